// Converting between durations, time points and tick numbers.
#ifndef TIMINGWHEEL_INTERNAL_TIME_CLOCK_H_
#define TIMINGWHEEL_INTERNAL_TIME_CLOCK_H_

#include <chrono>
#include <cstdint>

#include "absl/time/time.h"

namespace timingwheel {
namespace internal {

// ceil(d / interval) for d >= 0, saturating at kMaxTick: the number of ticks
// after "now" at which a timer of delay d is due (api.md S1).
std::uint64_t CeilTicks(absl::Duration d, absl::Duration interval);

// Real time on the monotonic clock. Tick j is due at start + j * interval,
// so ticks never drift however long a tick's work takes.
class RealClock {
 public:
  explicit RealClock(absl::Duration interval);
  // With tick 0 at `start` (tests use it to know where ticks fall).
  RealClock(absl::Duration interval,
            std::chrono::steady_clock::time_point start);

  // Ticks due by now: floor((now - start) / interval).
  std::uint64_t TicksDue() const;
  // The first tick at or after now + delay (delay > 0). `now` is read from
  // the cycle counter: no earlier than steady_clock's, at most
  // CycleClock::kMaxAheadNs later.
  std::uint64_t DeadlineTick(absl::Duration delay) const;
  // How long until tick `tick` is due; zero if it is.
  absl::Duration UntilTick(std::uint64_t tick) const;
  // When tick `tick` is due, in nanoseconds of the steady clock's epoch,
  // saturating at INT64_MAX.
  std::int64_t SteadyNanosOfTick(std::uint64_t tick) const;
  // Time since tick 0. One clock read.
  absl::Duration SinceStart() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }

 private:
  const std::chrono::steady_clock::time_point start_;
  const std::int64_t start_ns_;  // start_ on the steady clock's epoch, in ns
  const absl::Duration interval_;
  // interval_ in nanoseconds when it is a whole number of them, else 0.
  const std::int64_t interval_ns_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_TIME_CLOCK_H_
