// timingwheel::LocalWheel: keyed timers on a loop the caller owns.
//
// The wheel a TimingWheel's event loop runs, without the loop: no threads,
// no queue, no clock of its own. Every call takes effect before it returns,
// on the calling thread, and timers fire on that thread too, when its loop
// calls Advance. A server that runs an event loop per core (Asio's
// io_context, epoll, libuv) keeps one LocalWheel per loop, so that a
// connection's idle timer lives, is pushed later and fires on the
// connection's own thread, with no hop between threads on any of the three.
// <timingwheel/asio.h> drives one from an io_context.
//
//   auto idle = timingwheel::LocalWheel<int, Conn*>::Create(
//       {.interval = absl::Milliseconds(10)});
//   (*idle)->Set(fd, conn, absl::Seconds(30)).IgnoreError();   // accepted
//   (*idle)->Move(fd, absl::Seconds(30)).IgnoreError();        // a request
//   // The loop, each time round:
//   (*idle)->Advance(LocalWheel<int, Conn*>::Clock::now(),
//                    [](int fd, Conn* conn) { conn->Close(); });
//   // ...then waits for I/O until (*idle)->NextDue() at the latest.
//
// Or the connection keeps its deadline, and a request pushes it with a
// store into the connection, which is in cache, rather than a Move into
// the wheel, which is not; the wheel reads it when the timer comes due:
//
//   conn->idle_until = Clock::now() + std::chrono::seconds(30);  // a request
//   (*idle)->Advance(now, [](int fd, Conn* conn) { conn->Close(); },
//                    [](Conn* const& conn) { return conn->idle_until; });
//
// Promises (docs/api.md "LocalWheel"), as a TimingWheel's:
// - Never early: a timer fires in the first Advance(now) with now at or
//   after its deadline rounded up to a tick (a tick is
//   LocalOptions::interval long, counted from Create's `start`).
// - Exactly once: every timer set ends one way: fired, removed, superseded
//   by a Set of its key, or handed back by TakeAll (or dropped by the
//   destructor).
// - Any delay costs the same: levels file far timers by when they are due;
//   a later Move only records the new deadline, and a kept deadline is
//   read only when the timer comes due.
// - Memory follows the live set: once fewer than a quarter of its entries
//   are live for LocalOptions::memory_decay (of Advance's time), Advance
//   gives the rest back a bounded step at a time.
//
// One thread owns a LocalWheel: every method must be called on it (checked
// where TW_DCHECK checks: debug and -Dinvariants=true builds), the fire
// function included. Fire functions may call Set, Move and Remove on the
// wheel (a heartbeat re-arms itself) but must not destroy it.
#ifndef TIMINGWHEEL_LOCAL_WHEEL_H_
#define TIMINGWHEEL_LOCAL_WHEEL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/duration.h"
#include "timingwheel/internal/base/latency_recorder.h"
#include "timingwheel/internal/local/owner_thread.h"
#include "timingwheel/internal/local/tick_time.h"
#include "timingwheel/internal/loop/validate.h"
#include "timingwheel/internal/time/cycle_clock.h"
#include "timingwheel/internal/wheel/wheel.h"
#include "timingwheel/options.h"
#include "timingwheel/stats.h"

namespace timingwheel {

// Keyed timers driven by the owning thread's loop. K: copyable (or
// movable), hashable by Hash, comparable by Eq. V: movable.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class LocalWheel {
 public:
  // The clock deadlines and Advance's `now` are on: the monotonic clock,
  // Asio's steady_timer's own.
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  // Validates options (InvalidArgument names the field) and allocates the
  // slot lists (64 bytes a slot and about 40 KiB for the coarse levels),
  // and the key index if expected_timers is set (ResourceExhausted when
  // memory runs out). Tick k is due at start + k * interval.
  static absl::StatusOr<std::unique_ptr<LocalWheel>> Create(
      LocalOptions options, TimePoint start = Clock::now()) {
    if (absl::Status s = internal::ValidateLocalOptions(options); !s.ok()) {
      return s;
    }
    try {
      return std::unique_ptr<LocalWheel>(new LocalWheel(options, start));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory creating the wheel");
    }
  }

  // Drops the timers that never fired (their keys and values destroyed).
  ~LocalWheel() = default;

  LocalWheel(const LocalWheel&) = delete;
  LocalWheel& operator=(const LocalWheel&) = delete;

  // Schedules `key` to fire with `value` once `delay` (> 0, finite) has
  // passed, measured from this call (one clock read: steady_clock's, or
  // the cycle counter's bound on it where the kernel's clock is that
  // counter; never behind steady_clock). A present key gets
  // the new value and deadline and fires once, with the new value (the old
  // value is superseded). Errors: InvalidArgument for the delay;
  // ResourceExhausted when memory runs out (then nothing changed). Cost:
  // the key's hash and one index probe, a few hundred nanoseconds at most.
  absl::Status Set(K key, V value, absl::Duration delay) {
    return SetIn(std::move(key), std::move(value), delay);
  }
  template <typename Rep, typename Period>
  absl::Status Set(K key, V value, std::chrono::duration<Rep, Period> delay) {
    return SetIn(std::move(key), std::move(value), delay);
  }
  // The same with the deadline given: any time point (one at or before the
  // last Advance's `now` fires in the next Advance). No clock read.
  absl::Status SetAt(K key, V value, TimePoint deadline) {
    return SetTick(std::move(key), std::move(value),
                   time_.TickAtOrAfter(deadline));
  }

  // Reschedules a present key to fire `delay` (> 0, finite) from now,
  // keeping its value; later or earlier, any number of times. Errors:
  // InvalidArgument for the delay, NotFound when the key has no timer.
  // Cost: one index probe and, when later, one write (the entry is filed
  // again when its old slot comes round).
  absl::Status Move(const K& key, absl::Duration delay) {
    return MoveIn(key, delay);
  }
  template <typename Rep, typename Period>
  absl::Status Move(const K& key, std::chrono::duration<Rep, Period> delay) {
    return MoveIn(key, delay);
  }
  absl::Status MoveAt(const K& key, TimePoint deadline) {
    return MoveTick(key, time_.TickAtOrAfter(deadline));
  }

  // Removes a present key so it never fires; its value is destroyed.
  // Returns whether it was present. One index probe and an O(1) unlink.
  bool Remove(const K& key) {
    CheckCaller();
    ++counts_.applied;
    if (!wheel_.Remove(key)) return false;
    ++counts_.removed;
    return true;
  }

  // The deadline of a present key's timer (rounded up to its tick), or
  // nullopt.
  std::optional<TimePoint> DeadlineOf(const K& key) const {
    owner_.Check();
    const std::optional<std::uint64_t> tick = wheel_.DeadlineOf(key);
    if (!tick.has_value()) return std::nullopt;
    return time_.TimeOfTick(*tick);
  }

  // Fires every timer due at or before `now`: removes it and calls
  // fire(K key, V value) for it, on this thread, in deadline order (a
  // tick's timers in no set order). A tick's timers are taken out of the
  // wheel before the first of them is called, so fire may Set, Move and
  // Remove freely; a timer it sets that falls due by `now` fires in this
  // call too. An exception fire throws is caught and counted in
  // stats().callback_exceptions, and the other timers still fire. Also does
  // a bounded step of the wheel's upkeep (moving far timers down a level,
  // giving memory back). A `now` earlier than a previous one fires nothing;
  // a call from inside fire returns 0 at once (the outer call goes on).
  // Returns how many timers fired. Running out of memory for the list of a
  // tick's timers ends the process (std::terminate): they are out of the
  // wheel by then, and would be lost.
  template <typename Fire>
  std::size_t Advance(TimePoint now, Fire&& fire) {
    return AdvanceWith(now, fire, [](const StoredKey&, const V&) noexcept {
      return std::uint64_t{0};
    });
  }

  // Advance, with deadlines the caller keeps: before a due timer fires,
  // kept(const V& value) returns the deadline the caller keeps for it (a
  // connection's "idle until", say); if that is after the tick the timer is
  // due on, the timer is filed again for it (rounded up to a tick) and
  // fires then, or later still if the kept deadline has moved on again by
  // then. So a timer is pushed later by a store into the caller's own
  // object, with no call into the wheel: for a per-request idle timeout,
  // where the object is in cache and the wheel is not. Never early: a
  // timer fires on the first tick at or after both its deadline in the
  // wheel and its kept deadline as read on that tick. A kept deadline
  // earlier than the wheel's does not bring the timer forward (Move does).
  // The timer stays in the wheel meanwhile: Remove, DeadlineOf (which
  // gives the deadline it is filed for) and TakeAll see it. kept runs
  // inside the wheel's scan of a tick: it must not call the wheel; an
  // exception it throws is counted in stats().callback_exceptions and the
  // timer fires. A timer filed again counts in stats().refiled.
  template <typename Fire, typename Kept>
  std::size_t Advance(TimePoint now, Fire&& fire, Kept&& kept) {
    return AdvanceWith(
        now, fire, [this, &kept](const StoredKey&, const V& value) noexcept {
          try {
            return time_.TickAtOrAfter(kept(value));
          } catch (...) {
            ++counts_.callback_exceptions;
            return std::uint64_t{0};
          }
        });
  }

  // When Advance next has work: the time of the first tick a timer may
  // fire on, or upkeep is due (never later than either; it may be earlier,
  // as when a timer moved later is filed again). TimePoint::max() when the
  // wheel is empty. A bitmap search per level.
  TimePoint NextDue() const {
    owner_.Check();
    TimePoint next = time_.TimeOfTick(wheel_.NextDueTick());
    if (compact_at_.has_value()) next = std::min(next, *compact_at_);
    return next;
  }

  // Removes every timer and returns them (any order): what a TimingWheel's
  // Stop returns.
  std::vector<std::pair<K, V>> TakeAll() {
    owner_.Check();
    std::vector<std::pair<K, V>> all;
    all.reserve(wheel_.size());
    wheel_.TakeAll([&all](StoredKey&& key, V&& value) noexcept {
      all.emplace_back(Store::Take(key), std::move(value));
    });
    return all;
  }

  // Timers pending.
  std::size_t size() const { return wheel_.size(); }
  // The tick length and tick 0's time.
  absl::Duration interval() const { return time_.interval(); }
  TimePoint start() const { return time_.start(); }

  // The wheel's counters (docs/api.md E2), read on the owning thread:
  // pending, ticks (done by Advance), applied (Set, Move and Remove calls),
  // fired, moved, removed, superseded, callback_exceptions, refiled,
  // memory_bytes and fire_lateness (Advance's `now` minus the time of the
  // tick each timer was due on). The queue's and workers' fields are 0.
  Stats stats() const {
    owner_.Check();
    Stats s = counts_;
    s.pending = wheel_.size();
    s.ticks = wheel_.now();
    s.refiled = wheel_.refiled();
    s.memory_bytes = MemoryBytes();
    s.fire_lateness = Histogram(lateness_);
    return s;
  }

  // Bytes the wheel holds: its entries, key index, slot lists, and the
  // list a tick's timers are fired from.
  std::size_t MemoryBytes() const {
    return wheel_.MemoryBytes() + due_.capacity() * sizeof(due_[0]);
  }

  // The first broken invariant of the wheel (internal/wheel/wheel.h), or
  // OK: for tests and checking builds. O(timers + slots).
  absl::Status CheckInvariants() const { return wheel_.CheckInvariants(); }

 private:
  using Core = internal::Wheel<K, V, Hash, Eq>;
  using Store = typename Core::Store;
  using StoredKey = typename Core::StoredKey;

  // Upkeep steps an Advance takes, as the TimingWheel's loop does a round:
  // timers moved down from a coarse slot that starts soon, index words of
  // a growth and of a compaction. Each is tens of microseconds at most.
  static constexpr std::size_t kCascadeBudget = 1024;
  static constexpr std::size_t kGrowBudget = 8192;
  static constexpr std::size_t kCompactBudget = 1024;

  LocalWheel(const LocalOptions& options, TimePoint start)
      : time_(options.interval, start),
        memory_decay_(options.memory_decay),
        wheel_(static_cast<std::uint32_t>(options.num_slots)) {
    if (options.expected_timers != 0) wheel_.Reserve(options.expected_timers);
  }

  // Advance, with kept_tick(const StoredKey&, const V&) noexcept giving
  // the tick of a due timer's kept deadline (0: none kept).
  template <typename Fire, typename KeptTick>
  std::size_t AdvanceWith(TimePoint now, Fire& fire, KeptTick&& kept_tick) {
    owner_.Check();
    if (advancing_) return 0;
    advancing_ = true;
    const std::uint64_t target = time_.TickAtOrBefore(now);
    std::size_t fired = 0;
    wheel_.Cascade(kCascadeBudget);
    while (wheel_.now() < target) {
      const std::uint64_t step = std::min(wheel_.NextDueTick(), target);
      scanning_ = true;
      wheel_.AdvanceTo(
          step,
          [this](std::uint64_t, StoredKey&& key, V&& value) noexcept {
            due_.emplace_back(Store::Take(key), std::move(value));
          },
          kept_tick);
      scanning_ = false;
      if (due_.empty()) continue;
      const std::int64_t late_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              now - time_.TimeOfTick(wheel_.now()))
              .count();
      // Fire functions reach the wheel, never this list: a nested Advance
      // returns at once.
      for (auto& [key, value] : due_) {
        lateness_.Record(late_ns);
        ++counts_.fired;
        ++fired;
        try {
          fire(std::move(key), std::move(value));
        } catch (...) {
          ++counts_.callback_exceptions;
        }
      }
      due_.clear();
    }
    Upkeep(now);
    advancing_ = false;
    return fired;
  }

  // The delay forms: one read of the clock, no absl::Duration arithmetic
  // on the way (internal::DelayNanos). The read is CycleClock's: never
  // behind steady_clock, so the deadline is never early.
  template <typename Delay>
  absl::Status SetIn(K key, V value, Delay delay) {
    const std::optional<std::int64_t> ns = internal::DelayNanos(delay);
    if (!ns.has_value()) return internal::InvalidDelay(delay);
    const std::uint32_t hash = wheel_.HashOf(key);
    // The index's line is on its way while the clock is read: a clock read
    // may wait for every load before it (a serialising counter read), and
    // so would otherwise add the probe's cache miss to its own time.
    wheel_.PrefetchIndex(hash);
    const std::uint64_t tick =
        time_.TickAfter(internal::CycleClock::NanosNotBefore(), *ns);
    return SetTick(std::move(key), std::move(value), tick, hash);
  }
  template <typename Delay>
  absl::Status MoveIn(const K& key, Delay delay) {
    const std::optional<std::int64_t> ns = internal::DelayNanos(delay);
    if (!ns.has_value()) return internal::InvalidDelay(delay);
    const std::uint32_t hash = wheel_.HashOf(key);
    wheel_.PrefetchIndex(hash);
    const std::uint64_t tick =
        time_.TickAfter(internal::CycleClock::NanosNotBefore(), *ns);
    return MoveTick(key, tick, hash);
  }

  absl::Status SetTick(K key, V value, std::uint64_t tick) {
    const std::uint32_t hash = wheel_.HashOf(key);
    return SetTick(std::move(key), std::move(value), tick, hash);
  }
  absl::Status SetTick(K key, V value, std::uint64_t tick, std::uint32_t hash) {
    CheckCaller();
    try {
      if (wheel_.Set(StoredKey(std::move(key)), std::move(value), tick, hash)) {
        ++counts_.superseded;
      }
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory for a timer");
    }
    ++counts_.applied;
    return absl::OkStatus();
  }

  absl::Status MoveTick(const K& key, std::uint64_t tick) {
    return MoveTick(key, tick, wheel_.HashOf(key));
  }
  absl::Status MoveTick(const K& key, std::uint64_t tick, std::uint32_t hash) {
    CheckCaller();
    ++counts_.applied;
    if (!wheel_.Move(key, tick, hash)) {
      return absl::NotFoundError("Move: the key has no timer");
    }
    ++counts_.moved;
    return absl::OkStatus();
  }

  // The owning thread, and not from inside a kept function (the wheel is
  // mid-scan then).
  void CheckCaller() const {
    owner_.Check();
    TW_DCHECK(!scanning_);
  }

  // A step of what the TimingWheel's loop does between rounds: the key
  // index's growth, and, once the wheel has wanted to give memory back for
  // memory_decay, a step of that (NextDue comes due again while steps
  // remain).
  void Upkeep(TimePoint now) {
    wheel_.GrowStep(kGrowBudget);
    if (!wheel_.WantsCompaction()) {
      compact_at_.reset();
      return;
    }
    if (!compact_at_.has_value()) {
      if (memory_decay_ == absl::InfiniteDuration()) return;
      compact_at_ = internal::TickTime::Plus(now, memory_decay_);
    }
    if (now < *compact_at_) return;
    // Done (false): wait memory_decay again before the next look, which a
    // wheel that wants compaction yet has nothing to move would otherwise
    // make at once, and forever.
    compact_at_ = wheel_.Compact(kCompactBudget)
                      ? now
                      : internal::TickTime::Plus(now, memory_decay_);
  }

  static LatencyHistogram Histogram(const internal::LocalLatencies& l) {
    LatencyHistogram h;
    h.buckets = l.buckets;
    h.count = l.count;
    h.sum = absl::Nanoseconds(l.sum_ns);
    h.max = absl::Nanoseconds(l.max_ns);
    return h;
  }

  const internal::TickTime time_;
  const absl::Duration memory_decay_;
  Core wheel_;
  internal::OwnerThread owner_;
  // A tick's fired timers, between leaving the wheel and their fire calls.
  std::vector<std::pair<K, V>> due_;
  bool advancing_ = false;
  bool scanning_ = false;  // in the wheel's AdvanceTo: kept may be running
  // When Upkeep next compacts: set while the wheel wants to give memory
  // back.
  std::optional<TimePoint> compact_at_;
  Stats counts_;
  internal::LocalLatencies lateness_;
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_LOCAL_WHEEL_H_
