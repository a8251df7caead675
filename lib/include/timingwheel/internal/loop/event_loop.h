// The thread that owns a Wheel: applies commands, runs ticks, sleeps.
//
// Why over 450 lines: one class, the loop thread's state and the steps of
// its round (Run), each of which reads that state (the batch, the pace and
// growth windows, compaction, the stop); the pieces that stand alone
// already live beside it (the queue, the pipeline, the pools, the time
// source). Split, a reader must hold both files to follow one round.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_EVENT_LOOP_H_
#define TIMINGWHEEL_INTERNAL_LOOP_EVENT_LOOP_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/loop/apply_pipeline.h"
#include "timingwheel/internal/loop/callback_scope.h"
#include "timingwheel/internal/loop/caller_share.h"
#include "timingwheel/internal/loop/command.h"
#include "timingwheel/internal/loop/command_queue.h"
#include "timingwheel/internal/loop/drain_pool.h"
#include "timingwheel/internal/loop/execute_pool.h"
#include "timingwheel/internal/loop/loop_stats.h"
#include "timingwheel/internal/loop/thread_name.h"
#include "timingwheel/internal/time/tick_sink.h"
#include "timingwheel/internal/time/time_source.h"
#include "timingwheel/internal/wheel/wheel.h"
#include "timingwheel/options.h"
#include "timingwheel/stats.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace internal {

// Owns the wheel and the only thread that touches it. Callers reach it only
// through the command queue; fired timers leave it for the execute pool,
// drained ones for the drain pool. Nothing else flows back but completion
// signals (a Drain's entries, a Tick's or a Stop's end).
template <typename K, typename V, typename Hash, typename Eq>
class EventLoop final : public TickSink {
 public:
  using Callback = std::function<void(K, V)>;
  using Entries = std::vector<std::pair<K, V>>;
  using WheelType = Wheel<K, V, Hash, Eq>;
  // How commands, entries and fired timers hold a key (base/stored_key.h).
  using Store = typename WheelType::Store;
  using StoredKey = typename Store::Stored;
  using Cmd = Command<K, V, StoredKey>;

  // Builds everything and starts the execute workers, but not the loop
  // thread. Throws std::bad_alloc or std::system_error when memory or
  // threads run out.
  EventLoop(const Options& options, Callback execute)
      : ticker_(options.ticker),
        manual_(dynamic_cast<ManualTicker*>(options.ticker.get())),
        execute_(std::move(execute)),
        time_(options.interval, manual_ != nullptr),
        wheel_(static_cast<std::uint32_t>(options.num_slots)),
        pipeline_(&wheel_),
        batch_(Pipeline::kBatch),
        memory_decay_(ClampDecay(options.memory_decay)),
        queue_(options.max_pending, options.max_lag),
        drain_pool_(options.drain_workers, Owner(), &stats_),
        execute_pool_(options.execute_workers, &execute_, Owner(), &stats_,
                      ManualTickEndsWhenIdle()) {
    wheel_.Reserve(options.expected_timers);
    wheel_.UseResidentMemory(&caller_share_.pool_block(),
                             &caller_share_.index_table());
  }

  ~EventLoop() {
    Stop().IgnoreError();
    if (attached_) TickerAccess::Detach(*manual_, this);
  }

  // True on a thread running one of this wheel's callbacks (execute or
  // drain).
  bool InOwnCallback() const { return CallbackScope::InCallbackOf(Owner()); }

  // Destroys `loop` from inside one of its own callbacks, where it cannot
  // wait for itself: no callback or drain function starts after this
  // returns (one a worker has already taken may still run), the fired
  // timers not yet run and the drained entries not yet handed out are
  // dropped, and the rest (joining the threads, dropping the pending
  // timers, freeing everything) happens as ~EventLoop would do it: from an
  // execute callback on this worker once the callback returns; from a
  // drain function in the Drain call running it (the last, if several),
  // once its functions have returned.
  static void DestroyFromCallback(std::unique_ptr<EventLoop> loop) {
    loop->execute_pool_.Abandon();
    if (loop->execute_pool_.OnWorkerThread()) {
      Executors::AfterCallback(
          [](void* p) { delete static_cast<EventLoop*>(p); }, loop.release());
      return;
    }
    loop->drain_pool_.Abandon();
    MutexLock lock(loop->drain_mu_);
    loop->orphaned_ = true;  // the last Drain call deletes it
    loop.release();
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
      NameThread(thread_, "tw-loop");
    } catch (const std::system_error&) {
      return absl::ResourceExhaustedError("cannot start the loop thread");
    }
    return absl::OkStatus();
  }

  // Any thread: see TimeSource.
  std::uint64_t DeadlineTick(absl::Duration delay) const {
    return time_.DeadlineTick(delay);
  }
  absl::Duration Now() const { return time_.Now(); }

  // Any thread, at the start of a call that queues keyed work, before it
  // reads the time its deadline counts from: see CallerShare.
  void BeforeSubmit() noexcept { caller_share_.BeforeSubmit(); }

  // Any thread: the hash a keyed command carries (Wheel::HashOf).
  std::uint32_t HashOf(const K& key) const {
    return WheelType::HashWith(hash_, key);
  }

  absl::Status Push(Cmd command) { return queue_.Push(std::move(command)); }
  // What a batch call of no items returns: OK, or FailedPrecondition once
  // stopped, as every other call.
  absl::Status EmptyBatch() const { return queue_.EmptyBatch(); }
  // The n keyed commands make(0), ..., make(n - 1), all or none: see
  // CommandQueue::PushEach.
  template <typename Make>
  absl::Status PushEach(std::size_t n, Make&& make) {
    return queue_.PushEach(n, std::forward<Make>(make));
  }

  // docs/api.md S7: the loop takes every entry, the drain pool runs fn.
  absl::Status Drain(Callback fn) {
    if (!fn) return absl::InvalidArgumentError("Drain: fn is empty");
    if (InOwnCallback()) {
      return absl::FailedPreconditionError(
          "Drain called from a callback of the same wheel");
    }
    {
      MutexLock lock(drain_mu_);
      ++active_drains_;
    }
    DrainRequest<K, V> request;
    absl::Status status = queue_.Push(Cmd::Drain(&request));
    if (status.ok()) {
      request.taken.wait();
      drain_pool_.Run(request.entries, fn);
    }
    bool reap = false;
    {
      MutexLock lock(drain_mu_);
      if (--active_drains_ == 0) {
        reap = orphaned_;
        drains_done_.notify_all();
      }
    }
    // Destroyed from a drain function (DestroyFromCallback): nothing else
    // refers to the loop now.
    if (reap) delete this;
    return status;
  }

  // docs/api.md S8. Concurrent calls: one stops the wheel, the others wait
  // for it and get an empty vector.
  absl::StatusOr<Entries> Stop() {
    if (InOwnCallback()) {
      return absl::FailedPreconditionError(
          "Stop called from a callback of the same wheel");
    }
    MutexLock lock(stop_mu_);
    if (stopped_) return Entries();
    queue_.Close();
    queue_.PushAfterClose(Cmd::Stop());
    if (thread_.joinable()) thread_.join();
    execute_pool_.Shutdown();  // runs every fired timer first
    {
      MutexLock drain_lock(drain_mu_);
      while (active_drains_ != 0) drain_lock.Wait(drains_done_);
    }
    drain_pool_.Shutdown();
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

  // The loop's published counts, and what stats() reads from their own
  // sources (Stats: fire_lateness and after).
  Stats stats() const {
    Stats s = stats_.Read();
    s.fire_lateness = execute_pool_.Lateness();
    s.callbacks_pending = execute_pool_.Outstanding();
    s.commands_queued = queue_.SizeApprox();
    const std::int64_t look = last_look_ns_.load(std::memory_order_relaxed);
    if (s.commands_queued != 0 && look != 0) {
      s.loop_lag =
          absl::Nanoseconds(std::max<std::int64_t>(SteadyNowNs() - look, 0));
    }
    if (queue_.BoundsLag()) {
      s.lag_limit_commands = static_cast<std::size_t>(
          std::max<std::int64_t>(queue_.LagLimit(), 0));
    }
    return s;
  }

 private:
  using Pipeline = ApplyPipeline<K, V, Hash, Eq>;
  using Executors = ExecutePool<K, V, Store>;
  using Clock = std::chrono::steady_clock;

  // Commands applied per round at least, before the loop looks at the clock
  // again (more when more were already queued: see Run).
  static constexpr std::size_t kMinCommandsPerRound = 8192;
  // Callers pace themselves (CallerShare) while more commands than this are
  // queued, about a millisecond of the loop's work at a million timers, and
  // timers are due within kPaceHorizon.
  static constexpr std::size_t kPaceCallersAbove = 16384;
  static constexpr std::chrono::milliseconds kPaceHorizon{20};
  // Callers pace themselves also while work has been due this long and the
  // loop has not got to it: the loop lacks a core, whatever the queue holds
  // (a burst of string keys costs the loop more per command, and its
  // producer, the loop and the execute worker want three cores of two).
  static constexpr std::chrono::microseconds kPaceLate{500};
  // Batches a long round applies between two SignalBacklogs.
  static constexpr std::size_t kBatchesPerSignal = 16;
  // Timers a round moves down from each draining coarse slot, before the
  // slot's last tick nears (then more: Wheel::Cascade).
  static constexpr std::size_t kCascadeBudget = 1024;
  // Index words and pool entries a round's compaction step looks at: with
  // a relocation costing a few cache misses at worst, well under a
  // millisecond, so no tick waits for it.
  static constexpr std::size_t kCompactBudget = 1024;
  // Index words a round's growth step empties or migrates: tens of
  // microseconds at most, so no tick waits long for it.
  static constexpr std::size_t kGrowBudget = 8192;
  // Sets a second, net, above which the index grows early (see GrowEarly):
  // at that rate a set comes every microsecond, and the growth's share of
  // the sets that would pay for it at 3/4 (about 64 words each, a few
  // hundred nanoseconds) starts to build a backlog.
  static constexpr double kEarlyGrowthRate = 1e6;
  static constexpr std::chrono::milliseconds kEarlyGrowthWindow{1};
  // MeasurePace's window: at most this many commands, or this long.
  static constexpr std::size_t kPaceCommands = 1024;
  static constexpr std::chrono::microseconds kPaceWindow{1000};
  // Longest sleep; a safety net against a missed wake-up or clock oddities.
  static constexpr absl::Duration kMaxSleep = absl::Seconds(1);
  // After a round that applied commands the loop naps this long before
  // looking again, unannounced (see CommandQueue::Nap); one empty look and
  // it goes back to sleeping until woken.
  static constexpr absl::Duration kNap = absl::Microseconds(100);
  // A round that applied fewer commands naps before the next (Run).
  static constexpr std::size_t kTrickleBelow = Pipeline::kBatch;

  // Who the callbacks run for: what CallbackScope compares.
  const void* Owner() const { return static_cast<const TickSink*>(this); }

  void Run() {
    bool streaming = false;  // the last round applied commands
    bool slept = true;       // since the last MeasurePace
    for (;;) {
      MeasurePace(slept);
      slept = false;
      // Learn which ticks are due *before* taking commands, then take
      // commands until every producer's queue is found empty, so a tick
      // does not run ahead of a command already waiting when it became due
      // (a MoveTimer sent long before the old deadline must win, however far
      // behind the loop is). Under a flood that never empties the queue the
      // round stops after as many commands as were queued at its start,
      // taken from the producers in turn, so ticking is not starved either;
      // a producer far behind may then see a tick pass one of its commands.
      FinishManualTick();
      const std::uint64_t due =
          tick_callbacks_running_ ? wheel_.now() : time_.DueTick(wheel_.now());
      // What is queued now is taken this round; what is queued later came
      // after this look (Stats::loop_lag).
      const std::int64_t look_ns = SteadyNowNs();
      last_look_ns_.store(look_ns, std::memory_order_relaxed);
      // With max_lag, also once it has applied max_lag's worth at the
      // measured pace (ApplyQueued).
      const std::size_t queued = queue_.SizeApprox();
      SignalBacklog(queued, look_ns);
      const std::size_t applied =
          ApplyQueued(std::max(kMinCommandsPerRound, queued));
      if (applied != 0) SignalBacklog(queue_.SizeApprox(), SteadyNowNs());
      if (stop_requested_) {
        FinishStop();
        return;
      }
      if (applied != 0) streaming = true;
      // A step of moving coarse slots that start soon down to finer levels,
      // every round, so that no tick has to move a whole slot at once.
      const bool cascading = wheel_.Cascade(kCascadeBudget);
      // A step of the key index's growth, every round, so that the sets
      // after it need not pay for it (see GrowEarly).
      GrowEarly();
      const bool growing = wheel_.GrowStep(kGrowBudget);
      // With real time, then on to the sleep below, not round again: with an
      // interval of a few nanoseconds another tick is always due by the end of
      // a round, and an empty wheel would spin instead of sleeping until its
      // next occupied tick (docs/api.md S11).
      if (due > wheel_.now()) {
        AdvanceTo(due);
        // A ManualTicker's Tick(n) is worked off a step at a time: round
        // again rather than to the sleep, which would wait for a command.
        if (time_.manual()) continue;
      }
      Publish();
      const bool compacting = CompactStep();
      // A round that took fewer commands than a batch is a trickle: round
      // again at once and the loop keeps pace with its producers a few
      // commands at a time, paying a round's cost for each few and sharing
      // the queue's lines with them; a nap lets a batch gather.
      const bool trickle =
          applied < kTrickleBelow && !time_.manual() && !queue_.BoundsLag();
      if ((applied != 0 && !trickle) || cascading || growing || compacting) {
        continue;
      }
      // Idle until the next tick or command: where a check delays no work
      // that is due. Its time is no command's: the pace window restarts.
      if (CheckWheel()) slept = true;
      // The last step may have freed memory since Publish.
      if (MemoryBytes() != stats_.counts().memory_bytes) Publish();
      absl::Duration wait = time_.UntilTick(wheel_.NextDueTick(), kMaxSleep);
      if (compact_after_ != kNotCompacting) {
        wait = std::min(wait, absl::FromChrono(compact_after_ - Clock::now()));
      }
      if (wait > absl::ZeroDuration()) {
        if (queue_.BoundsLag()) queue_.Idle();
        // A ManualTicker's Tick waits on the loop: never nap there.
        if (streaming && !time_.manual()) {
          queue_.Nap(std::min(wait, kNap));
        } else {
          queue_.WaitForWork(wait);
        }
        slept = true;
      }
      streaming = false;
    }
  }

  // Checking builds (TIMINGWHEEL_CHECK_INVARIANTS: -Dinvariants=true, the
  // sanitizer runs of ./run test) check the wheel's invariants after each
  // round that leaves the loop idle, aborting with the first one broken, and
  // return true if they did; other builds do nothing here. A check walks
  // every timer and slot, so after one that took t the next waits until
  // kCheckSpacing * t more has passed: checks take at most about
  // 1 / (kCheckSpacing + 1) of the loop's time, whatever the wheel's size.
  bool CheckWheel() {
#if defined(TIMINGWHEEL_CHECK_INVARIANTS)
    const Clock::time_point start = Clock::now();
    if (start < next_wheel_check_) return false;
    TW_DCHECK_OK(wheel_.CheckInvariants());
    const Clock::time_point end = Clock::now();
    next_wheel_check_ = end + (end - start) * kCheckSpacing;
    return true;
#else
    return false;
#endif
  }

  // The key index doubles when sets fill it to 3/4, and left to itself
  // does that work on the next C/32 + C/64 sets (C its capacity): a few
  // hundred nanoseconds more each, for tens of thousands of sets. In a
  // burst they then fall behind the callers, and the ticks behind them.
  // So the loop steps the growth itself each round, in time the sets leave
  // it, and while sets arrive faster than kEarlyGrowthRate it starts the
  // growth from half full: then it is spread over a quarter of the table's
  // sets, done mostly in spare time, before the table is full. Slower, a
  // growth at 3/4 costs the sets little next to the time between them, so
  // a table is never doubled early for timers that are not coming. The
  // rate is measured over kEarlyGrowthWindow from when the index is half
  // full; a reading of the clock a round meanwhile.
  void GrowEarly() {
    if (!wheel_.WantsEarlyGrowth()) {
      growth_watch_start_ = kNotWatching;
      return;
    }
    const Clock::time_point now = Clock::now();
    const std::size_t size = wheel_.size();
    if (growth_watch_start_ == kNotWatching || size < growth_watch_size_) {
      growth_watch_start_ = now;
      growth_watch_size_ = size;
      return;
    }
    const auto elapsed = now - growth_watch_start_;
    if (elapsed < kEarlyGrowthWindow) return;
    const double per_second = static_cast<double>(size - growth_watch_size_) /
                              std::chrono::duration<double>(elapsed).count();
    if (per_second >= kEarlyGrowthRate) {
      try {
        wheel_.StartGrowth();
      } catch (const std::bad_alloc&) {
        // The sets will start it at 3/4, and report running out there.
      }
      growth_watch_start_ = kNotWatching;
    } else {
      growth_watch_start_ = now;
      growth_watch_size_ = size;
    }
  }

  // Options::memory_decay as the loop keeps it: a finite decay of centuries
  // would overflow the steady clock's time_point, so beyond a year it means
  // never.
  static absl::Duration ClampDecay(absl::Duration decay) {
    return decay > absl::Hours(24 * 365) ? absl::InfiniteDuration() : decay;
  }

  // Memory follows the live set, a little late: once the wheel has wanted
  // to give memory back for Options::memory_decay, a bounded step of it
  // each round, flood or not, and rounds without sleeping while it lasts.
  // Returns true while steps remain. The delay spares a wheel that empties
  // and refills within it (a burst of timers all fired, then the next
  // burst) from giving back its pages and faulting them in again, which
  // the next burst's timers would wait for.
  bool CompactStep() {
    if (!wheel_.WantsCompaction()) {
      compact_after_ = kNotCompacting;
      return false;
    }
    const Clock::time_point now = Clock::now();
    if (compact_after_ == kNotCompacting) {
      if (memory_decay_ == absl::InfiniteDuration()) return false;
      compact_after_ = now + absl::ToChronoNanoseconds(memory_decay_);
    }
    if (now < compact_after_) return false;
    return wheel_.Compact(kCompactBudget);
  }

  // Applies queued commands until the queue is empty or at least `limit`
  // were applied; returns how many.
  // With Options::max_lag, it also reads the clock after each batch, to
  // measure the pace within a long round too (SamplePace), and ends the
  // round once it has applied what the loop works off within max_lag at
  // that pace (Admission::lag_limit), taking no more than that in a batch:
  // admission keeps about that much queued, so the round rarely ends with
  // commands that were waiting at its start left over, but when they turn
  // out dearer than measured, the ticks due meanwhile run next rather than
  // after the whole queue. At least kMinTake commands a round, so that a
  // tiny limit (a max_lag of nanoseconds) does not leave the loop running
  // a round, with its fixed costs, per command. A clock read per batch: a
  // fraction of a nanosecond per command when commands are cheap (batches
  // of 256), nothing next to them when they are dear.
  std::size_t ApplyQueued(std::size_t limit) {
    std::size_t total = 0;
    if (!queue_.BoundsLag()) {
      for (std::size_t batches = 1;; ++batches) {
        const std::size_t n = queue_.PopBulk(batch_.data(), batch_.size());
        pipeline_.Apply(batch_.data(), n, stats_.counts(),
                        [this](Cmd& c) { ApplyUnkeyed(c); });
        total += n;
        if (n < batch_.size() || total >= limit) return total;
        // A long round tells callers as it goes: what they queue meanwhile
        // makes it longer still.
        if (batches % kBatchesPerSignal == 0) {
          SignalBacklog(queue_.SizeApprox(), SteadyNowNs());
        }
      }
    }
    constexpr std::size_t kMinTake = 32;
    for (;;) {
      const auto lag_limit = static_cast<std::size_t>(queue_.LagLimit());
      const std::size_t room = lag_limit > total ? lag_limit - total : 0;
      if (total != 0 && room == 0) return total;
      const std::size_t take =
          std::min(batch_.size(), std::max(room, kMinTake));
      const std::size_t n = queue_.PopBulk(batch_.data(), take);
      pipeline_.Apply(batch_.data(), n, stats_.counts(),
                      [this](Cmd& c) { ApplyUnkeyed(c); });
      total += n;
      pace_commands_ += n;
      if (n != 0) SamplePace(Clock::now(), false);
      if (n < take || total >= limit) return total;
    }
  }

  // Options::max_lag: the loop's pace, for admission. Measured in wall time
  // over busy stretches, ticks and all (whatever keeps the loop from the
  // queue delays a queued command just as much), in windows of
  // kPaceCommands commands or kPaceWindow, whichever ends first (checked
  // here and after each batch a round applies: SamplePace). Called at
  // the start of each round, with `slept` when the loop slept since the
  // last call: idle time says nothing about the pace. A window that drained
  // the wheel is dropped (a Drain's cost is its own, not the commands').
  // Also tells admission when the round starts, and when the first tick
  // the wheel has work on is due (a bitmap search per level): how late the
  // loop is on its ticks.
  void MeasurePace(bool slept) {
    if (!queue_.BoundsLag()) return;
    const Clock::time_point now = Clock::now();
    queue_.RoundStarts(now);
    queue_.WorkDueAt(time_.SteadyNanosOfTick(wheel_.NextDueTick()));
    SamplePace(now, slept);
  }

  // The pace window at `now` (with max_lag): restarted after a sleep or a
  // Drain, recorded and restarted once full. ApplyQueued calls it after
  // each batch too, so a round that takes longer than the window is
  // measured while it runs.
  void SamplePace(Clock::time_point now, bool slept) {
    if (slept || drained_in_window_) {
      pace_start_ = now;
      pace_commands_ = 0;
      drained_in_window_ = false;
      return;
    }
    if (pace_commands_ >= kPaceCommands ||
        (pace_commands_ != 0 && now - pace_start_ >= kPaceWindow)) {
      queue_.RecordApplied(pace_commands_, absl::FromChrono(now - pace_start_));
      pace_start_ = now;
      pace_commands_ = 0;
    }
  }

  // Drain, Tick and Stop, in their turn among the keyed commands.
  void ApplyUnkeyed(Cmd& c) {
    switch (c.kind()) {
      case Cmd::Kind::kDrain: {
        DrainRequest<K, V>* request = c.drain();
        request->entries.reserve(wheel_.size());
        wheel_.TakeAll([request](StoredKey&& key, V&& value) {
          request->entries.emplace_back(Store::Take(key), std::move(value));
        });
        stats_.counts().drained += request->entries.size();
        drained_in_window_ = true;
        request->taken.count_down();
        return;
      }
      case Cmd::Kind::kTick:
        time_.AddRequest(c.tick());
        return;
      case Cmd::Kind::kStop:
        stop_requested_ = true;
        return;
      default:
        return;
    }
  }

  // Runs the ticks up to `due` and hands what fired to the execute pool. A
  // manual tick ends when its callbacks have returned (FinishManualTick).
  void AdvanceTo(std::uint64_t due) {
    const std::size_t before = fired_.size();
    std::uint64_t last_tick = 0;
    std::int64_t due_ns = Executors::kNoDueTime;
    wheel_.AdvanceTo(due, [&](std::uint64_t tick, StoredKey&& key, V&& value) {
      if (tick != last_tick && !time_.manual()) {
        last_tick = tick;
        due_ns = time_.SteadyNanosOfTick(tick);
      }
      fired_.emplace_back(std::move(key), std::move(value), due_ns);
    });
    stats_.counts().fired += fired_.size() - before;
    time_.Advanced(wheel_.now());
    // Counters first: a caller that sees a callback run also sees it
    // counted in stats().
    Publish();
    execute_pool_.Submit(fired_);
    if (time_.manual()) tick_callbacks_running_ = true;
  }

  // Manual time: a tick is counted done, and the next one may run, once
  // its callbacks have returned (ManualTicker::Tick's (c), and a callback
  // of tick k sees ticks_done = k). The loop does not wait for them: it
  // goes on applying commands meanwhile (docs/api.md S10), so a callback
  // that waits for another thread's Drain, or for a command applied,
  // finishes. The worker that runs the last of them wakes the loop
  // (ManualTickEndsWhenIdle), whose next round lands here.
  void FinishManualTick() {
    if (!tick_callbacks_running_ || !execute_pool_.Idle()) return;
    tick_callbacks_running_ = false;
    time_.TickCompleted();
  }

  // The execute pool's idle hook: wakes the loop to finish a manual tick.
  std::function<void()> ManualTickEndsWhenIdle() {
    if (manual_ == nullptr) return nullptr;
    return [this] { queue_.WakeConsumer(); };
  }

  // After the Stop command: the gate was closed before it was pushed, so
  // whatever is still queued was accepted and must be applied.
  void FinishStop() {
    caller_share_.SetBehind(false);  // no caller waits for a loop that is gone
    while (ApplyQueued(kMinCommandsPerRound) != 0) {
    }
    // A Tick call still waiting returns after its callbacks (its (c)).
    if (tick_callbacks_running_) execute_pool_.WaitIdle();
    time_.ReleaseRequests();
    stop_result_.reserve(wheel_.size());
    wheel_.TakeAll([this](StoredKey&& key, V&& value) {
      stop_result_.emplace_back(Store::Take(key), std::move(value));
    });
    Publish();
  }

  // Tells callers whether to pace themselves (CallerShare): the loop is
  // kPaceLate behind work due, or more than kPaceCallersAbove commands are
  // queued and timers are due within kPaceHorizon, whose lateness the
  // backlog would add to (a flood of sets for later loses nothing by
  // waiting in the queue, and is not slowed). A slow execute callback
  // paces no caller: callers sleeping would not speed it up. now_ns is a
  // reading the caller has taken; the wheel is searched for its next work
  // only when that work could be overdue, or the queue is long.
  void SignalBacklog(std::size_t queued, std::int64_t now_ns) {
    const std::int64_t late_ns = std::chrono::nanoseconds(kPaceLate).count();
    const bool may_be_late = now_ns - late_ns > NanosOfNextTick();
    const bool long_queue = queued > kPaceCallersAbove;
    if (!may_be_late && !long_queue) {
      caller_share_.SetBehind(false);
      return;
    }
    const std::int64_t until_due = NanosUntilWorkDue(now_ns);
    caller_share_.SetBehind(
        (may_be_late && until_due < -late_ns) ||
        (long_queue &&
         until_due <= std::chrono::nanoseconds(kPaceHorizon).count()));
  }
  // How long from now_ns until the wheel's next work is due (negative:
  // overdue), or int64 max when it has none.
  std::int64_t NanosUntilWorkDue(std::int64_t now_ns) const {
    const std::int64_t due = time_.SteadyNanosOfTick(wheel_.NextDueTick());
    if (due == std::numeric_limits<std::int64_t>::max()) return due;
    return due - now_ns;
  }
  // When tick now()+1 is due: no work is due before it. Kept per tick, as
  // a round may ask twice and most rounds advance by a tick or less.
  std::int64_t NanosOfNextTick() {
    if (wheel_.now() != next_tick_of_) {
      next_tick_of_ = wheel_.now();
      next_tick_ns_ = time_.SteadyNanosOfTick(next_tick_of_ + 1);
    }
    return next_tick_ns_;
  }
  static std::int64_t SteadyNowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               Clock::now().time_since_epoch())
        .count();
  }

  // The wheel's memory and the blocks held ready for it.
  std::size_t MemoryBytes() const {
    return wheel_.MemoryBytes() + caller_share_.pool_block().ReadyBytes();
  }

  void Publish() {
    stats_.counts().pending = wheel_.size();
    stats_.counts().ticks = wheel_.now();
    stats_.counts().refiled = wheel_.refiled();
    stats_.counts().memory_bytes = MemoryBytes();
    stats_.Publish();
  }

  const std::shared_ptr<Ticker> ticker_;  // keeps manual_ alive
  ManualTicker* const manual_;            // nullptr: real time
  const Callback execute_;
  bool attached_ = false;
  TimeSource time_;
  LoopStats stats_;

  // Loop thread only.
  // Read by callers on every call; the loop hands memory over through it.
  CallerShare caller_share_;
  // On lines of its own: callers read caller_share_'s flags on every call,
  // and the loop writes the wheel's fields on every command.
  alignas(64) WheelType wheel_;
  // Callers hash their keys with it (HashOf), concurrently: Hash is called
  // const, as std::hash and absl::Hash allow.
  const Hash hash_{};
  Pipeline pipeline_;
  std::vector<Cmd> batch_;  // commands being applied
  std::vector<typename Executors::Item> fired_;  // for the execute pool
  bool stop_requested_ = false;
  // Manual time: a tick ran and its callbacks may still be running.
  bool tick_callbacks_running_ = false;
  // MeasurePace's window: since when, how many commands, whether a Drain
  // ran in it. MeasurePace also tells admission when each round starts.
  Clock::time_point pace_start_ = Clock::now();
  std::size_t pace_commands_ = 0;
  bool drained_in_window_ = false;
  // When compaction may start (see CompactStep); kNotCompacting when the
  // wheel does not want it.
  static constexpr Clock::time_point kNotCompacting = Clock::time_point::max();
  Clock::time_point compact_after_ = kNotCompacting;
  const absl::Duration memory_decay_;  // Options::memory_decay
  // GrowEarly's window: since when, and the index's size then.
  static constexpr Clock::time_point kNotWatching = Clock::time_point::max();
  Clock::time_point growth_watch_start_ = kNotWatching;
  std::size_t growth_watch_size_ = 0;
#if defined(TIMINGWHEEL_CHECK_INVARIANTS)
  // CheckWheel: no check before this.
  static constexpr int kCheckSpacing = 9;
  Clock::time_point next_wheel_check_ = {};
#endif

  CommandQueue<Cmd> queue_;
  DrainPool<K, V> drain_pool_;
  Executors execute_pool_;
  std::thread thread_;

  // Standard primitives (Mutex is a std::mutex), not absl::Mutex:
  // ThreadSanitizer sees them even when the system's Abseil was built
  // without it.
  Mutex drain_mu_;
  std::condition_variable drains_done_;
  int active_drains_ ABSL_GUARDED_BY(drain_mu_) = 0;
  // See DestroyFromCallback.
  bool orphaned_ ABSL_GUARDED_BY(drain_mu_) = false;

  Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  Entries stop_result_;   // written by the loop, read by Stop after join
  // NanosOfNextTick's answer, and the now() it was for.
  std::uint64_t next_tick_of_ = kNever;
  std::int64_t next_tick_ns_ = 0;
  // When the loop last took what was queued (steady ns; 0: never).
  alignas(64) std::atomic<std::int64_t> last_look_ns_{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_EVENT_LOOP_H_
