// This implementation's extensions (docs/api.md "Extensions"), through the
// public header only: E2 stats(), E6 Now(), E8 levels (any delay fires on
// its own tick whatever num_slots is) and E9 memory that follows the live
// set. The other extensions are tested beside the rules they extend: E1, E3
// and E4 in errors_test.cc, E5 in timing_test.cc and errors_test.cc, E7 in
// drain_test.cc, E10 and E11 in realtime_test.cc, E12 in stop_test.cc.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../common/counted.h"
#include "../common/hang_guard.h"
#include "../common/manual_wheel.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace extensions_test {

using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::Counted;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::TestOptions;

// ---------------------------------------------------------------------------
// E2: stats().applied counts every set, move and remove the loop applied,
// whether or not its key was present; moved and removed count those that
// found their key.
TEST(E2Stats, AppliedCountsMovesAndRemovesToo) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  ASSERT_TRUE(wheel.SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(1, 5 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(2, 5 * kInterval).ok());  // absent
  ASSERT_TRUE(wheel.RemoveTimer(1).ok());
  ASSERT_TRUE(wheel.RemoveTimer(3).ok());  // absent
  w.Tick();  // queued behind them: all applied (S9)
  const Stats stats = wheel.stats();
  EXPECT_EQ(stats.applied, 5u);
  EXPECT_EQ(stats.moved, 1u);
  EXPECT_EQ(stats.removed, 1u);
  EXPECT_EQ(stats.pending, 0u);
}

// ---------------------------------------------------------------------------
// docs/api.md E6: Now(), the wheel's own time.

// Under a ManualTicker: ticks done x interval, also as a callback sees it
// (tick k: k * interval); a timer set with delay d is due at Now() + d.
TEST(E6Now, ManualTickerTimeIsTicksTimesInterval) {
  std::atomic<int64_t> seen_in_callback_ns{-1};
  ManualWheel w(8, [&](IntWheel& wheel, int key, int) {
    if (key == 1) {
      seen_in_callback_ns.store(absl::ToInt64Nanoseconds(wheel.Now()));
    }
  });
  IntWheel& wheel = w.wheel();
  EXPECT_EQ(wheel.Now(), absl::ZeroDuration());
  w.Tick(3);
  EXPECT_EQ(wheel.Now(), 3 * kInterval);
  ASSERT_TRUE(wheel.SetTimer(1, 1, 2.5 * kInterval).ok());
  w.Tick(3);
  // Due at Now() + 2.5 intervals = tick 5.5: fires on tick 6, w's 3rd.
  EXPECT_EQ(w.FireTick(1), 6);
  EXPECT_EQ(seen_in_callback_ns.load(),
            absl::ToInt64Nanoseconds(6 * kInterval));
  EXPECT_EQ(wheel.Now(), 6 * kInterval);
}

// A tick that fires thousands of timers hands them to the workers in
// pieces while it collects the rest; every callback still sees the tick
// that fired it done, and itself counted in stats().fired.
TEST(E6Now, EveryCallbackOfABigTickSeesItsTickAndItsCount) {
  constexpr int kTimers = 5000;
  std::atomic<int> started{0}, wrong_time{0}, uncounted{0};
  Options options = TestOptions();
  options.execute_workers = 2;
  ManualWheel w(
      8,
      [&](IntWheel& wheel, int, int) {
        const int mine = started.fetch_add(1) + 1;
        if (wheel.Now() != 2 * kInterval) wrong_time.fetch_add(1);
        if (wheel.stats().fired < static_cast<std::uint64_t>(mine)) {
          uncounted.fetch_add(1);
        }
      },
      options);
  IntWheel& wheel = w.wheel();
  w.Tick();
  for (int k = 0; k < kTimers; ++k) {
    ASSERT_TRUE(wheel.SetTimer(k, k, kInterval).ok());
  }
  w.Tick();
  EXPECT_EQ(started.load(), kTimers);
  EXPECT_EQ(wrong_time.load(), 0);
  EXPECT_EQ(uncounted.load(), 0);
  EXPECT_EQ(w.KeysFiredAt(2).size(), static_cast<std::size_t>(kTimers));
}

// With real time: time since Create on the monotonic clock. Bounds only
// from the steady clock read around the calls; nothing about speed.
TEST(E6Now, RealTimeFollowsTheClock) {
  const auto before_create = std::chrono::steady_clock::now();
  auto wheel = IntWheel::Create(TestOptions(), [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  const absl::Duration first = (*wheel)->Now();
  EXPECT_GE(first, absl::ZeroDuration());
  EXPECT_LE(first,
            absl::FromChrono(std::chrono::steady_clock::now() - before_create));
  absl::SleepFor(absl::Milliseconds(30));
  const absl::Duration second = (*wheel)->Now();
  EXPECT_GE(second - first, absl::Milliseconds(30));
  EXPECT_LE(second,
            absl::FromChrono(std::chrono::steady_clock::now() - before_create));
}

// ---------------------------------------------------------------------------
// E8 Levels: any delay fires on its own tick, whatever num_slots is, and the
// timers beyond level 0 are refiled on the way (stats().refiled).

TEST(E8Levels, EveryDelayFiresOnItsTickWhateverNumSlots) {
  for (int num_slots : {1, 4, 512}) {
    ManualWheel w(num_slots);
    constexpr int kTimers = 300;
    // Delays from 1 to ~2,100 ticks: levels 0 to 3 on a 4-slot wheel.
    for (int k = 0; k < kTimers; ++k) {
      ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval * (1 + 7 * k)).ok());
    }
    w.Tick(7 * kTimers + 1);
    for (int k = 0; k < kTimers; ++k) {
      EXPECT_EQ(w.FireTick(k), 1 + 7 * k) << "num_slots " << num_slots;
    }
    if (num_slots < 512) {
      EXPECT_GT(w.wheel().stats().refiled, 0u);
    }
    EXPECT_EQ(w.wheel().stats().pending, 0u);
  }
}

// ---------------------------------------------------------------------------
// E9 Memory follows the live set.

// E9: a timer removed while filed on the finest level releases its key and
// value at once, not when its slot comes round.
TEST(E9Memory, ARemovedTimersValueIsDestroyedAtOnce) {
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.num_slots = 64;
  auto wheel = TimingWheel<int, Counted>::Create(options, [](int, Counted) {});
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE(
      (*wheel)->SetTimer(1, Counted(1, destroyed), 10 * kInterval).ok());
  ASSERT_TRUE((*wheel)->RemoveTimer(1).ok());
  ticker->Tick();  // the remove is applied; the slot is 9 ticks away
  EXPECT_EQ(destroyed->load(), 1);
  ticker->Tick(12);
  EXPECT_EQ(destroyed->load(), 1);  // and not again
}

// After 200,000 timers are removed the loop gives their memory back on its
// own, between ticks, once Options::memory_decay has passed.
TEST(E9Memory, FallsBackAfterMostTimersAreRemoved) {
  Options options = TestOptions();
  options.memory_decay = absl::Milliseconds(50);
  ManualWheel w(512, nullptr, options);
  constexpr int kTimers = 200'000;
  for (int k = 0; k < kTimers; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval * (10 + k / 100)).ok());
  }
  w.Tick();  // a round trip: everything above is applied
  const std::size_t peak = w.wheel().stats().memory_bytes;
  EXPECT_GT(peak, std::size_t{kTimers} * 32);
  for (int k = 0; k < kTimers; ++k) {
    if (k % 1000 != 0) {
      ASSERT_TRUE(w.wheel().RemoveTimer(k).ok());
    }
  }
  // No ticks meanwhile: the loop does it on its own, idle or not.
  BecomesTrue([&] { return w.wheel().stats().memory_bytes <= peak / 10; });
  EXPECT_LE(w.wheel().stats().memory_bytes, peak / 10);
  EXPECT_EQ(w.wheel().stats().pending, std::size_t{kTimers / 1000});
  // The survivors, relocated, still fire on their own ticks.
  const int ticked = w.ticks();
  w.Tick(10 + kTimers / 100 - ticked);
  for (int k = 0; k < kTimers; k += 1000) {
    EXPECT_EQ(w.FireTick(k), 10 + k / 100);
  }
}

// Sets n timers far out, removes them all, and returns the memory the wheel
// held at its peak; the wheel is then empty and wants to give memory back.
std::size_t FillAndEmpty(ManualWheel& w, int n) {
  for (int k = 0; k < n; ++k) {
    EXPECT_TRUE(w.wheel().SetTimer(k, k, kInterval * 1000).ok());
  }
  w.Tick();  // a round trip: everything above is applied
  const std::size_t peak = w.wheel().stats().memory_bytes;
  for (int k = 0; k < n; ++k) EXPECT_TRUE(w.wheel().RemoveTimer(k).ok());
  w.Tick();
  EXPECT_EQ(w.wheel().stats().pending, 0u);
  return peak;
}

// E9: memory the wheel no longer needs stays for Options::memory_decay, so a
// burst that comes back within it finds its memory resident; then it goes.
TEST(E9Memory, StaysForTheDecayThenGoes) {
  Options options = TestOptions();
  options.memory_decay = absl::Milliseconds(1500);
  ManualWheel w(512, nullptr, options);
  const absl::Time start = absl::Now();  // the decay starts after this
  const std::size_t peak = FillAndEmpty(w, 200'000);
  absl::SleepFor(absl::Milliseconds(300));
  // Read before the decay could have passed, however slow this machine is.
  const std::size_t during = w.wheel().stats().memory_bytes;
  if (absl::Now() - start < absl::Milliseconds(1400)) {
    EXPECT_GE(during, peak / 2);
  }
  EXPECT_TRUE(
      BecomesTrue([&] { return w.wheel().stats().memory_bytes <= peak / 10; }));
}

// E9: with memory_decay = InfiniteDuration the wheel keeps its memory.
TEST(E9Memory, InfiniteDecayKeepsTheMemory) {
  Options options = TestOptions();
  options.memory_decay = absl::InfiniteDuration();
  ManualWheel w(512, nullptr, options);
  const std::size_t peak = FillAndEmpty(w, 100'000);
  absl::SleepFor(absl::Milliseconds(200));
  w.Tick();
  EXPECT_GE(w.wheel().stats().memory_bytes, peak / 2);
}

}  // namespace extensions_test
}  // namespace timingwheel
