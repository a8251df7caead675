// Stop's result in a fixed order, so tests can compare it with what they
// expect (Stop returns the unfired entries in any order).
#ifndef TIMINGWHEEL_TESTS_COMMON_STOP_RESULT_H_
#define TIMINGWHEEL_TESTS_COMMON_STOP_RESULT_H_

#include <algorithm>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace timingwheel {
namespace testing {

// The (key, value) entries of a TimingWheel<int, int>.
using Entries = std::vector<std::pair<int, int>>;

// Sorted copy of Stop's result, for comparisons.
template <typename K, typename V>
std::vector<std::pair<K, V>> Sorted(std::vector<std::pair<K, V>> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Stops `wheel` and returns what Stop returned, sorted; an empty vector (and
// a test failure) if Stop failed.
template <typename Wheel>
Entries StopSorted(Wheel& wheel) {
  auto stopped = wheel.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.status();
  if (!stopped.ok()) return {};
  return Sorted(std::move(*stopped));
}

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_STOP_RESULT_H_
