// The threads that run Drain's fn.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_DRAIN_POOL_H_
#define TIMINGWHEEL_INTERNAL_LOOP_DRAIN_POOL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "timingwheel/internal/loop/callback_scope.h"
#include "timingwheel/internal/loop/loop_stats.h"
#include "timingwheel/internal/loop/thread_name.h"

namespace timingwheel {
namespace internal {

// A pool of Options::drain_workers threads, started by the first Drain
// (a wheel that never drains costs no threads) and kept until the wheel
// stops. One Drain runs at a time; a second waits for the first.
//
// Hand-out: the workers claim runs of entries from a shared cursor, each
// run a share of what is left (remaining / (2 * workers), between 1 and
// kMaxRun): a Drain of a few entries hands them out one by one, so slow fns
// overlap (8 entries on 4 workers take 2 fn times, not 8), while a Drain of
// a million cheap entries costs one atomic operation per kMaxRun entries.
template <typename K, typename V>
class DrainPool {
 public:
  using Fn = std::function<void(K, V)>;
  using Entries = std::vector<std::pair<K, V>>;

  // `threads` workers, run inside a CallbackScope of `owner`; exceptions
  // from fn are counted in `stats`.
  DrainPool(int threads, const void* owner, LoopStats* stats)
      : size_(threads), owner_(owner), stats_(stats) {}
  ~DrainPool() { Shutdown(); }
  DrainPool(const DrainPool&) = delete;
  DrainPool& operator=(const DrainPool&) = delete;

  // Calls fn(key, value) for every entry on the pool's threads, moving them
  // out; returns when every call has returned. Starts the threads on first
  // use; if the OS refuses every one, runs fn on the calling thread. Not
  // after Shutdown.
  void Run(Entries& entries, const Fn& fn) {
    if (entries.empty()) return;
    std::lock_guard<std::mutex> one_at_a_time(run_mu_);
    Job job{&entries, &fn};
    if (!StartThreads()) {
      Work(job);
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &job;
    ++generation_;
    busy_ = threads_.size();
    work_.notify_all();
    done_.wait(lock, [this] { return busy_ == 0; });
    job_ = nullptr;
  }

  // No fn starts after this returns (but one a worker is already starting),
  // and the entries left are not handed out: the Drain caller drops them.
  // For a wheel destroyed from its own Drain function.
  void Abandon() { abandoned_.store(true, std::memory_order_relaxed); }

  // Joins the threads. Idempotent; not from a drain worker.
  void Shutdown() {
    std::lock_guard<std::mutex> no_run(run_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  // Longest run of entries a worker claims at once.
  static constexpr std::size_t kMaxRun = 64;

  struct Job {
    Entries* entries;
    const Fn* fn;
    std::atomic<std::size_t> next{0};
  };

  // Caller holds run_mu_. True if at least one thread runs.
  bool StartThreads() {
    if (!threads_.empty()) return true;
    threads_.reserve(size_);
    for (int i = 0; i < size_; ++i) {
      try {
        threads_.emplace_back([this] { WorkerLoop(); });
        NameThread(threads_.back(), "tw-drain");
      } catch (const std::system_error&) {
        break;  // fewer threads than asked
      }
    }
    return !threads_.empty();
  }

  void WorkerLoop() {
    std::uint64_t seen = 0;
    for (;;) {
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait(lock, [&] { return generation_ != seen || stopping_; });
        if (generation_ == seen) return;  // stopping
        seen = generation_;
        job = job_;
      }
      Work(*job);
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_.notify_all();
    }
  }

  // Claims runs of the job's entries until none is left. On a worker, or on
  // the calling thread when no worker could start.
  void Work(Job& job) {
    CallbackScope scope(owner_);
    Entries& entries = *job.entries;
    const std::size_t n = entries.size();
    const std::size_t share = 2 * std::max<std::size_t>(1, threads_.size());
    std::size_t begin = job.next.load(std::memory_order_relaxed);
    while (begin < n) {
      const std::size_t run =
          std::clamp<std::size_t>((n - begin) / share, 1, kMaxRun);
      if (!job.next.compare_exchange_weak(begin, begin + run,
                                          std::memory_order_relaxed)) {
        continue;  // begin now holds the current cursor
      }
      for (std::size_t i = begin; i < begin + run; ++i) {
        if (abandoned_.load(std::memory_order_relaxed)) return;
        try {
          (*job.fn)(std::move(entries[i].first), std::move(entries[i].second));
        } catch (...) {
          stats_->CountException();
        }
      }
      begin = job.next.load(std::memory_order_relaxed);
    }
  }

  const int size_;
  const void* const owner_;
  LoopStats* const stats_;

  std::mutex run_mu_;                 // held across a Run: one Drain at a time
  std::vector<std::thread> threads_;  // started under run_mu_

  std::mutex mu_;
  std::condition_variable work_;        // workers: a new job, or stopping
  std::condition_variable done_;        // Run: every worker left the job
  Job* job_ = nullptr;                  // guarded by mu_
  std::uint64_t generation_ = 0;        // guarded by mu_; one per job
  std::size_t busy_ = 0;                // guarded by mu_; workers in the job
  bool stopping_ = false;               // guarded by mu_
  std::atomic<bool> abandoned_{false};  // see Abandon
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_DRAIN_POOL_H_
