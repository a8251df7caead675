// The threads that run Drain's fn.
//
// Why apart from ExecutePool (execute_pool.h), which it resembles in shape:
// that pool serves an endless stream of fired timers from the loop, through
// a queue, on threads that live as long as the wheel; this one serves one
// Drain call at a time, synchronously, on a fixed vector that its workers
// claim through an atomic cursor, on threads started only by a first Drain.
// What they could share is starting and naming threads.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_DRAIN_POOL_H_
#define TIMINGWHEEL_INTERNAL_LOOP_DRAIN_POOL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <system_error>
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
    MutexLock one_at_a_time(run_mu_);
    Job job{&entries, &fn};
    if (!StartThreads()) {
      Work(job);
      return;
    }
    MutexLock lock(mu_);
    job_ = &job;
    ++generation_;
    busy_ = threads_.size();
    work_.notify_all();
    while (busy_ != 0) lock.Wait(done_);
    job_ = nullptr;
  }

  // No fn starts after this returns (but one a worker is already starting),
  // and the entries left are not handed out: the Drain caller drops them.
  // For a wheel destroyed from its own Drain function.
  void Abandon() { abandoned_.store(true, std::memory_order_relaxed); }

  // Joins the threads. Idempotent; not from a drain worker.
  void Shutdown() {
    MutexLock no_run(run_mu_);
    {
      MutexLock lock(mu_);
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

  // True if at least one thread runs.
  bool StartThreads() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_) {
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
        MutexLock lock(mu_);
        while (generation_ == seen && !stopping_) lock.Wait(work_);
        if (generation_ == seen) return;  // stopping
        seen = generation_;
        job = job_;
      }
      Work(*job);
      MutexLock lock(mu_);
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

  Mutex run_mu_;  // held across a Run: one Drain at a time
  // Started under run_mu_; its size is read by the workers, which run
  // while a Run (another thread) holds run_mu_.
  std::vector<std::thread> threads_;

  Mutex mu_;
  std::condition_variable work_;  // workers: a new job, or stopping
  std::condition_variable done_;  // Run: every worker left the job
  Job* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // one per job
  std::size_t busy_ ABSL_GUARDED_BY(mu_) = 0;  // workers in the job
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> abandoned_{false};  // see Abandon
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_DRAIN_POOL_H_
