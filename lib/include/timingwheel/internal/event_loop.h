// The thread that owns a Wheel: applies commands, processes ticks, sleeps.
#ifndef TIMINGWHEEL_INTERNAL_EVENT_LOOP_H_
#define TIMINGWHEEL_INTERNAL_EVENT_LOOP_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/callback_scope.h"
#include "timingwheel/internal/clock.h"
#include "timingwheel/internal/command.h"
#include "timingwheel/internal/command_queue.h"
#include "timingwheel/internal/execute_pool.h"
#include "timingwheel/internal/wheel.h"
#include "timingwheel/options.h"
#include "timingwheel/stats.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace internal {

// Owns the wheel and the only thread that touches it. Callers reach it only
// through the command queue; expired entries leave it in batches for the
// execute workers. Nothing else flows back but completion signals.
template <typename K, typename V, typename Hash, typename Eq>
class EventLoop final : public TickSink {
 public:
  using Callback = std::function<void(K, V)>;
  using Entries = std::vector<std::pair<K, V>>;
  using Cmd = Command<K, V>;

  // Builds everything but starts no loop thread; throws std::bad_alloc or
  // std::system_error when memory or threads run out.
  EventLoop(const Options& options, Callback execute)
      : interval_(options.interval),
        ticker_(options.ticker),
        manual_(dynamic_cast<ManualTicker*>(options.ticker.get())),
        drain_workers_(options.drain_workers),
        execute_(std::move(execute)),
        wheel_(static_cast<std::uint32_t>(options.num_slots)),
        queue_(options.max_pending),
        clock_(options.interval),
        pool_(options.execute_workers, &execute_,
              static_cast<const TickSink*>(this), &exceptions_) {
    wheel_.Reserve(options.expected_timers);
  }

  ~EventLoop() {
    Stop().IgnoreError();
    if (attached_) TickerAccess::Detach(*manual_, this);
  }

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Attaches to the manual ticker, if any, and starts the loop thread.
  absl::Status Start() {
    if (manual_ != nullptr) {
      if (!TickerAccess::Attach(*manual_, this)) {
        return absl::InvalidArgumentError(
            "Options::ticker: this ManualTicker already drives another wheel");
      }
      attached_ = true;
    }
    try {
      thread_ = std::thread([this] { Run(); });
    } catch (const std::system_error&) {
      return absl::ResourceExhaustedError("cannot start the loop thread");
    }
    return absl::OkStatus();
  }

  // The tick at which a timer of `delay` (> 0), submitted now, is due.
  std::uint64_t DeadlineTick(absl::Duration delay) const {
    if (manual_ != nullptr) {
      return std::min(ticks_done_.load(std::memory_order_acquire) +
                          CeilTicks(delay, interval_),
                      kMaxTick);
    }
    return clock_.DeadlineTick(delay);
  }

  // The wheel's time since it started: real time, or ticks done * interval.
  absl::Duration Now() const {
    if (manual_ != nullptr) {
      return interval_ * static_cast<std::int64_t>(
                             ticks_done_.load(std::memory_order_acquire));
    }
    return clock_.SinceStart();
  }

  absl::Status Push(Cmd command) { return queue_.Push(std::move(command)); }

  // api.md S7.
  absl::Status Drain(Callback fn) {
    if (!fn) return absl::InvalidArgumentError("Drain: fn is empty");
    if (InOwnCallback()) {
      return absl::FailedPreconditionError(
          "Drain called from a callback of the same wheel");
    }
    {
      std::lock_guard<std::mutex> lock(drain_mu_);
      ++active_drains_;
    }
    DrainRequest<K, V> request;
    absl::Status status = queue_.Push(Cmd::Drain(&request));
    if (status.ok()) {
      request.taken.wait();
      RunDrain(request.entries, fn);
    }
    std::lock_guard<std::mutex> lock(drain_mu_);
    if (--active_drains_ == 0) drains_done_.notify_all();
    return status;
  }

  // api.md S8. Concurrent calls: one stops the wheel, the others wait for it
  // and get an empty vector.
  absl::StatusOr<Entries> Stop() {
    if (InOwnCallback()) {
      return absl::FailedPreconditionError(
          "Stop called from a callback of the same wheel");
    }
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return Entries();
    queue_.Close();
    queue_.PushAfterClose(Cmd::Stop());
    if (thread_.joinable()) thread_.join();
    pool_.Shutdown();  // the loop already did, unless it never started
    {
      std::unique_lock<std::mutex> drain_lock(drain_mu_);
      drains_done_.wait(drain_lock, [this] { return active_drains_ == 0; });
    }
    stopped_ = true;
    return std::move(stop_result_);
  }

  // ManualTicker::Tick's work (TickSink).
  void RunTicks(int n) override {
    if (n < 1 || InOwnCallback()) return;
    TickRequest request(n);
    if (!queue_.Push(Cmd::Tick(&request)).ok()) return;
    request.done.wait();
  }

  Stats stats() const {
    Stats s;
    s.pending = published_.pending.load(std::memory_order_relaxed);
    s.ticks = published_.ticks.load(std::memory_order_relaxed);
    s.applied = published_.applied.load(std::memory_order_relaxed);
    s.fired = published_.fired.load(std::memory_order_relaxed);
    s.moved = published_.moved.load(std::memory_order_relaxed);
    s.removed = published_.removed.load(std::memory_order_relaxed);
    s.superseded = published_.superseded.load(std::memory_order_relaxed);
    s.drained = published_.drained.load(std::memory_order_relaxed);
    s.callback_exceptions = exceptions_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  // Commands taken from the queue per dequeue call.
  static constexpr std::size_t kBatch = 256;
  // How many commands ahead of the one being applied the loop prefetches.
  static constexpr std::size_t kPrefetchDistance = 8;
  // Commands applied per round at least, before the loop looks at the clock
  // again (more when more were already queued: see Run).
  static constexpr std::size_t kMaxCommandsPerRound = 8192;
  // Drain entries a drain worker claims at a time.
  static constexpr std::size_t kDrainChunk = 64;
  // Longest sleep; a safety net against a missed wake-up or clock oddities.
  static constexpr absl::Duration kMaxSleep = absl::Seconds(1);
  // After a round that applied commands the loop naps this long before
  // looking again, unannounced (see CommandQueue::Nap); one empty look and
  // it goes back to sleeping until woken.
  static constexpr absl::Duration kNap = absl::Microseconds(100);

  // Counters only the loop thread writes, and their published copies.
  struct Counters {
    std::uint64_t applied = 0, fired = 0, moved = 0, removed = 0,
                  superseded = 0, drained = 0;
  };
  struct Published {
    std::atomic<std::size_t> pending{0};
    std::atomic<std::uint64_t> ticks{0}, applied{0}, fired{0}, moved{0},
        removed{0}, superseded{0}, drained{0};
  };

  bool InOwnCallback() const {
    return CallbackScope::InCallbackOf(static_cast<const TickSink*>(this));
  }

  void Run() {
    std::vector<Cmd> batch(kBatch);
    bool streaming = false;  // the last round applied commands
    for (;;) {
      // Real time: learn which ticks are due *before* taking commands, then
      // take commands until every producer's queue is found empty, so a
      // tick does not run ahead of a command already waiting when it became
      // due (a MoveTimer sent long before the old deadline must win, however
      // far behind the loop is). Under a flood that never empties the queue
      // the round stops after as many commands as were queued at its start,
      // taken from the producers in turn, so ticking is not starved either;
      // a producer far behind may then see a tick pass one of its commands.
      const std::uint64_t due = manual_ == nullptr ? clock_.TicksDue() : 0;
      const std::size_t applied = ApplyQueued(
          batch, std::max(kMaxCommandsPerRound, queue_.SizeApprox()));
      if (stop_requested_) {
        FinishStop(batch);
        return;
      }
      absl::Duration wait = kMaxSleep;
      if (manual_ != nullptr) {
        if (!tick_requests_.empty()) {
          RunManualTick();
          continue;
        }
        Publish();
      } else {
        if (due > wheel_.now()) {
          AdvanceTo(due);
          // Counters first: a caller that sees a callback run also sees it
          // counted in stats().
          Publish();
          pool_.Submit(fired_);
        } else {
          Publish();
        }
        const std::uint64_t next = wheel_.NextDueTick();
        if (next != kNever) wait = std::min(wait, clock_.UntilTick(next));
      }
      if (applied != 0) {
        streaming = true;
        continue;
      }
      if (wait > absl::ZeroDuration()) {
        // A ManualTicker's Tick waits on the loop: never nap there.
        if (streaming && manual_ == nullptr) {
          queue_.Nap(std::min(wait, kNap));
        } else {
          queue_.WaitForWork(wait);
        }
      }
      streaming = false;
    }
  }

  // Applies queued commands until the queue is empty or at least `limit`
  // were applied.
  std::size_t ApplyQueued(std::vector<Cmd>& batch, std::size_t limit) {
    std::size_t total = 0;
    for (;;) {
      const std::size_t n = queue_.PopBulk(batch.data(), batch.size());
      // A software pipeline, so that the cache misses of several commands
      // overlap instead of each command waiting on its own in turn (~150 ns
      // each at a million timers here). Command i is applied while the links
      // of i+d/2 (what an unlink and relink will write), the entry of i+d
      // and the index line of i+2d are on their way.
      constexpr std::size_t d = kPrefetchDistance;
      for (std::size_t i = 0; i < n + 2 * d; ++i) {
        if (i < n && batch[i].counted()) {
          hashes_[i] = wheel_.HashOf(batch[i].key());
          wheel_.PrefetchIndex(hashes_[i]);
        }
        if (i >= d && i - d < n && batch[i - d].counted()) {
          candidates_[i - d] = wheel_.PrefetchEntry(hashes_[i - d]);
        }
        if (i >= d + d / 2 && i - d - d / 2 < n) {
          const Cmd& c = batch[i - d - d / 2];
          if (c.kind() == Cmd::Kind::kMove || c.kind() == Cmd::Kind::kRemove) {
            wheel_.PrefetchLinks(candidates_[i - d - d / 2],
                                 c.kind() == Cmd::Kind::kRemove, c.deadline());
          }
        }
        if (i >= 2 * d) Apply(batch[i - 2 * d], hashes_[i - 2 * d]);
      }
      total += n;
      if (n < batch.size() || total >= limit) return total;
    }
  }

  // `hash` is wheel_.HashOf(c.key()) for commands that carry a key.
  void Apply(Cmd& c, std::uint32_t hash) {
    switch (c.kind()) {
      case Cmd::Kind::kSet:
        ++counters_.applied;
        if (wheel_.Set(std::move(c.key()), std::move(c.value()), c.deadline(),
                       hash)) {
          ++counters_.superseded;
        }
        break;
      case Cmd::Kind::kMove:
        ++counters_.applied;
        if (wheel_.Move(c.key(), c.deadline(), hash)) ++counters_.moved;
        break;
      case Cmd::Kind::kRemove:
        ++counters_.applied;
        if (wheel_.Remove(c.key(), hash)) ++counters_.removed;
        break;
      case Cmd::Kind::kDrain: {
        DrainRequest<K, V>* request = c.drain();
        request->entries.reserve(wheel_.size());
        wheel_.TakeAll([request](K&& key, V&& value) {
          request->entries.emplace_back(std::move(key), std::move(value));
        });
        counters_.drained += request->entries.size();
        request->taken.count_down();
        break;
      }
      case Cmd::Kind::kTick:
        tick_requests_.push_back(c.tick());
        break;
      case Cmd::Kind::kStop:
        stop_requested_ = true;
        break;
      case Cmd::Kind::kNone:
        break;
    }
  }

  void AdvanceTo(std::uint64_t tick) {
    const std::size_t before = fired_.size();
    wheel_.AdvanceTo(tick, [this](std::uint64_t, K&& key, V&& value) {
      fired_.emplace_back(std::in_place, std::move(key), std::move(value));
    });
    counters_.fired += fired_.size() - before;
    ticks_done_.store(wheel_.now(), std::memory_order_release);
  }

  // One tick of a ManualTicker request: callbacks of tick k see
  // ticks_done == k, and return before tick k+1 starts.
  void RunManualTick() {
    AdvanceTo(wheel_.now() + 1);
    Publish();
    pool_.Submit(fired_);
    pool_.WaitIdle();
    TickRequest* request = tick_requests_.front();
    if (--request->remaining == 0) {
      tick_requests_.pop_front();
      request->done.count_down();
    }
  }

  // Runs fn over entries on up to drain_workers_ threads, returning when all
  // calls have returned.
  void RunDrain(Entries& entries, const Callback& fn) {
    const std::size_t n = entries.size();
    if (n == 0) return;
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      CallbackScope scope(static_cast<const TickSink*>(this));
      for (;;) {
        const std::size_t begin =
            next.fetch_add(kDrainChunk, std::memory_order_relaxed);
        if (begin >= n) return;
        const std::size_t end = std::min(n, begin + kDrainChunk);
        for (std::size_t i = begin; i < end; ++i) {
          try {
            fn(std::move(entries[i].first), std::move(entries[i].second));
          } catch (...) {
            exceptions_.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
    };
    const std::size_t workers =
        std::min<std::size_t>(static_cast<std::size_t>(drain_workers_),
                              (n + kDrainChunk - 1) / kDrainChunk);
    std::vector<std::thread> threads;
    threads.reserve(workers);
    for (std::size_t i = 0; i < workers; ++i) {
      try {
        threads.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // fewer threads than asked; the calling thread helps below
      }
    }
    if (threads.empty()) work();
    for (std::thread& t : threads) t.join();
  }

  // After the Stop command: the gate was closed before it was pushed, so
  // whatever is still queued was accepted and must be applied.
  void FinishStop(std::vector<Cmd>& batch) {
    while (ApplyQueued(batch, kMaxCommandsPerRound) != 0) {
    }
    for (TickRequest* request : tick_requests_) request->done.count_down();
    tick_requests_.clear();
    stop_result_.reserve(wheel_.size());
    wheel_.TakeAll([this](K&& key, V&& value) {
      stop_result_.emplace_back(std::move(key), std::move(value));
    });
    Publish();
    // Here, not in Stop: moodycamel keeps order per producer only, and this
    // thread submitted every batch, so its exit tasks queue behind them all.
    pool_.Shutdown();
  }

  void Publish() {
    published_.pending.store(wheel_.size(), std::memory_order_relaxed);
    published_.ticks.store(wheel_.now(), std::memory_order_relaxed);
    published_.applied.store(counters_.applied, std::memory_order_relaxed);
    published_.fired.store(counters_.fired, std::memory_order_relaxed);
    published_.moved.store(counters_.moved, std::memory_order_relaxed);
    published_.removed.store(counters_.removed, std::memory_order_relaxed);
    published_.superseded.store(counters_.superseded,
                                std::memory_order_relaxed);
    published_.drained.store(counters_.drained, std::memory_order_relaxed);
  }

  const absl::Duration interval_;
  const std::shared_ptr<Ticker> ticker_;  // keeps manual_ alive
  ManualTicker* const manual_;            // nullptr: real time
  const int drain_workers_;
  const Callback execute_;
  bool attached_ = false;

  // Loop thread only.
  Wheel<K, V, Hash, Eq> wheel_;
  std::vector<typename ExecutePool<K, V>::Item> fired_;  // for pool_
  // Of the batch being applied: each command's key hash, and the entry
  // PrefetchEntry guessed for it.
  std::uint32_t hashes_[kBatch];
  std::uint32_t candidates_[kBatch];
  std::deque<TickRequest*> tick_requests_;
  bool stop_requested_ = false;
  Counters counters_;

  CommandQueue<Cmd> queue_;
  const RealClock clock_;
  std::atomic<std::uint64_t> ticks_done_{0};
  Published published_;
  std::atomic<std::uint64_t> exceptions_{0};
  ExecutePool<K, V> pool_;
  std::thread thread_;

  // Standard primitives, not absl::Mutex: ThreadSanitizer sees them even
  // when the system's Abseil was built without it.
  std::mutex drain_mu_;
  std::condition_variable drains_done_;
  int active_drains_ = 0;  // guarded by drain_mu_

  std::mutex stop_mu_;
  bool stopped_ = false;  // guarded by stop_mu_
  Entries stop_result_;   // written by the loop, read by Stop after join
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_EVENT_LOOP_H_
