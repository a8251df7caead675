// Delays given as any std::chrono::duration, as the absl::Duration every
// call takes: saturating rather than overflowing, so that no delay a caller
// can write is undefined behaviour or wraps to a negative one.
#ifndef TIMINGWHEEL_INTERNAL_BASE_DURATION_H_
#define TIMINGWHEEL_INTERNAL_BASE_DURATION_H_

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
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

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_DURATION_H_
