// Options for a TimingWheel and for a Cache.
#ifndef TIMINGWHEEL_OPTIONS_H_
#define TIMINGWHEEL_OPTIONS_H_

#include <cstddef>
#include <memory>

#include "absl/time/time.h"

namespace timingwheel {

class Ticker;

// How a wheel is shaped and staffed. Create() validates every field and
// returns InvalidArgument for a value outside the documented range.
struct Options {
  // Length of one tick: the wheel's resolution. At least 1ns, finite.
  absl::Duration interval = absl::Seconds(1);
  // Slots of the finest level, 1 .. kMaxSlots, rounded up to a power of
  // two. Coarser levels of 64 slots above it cover every delay up to years
  // at the same cost, so this is not a sizing decision: a timer due within
  // num_slots ticks is filed once, one further out is refiled once per level
  // as its time approaches (a few times over its life). Each slot costs 64
  // bytes (list heads for two rotations).
  int num_slots = 512;
  // Threads running the execute callback, 1 .. kMaxWorkers.
  int execute_workers = 1;
  // Threads running Drain's fn, 1 .. kMaxWorkers: a pool started by the
  // first Drain and kept until the wheel stops.
  int drain_workers = 8;
  // Bound on SetTimer/MoveTimer/RemoveTimer commands queued but not yet
  // applied by the loop; beyond it those calls return ResourceExhausted.
  // 0 = unbounded (and the submission path then keeps no shared counter).
  std::size_t max_pending = 0;
  // Bound on how far behind its callers the loop may fall, 0 = no bound.
  // By default every well-formed call is accepted, and when callers submit
  // faster than the loop applies, timers fire late by about the time the
  // loop needs to work off the backlog (ticks wait for the commands queued
  // before them). With max_lag > 0, SetTimer/MoveTimer/RemoveTimer (and
  // their batch forms) return ResourceExhausted, with no effect, while
  // applying what is already queued would take the loop longer than
  // max_lag, at its measured pace, counting what its ticks are overdue
  // already (or the busy loop has not come round to the queue for
  // max_lag); timers then fire at most about max_lag plus one interval
  // late, as far as the measured pace holds: while the key index grows a
  // set costs the loop more (set expected_timers where lateness matters). A
  // refused caller should retry later (after a yield or a short sleep) or shed
  // the work. Finite, >= 0. Cost: one shared atomic add a call, as max_pending.
  absl::Duration max_lag = absl::ZeroDuration();
  // How many timers the wheel is expected to hold at its peak, 0 = unknown.
  // Create sizes the key index for it up front (11 to 21 bytes a timer).
  // Without it the index doubles as the wheel grows, a bounded step of the
  // move per insert and more between the loop's rounds, so no command stops
  // the loop for a rehash; while sets arrive faster than 1 M/s it doubles
  // from half full, so a burst does not meet the doubling at once (then 11
  // to 32 bytes a timer). The hint saves that work, and the two tables held
  // while a doubling is under way. A hint, not a limit.
  std::size_t expected_timers = 0;
  // How long memory the wheel no longer needs stays with it: once fewer
  // than a quarter of its timer entries are live (and its key index is as
  // sparse) for this long, the loop gives the rest back, a bounded step a
  // round. A burst that returns sooner finds its memory resident, where
  // faulting it in again would make its timers late; an idle wheel still
  // returns to its live set. >= 0; InfiniteDuration = never give back.
  absl::Duration memory_decay = absl::Seconds(10);
  // Where ticks come from. nullptr = real time (drift-free, monotonic clock).
  // A ManualTicker drives at most one wheel at a time.
  std::shared_ptr<Ticker> ticker;
};

// How a LocalWheel is shaped: the fields of Options that apply to a wheel
// with no threads of its own (LocalWheel::Create validates them as Create
// does Options').
struct LocalOptions {
  // Length of one tick: the wheel's resolution. A whole number of
  // nanoseconds, at least 1ns.
  absl::Duration interval = absl::Milliseconds(10);
  int num_slots = 512;              // as Options::num_slots
  std::size_t expected_timers = 0;  // as Options::expected_timers
  // As Options::memory_decay, on the time Advance is given.
  absl::Duration memory_decay = absl::Seconds(10);
};

// Largest Options::num_slots accepted: 4 Mi slots, 256 MiB of slot lists at
// 64 bytes a slot.
inline constexpr int kMaxSlots = 1 << 22;
// Largest execute_workers / drain_workers accepted.
inline constexpr int kMaxWorkers = 1024;
// Largest expected_timers accepted: the pool addresses fewer than 2^31.
inline constexpr std::size_t kMaxTimers = (std::size_t{1} << 31) - 1;

// Why a value left the cache.
enum class RemovalCause {
  kExpired,   // its time to live ran out
  kExplicit,  // Delete or Clear
  kReplaced,  // a Set of its key replaced the value
  kSize,      // evicted to stay within max_entries
};

// How a Cache behaves. Create validates it.
struct CacheOptions {
  absl::Duration ttl = absl::Minutes(1);  // time to live of Set without one;
                                          // > 0; InfiniteDuration = never
  bool sliding = false;         // a hit restarts the entry's time to live
                                // (expire after access); else after write
  std::size_t max_entries = 0;  // 0 = unbounded
  Options wheel;                // interval (= expiry precision), ticker,
                                // workers, ... as for TimingWheel
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_OPTIONS_H_
