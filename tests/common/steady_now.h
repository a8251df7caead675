// The steady clock as a plain count, for tests that compare fire times with
// the time a call was made.
#ifndef TIMINGWHEEL_TESTS_COMMON_STEADY_NOW_H_
#define TIMINGWHEEL_TESTS_COMMON_STEADY_NOW_H_

#include <chrono>
#include <cstdint>

namespace timingwheel {
namespace testing {

// Nanoseconds of std::chrono::steady_clock (the clock the library's real
// time follows) since its epoch.
inline std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_STEADY_NOW_H_
