// The threads that run the execute callback on fired timers.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_EXECUTE_POOL_H_
#define TIMINGWHEEL_INTERNAL_LOOP_EXECUTE_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "timingwheel/internal/base/latency_recorder.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/base/stored_key.h"
#include "timingwheel/internal/loop/callback_scope.h"
#include "timingwheel/internal/loop/loop_stats.h"
#include "timingwheel/internal/loop/thread_name.h"
#include "timingwheel/internal/time/cycle_clock.h"

namespace timingwheel {
namespace internal {

// Fired timers go from the loop to the workers through one queue guarded by
// a std::mutex:
// - The loop hands over a whole tick's timers at once, in one lock: its
//   vector joins the queue of batches whole and it gets an emptied one
//   back, O(1) however far behind the workers are. The buffers go round
//   between the loop and the workers with their capacity, so a burst that
//   the workers fall behind on copies no timer and grows no buffer past a
//   tick's worth (growing one would fault in fresh pages on the loop).
// - With one worker, it takes everything queued in one lock: nothing could
//   overtake a slow callback anyway.
// - With several, each takes one timer at a time, so a slow callback holds
//   up nothing but itself (docs/api.md S10) while the others carry on.
// A lock is what ThreadSanitizer models exactly, so a program that links the
// library runs clean under it with no suppression; a lock-free queue with
// several consumers, such as moodycamel's, recycles blocks after a
// release-only counter, which TSan reports as a race.
//
// Items hold keys as the wheel holds them (Store: base/stored_key.h); a
// worker turns each into a K just before the callback, so a key the
// callback frees was allocated by the same thread.
template <typename K, typename V,
          typename Store = KeyStore<K, std::equal_to<K>>>
class ExecutePool {
 public:
  using Callback = std::function<void(K, V)>;
  // A fired timer: its key and value, and the steady time (ns) of the tick
  // it was due on, kNoDueTime under a ManualTicker.
  struct Item {
    Item(typename Store::Stored&& k, V&& v, std::int64_t due)
        : key(std::move(k)), value(std::move(v)), due_ns(due) {}
    typename Store::Stored key;
    V value;
    std::int64_t due_ns;
  };
  static constexpr std::int64_t kNoDueTime =
      std::numeric_limits<std::int64_t>::min();

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
        batches_.push_back(std::move(fired));
        fired.clear();  // moved-from: make it empty for certain
        if (!spares_.empty()) {
          fired.swap(spares_.back());
          spares_.pop_back();
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

  // Items submitted whose callback has not returned. Any thread.
  std::uint64_t Outstanding() const {
    return outstanding_.load(std::memory_order_relaxed);
  }
  // How late the callbacks run so far started. Any thread.
  LatencyHistogram Lateness() const { return lateness_.Snapshot(); }

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
    std::deque<std::vector<Item>> dropped;
    std::size_t n = 0;
    {
      MutexLock lock(mu_);
      abandoned_ = true;
      n = QueuedLocked();
      dropped.swap(batches_);
      head_ = 0;
    }
    dropped.clear();  // values destroyed outside the lock
    Done(n);
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

  // One worker (take_all_) takes every queued batch at once; with several,
  // each takes one item at a time from the oldest batch. Batches emptied
  // go back to spares_ for the loop's next ticks.
  void RunCallbacks() {
    CallbackScope scope(owner_);
    current_pool_ = this;
    std::deque<std::vector<Item>> taken;
    std::vector<Item> one;
    // How late this worker's callbacks started, not yet in lateness_: added
    // before the worker waits, before it finishes the last item queued, and
    // every kLatenessFlush items meanwhile, so that workers taking one item
    // at a time do not share atomic lines per callback. With one worker a
    // caller who sees every callback done sees them counted; with several,
    // another worker's last few are added as it goes back to wait.
    LocalLatencies lateness;
    for (;;) {
      std::size_t ran = 0;
      bool took_last = false;
      {
        MutexLock lock(mu_);
        if (batches_.empty() && lateness.count != 0) Flush(lateness);
        while (!((!batches_.empty() && !abandoned_) || stopping_)) {
          lock.Wait(work_);
        }
        // Stopping with nothing left, or abandoned.
        if (batches_.empty() || abandoned_) break;
        if (take_all_) {
          taken.swap(batches_);
        } else {
          std::vector<Item>& front = batches_.front();
          one.push_back(std::move(front[head_++]));
          if (head_ == front.size()) {
            Recycle(front);
            batches_.pop_front();
            head_ = 0;
          }
        }
        took_last = batches_.empty();
      }
      if (take_all_) {
        for (const std::vector<Item>& batch : taken) ran += batch.size();
        for (std::vector<Item>& batch : taken) {
          if (RunItems(batch, lateness)) break;
        }
        if (reaper_ == nullptr) {
          MutexLock lock(mu_);
          for (std::vector<Item>& batch : taken) Recycle(batch);
        }
      } else {
        ran = 1;
        RunItems(one, lateness);
        one.clear();
      }
      taken.clear();  // what a callback that destroyed the wheel left
      if (reaper_ == nullptr &&
          (took_last || lateness.count >= kLatenessFlush)) {
        Flush(lateness);
      }
      Done(ran);
      if (reaper_ != nullptr) break;
    }
    current_pool_ = nullptr;
  }

  void Flush(LocalLatencies& lateness) {
    lateness_.Add(lateness);
    lateness = LocalLatencies();
  }

  // Runs each item's callback; true if one destroyed the wheel (the rest
  // are dropped). Records in `lateness` how late each callback starts
  // (Stats::fire_lateness).
  //
  // The clock is read before the first callback, then before every
  // kClockStride-th while callbacks run quickly (the last read came under
  // kQuickNs before), before each one otherwise. A callback's start is
  // taken as the last read: while callbacks are quick, at most
  // kClockStride - 1 callbacks early, which is what lets a burst of cheap
  // callbacks pay a read per kClockStride rather than one each; a callback
  // that turns slow in such a stretch makes the rest of it (at most
  // kClockStride - 1 callbacks) count its run time as not late, and the
  // next read switches back to one read each.
  bool RunItems(std::vector<Item>& items, LocalLatencies& lateness) {
    std::int64_t now = 0, last_read = 0;
    std::uint32_t stride = 1, since_read = kClockStride;
    for (Item& item : items) {
      if (++since_read >= stride) {
        now = CycleClock::NanosNotBefore();
        const bool quick = last_read != 0 && now - last_read < kQuickNs;
        stride = quick ? kClockStride : 1;
        last_read = now;
        since_read = 0;
      }
      lateness.Record(item.due_ns == kNoDueTime ? 0 : now - item.due_ns);
      try {
        (*execute_)(Store::Take(item.key), std::move(item.value));
      } catch (...) {
        stats_->CountException();
      }
      if (reaper_ != nullptr) return true;  // the wheel is being destroyed
    }
    return false;
  }

  // Keeps an emptied batch's buffer for the loop, a few at most, so that
  // the buffers in use follow the ticks in flight and no more.
  void Recycle(std::vector<Item>& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    batch.clear();
    if (spares_.size() < kMaxSpares && batch.capacity() != 0) {
      spares_.push_back(std::move(batch));
    }
  }

  // Items queued and not taken.
  std::size_t QueuedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::size_t n = 0;
    for (const std::vector<Item>& batch : batches_) n += batch.size();
    return n - head_;
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

  static constexpr std::size_t kMaxSpares = 4;
  static constexpr std::uint64_t kLatenessFlush = 64;
  static constexpr std::uint32_t kClockStride = 16;
  static constexpr std::int64_t kQuickNs = 16'000;

  Mutex mu_;
  std::condition_variable work_;
  // Fired timers, a tick's batch each, oldest first; the front batch's
  // items before head_ are taken (several workers only).
  std::deque<std::vector<Item>> batches_ ABSL_GUARDED_BY(mu_);
  std::size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<Item>> spares_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // see Abandon

  alignas(64) std::atomic<std::uint64_t> outstanding_{0};  // submitted, not run
  alignas(64) LatencyRecorder lateness_;
  std::vector<std::thread> threads_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_EXECUTE_POOL_H_
