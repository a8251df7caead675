#include "timingwheel/internal/time/clock.h"

#include <algorithm>
#include <limits>

#include "timingwheel/internal/time/cycle_clock.h"
#include "timingwheel/internal/base/ticks.h"

namespace timingwheel {
namespace internal {
namespace {

// Bound on the operands of RealClock's integer fast path.
constexpr std::int64_t kFastLimit = std::int64_t{1} << 61;

std::uint64_t Saturate(std::int64_t ticks) {
  if (ticks <= 0) return 0;
  return std::min(static_cast<std::uint64_t>(ticks), kMaxTick);
}

}  // namespace

std::uint64_t CeilTicks(absl::Duration d, absl::Duration interval) {
  absl::Duration rem;
  // IDivDuration saturates at kint64max for huge or infinite d.
  std::int64_t q = absl::IDivDuration(d, interval, &rem);
  if (rem > absl::ZeroDuration() && q < INT64_MAX) ++q;
  return Saturate(q);
}

RealClock::RealClock(absl::Duration interval)
    : RealClock(interval, std::chrono::steady_clock::now()) {}

RealClock::RealClock(absl::Duration interval,
                     std::chrono::steady_clock::time_point start)
    : start_(start),
      start_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    start.time_since_epoch())
                    .count()),
      interval_(interval),
      interval_ns_(absl::Nanoseconds(absl::ToInt64Nanoseconds(interval)) ==
                               interval &&
                           interval < absl::Nanoseconds(kFastLimit)
                       ? absl::ToInt64Nanoseconds(interval)
                       : 0) {}

std::uint64_t RealClock::TicksDue() const {
  absl::Duration rem;
  return Saturate(absl::IDivDuration(SinceStart(), interval_, &rem));
}

std::uint64_t RealClock::DeadlineTick(absl::Duration delay) const {
  // The common case in integer nanoseconds: Duration arithmetic and
  // IDivDuration would be most of a producer's cost per call. Rounding the
  // delay up to whole nanoseconds first is exact, since ceil(x / I) ==
  // ceil(ceil(x) / I) for a whole-nanosecond interval I and start-relative
  // times. With delay, interval and time since start each below 2^61 ns (73
  // years), the sum below cannot overflow.
  if (interval_ns_ > 0 && delay < absl::Nanoseconds(kFastLimit)) {
    std::int64_t delay_ns = absl::ToInt64Nanoseconds(delay);
    if (absl::Nanoseconds(delay_ns) < delay) ++delay_ns;
    // The submission time read from the cycle counter: never before the
    // steady clock's now, so the deadline is never early (CycleClock).
    const std::int64_t since_ns = CycleClock::NanosNotBefore() - start_ns_;
    const std::int64_t sum = since_ns + delay_ns;  // < 2^62: no overflow
    return Saturate((sum + interval_ns_ - 1) / interval_ns_);
  }
  // Duration addition saturates to infinity rather than wrapping.
  return CeilTicks(SinceStart() + delay, interval_);
}

std::int64_t RealClock::SteadyNanosOfTick(std::uint64_t tick) const {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::int64_t start_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          start_.time_since_epoch())
          .count();
  if (tick > static_cast<std::uint64_t>(kMax)) return kMax;
  // Duration arithmetic saturates to infinity, which converts to kMax.
  const std::int64_t offset =
      absl::ToInt64Nanoseconds(interval_ * static_cast<std::int64_t>(tick));
  return offset > kMax - start_ns ? kMax : start_ns + offset;
}

absl::Duration RealClock::UntilTick(std::uint64_t tick) const {
  const absl::Duration due = interval_ * static_cast<std::int64_t>(tick);
  return std::max(due - SinceStart(), absl::ZeroDuration());
}

}  // namespace internal
}  // namespace timingwheel
