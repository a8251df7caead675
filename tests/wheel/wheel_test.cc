// Internal, below the public API: the Wheel that docs/api.md S1-S6 rest on
// (exact ticks, replace/move/remove, circles, exactly once); the contract
// itself is checked in tests/contract/.
//
// Deterministic unit tests of the single-threaded internal::Wheel: exact fire
// ticks, clamping, replace/move/remove semantics, NextDueTick, levels and
// cascades, big jumps, TakeAll, and which removes are lazy. Unusual keys
// and values, colliding hashes and lifetimes are in
// wheel_keys_values_test.cc.

#include "timingwheel/internal/wheel/wheel.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "wheel_fires.h"

namespace timingwheel {
namespace internal {
namespace wheel_test {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;
using wheel_testing::Advance;
using wheel_testing::F;
using wheel_testing::IntWheel;

TEST(WheelTest, EmptyWheelAdvancesAndFiresNothing) {
  IntWheel w(8);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.now(), 0u);
  EXPECT_EQ(w.num_slots(), 8u);
  EXPECT_EQ(w.NextDueTick(), kNever);
  EXPECT_EQ(w.DeadlineOf(1), std::nullopt);
  EXPECT_THAT(Advance(w, 100), IsEmpty());
  EXPECT_EQ(w.now(), 100u);
  // A target at or before now() leaves the cursor where it is.
  EXPECT_THAT(Advance(w, 50), IsEmpty());
  EXPECT_EQ(w.now(), 100u);
}

TEST(WheelTest, FiresExactlyAtDeadlineTick) {
  // Every deadline within and beyond a rotation, on several wheel sizes,
  // advancing one tick at a time so an early or late fire shows up.
  for (std::uint32_t n : {1u, 2u, 3u, 8u, 64u, 65u}) {
    for (std::uint64_t d = 1; d <= 3 * n + 5; ++d) {
      IntWheel w(n);
      EXPECT_FALSE(w.Set(7, 70, d));
      EXPECT_THAT(w.DeadlineOf(7), Optional(d));
      for (std::uint64_t t = 1; t < d; ++t) {
        ASSERT_THAT(Advance(w, t), IsEmpty()) << "n=" << n << " d=" << d;
      }
      ASSERT_THAT(Advance(w, d), ElementsAre(F{d, 7, 70}))
          << "n=" << n << " d=" << d;
      EXPECT_EQ(w.size(), 0u);
      EXPECT_EQ(w.NextDueTick(), kNever);
    }
  }
}

TEST(WheelTest, FiresInTickOrderInOneAdvance) {
  IntWheel w(4);
  // Deadlines in the same slot on different rotations, and neighbours.
  const std::vector<std::uint64_t> deadlines = {13, 1, 5, 9, 2, 3, 4, 8, 100};
  for (std::uint64_t d : deadlines) w.Set(d, d * 10, d);
  std::vector<F> fired = Advance(w, 99);
  std::vector<F> want;
  for (std::uint64_t d : deadlines) {
    if (d <= 99) want.push_back({d, d, d * 10});
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(fired, want);
  EXPECT_EQ(w.size(), 1u);
  EXPECT_THAT(Advance(w, 100), ElementsAre(F{100, 100, 1000}));
}

TEST(WheelTest, DeadlineAtOrBeforeNowIsClampedToNextTick) {
  IntWheel w(8);
  Advance(w, 10);
  EXPECT_FALSE(w.Set(1, 1, 0));
  EXPECT_FALSE(w.Set(2, 2, 10));
  EXPECT_FALSE(w.Set(3, 3, 9));
  EXPECT_THAT(w.DeadlineOf(1), Optional(11u));
  EXPECT_THAT(w.DeadlineOf(2), Optional(11u));
  EXPECT_THAT(w.DeadlineOf(3), Optional(11u));
  EXPECT_EQ(w.NextDueTick(), 11u);
  EXPECT_THAT(Advance(w, 11),
              UnorderedElementsAre(F{11, 1, 1}, F{11, 2, 2}, F{11, 3, 3}));
}

TEST(WheelTest, MoveClampsLikeSet) {
  IntWheel w(8);
  Advance(w, 20);
  w.Set(1, 1, 40);
  w.Set(2, 2, 40);
  w.Set(3, 3, 40);
  EXPECT_TRUE(w.Move(1, 0));
  EXPECT_TRUE(w.Move(2, 20));
  EXPECT_TRUE(w.Move(3, kNever));
  EXPECT_THAT(w.DeadlineOf(1), Optional(21u));
  EXPECT_THAT(w.DeadlineOf(2), Optional(21u));
  EXPECT_THAT(w.DeadlineOf(3), Optional(kMaxTick));
  EXPECT_THAT(Advance(w, 1000), UnorderedElementsAre(F{21, 1, 1}, F{21, 2, 2}));
  EXPECT_THAT(w.DeadlineOf(3), Optional(kMaxTick));
}

TEST(WheelTest, DeadlineAboveMaxTickSaturates) {
  IntWheel w(16);
  w.Set(1, 10, kMaxTick + 5);
  w.Set(2, 20, ~std::uint64_t{0});
  w.Set(3, 30, kMaxTick);
  w.Set(4, 40, kMaxTick - 1);
  EXPECT_THAT(w.DeadlineOf(1), Optional(kMaxTick));
  EXPECT_THAT(w.DeadlineOf(2), Optional(kMaxTick));
  EXPECT_THAT(w.DeadlineOf(3), Optional(kMaxTick));
  EXPECT_THAT(w.DeadlineOf(4), Optional(kMaxTick - 1));
  EXPECT_LE(w.NextDueTick(), kMaxTick - 1);
  EXPECT_GT(w.NextDueTick(), 0u);
  // The jump to the end of time takes a handful of steps, not 2^62.
  EXPECT_THAT(Advance(w, kMaxTick - 2), IsEmpty());
  EXPECT_THAT(Advance(w, kMaxTick - 1), ElementsAre(F{kMaxTick - 1, 4, 40}));
  // A target past kMaxTick stops at kMaxTick, where the saturated ones fire.
  EXPECT_THAT(Advance(w, ~std::uint64_t{0}),
              UnorderedElementsAre(F{kMaxTick, 1, 10}, F{kMaxTick, 2, 20},
                                   F{kMaxTick, 3, 30}));
  EXPECT_EQ(w.now(), kMaxTick);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.NextDueTick(), kNever);
}

TEST(WheelTest, SetOnPresentKeyReplacesValueAndDeadline) {
  IntWheel w(8);
  EXPECT_FALSE(w.Set(5, 1, 6));
  EXPECT_TRUE(w.Set(5, 2, 12));  // later
  EXPECT_EQ(w.size(), 1u);
  EXPECT_THAT(w.DeadlineOf(5), Optional(12u));
  EXPECT_THAT(Advance(w, 11), IsEmpty());
  EXPECT_THAT(Advance(w, 100), ElementsAre(F{12, 5, 2}));

  EXPECT_FALSE(w.Set(6, 1, 150));
  EXPECT_TRUE(w.Set(6, 2, 103));  // earlier
  EXPECT_TRUE(w.Set(6, 3, 103));  // same deadline, new value
  EXPECT_EQ(w.size(), 1u);
  EXPECT_THAT(Advance(w, 1000), ElementsAre(F{103, 6, 3}));
  EXPECT_EQ(w.size(), 0u);
}

TEST(WheelTest, SetAfterFireInsertsAgain) {
  IntWheel w(4);
  w.Set(1, 1, 3);
  EXPECT_THAT(Advance(w, 3), ElementsAre(F{3, 1, 1}));
  EXPECT_FALSE(w.Set(1, 2, 3));  // fired keys are gone; 3 <= now: next tick
  EXPECT_THAT(Advance(w, 10), ElementsAre(F{4, 1, 2}));
}

TEST(WheelTest, MoveLaterRepeatedlyAcrossRotations) {
  for (std::uint32_t n : {1u, 2u, 4u, 7u}) {
    IntWheel w(n);
    w.Set(1, 11, 3);
    std::uint64_t deadline = 3;
    // Each round: advance to just before the deadline, then push it out by
    // a growing distance (same slot, next slot, several circles).
    for (std::uint64_t push : {1u, 2u, 4u, 5u, 8u, 9u, 16u, 33u, 100u}) {
      ASSERT_THAT(Advance(w, deadline - 1), IsEmpty()) << "n=" << n;
      deadline += push;
      ASSERT_TRUE(w.Move(1, deadline));
      ASSERT_THAT(w.DeadlineOf(1), Optional(deadline));
      ASSERT_LE(w.NextDueTick(), deadline);
    }
    // Also several later moves at one instant.
    for (int i = 0; i < 5; ++i) {
      deadline += n + 1;
      ASSERT_TRUE(w.Move(1, deadline));
    }
    for (std::uint64_t t = w.now() + 1; t < deadline; ++t) {
      ASSERT_THAT(Advance(w, t), IsEmpty()) << "n=" << n << " t=" << t;
    }
    EXPECT_THAT(Advance(w, deadline + 10 * n), ElementsAre(F{deadline, 1, 11}))
        << "n=" << n;
  }
}

TEST(WheelTest, MoveEarlierRepeatedly) {
  IntWheel w(4);
  w.Set(1, 11, 1000);
  for (std::uint64_t d : {500u, 499u, 101u, 17u, 16u, 13u, 6u}) {
    ASSERT_TRUE(w.Move(1, d));
    ASSERT_THAT(w.DeadlineOf(1), Optional(d));
    ASSERT_LE(w.NextDueTick(), d);
  }
  EXPECT_THAT(Advance(w, 5), IsEmpty());
  EXPECT_THAT(Advance(w, 2000), ElementsAre(F{6, 1, 11}));
}

TEST(WheelTest, MoveLaterThenEarlierThenLater) {
  // Lazy later moves leave the entry in its old slot; an earlier move must
  // then relink it from wherever it is, and so on.
  IntWheel w(4);
  w.Set(1, 11, 2);
  w.Set(2, 22, 2);  // a neighbour in the same slot
  ASSERT_TRUE(w.Move(1, 30));
  ASSERT_TRUE(w.Move(1, 5));
  ASSERT_TRUE(w.Move(1, 19));
  ASSERT_TRUE(w.Move(1, 7));
  ASSERT_TRUE(w.Move(1, 8));
  EXPECT_THAT(Advance(w, 7), ElementsAre(F{2, 2, 22}));
  EXPECT_THAT(Advance(w, 8), ElementsAre(F{8, 1, 11}));
  EXPECT_EQ(w.size(), 0u);
}

TEST(WheelTest, LazyMoveIsRelinkedByAnEarlierScanOfItsSlot) {
  // A at 2 and B at 6 share slot 2 of 4. B moved to 7 is relinked when the
  // slot is scanned at tick 2; B moved to 10 stays in slot 2 a circle more.
  IntWheel w(4);
  w.Set(1, 10, 2);
  w.Set(2, 20, 6);
  w.Set(3, 30, 6);
  ASSERT_TRUE(w.Move(2, 7));
  ASSERT_TRUE(w.Move(3, 10));
  EXPECT_THAT(Advance(w, 2), ElementsAre(F{2, 1, 10}));
  EXPECT_THAT(Advance(w, 6), IsEmpty());
  EXPECT_THAT(Advance(w, 7), ElementsAre(F{7, 2, 20}));
  EXPECT_THAT(Advance(w, 9), IsEmpty());
  EXPECT_THAT(Advance(w, 10), ElementsAre(F{10, 3, 30}));
}

TEST(WheelTest, ManyEntriesInOneSlotOnDifferentCircles) {
  IntWheel w(4);
  for (std::uint64_t c = 0; c < 20; ++c) w.Set(c, c, 3 + 4 * c);
  for (std::uint64_t c = 0; c < 20; ++c) {
    ASSERT_THAT(Advance(w, 2 + 4 * c), IsEmpty());
    ASSERT_THAT(Advance(w, 3 + 4 * c), ElementsAre(F{3 + 4 * c, c, c}));
  }
}

TEST(WheelTest, MoveOnAbsentKeyIsANoOp) {
  IntWheel w(8);
  EXPECT_FALSE(w.Move(1, 5));
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.DeadlineOf(1), std::nullopt);
  w.Set(2, 2, 5);
  EXPECT_FALSE(w.Move(1, 3));
  EXPECT_THAT(w.DeadlineOf(2), Optional(5u));
  EXPECT_THAT(Advance(w, 100), ElementsAre(F{5, 2, 2}));
  EXPECT_FALSE(w.Move(2, 200));  // fired: absent now
  EXPECT_THAT(Advance(w, 300), IsEmpty());
}

TEST(WheelTest, RemoveStopsTheTimer) {
  IntWheel w(4);
  // Head, middle and tail of one slot's list, and a lazily moved entry.
  for (std::uint64_t k = 0; k < 5; ++k) w.Set(k, k, 2 + 4 * k);
  w.Set(9, 9, 2);
  ASSERT_TRUE(w.Move(9, 23));  // still linked in slot 2
  EXPECT_TRUE(w.Remove(4));
  EXPECT_TRUE(w.Remove(0));
  EXPECT_TRUE(w.Remove(2));
  EXPECT_TRUE(w.Remove(9));
  EXPECT_FALSE(w.Remove(9));
  EXPECT_FALSE(w.Remove(100));
  EXPECT_EQ(w.size(), 2u);
  EXPECT_EQ(w.DeadlineOf(0), std::nullopt);
  EXPECT_THAT(w.DeadlineOf(1), Optional(6u));
  EXPECT_THAT(Advance(w, 1000), ElementsAre(F{6, 1, 1}, F{14, 3, 3}));
  EXPECT_EQ(w.NextDueTick(), kNever);
}

TEST(WheelTest, RemoveLastEntryOfAHotSlotKeepsOthersDue) {
  IntWheel w(8);
  w.Set(1, 1, 3);
  w.Set(2, 2, 5);
  EXPECT_TRUE(w.Remove(1));
  EXPECT_LE(w.NextDueTick(), 5u);
  std::vector<F> fired = Advance(w, w.NextDueTick());  // may be early
  for (F& f : Advance(w, 5)) fired.push_back(f);
  EXPECT_THAT(fired, ElementsAre(F{5, 2, 2}));
}

TEST(WheelTest, NextDueTickIsNeverLate) {
  IntWheel w(8);
  EXPECT_EQ(w.NextDueTick(), kNever);
  w.Set(1, 1, 30);
  EXPECT_GT(w.NextDueTick(), 0u);
  EXPECT_LE(w.NextDueTick(), 30u);
  w.Set(2, 2, 4);
  EXPECT_GT(w.NextDueTick(), 0u);
  EXPECT_LE(w.NextDueTick(), 4u);
  // Later move of the earliest: the bound may lag, but never exceed.
  w.Move(2, 40);
  EXPECT_LE(w.NextDueTick(), 30u);
  w.Remove(1);
  EXPECT_LE(w.NextDueTick(), 40u);
  // Following NextDueTick() reaches every fire without skipping it.
  std::vector<F> fired;
  while (w.size() > 0) {
    const std::uint64_t due = w.NextDueTick();
    ASSERT_GT(due, w.now());
    for (F& f : Advance(w, due)) fired.push_back(f);
  }
  EXPECT_THAT(fired, ElementsAre(F{40, 2, 2}));
  EXPECT_EQ(w.NextDueTick(), kNever);
}

TEST(WheelTest, NextDueTickSkipsIdleStretches) {
  // One timer far beyond the wheel's span: following NextDueTick() must get
  // there in a few steps per level, not one per rotation or per tick.
  for (std::uint32_t n : {1u, 8u, 512u}) {
    IntWheel w(n);
    w.Set(1, 1, 1'000'000);
    w.Set(2, 2, 1'000'000'000);
    int steps = 0;
    std::vector<F> fired;
    while (w.size() > 0) {
      // Per level at most a drain start and a drain deadline, then the fire.
      ASSERT_LT(++steps, 2 * static_cast<int>(w.num_levels()) + 2)
          << "n=" << n << " stuck at now=" << w.now()
          << " next=" << w.NextDueTick();
      for (F& f : Advance(w, w.NextDueTick())) fired.push_back(f);
    }
    EXPECT_THAT(fired, ElementsAre(F{1'000'000, 1, 1}, F{1'000'000'000, 2, 2}));
  }
}

TEST(WheelTest, LevelsCoverEveryBitOfADeadline) {
  // Level 0 is num_slots rounded up to a power of two; levels of 64 slots
  // (6 bits each) follow until bit 62, the top bit of a deadline, is covered.
  EXPECT_EQ(IntWheel(512).num_slots(), 512u);
  EXPECT_EQ(IntWheel(512).num_levels(), 1u + (63 - 9 + 5) / 6);
  EXPECT_EQ(IntWheel(500).num_slots(), 512u);
  EXPECT_EQ(IntWheel(1).num_levels(), 1u + (63 + 5) / 6);
  // One bit a level: every bit of a deadline is a level.
  EXPECT_EQ((IntWheel(1, {}, {}, 2).num_levels()), 64u);
  EXPECT_EQ((IntWheel(4, {}, {}, 4).num_levels()), 1u + (63 - 2 + 1) / 2);
}

TEST(WheelTest, FarTimerIsRefiledOncePerLevelAndFiresOnItsTick) {
  for (std::uint64_t d :
       {std::uint64_t{1} << 40, (std::uint64_t{1} << 40) + 12'345, kMaxTick - 1,
        kMaxTick}) {
    IntWheel w(512);
    w.Set(1, 7, d);
    std::vector<F> fired;
    while (w.size() > 0) {
      for (F& f : Advance(w, w.NextDueTick())) fired.push_back(f);
    }
    EXPECT_THAT(fired, ElementsAre(F{d, 1, 7})) << d;
    EXPECT_LT(w.refiled(), w.num_levels()) << d;
  }
}

TEST(WheelTest, FarTimersCostNothingUntilTheirTimeApproaches) {
  // 10,000 timers spread over a million ticks: the first 3,000 ticks, with
  // every tick processed, refile only the few timers due in them (a
  // single-level wheel of 512 slots would walk every one of them about 6
  // times meanwhile).
  std::mt19937_64 rng(99);
  IntWheel w(512);
  std::uint64_t due_soon = 0;
  for (std::uint64_t k = 0; k < 10'000; ++k) {
    const std::uint64_t d = 1'000 + rng() % 1'000'000;
    if (d <= 3'000 + 512) ++due_soon;
    w.Set(k, k, d);
  }
  std::size_t fired = 0;
  for (std::uint64_t t = 1; t <= 3'000; ++t) fired += Advance(w, t).size();
  EXPECT_GT(fired, 0u);
  EXPECT_LE(w.refiled(), due_soon);
  EXPECT_EQ(w.size(), 10'000 - fired);
}

TEST(WheelTest, CascadeDrainsACoarseSlotAheadOfItsStart) {
  // 10,000 timers due in [1024, 1536) sit in one level-1 slot of a 512-slot
  // wheel. From tick 512 on (the slot before theirs) Cascade moves them down
  // a budget at a time, so by tick 1023 none is left to move in one go, and
  // every one still fires on its own tick.
  std::mt19937_64 rng(5);
  IntWheel w(512);
  std::vector<F> want;
  for (std::uint64_t k = 0; k < 10'000; ++k) {
    const std::uint64_t d = 1024 + rng() % 512;
    w.Set(k, k, d);
    want.push_back({d, k, k});
  }
  EXPECT_FALSE(w.Cascade(100));  // not draining yet: nothing moves
  EXPECT_EQ(w.refiled(), 0u);
  EXPECT_EQ(w.NextDueTick(), 512u);  // the drain starts
  EXPECT_THAT(Advance(w, 512), IsEmpty());
  EXPECT_TRUE(w.Cascade(100));
  EXPECT_EQ(w.refiled(), 100u);
  int calls = 1;
  for (std::uint64_t t = 513; w.Cascade(100); ++t) {
    ASSERT_LT(t, 1023u);
    EXPECT_THAT(Advance(w, t), IsEmpty());
    ++calls;
  }
  EXPECT_EQ(w.refiled(), 10'000u);
  EXPECT_GT(calls, 20);  // spread out, not one burst
  std::vector<F> fired = Advance(w, 2000);
  std::sort(want.begin(), want.end(), [](const F& a, const F& b) {
    return std::tie(a.tick, a.key) < std::tie(b.tick, b.key);
  });
  std::sort(fired.begin(), fired.end(), [](const F& a, const F& b) {
    return std::tie(a.tick, a.key) < std::tie(b.tick, b.key);
  });
  EXPECT_EQ(fired, want);
  EXPECT_EQ(w.refiled(), 10'000u);
}

TEST(WheelTest, MovingEarlierLeavesNoTombstoneOnACoarseLevel) {
  // A timer an hour out moved to the next tick fires there, and nothing is
  // left behind in its old coarse slot: the wheel goes idle.
  IntWheel w(512);
  w.Set(1, 1, 3'600'000);
  ASSERT_TRUE(w.Move(1, 5));
  EXPECT_EQ(w.NextDueTick(), 5u);
  EXPECT_THAT(Advance(w, 5), ElementsAre(F{5, 1, 1}));
  EXPECT_EQ(w.NextDueTick(), kNever);
  EXPECT_EQ(w.refiled(), 0u);
}

TEST(WheelTest, HugeJumpFiresEverythingInOrder) {
  std::mt19937_64 rng(12345);
  IntWheel w(512);
  std::vector<F> want;
  for (std::uint64_t k = 0; k < 2000; ++k) {
    const std::uint64_t d = 1 + rng() % 1'000'000'000;
    w.Set(k, k + 1, d);
    want.push_back({d, k, k + 1});
  }
  w.Set(5000, 1, 1'000'000'001);
  w.Set(5001, 1, kMaxTick);
  // Spread lazy moves over the range too.
  for (std::uint64_t k = 0; k < 2000; k += 7) {
    want[k].tick += 1 + rng() % 10'000'000;
    ASSERT_TRUE(w.Move(k, want[k].tick));
  }
  std::erase_if(want, [](const F& f) { return f.tick > 1'000'000'000; });
  std::sort(want.begin(), want.end());
  std::vector<F> fired = Advance(w, 1'000'000'000);
  std::stable_sort(fired.begin(), fired.end());  // order within a tick is free
  EXPECT_EQ(fired, want);
  EXPECT_EQ(w.now(), 1'000'000'000u);
  EXPECT_EQ(w.size(), 2002 - want.size());
  EXPECT_TRUE(w.DeadlineOf(5000).has_value());
  EXPECT_TRUE(w.DeadlineOf(5001).has_value());
}

TEST(WheelTest, HugeJumpOnOneSlotWheel) {
  IntWheel w(1);
  w.Set(1, 1, 1'000'000'000);
  w.Set(2, 2, 3'000'000'000);
  EXPECT_THAT(Advance(w, 2'000'000'000), ElementsAre(F{1'000'000'000, 1, 1}));
  EXPECT_THAT(Advance(w, 1'000'000'000'000),
              ElementsAre(F{3'000'000'000, 2, 2}));
}

TEST(WheelTest, TakeAllThenReuse) {
  IntWheel w(8);
  for (std::uint64_t k = 0; k < 100; ++k) w.Set(k, k * 2, 1 + k * 3);
  w.Move(3, 1000);  // lazy
  w.Move(90, 2);    // relinked
  Advance(w, 10);   // fires 0..3 except the moved 3, and 90
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;
  w.TakeAll(
      [&](std::uint64_t&& k, std::uint64_t&& v) { taken.emplace_back(k, v); });
  std::vector<std::pair<std::uint64_t, std::uint64_t>> want;
  for (std::uint64_t k = 0; k < 100; ++k) {
    if (k == 90 || (k < 4 && k != 3)) continue;
    want.emplace_back(k, k * 2);
  }
  EXPECT_THAT(taken, UnorderedElementsAreArray(want));
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.NextDueTick(), kNever);
  EXPECT_EQ(w.DeadlineOf(50), std::nullopt);
  EXPECT_EQ(w.now(), 10u);
  EXPECT_THAT(Advance(w, 2000), IsEmpty());

  // The wheel is fully usable afterwards, old keys included.
  for (std::uint64_t k = 0; k < 50; ++k) {
    EXPECT_FALSE(w.Set(k, k + 7, 3000 + k)) << k;
  }
  EXPECT_TRUE(w.Move(10, 3100));
  EXPECT_TRUE(w.Remove(11));
  std::vector<F> fired = Advance(w, 4000);
  EXPECT_EQ(fired.size(), 49u);
  for (const F& f : fired) {
    EXPECT_EQ(f.value, f.key + 7);
    EXPECT_EQ(f.tick, f.key == 10 ? 3100 : 3000 + f.key);
  }
  // TakeAll on an empty wheel is harmless.
  int calls = 0;
  w.TakeAll([&](std::uint64_t&&, std::uint64_t&&) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(WheelTest, OneSlotWheelFiresEachTimerOnItsTick) {
  IntWheel w(1);
  w.Set(1, 1, 5);
  w.Set(2, 2, 1);
  w.Set(3, 3, 3);
  w.Set(4, 4, 3);
  w.Move(1, 9);  // lazy
  w.Move(3, 2);  // earlier
  w.Remove(4);
  EXPECT_THAT(Advance(w, 1), ElementsAre(F{1, 2, 2}));
  EXPECT_THAT(Advance(w, 8), ElementsAre(F{2, 3, 3}));
  EXPECT_TRUE(w.Move(1, 12));
  EXPECT_THAT(Advance(w, 11), IsEmpty());
  EXPECT_THAT(Advance(w, 12), ElementsAre(F{12, 1, 1}));
}

TEST(WheelTest, MillionSlotWheelFiresEachTimerOnItsTick) {
  constexpr std::uint32_t kSlots = 1u << 20;
  IntWheel w(kSlots);
  EXPECT_GE(w.MemoryBytes(), kSlots * 12u);
  std::vector<F> want;
  for (std::uint64_t k = 0; k < 300; ++k) {
    const std::uint64_t d = 1 + k * 10'007;  // spans about 3 rotations
    w.Set(k, k, d);
    want.push_back({d, k, k});
  }
  // Just past the last slot of the first rotation and wrapping.
  w.Set(1000, 1, kSlots);
  w.Set(1001, 1, kSlots + 1);
  want.push_back({kSlots, 1000, 1});
  want.push_back({kSlots + 1, 1001, 1});
  std::sort(want.begin(), want.end());
  std::vector<F> fired;
  while (w.size() > 0) {
    for (F& f : Advance(w, w.NextDueTick())) fired.push_back(f);
  }
  EXPECT_EQ(fired, want);
}

// Which removes are lazy: exactly those of timers filed on level 0 (two
// rotations: now's and the next), including one that came down from a
// coarse level; a timer on a coarse level unlinks at once, also when it is
// due in level 0's next rotation but still waits in a draining slot.
TEST(WheelTest, RemoveIsLazyExactlyForTimersFiledOnLevel0) {
  IntWheel w(64);    // level 0 holds ticks [0, 128) at now() = 0
  w.Set(1, 1, 100);  // level 0, next rotation
  for (std::uint64_t k = 2; k <= 4; ++k) w.Set(k, k, 300);  // level 1
  EXPECT_TRUE(w.Remove(1));
  EXPECT_EQ(w.removed_in_lists(), 1u);
  EXPECT_TRUE(w.Remove(2));
  EXPECT_EQ(w.removed_in_lists(), 1u);
  EXPECT_THAT(Advance(w, 200), IsEmpty());
  EXPECT_EQ(w.removed_in_lists(), 0u);  // key 1's slot came at tick 100
  // Tick 300 is in level 0's next rotation now, but keys 3 and 4 still
  // wait in level 1's slot [256, 320), which moves down by tick 255.
  EXPECT_EQ(w.refiled(), 0u);
  EXPECT_TRUE(w.Remove(4));
  EXPECT_EQ(w.removed_in_lists(), 0u);
  EXPECT_THAT(Advance(w, 255), IsEmpty());
  EXPECT_EQ(w.refiled(), 1u);  // key 3
  EXPECT_THAT(w.DeadlineOf(3), Optional(300u));
  EXPECT_TRUE(w.Remove(3));
  EXPECT_EQ(w.removed_in_lists(), 1u);
  EXPECT_THAT(Advance(w, 1000), IsEmpty());
  EXPECT_EQ(w.removed_in_lists(), 0u);
  EXPECT_EQ(w.NextDueTick(), kNever);
}

}  // namespace wheel_test
}  // namespace internal
}  // namespace timingwheel
