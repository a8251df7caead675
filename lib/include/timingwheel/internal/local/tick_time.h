// A LocalWheel's ticks as times on the steady clock, and back.
#ifndef TIMINGWHEEL_INTERNAL_LOCAL_TICK_TIME_H_
#define TIMINGWHEEL_INTERNAL_LOCAL_TICK_TIME_H_

#include <chrono>
#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "timingwheel/internal/base/ticks.h"

namespace timingwheel {
namespace internal {

// Tick k is due at start + k * interval. A deadline is rounded up to its
// tick and `now` down to the last tick due, so a timer fires at a `now` no
// earlier than its deadline, whatever the two times are. In integer
// nanoseconds (the interval is a whole number of them), saturating: a time
// or deadline past what the arithmetic holds is kMaxTick, a timer that
// never fires, and a time before start is tick 0.
class TickTime {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  TickTime(absl::Duration interval, TimePoint start)
      : start_(start),
        start_ns_(NanosOf(start)),
        interval_ns_(absl::ToInt64Nanoseconds(interval)) {}

  absl::Duration interval() const { return absl::Nanoseconds(interval_ns_); }
  TimePoint start() const { return start_; }

  // The last tick due at `now`.
  std::uint64_t TickAtOrBefore(TimePoint now) const {
    const std::int64_t rel = Since(now);
    return rel <= 0 ? 0 : Saturate(static_cast<std::uint64_t>(rel) /
                                   static_cast<std::uint64_t>(interval_ns_));
  }

  // The first tick at or after `deadline`.
  std::uint64_t TickAtOrAfter(TimePoint deadline) const {
    return CeilTick(Since(deadline));
  }

  // The first tick at or after now_ns + delay_ns (steady clock nanoseconds;
  // delay_ns > 0), saturating.
  std::uint64_t TickAfter(std::int64_t now_ns, std::int64_t delay_ns) const {
    if (delay_ns > kMaxNs - now_ns) return kMaxTick;
    return TickAtOrAfter(NanosAsTime(now_ns + delay_ns));
  }

  // A time in nanoseconds of the steady clock's epoch, and back.
  static TimePoint NanosAsTime(std::int64_t ns) {
    return TimePoint(std::chrono::duration_cast<TimePoint::duration>(
        std::chrono::nanoseconds(ns)));
  }
  static std::int64_t NanosOf(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  }

  // When tick `tick` is due; TimePoint::max() for kNever and for a time
  // the clock cannot hold.
  TimePoint TimeOfTick(std::uint64_t tick) const {
    const std::int64_t room = start_ns_ >= 0 ? kMaxNs - start_ns_ : kMaxNs;
    if (tick == kNever ||
        tick > static_cast<std::uint64_t>(room / interval_ns_)) {
      return TimePoint::max();
    }
    return NanosAsTime(start_ns_ +
                       static_cast<std::int64_t>(tick) * interval_ns_);
  }

  // t + d, saturating at TimePoint::max() (d >= 0).
  static TimePoint Plus(TimePoint t, absl::Duration d) {
    const std::int64_t t_ns = NanosOf(t);
    const std::int64_t d_ns = absl::ToInt64Nanoseconds(d);
    if (d_ns > kMaxNs - t_ns) return TimePoint::max();
    return NanosAsTime(t_ns + d_ns);
  }

 private:
  static constexpr std::int64_t kMaxNs = std::numeric_limits<std::int64_t>::max();

  // t - start in nanoseconds, saturating.
  std::int64_t Since(TimePoint t) const {
    const std::int64_t t_ns = NanosOf(t);
    if (start_ns_ < 0 && t_ns > kMaxNs + start_ns_) return kMaxNs;
    if (start_ns_ > 0 && t_ns < std::numeric_limits<std::int64_t>::min() +
                                    start_ns_) {
      return std::numeric_limits<std::int64_t>::min();
    }
    return t_ns - start_ns_;
  }

  std::uint64_t CeilTick(std::int64_t rel) const {
    if (rel <= 0) return 0;
    const auto r = static_cast<std::uint64_t>(rel);
    const auto i = static_cast<std::uint64_t>(interval_ns_);
    return Saturate(r / i + (r % i != 0 ? 1 : 0));
  }

  static std::uint64_t Saturate(std::uint64_t tick) {
    return tick < kMaxTick ? tick : kMaxTick;
  }

  const TimePoint start_;
  const std::int64_t start_ns_;
  const std::int64_t interval_ns_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOCAL_TICK_TIME_H_
