#include "timingwheel/internal/clock.h"

#include <algorithm>

#include "timingwheel/internal/wheel.h"

namespace timingwheel {
namespace internal {
namespace {

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
    : start_(std::chrono::steady_clock::now()), interval_(interval) {}

std::uint64_t RealClock::TicksDue() const {
  absl::Duration rem;
  return Saturate(absl::IDivDuration(SinceStart(), interval_, &rem));
}

std::uint64_t RealClock::DeadlineTick(absl::Duration delay) const {
  // Duration addition saturates to infinity rather than wrapping.
  return CeilTicks(SinceStart() + delay, interval_);
}

absl::Duration RealClock::UntilTick(std::uint64_t tick) const {
  const absl::Duration due = interval_ * static_cast<std::int64_t>(tick);
  return std::max(due - SinceStart(), absl::ZeroDuration());
}

}  // namespace internal
}  // namespace timingwheel
