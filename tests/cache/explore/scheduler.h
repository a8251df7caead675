// Runs a few threads one at a time, handing a baton from one to the next at
// each schedule point they reach, so that a strategy (strategies.h), not
// the OS, decides how their steps interleave. A schedule is then a list of
// choices, which replays exactly.
//
// The threads are a persistent pool (ManagedThreads), reused schedule
// after schedule: creating threads per schedule would cost more than the
// schedules. A thread not in the pool (the test's main thread, a library's
// own threads) passes through every schedule point untouched.
//
// At each point the strategy sees which threads are enabled: not finished,
// and not waiting (Spin) for another thread to move. A thread that spins is
// enabled again once another thread has taken a step, so a wait on a lock
// or a mark costs one choice, not a loop of them; if every thread left
// spins, the schedule deadlocked. Free run (after a deadlock or a step
// bound) lets every thread go on unscheduled, so that the run can still
// end.
#ifndef TIMINGWHEEL_TESTS_CACHE_EXPLORE_SCHEDULER_H_
#define TIMINGWHEEL_TESTS_CACHE_EXPLORE_SCHEDULER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace timingwheel {
namespace explore {

inline constexpr int kMaxThreads = 3;

// What a strategy sees where it chooses the thread that takes the next step.
struct ChoicePoint {
  int index = 0;                 // choices made before this one in the schedule
  int current = -1;              // the thread that reached it; -1 at the start
  bool current_enabled = false;  // it could go on
  bool spin = false;             // it waits for another thread (Spin)
  std::uint32_t enabled = 0;     // bit i: thread i may take the next step
};

// Decides who runs at each choice point of a schedule.
class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual void BeginSchedule(int threads) { static_cast<void>(threads); }
  // One of the threads enabled at `p`.
  virtual int Choose(const ChoicePoint& p) = 0;
};

class Scheduler {
 public:
  // Called on a managed thread each time it resumes at a step, with what
  // the step touches: the test's checks of freed memory.
  using ResumeHook =
      std::function<void(int thread, const char* step, const void* touches)>;

  static Scheduler& Instance() {
    static Scheduler* const scheduler = new Scheduler;  // threads outlive it
    return *scheduler;
  }

  // Runs bodies[i] on managed thread i, one step at a time as `strategy`
  // decides, and returns once all have returned. Not reentrant.
  void Run(std::vector<std::function<void()>> bodies, Strategy& strategy,
           int max_steps = 20'000) {
    std::unique_lock<std::mutex> lock(mu_);
    StartThreadsLocked();
    bodies_ = std::move(bodies);
    n_ = static_cast<int>(bodies_.size());
    strategy_ = &strategy;
    strategy.BeginSchedule(n_);
    max_steps_ = max_steps;
    trace_.clear();
    choices_.clear();
    failure_.reset();
    free_run_ = false;
    for (int i = 0; i < kMaxThreads; ++i) {
      done_[i] = i >= n_;
      spinning_[i] = false;
    }
    ++generation_;
    for (auto& cv : thread_cv_) cv.notify_one();
    HandOffLocked(-1, false);
    main_cv_.wait(lock, [&] { return finished_ == n_; });
    finished_ = 0;
    running_ = -1;
  }

  // The managed thread the caller is, or -1.
  static int CurrentThread() { return this_thread_; }
  bool Managed() const { return this_thread_ >= 0 && !free_run_; }

  // A schedule point: the caller may be descheduled here.
  void Step(const char* name, const void* touches) {
    const int me = this_thread_;
    if (me < 0) return;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (free_run_) return;
      trace_.emplace_back(me, name);
      if (static_cast<int>(trace_.size()) > max_steps_) {
        FailLocked("more than " + std::to_string(max_steps_) +
                   " steps: a livelock?");
        FreeRunLocked();
        return;
      }
      HandOffLocked(me, true);
      WaitForBatonLocked(lock, me);
      if (free_run_) return;
    }
    if (resume_hook_) resume_hook_(me, name, touches);
  }

  // The caller waits for another thread to move.
  void Spin(const char* name) {
    const int me = this_thread_;
    if (me < 0 || free_run_) {
      std::this_thread::yield();
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (free_run_) return;
    trace_.emplace_back(me, name);
    spinning_[me] = true;
    if (static_cast<int>(trace_.size()) > max_steps_) {
      FailLocked("more than " + std::to_string(max_steps_) +
                 " steps: a livelock?");
      FreeRunLocked();
      return;
    }
    if (EnabledLocked() == 0) {
      FailLocked(std::string("deadlock: every thread left waits (") + name +
                 ")");
      FreeRunLocked();
      return;
    }
    HandOffLocked(me, false, true);
    WaitForBatonLocked(lock, me);
  }

  // Records a failure of the running schedule (the first one is kept).
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(what);
  }
  std::optional<std::string> failure() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

  void set_resume_hook(ResumeHook hook) { resume_hook_ = std::move(hook); }

  // The last schedule: the thread chosen at each choice point (replayable
  // by a strategy that follows them), and each step taken, by thread.
  std::vector<int> Choices() const {
    std::lock_guard<std::mutex> lock(mu_);
    return choices_;
  }
  int Steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(trace_.size());
  }
  // "T0: a b c | T1: d e | T0: f": the steps in order, a run of one
  // thread's steps at a time.
  std::string Trace() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    int last = -2;
    for (const auto& [thread, step] : trace_) {
      if (thread != last) {
        if (!out.empty()) out += "\n    ";
        out += "T" + std::to_string(thread) + ":";
        last = thread;
      }
      out += " ";
      out += step;
    }
    return out;
  }

 private:
  Scheduler() = default;

  void StartThreadsLocked() {
    if (!threads_.empty()) return;
    for (int i = 0; i < kMaxThreads; ++i) {
      threads_.emplace_back([this, i] { ThreadLoop(i); });
      threads_.back().detach();  // the pool lives as long as the process
    }
  }

  void ThreadLoop(int me) {
    this_thread_ = me;
    std::uint64_t seen = 0;
    for (;;) {
      std::function<void()> body;
      {
        std::unique_lock<std::mutex> lock(mu_);
        thread_cv_[me].wait(lock, [&] {
          return generation_ != seen && me < n_ &&
                 (running_ == me || free_run_);
        });
        seen = generation_;
        body = bodies_[me];
      }
      body();
      std::unique_lock<std::mutex> lock(mu_);
      trace_.emplace_back(me, "end");
      done_[me] = true;
      if (++finished_ == n_) {
        main_cv_.notify_one();
        continue;
      }
      if (free_run_) continue;
      if (EnabledLocked() == 0) {
        FailLocked("deadlock: the threads left wait for one that ended");
        FreeRunLocked();
        continue;
      }
      HandOffLocked(me, false);
    }
  }

  std::uint32_t EnabledLocked() const {
    std::uint32_t enabled = 0;
    for (int i = 0; i < n_; ++i) {
      if (!done_[i] && !spinning_[i]) enabled |= 1u << i;
    }
    return enabled;
  }

  // Asks the strategy who takes the next step and passes the baton to it.
  void HandOffLocked(int me, bool me_enabled, bool spin = false) {
    ChoicePoint p;
    p.index = static_cast<int>(choices_.size());
    p.current = me;
    p.current_enabled = me_enabled;
    p.spin = spin;
    p.enabled = EnabledLocked();
    int next = strategy_->Choose(p);
    if (next < 0 || next >= n_ || (p.enabled & (1u << next)) == 0) {
      FailLocked("the strategy chose thread " + std::to_string(next) +
                 ", not enabled");
      next = __builtin_ctz(p.enabled);
    }
    choices_.push_back(next);
    // The others see `next` move before they run again.
    for (int i = 0; i < n_; ++i) {
      if (i != next) spinning_[i] = false;
    }
    running_ = next;
    if (next != me) thread_cv_[next].notify_one();
  }

  void WaitForBatonLocked(std::unique_lock<std::mutex>& lock, int me) {
    thread_cv_[me].wait(lock, [&] { return running_ == me || free_run_; });
  }

  void FailLocked(const std::string& what) {
    if (!failure_) failure_ = what;
  }

  void FreeRunLocked() {
    free_run_ = true;
    running_ = -1;
    for (auto& cv : thread_cv_) cv.notify_all();
  }

  static inline thread_local int this_thread_ = -1;

  mutable std::mutex mu_;
  std::condition_variable main_cv_;
  std::condition_variable thread_cv_[kMaxThreads];
  std::vector<std::thread> threads_;
  std::uint64_t generation_ = 0;
  std::vector<std::function<void()>> bodies_;
  int n_ = 0;
  int finished_ = 0;
  int running_ = -1;
  bool done_[kMaxThreads] = {};
  bool spinning_[kMaxThreads] = {};
  std::atomic<bool> free_run_{false};  // read by threads passing through
  int max_steps_ = 0;
  Strategy* strategy_ = nullptr;
  ResumeHook resume_hook_;
  std::vector<std::pair<int, const char*>> trace_;
  std::vector<int> choices_;
  std::optional<std::string> failure_;
};

}  // namespace explore
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_EXPLORE_SCHEDULER_H_
