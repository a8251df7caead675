// docs/api.md S1 (never early; with a ManualTicker exactly on the documented
// tick) and S5 with E5 (delays beyond one rotation, days and years without
// overflow, saturated deadlines), through the public header only, with a
// ManualTicker. S1 against the real clock is in realtime_test.cc.

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>
#include <vector>

#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace timing_test {

using ::absl::StatusCode;
using ::timingwheel::testing::Entries;
using ::timingwheel::testing::Fire;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::StopSorted;

// ---------------------------------------------------------------------------
// docs/api.md S1: never early, and with a ManualTicker exactly on the
// documented tick.

TEST(S1Exact, KIntervalsFireOnKthTickAcrossCircles) {
  ManualWheel w(8);
  for (int k = 1; k <= 30; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, -k, k * kInterval).ok());
  }
  w.Tick(35);
  for (int k = 1; k <= 30; ++k) {
    EXPECT_EQ(w.FireTick(k), k) << "delay " << k << " intervals";
  }
  for (const Fire& f : w.fires()) EXPECT_EQ(f.value, -f.key);
}

TEST(S1Exact, CountsFromTheTickWhenSet) {
  ManualWheel w(8);
  w.Tick(5);
  for (int k = 1; k <= 20; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, k * kInterval).ok());
  }
  w.Tick(3);
  ASSERT_TRUE(w.wheel().SetTimer(100, 100, 9 * kInterval).ok());
  w.Tick(30);
  for (int k = 1; k <= 20; ++k) EXPECT_EQ(w.FireTick(k), 5 + k) << k;
  EXPECT_EQ(w.FireTick(100), 5 + 3 + 9);
}

TEST(S1Exact, SubIntervalDelaysFireOnNextTick) {
  ManualWheel w(8);
  const absl::Duration delays[] = {absl::Nanoseconds(0.25),
                                   absl::Nanoseconds(1), kInterval / 2,
                                   kInterval - absl::Nanoseconds(1)};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.wheel().SetTimer(i, i, delays[i]).ok());
  }
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{0, 1, 2, 3}));
  w.Tick(6);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.wheel().SetTimer(10 + i, i, delays[i]).ok());
  }
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(8), (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(w.fires().size(), 8u);
}

TEST(S1Exact, FractionalDelaysRoundUp) {
  ManualWheel w(4);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval * 1.5).ok());
  ASSERT_TRUE(
      w.wheel().SetTimer(2, 2, 2 * kInterval + absl::Nanoseconds(1)).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, kInterval * 4.01).ok());
  ASSERT_TRUE(w.wheel().SetTimer(4, 4, kInterval * 9.99).ok());
  w.Tick(12);
  EXPECT_EQ(w.FireTick(1), 2);
  EXPECT_EQ(w.FireTick(2), 3);
  EXPECT_EQ(w.FireTick(3), 5);
  EXPECT_EQ(w.FireTick(4), 10);
}

TEST(S1Exact, SetFromCallbackCountsFromTheCallbacksTick) {
  ManualWheel w(8, [](IntWheel& wheel, int key, int) {
    if (key != 1) return;
    EXPECT_TRUE(wheel.SetTimer(100, 0, kInterval).ok());
    EXPECT_TRUE(wheel.SetTimer(101, 0, kInterval / 2).ok());
    EXPECT_TRUE(wheel.SetTimer(102, 0, 3 * kInterval).ok());
    EXPECT_TRUE(wheel.SetTimer(103, 0, 9 * kInterval).ok());  // a full circle+
    EXPECT_TRUE(wheel.SetTimer(104, 0, kInterval * 1.5).ok());
    EXPECT_TRUE(wheel.MoveTimer(2, kInterval).ok());  // earlier
    EXPECT_TRUE(wheel.RemoveTimer(3).ok());
  });
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 20 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, 5 * kInterval).ok());
  w.Tick(25);
  EXPECT_EQ(w.FireTick(1), 3);
  EXPECT_EQ(w.FireTick(100), 4);
  EXPECT_EQ(w.FireTick(101), 4);
  EXPECT_EQ(w.FireTick(102), 6);
  EXPECT_EQ(w.FireTick(103), 12);
  EXPECT_EQ(w.FireTick(104), 5);
  EXPECT_EQ(w.FireTick(2), 4);
  EXPECT_EQ(w.FireTick(3), -1);
}

// ---------------------------------------------------------------------------
// docs/api.md S5 (and E5): long delays.

TEST(S5LongDelays, ManyCirclesOnATinyWheel) {
  ManualWheel w(4, nullptr, [] {
    Options o;
    o.interval = absl::Milliseconds(1);
    return o;
  }());
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, absl::Seconds(1)).ok());  // 250 circles
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, absl::Milliseconds(1001)).ok());
  w.Tick(999);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 1000);
  w.Tick();
  EXPECT_EQ(w.FireTick(2), 1001);
}

// A day at a 1 s interval is 86,400 ticks: ticked through to the exact tick.
TEST(S5LongDelays, OneDayFiresOnItsTick) {
  ManualWheel w(64, nullptr, [] {
    Options o;
    o.interval = absl::Seconds(1);
    return o;
  }());
  const IntWheel& wheel = w.wheel();
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, absl::Hours(24)).ok());
  ASSERT_TRUE(
      w.wheel()
          .SetTimer(2, 2, std::chrono::hours(24) + std::chrono::milliseconds(1))
          .ok());
  w.ticker().Tick(86399);  // in one call: no per-tick bookkeeping needed here
  EXPECT_EQ(wheel.stats().fired, 0u);
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 1);  // w counts from its own first Tick
  EXPECT_EQ(wheel.stats().ticks, 86400u);
  w.Tick();
  EXPECT_EQ(w.FireTick(2), 2);
}

// Days and years at 1 ms: accepted, pending, not fired early, returned by
// Stop; and they do not disturb short timers on the same wheel.
TEST(S5LongDelays, DaysAndYearsAtOneMillisecondDoNotOverflow) {
  ManualWheel w(8, nullptr, [] {
    Options o;
    o.interval = absl::Milliseconds(1);
    return o;
  }());
  IntWheel& wheel = w.wheel();
  ASSERT_TRUE(wheel.SetTimer(1, 1, absl::Hours(24 * 3)).ok());
  ASSERT_TRUE(wheel.SetTimer(2, 2, std::chrono::days(40)).ok());
  ASSERT_TRUE(wheel.SetTimer(3, 3, absl::Hours(24 * 365 * 100)).ok());
  ASSERT_TRUE(wheel.SetTimer(4, 4, std::chrono::hours::max()).ok());
  ASSERT_TRUE(
      wheel.SetTimer(5, 5, absl::Seconds(std::numeric_limits<int64_t>::max()))
          .ok());
  ASSERT_TRUE(wheel.SetTimer(6, 6, std::chrono::duration<double>(1e12)).ok());
  ASSERT_TRUE(wheel.SetTimer(7, 7, absl::Hours(24 * 365 * 100)).ok());
  ASSERT_TRUE(wheel.SetTimer(8, 8, std::chrono::hours::max()).ok());
  ASSERT_TRUE(wheel
                  .SetTimer(9, 9,
                            std::chrono::duration<std::uint64_t, std::nano>(
                                std::numeric_limits<std::uint64_t>::max()))
                  .ok());
  ASSERT_TRUE(wheel.SetTimer(10, 10, absl::Milliseconds(3)).ok());
  w.ticker().Tick(2);
  w.Tick(1);
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{10}));
  // A far timer moved near fires normally, and so do saturated ones (E5:
  // deadlines saturate at 2^62 ticks; hours::max() and 2^64 - 1 ns both
  // reach it at 1 ms).
  ASSERT_TRUE(wheel.MoveTimer(7, absl::Milliseconds(5)).ok());
  ASSERT_TRUE(wheel.MoveTimer(8, absl::Milliseconds(5)).ok());
  ASSERT_TRUE(wheel.MoveTimer(9, absl::Milliseconds(3)).ok());
  w.Tick(5);
  EXPECT_EQ(w.FireTick(9), 4);
  EXPECT_EQ(w.FireTick(7), 6);
  EXPECT_EQ(w.FireTick(8), 6);
  w.ticker().Tick(10000);
  EXPECT_EQ(wheel.stats().fired, 4u);
  EXPECT_EQ(wheel.stats().pending, 6u);
  EXPECT_EQ(StopSorted(wheel),
            (Entries{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}));
}

// A floating-point chrono delay too long for absl::Duration is still a
// finite positive delay (S5: "any finite positive delay works"), like an
// integer one (std::chrono::hours::max(), accepted above).
// Its conversion must saturate to a finite Duration: taken for
// InfiniteDuration, the delay would be refused.
TEST(S5LongDelays, HugeFloatingChronoDelayIsFinite) {
  ManualWheel w(8);
  using DSec = std::chrono::duration<double>;
  EXPECT_TRUE(w.wheel().SetTimer(1, 1, DSec(1e30)).ok());
  EXPECT_TRUE(
      w.wheel().SetTimer(2, 2, DSec(std::numeric_limits<double>::max())).ok());
  EXPECT_TRUE(w.wheel().SetTimer(3, 3, kInterval).ok());
  EXPECT_TRUE(w.wheel().MoveTimer(3, DSec(1e30)).ok());
  w.Tick(3);
  EXPECT_TRUE(w.fires().empty());
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{1, 1}, {2, 2}, {3, 3}}));
}

// An unsigned count past INT64_MAX is a long positive delay, not a negative
// one (a plain cast to int64 would wrap it).
TEST(S5LongDelays, HugeUnsignedChronoDelayIsFinite) {
  ManualWheel w(8);
  using UNanos = std::chrono::duration<std::uint64_t, std::nano>;
  using UHours = std::chrono::duration<std::uint64_t, std::ratio<3600>>;
  EXPECT_TRUE(w.wheel().SetTimer(1, 1, UNanos(~std::uint64_t{0})).ok());
  EXPECT_TRUE(w.wheel().SetTimer(2, 2, UHours(~std::uint64_t{0})).ok());
  EXPECT_TRUE(w.wheel().SetTimer(3, 3, UNanos(std::uint64_t{1} << 63)).ok());
  EXPECT_EQ(w.wheel().SetTimer(4, 4, UNanos(0)).code(),
            StatusCode::kInvalidArgument);
  w.Tick(3);
  EXPECT_TRUE(w.fires().empty());
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{1, 1}, {2, 2}, {3, 3}}));
}

}  // namespace timing_test
}  // namespace timingwheel
