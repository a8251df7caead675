// What the Wheel tests (wheel_test.cc, wheel_keys_values_test.cc) share:
// Advance, which runs a wheel to a tick and returns what fired, in order.
#ifndef TIMINGWHEEL_TESTS_WHEEL_WHEEL_FIRES_H_
#define TIMINGWHEEL_TESTS_WHEEL_WHEEL_FIRES_H_

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "timingwheel/internal/wheel/wheel.h"

namespace timingwheel {
namespace internal {
namespace wheel_testing {

template <typename K, typename V>
struct Fire {
  std::uint64_t tick;
  K key;
  V value;
  friend bool operator==(const Fire&, const Fire&) = default;
  friend bool operator<(const Fire& a, const Fire& b) {
    return std::tie(a.tick, a.key, a.value) < std::tie(b.tick, b.key, b.value);
  }
};

template <typename K, typename V>
void PrintTo(const Fire<K, V>& f, std::ostream* os) {
  *os << "{tick " << f.tick << ", key " << ::testing::PrintToString(f.key)
      << ", value " << ::testing::PrintToString(f.value) << "}";
}

// Advances and returns what fired, in the order the sink saw it. Also checks
// that the sink's ticks never go backwards and stay within (from, target].
template <typename K, typename V, typename H, typename E>
std::vector<Fire<K, V>> Advance(Wheel<K, V, H, E>& w, std::uint64_t target) {
  std::vector<Fire<K, V>> out;
  const std::uint64_t from = w.now();
  w.AdvanceTo(target, [&](std::uint64_t tick, K&& key, V&& value) {
    EXPECT_GT(tick, from);
    EXPECT_LE(tick, std::min(target, kMaxTick));
    if (!out.empty()) {
      EXPECT_GE(tick, out.back().tick);
    }
    out.push_back({tick, std::move(key), std::move(value)});
  });
  return out;
}

using IntWheel = Wheel<std::uint64_t, std::uint64_t>;

using F = Fire<std::uint64_t, std::uint64_t>;

}  // namespace wheel_testing
}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_WHEEL_WHEEL_FIRES_H_
