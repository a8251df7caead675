// The threads that run the execute callback on fired timers.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_EXECUTE_POOL_H_
#define TIMINGWHEEL_INTERNAL_LOOP_EXECUTE_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/loop/callback_scope.h"
#include "timingwheel/internal/loop/loop_stats.h"
#include "timingwheel/internal/loop/thread_name.h"

namespace timingwheel {
namespace internal {

// Fired timers go from the loop to the workers through one queue guarded by
// a std::mutex:
// - The loop hands over a whole tick's timers at once, in one lock: when the
//   queue is empty (the usual case) the two vectors swap, O(1), and their
//   buffers go round between the loop and the workers without allocating.
// - With one worker, it takes everything queued in one lock: nothing could
//   overtake a slow callback anyway.
// - With several, each takes one timer at a time, so a slow callback holds
//   up nothing but itself (docs/api.md S10) while the others carry on.
// A lock is what ThreadSanitizer models exactly, so a program that links the
// library runs clean under it with no suppression; a lock-free queue with
// several consumers, such as moodycamel's, recycles blocks after a
// release-only counter, which TSan reports as a race.
template <typename K, typename V>
class ExecutePool {
 public:
  using Callback = std::function<void(K, V)>;
  using Item = std::pair<K, V>;

  // Starts `threads` workers calling execute(key, value) inside a
  // CallbackScope of `owner`, counting exceptions in `stats`. When
  // `on_idle` is not null, the worker that finishes the last item
  // outstanding calls it (after the item's callback has returned). Throws
  // std::system_error if the OS refuses a thread (none is left running).
  ExecutePool(int threads, const Callback* execute, const void* owner,
              LoopStats* stats, std::function<void()> on_idle = nullptr)
      : execute_(execute),
        owner_(owner),
        stats_(stats),
        on_idle_(std::move(on_idle)),
        take_all_(threads == 1) {
    threads_.reserve(threads);
    try {
      for (int i = 0; i < threads; ++i) {
        threads_.emplace_back([this] { Run(); });
        NameThread(threads_.back(), "tw-execute");
      }
    } catch (...) {
      Shutdown();
      throw;
    }
  }
  ~ExecutePool() { Shutdown(); }
  ExecutePool(const ExecutePool&) = delete;
  ExecutePool& operator=(const ExecutePool&) = delete;

  // Loop thread: hands every item of `fired` to the workers, leaving
  // `fired` empty. One lock; O(1) when the workers have caught up.
  void Submit(std::vector<Item>& fired) {
    if (fired.empty()) return;
    const std::size_t n = fired.size();
    outstanding_.fetch_add(n, std::memory_order_relaxed);
    bool abandoned;
    {
      MutexLock lock(mu_);
      abandoned = abandoned_;
      if (!abandoned) {
        if (head_ == queue_.size()) {
          queue_.clear();
          head_ = 0;
          queue_.swap(fired);
        } else {
          for (Item& item : fired) queue_.push_back(std::move(item));
          fired.clear();
        }
      }
    }
    if (abandoned) {
      // No callback runs any more (Abandon): the values are dropped, not
      // under the lock.
      fired.clear();
      Done(n);
      return;
    }
    if (n == 1 || take_all_) {
      work_.notify_one();
    } else {
      work_.notify_all();
    }
  }

  // True when every item submitted so far has been run (and its callback
  // has returned, with all it did visible to the caller).
  bool Idle() const {
    return outstanding_.load(std::memory_order_acquire) == 0;
  }

  // Returns once every item submitted so far has been run.
  void WaitIdle() {
    for (std::uint64_t n;
         (n = outstanding_.load(std::memory_order_acquire)) != 0;) {
      outstanding_.wait(n, std::memory_order_acquire);
    }
  }

  // Runs every item submitted before it (unless abandoned), then joins the
  // workers: all of them from any other thread; from a worker (the
  // Reaper of AfterCallback), the others, the worker itself being on its
  // way out. Idempotent.
  void Shutdown() {
    if (threads_.empty()) return;
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    work_.notify_all();
    for (std::thread& t : threads_) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else {
        t.join();
      }
    }
    threads_.clear();
  }

  // True on one of this pool's worker threads.
  bool OnWorkerThread() const { return current_pool_ == this; }

  // From a callback (OnWorkerThread): no callback starts after this
  // returns. The timers queued and the ones fired later are dropped, their
  // values destroyed; a worker that has already taken one runs it. For a
  // wheel destroyed from its own callback.
  void Abandon() {
    std::vector<Item> dropped;
    {
      MutexLock lock(mu_);
      abandoned_ = true;
      for (; head_ < queue_.size(); ++head_) {
        dropped.push_back(std::move(queue_[head_]));
      }
      queue_.clear();
      head_ = 0;
    }
    Done(dropped.size());
  }

  // From a callback (OnWorkerThread): once the callback returns, this
  // worker drops what else it has taken, leaves its CallbackScope and calls
  // reap(arg), which may destroy the pool: the worker touches nothing of it
  // afterwards.
  using Reaper = void (*)(void*);
  static void AfterCallback(Reaper reap, void* arg) {
    reaper_ = reap;
    reaper_arg_ = arg;
  }

 private:
  void Run() {
    RunCallbacks();
    // Set by a callback that destroyed the wheel (AfterCallback): the last
    // thing this thread does, outside the callback's scope.
    if (reaper_ != nullptr) {
      const Reaper reap = std::exchange(reaper_, nullptr);
      reap(std::exchange(reaper_arg_, nullptr));
    }
  }

  void RunCallbacks() {
    CallbackScope scope(owner_);
    current_pool_ = this;
    std::vector<Item> taken;
    for (;;) {
      {
        MutexLock lock(mu_);
        while (!((head_ < queue_.size() && !abandoned_) || stopping_)) {
          lock.Wait(work_);
        }
        // Stopping with nothing left, or abandoned.
        if (head_ == queue_.size() || abandoned_) break;
        if (take_all_) {
          if (head_ == 0) {
            taken.swap(queue_);
          } else {
            for (; head_ < queue_.size(); ++head_) {
              taken.push_back(std::move(queue_[head_]));
            }
            queue_.clear();
          }
          head_ = 0;
        } else {
          taken.push_back(std::move(queue_[head_++]));
          if (head_ == queue_.size()) {
            queue_.clear();
            head_ = 0;
          }
        }
      }
      for (Item& item : taken) {
        try {
          (*execute_)(std::move(item.first), std::move(item.second));
        } catch (...) {
          stats_->CountException();
        }
        if (reaper_ != nullptr) break;  // the wheel is being destroyed
      }
      const std::size_t ran = taken.size();
      taken.clear();
      Done(ran);
      if (reaper_ != nullptr) break;
    }
    current_pool_ = nullptr;
  }

  // n submitted items have been run or dropped.
  void Done(std::size_t n) {
    if (n != 0 && outstanding_.fetch_sub(n, std::memory_order_acq_rel) == n) {
      outstanding_.notify_all();
      if (on_idle_) on_idle_();
    }
  }

  // The pool whose worker this thread is, and the Reaper its callback left.
  static inline thread_local const ExecutePool* current_pool_ = nullptr;
  static inline thread_local Reaper reaper_ = nullptr;
  static inline thread_local void* reaper_arg_ = nullptr;

  const Callback* const execute_;
  const void* const owner_;
  LoopStats* const stats_;
  const std::function<void()> on_idle_;
  const bool take_all_;  // one worker: it takes all that is queued

  Mutex mu_;
  std::condition_variable work_;
  // Items before head_ are taken.
  std::vector<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // see Abandon

  alignas(64) std::atomic<std::uint64_t> outstanding_{0};  // submitted, not run
  std::vector<std::thread> threads_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_EXECUTE_POOL_H_
