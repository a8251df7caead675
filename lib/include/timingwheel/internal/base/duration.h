// Delays given as any std::chrono::duration, as the absl::Duration every
// call takes: saturating rather than overflowing, so that no delay a caller
// can write is undefined behaviour or wraps to a negative one.
#ifndef TIMINGWHEEL_INTERNAL_BASE_DURATION_H_
#define TIMINGWHEEL_INTERNAL_BASE_DURATION_H_

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ratio>
#include <type_traits>

#include "absl/time/time.h"

namespace timingwheel {
namespace internal {

// ToDuration's conversion, which rounds toward zero.
template <typename Rep, typename Period>
absl::Duration ToDurationTruncated(std::chrono::duration<Rep, Period> d) {
  if constexpr (std::is_floating_point_v<Rep>) {
    const double seconds = std::chrono::duration<double>(d).count();
    if (std::isnan(seconds)) return absl::ZeroDuration();
    if (std::isinf(seconds)) {
      return seconds > 0 ? absl::InfiniteDuration() : -absl::InfiniteDuration();
    }
    // A finite duration too long for absl::Duration is still finite.
    if (seconds >= 9.2e18) {
      return absl::Seconds(std::numeric_limits<std::int64_t>::max());
    }
    return absl::Seconds(seconds);
  } else {
    // An unsigned count above INT64_MAX is still a finite, positive delay.
    if constexpr (std::is_unsigned_v<Rep>) {
      if (d.count() > static_cast<std::make_unsigned_t<std::int64_t>>(
                          std::numeric_limits<std::int64_t>::max())) {
        return absl::Seconds(std::numeric_limits<std::int64_t>::max());
      }
    }
    const absl::Duration r =
        absl::Seconds(static_cast<std::int64_t>(d.count())) *
        static_cast<std::int64_t>(Period::num) /
        static_cast<std::int64_t>(Period::den);
    // A finite duration too long for absl::Duration is still finite.
    if (r == absl::InfiniteDuration()) {
      return absl::Seconds(std::numeric_limits<std::int64_t>::max());
    }
    return r;
  }
}

// Any std::chrono::duration as an absl::Duration, saturating to infinity
// instead of overflowing; NaN becomes zero (and so is refused), and a
// positive one below absl's resolution becomes 1 ns, not zero: it is a
// positive delay (due on the next tick), not a refused one.
template <typename Rep, typename Period>
absl::Duration ToDuration(std::chrono::duration<Rep, Period> d) {
  const absl::Duration r = ToDurationTruncated(d);
  if (r == absl::ZeroDuration() && d > d.zero()) return absl::Nanoseconds(1);
  return r;
}

// A delay as whole nanoseconds, rounded up and saturating at INT64_MAX (a
// delay of centuries is still a valid one), or nullopt for one that is not
// positive and finite (the caller's InvalidArgument). Integer arithmetic
// where it suffices: the absl::Duration operators are a visible share of a
// call that costs a hundred nanoseconds.
inline std::optional<std::int64_t> DelayNanos(absl::Duration d) {
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return std::nullopt;
  }
  std::int64_t ns = absl::ToInt64Nanoseconds(d);  // truncates, saturates
  if (ns < std::numeric_limits<std::int64_t>::max() &&
      absl::Nanoseconds(ns) < d) {
    ++ns;
  }
  return ns;
}
template <typename Rep, typename Period>
std::optional<std::int64_t> DelayNanos(std::chrono::duration<Rep, Period> d) {
  using PerUnit = std::ratio_divide<Period, std::nano>;  // ns per tick of d
  if constexpr (std::is_integral_v<Rep> && PerUnit::den == 1) {
    if (!(d.count() > 0)) return std::nullopt;
    const auto count = static_cast<std::uint64_t>(d.count());
    constexpr auto kMax =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (count > kMax / static_cast<std::uint64_t>(PerUnit::num)) {
      return std::numeric_limits<std::int64_t>::max();
    }
    return static_cast<std::int64_t>(count *
                                     static_cast<std::uint64_t>(PerUnit::num));
  } else {
    return DelayNanos(ToDuration(d));
  }
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_DURATION_H_
