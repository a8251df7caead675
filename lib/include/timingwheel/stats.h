// Counters a TimingWheel and a Cache keep about themselves.
#ifndef TIMINGWHEEL_STATS_H_
#define TIMINGWHEEL_STATS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace timingwheel {

// Durations counted in log-spaced buckets, as an operator's dashboard reads
// them: bucket 0 holds [0, 1 us), bucket b (0 < b < kBuckets - 1) holds
// [2^(b-1) us, 2^b us), and the last one everything from 2^(kBuckets-2) us
// (about 67 s) up. Quantile() answers with the upper bound of the bucket
// that holds the quantile, so a p50 or p99 read from it is at most twice
// the truth; count, sum and max are exact.
struct LatencyHistogram {
  static constexpr int kBuckets = 28;
  std::array<std::uint64_t, kBuckets> buckets{};
  std::uint64_t count = 0;  // durations recorded
  absl::Duration sum = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();

  // The bucket a duration of `ns` nanoseconds (negative: 0) falls in.
  static constexpr int BucketOf(std::int64_t ns) {
    if (ns < 1000) return 0;
    const int b = std::bit_width(static_cast<std::uint64_t>(ns / 1000));
    return b < kBuckets - 1 ? b : kBuckets - 1;
  }
  // The exclusive upper bound of bucket b; InfiniteDuration for the last.
  static absl::Duration UpperBound(int b) {
    if (b >= kBuckets - 1) return absl::InfiniteDuration();
    return absl::Microseconds(std::int64_t{1} << b);
  }
  // The upper bound of the bucket holding the q-th quantile (q in [0, 1]),
  // capped at max; zero when nothing was recorded.
  absl::Duration Quantile(double q) const {
    if (count == 0) return absl::ZeroDuration();
    const double rank = q * static_cast<double>(count);
    std::uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += buckets[b];
      if (buckets[b] != 0 && static_cast<double>(seen) >= rank) {
        return std::min(UpperBound(b), max);
      }
    }
    return max;
  }
};

// A snapshot of a wheel's counters. The loop publishes them once per batch of
// commands and once per tick, so a snapshot may lag the calls that a caller
// just made by that much. Reading one costs a handful of relaxed loads.
struct Stats {
  std::size_t pending = 0;                // timers in the wheel now
  std::uint64_t ticks = 0;                // ticks the wheel has processed
  std::uint64_t applied = 0;              // set/move/remove commands applied
  std::uint64_t fired = 0;                // timers handed to execute
  std::uint64_t moved = 0;                // MoveTimer that found its key
  std::uint64_t removed = 0;              // RemoveTimer that found its key
  std::uint64_t superseded = 0;           // SetTimer that replaced a value
  std::uint64_t drained = 0;              // timers handed to a Drain fn
  std::uint64_t callback_exceptions = 0;  // exceptions caught from callbacks
  // Timers filed again when the slot they sat in came due: moved down a
  // level as their deadline approached, or caught up with a later move. A
  // timer is refiled about once per level it passes through.
  std::uint64_t refiled = 0;
  // Bytes the wheel's timers, key index and slots hold now. Falls back when
  // most timers are gone: the loop gives the memory back between ticks.
  std::size_t memory_bytes = 0;

  // What an operator alerts on (docs/api.md E14), read when stats() is
  // called rather than published by the loop:
  //
  // How late execute callbacks start: the time a callback starts minus the
  // time of the tick its timer was due on (its deadline, rounded up to a
  // tick as every deadline is). Under a ManualTicker a callback of tick k
  // runs at tick k's time, so every timer counts as 0 late.
  LatencyHistogram fire_lateness;
  // Commands (set, move, remove, drain, tick, stop) queued for the loop and
  // not yet taken: approximate, as the queue's size is.
  std::size_t commands_queued = 0;
  // How long the oldest queued command has waited, at most: the time since
  // the loop last took all that was queued (or found the queue empty), when
  // anything is queued; zero otherwise.
  absl::Duration loop_lag = absl::ZeroDuration();
  // With Options::max_lag: the commands the loop's measured pace allows in
  // the queue now (E4's limit, queued ones included); 0 without max_lag.
  std::size_t lag_limit_commands = 0;
  // Fired timers whose execute callback has not returned yet (queued for a
  // worker, or running).
  std::size_t callbacks_pending = 0;
};

// A snapshot of a cache's counters since creation.
struct CacheStats {
  std::uint64_t hits = 0, misses = 0;
  std::uint64_t loads = 0, load_failures = 0;  // GetOrLoad's load() calls
  std::uint64_t expired = 0, evicted = 0;      // removals by kExpired, kSize
  std::size_t size = 0;                        // entries present
  // Extension: exceptions thrown by the removal listener (each caught; the
  // value still counts as gone, and the other removals are still told).
  std::uint64_t listener_exceptions = 0;
  // Extensions (docs/api.md C10): the other removal causes, so that the
  // four counts say how every value left (kExplicit: Delete and Clear of
  // live entries; kReplaced: a Set, or a load, over a live value), and how
  // long GetOrLoad's load() calls took, failed ones included.
  std::uint64_t deleted = 0, replaced = 0;
  LatencyHistogram load_latency;

  // hits / (hits + misses); 0 before the first Get.
  double hit_ratio() const {
    const std::uint64_t all = hits + misses;
    return all == 0 ? 0.0
                    : static_cast<double>(hits) / static_cast<double>(all);
  }
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_STATS_H_
