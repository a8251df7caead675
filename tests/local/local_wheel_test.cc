// LocalWheel (docs/api.md "LocalWheel"): the contract rules that apply to a
// wheel driven by its owner's loop, on explicit time points, so every
// outcome is decided by the times the test passes, never by a clock.
#include "timingwheel/local_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace timingwheel {
namespace local_wheel_test {

using std::chrono::milliseconds;
using IntWheel = LocalWheel<int, int>;
using TimePoint = IntWheel::TimePoint;

// Tick 0 at an arbitrary point of the steady clock's range.
const TimePoint kT0 = TimePoint(std::chrono::hours(1000));

std::unique_ptr<IntWheel> MakeWheel(LocalOptions options = {
                                        .interval = absl::Milliseconds(10),
                                        .num_slots = 8}) {
  absl::StatusOr<std::unique_ptr<IntWheel>> w = IntWheel::Create(options, kT0);
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

// Advance(now) that records what fired, in order.
std::vector<std::pair<int, int>> AdvanceTo(IntWheel& w, TimePoint now) {
  std::vector<std::pair<int, int>> fired;
  w.Advance(now, [&](int k, int v) { fired.emplace_back(k, v); });
  return fired;
}

using Fired = std::vector<std::pair<int, int>>;

TEST(LocalWheelCreate, RefusesBadOptions) {
  for (LocalOptions bad : {
           LocalOptions{.interval = absl::ZeroDuration()},
           LocalOptions{.interval = -absl::Milliseconds(1)},
           LocalOptions{.interval = absl::InfiniteDuration()},
           LocalOptions{.interval = absl::Nanoseconds(1) / 4},
           LocalOptions{.interval = absl::Nanoseconds(3) / 2},
           LocalOptions{.num_slots = 0},
           LocalOptions{.num_slots = kMaxSlots + 1},
           LocalOptions{.expected_timers = kMaxTimers + 1},
           LocalOptions{.memory_decay = -absl::Seconds(1)},
       }) {
    absl::StatusOr<std::unique_ptr<IntWheel>> w = IntWheel::Create(bad);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(w.status().message().find("LocalOptions::"),
              absl::string_view::npos)
        << w.status();
  }
  EXPECT_TRUE(IntWheel::Create({.interval = absl::Nanoseconds(1)}).ok());
}

TEST(LocalWheelErrors, BadDelaysAndAbsentKeys) {
  auto w = MakeWheel();
  for (absl::Duration bad : {absl::ZeroDuration(), -absl::Seconds(1),
                             absl::InfiniteDuration(),
                             -absl::InfiniteDuration()}) {
    EXPECT_EQ(w->Set(1, 1, bad).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(w->Move(1, bad).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(w->Set(1, 1, std::chrono::nanoseconds(-5)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w->size(), 0u);
  EXPECT_EQ(w->Move(7, absl::Seconds(1)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(w->MoveAt(7, kT0).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(w->Remove(7));
  EXPECT_EQ(w->stats().moved, 0u);
}

// S1: a timer fires in the first Advance at or after its deadline rounded
// up to a tick, never before.
TEST(LocalWheelTiming, NeverEarlyOnTheTickOfItsDeadline) {
  auto w = MakeWheel();
  ASSERT_TRUE(w->SetAt(1, 10, kT0 + milliseconds(25)).ok());  // tick 3
  ASSERT_TRUE(w->SetAt(2, 20, kT0 + milliseconds(30)).ok());  // tick 3
  ASSERT_TRUE(w->SetAt(3, 30, kT0 + milliseconds(31)).ok());  // tick 4
  EXPECT_EQ(w->DeadlineOf(1), kT0 + milliseconds(30));
  EXPECT_EQ(w->NextDue(), kT0 + milliseconds(30));
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(29) + std::chrono::nanoseconds(
                                                         999'999))
                  .empty());
  Fired f = AdvanceTo(*w, kT0 + milliseconds(30));
  std::sort(f.begin(), f.end());
  EXPECT_EQ(f, (Fired{{1, 10}, {2, 20}}));
  EXPECT_EQ(w->NextDue(), kT0 + milliseconds(40));
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(45)), (Fired{{3, 30}}));
  EXPECT_EQ(w->NextDue(), TimePoint::max());
  EXPECT_EQ(w->size(), 0u);
}

// A deadline at or before the last Advance's time fires in the next one.
TEST(LocalWheelTiming, PastDeadlineFiresInTheNextAdvance) {
  auto w = MakeWheel();
  AdvanceTo(*w, kT0 + milliseconds(100));
  ASSERT_TRUE(w->SetAt(1, 1, kT0 - milliseconds(5)).ok());
  ASSERT_TRUE(w->SetAt(2, 2, kT0 + milliseconds(100)).ok());
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(105)).empty());
  Fired f = AdvanceTo(*w, kT0 + milliseconds(110));
  std::sort(f.begin(), f.end());
  EXPECT_EQ(f, (Fired{{1, 1}, {2, 2}}));
}

// Advance fires in deadline order across ticks, and a `now` that goes back
// fires nothing.
TEST(LocalWheelTiming, DeadlineOrderAndTimeThatGoesBack) {
  auto w = MakeWheel();
  for (int k = 0; k < 50; ++k) {
    ASSERT_TRUE(w->SetAt(k, k, kT0 + milliseconds(10 * (50 - k))).ok());
  }
  EXPECT_TRUE(AdvanceTo(*w, kT0 - milliseconds(50)).empty());
  Fired f = AdvanceTo(*w, kT0 + milliseconds(10 * 25));
  ASSERT_EQ(f.size(), 25u);
  for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i].first, 49 - int(i));
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(10)).empty());
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(10 * 60)).size(), 25u);
}

// S2-S4 and S6: replace, move later and earlier, remove; each timer ends
// one way, once.
TEST(LocalWheelCommands, ReplaceMoveRemoveEachEndOnce) {
  auto w = MakeWheel();
  ASSERT_TRUE(w->SetAt(1, 1, kT0 + milliseconds(50)).ok());
  ASSERT_TRUE(w->SetAt(1, 2, kT0 + milliseconds(70)).ok());  // superseded
  ASSERT_TRUE(w->SetAt(2, 2, kT0 + milliseconds(50)).ok());
  ASSERT_TRUE(w->MoveAt(2, kT0 + milliseconds(500)).ok());  // later
  ASSERT_TRUE(w->SetAt(3, 3, kT0 + milliseconds(500)).ok());
  ASSERT_TRUE(w->MoveAt(3, kT0 + milliseconds(20)).ok());  // earlier
  ASSERT_TRUE(w->SetAt(4, 4, kT0 + milliseconds(20)).ok());
  EXPECT_TRUE(w->Remove(4));
  EXPECT_FALSE(w->Remove(4));
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(20)), (Fired{{3, 3}}));
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(69)).empty());
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(70)), (Fired{{1, 2}}));
  EXPECT_TRUE(AdvanceTo(*w, kT0 + milliseconds(499)).empty());
  EXPECT_EQ(AdvanceTo(*w, kT0 + milliseconds(500)), (Fired{{2, 2}}));
  const Stats s = w->stats();
  EXPECT_EQ(s.fired, 3u);
  EXPECT_EQ(s.superseded, 1u);
  EXPECT_EQ(s.moved, 2u);
  EXPECT_EQ(s.removed, 1u);
  EXPECT_EQ(s.applied, 9u);  // 5 sets, 2 moves, 2 removes
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(s.ticks, 50u);
}

// S5/E5: any delay, from a tick to years, fires on its own tick, and costs
// a few refilings (about one per level it starts above level 0).
TEST(LocalWheelTiming, LongDelaysFireOnTheirTickAfterFewRefilings) {
  auto w = MakeWheel({.interval = absl::Milliseconds(1), .num_slots = 8});
  const std::vector<milliseconds> delays = {
      milliseconds(7), milliseconds(9), milliseconds(1'000),
      milliseconds(3'600'000), milliseconds(86'400'000LL * 365 * 3)};
  for (std::size_t i = 0; i < delays.size(); ++i) {
    ASSERT_TRUE(w->SetAt(int(i), int(i), kT0 + delays[i]).ok());
  }
  for (std::size_t i = 0; i < delays.size(); ++i) {
    const TimePoint due = kT0 + delays[i];
    // Walk to just before the deadline a step at a time the loop would
    // take: its next due times.
    while (w->NextDue() < due) {
      ASSERT_TRUE(AdvanceTo(*w, w->NextDue()).empty()) << i;
    }
    EXPECT_TRUE(AdvanceTo(*w, due - milliseconds(1)).empty()) << i;
    EXPECT_EQ(AdvanceTo(*w, due), (Fired{{int(i), int(i)}})) << i;
  }
  EXPECT_LE(w->stats().refiled, 5u * w->stats().fired * 2);
}

// A huge deadline saturates: a timer that never fires, held and handed back.
TEST(LocalWheelTiming, DeadlinesPastTheClocksRangeNeverFire) {
  auto w = MakeWheel({.interval = absl::Nanoseconds(1)});
  ASSERT_TRUE(w->SetAt(1, 1, TimePoint::max()).ok());
  ASSERT_TRUE(w->Set(2, 2, absl::Hours(24 * 365 * 500)).ok());
  ASSERT_TRUE(w->Set(3, 3, std::chrono::hours::max()).ok());
  EXPECT_TRUE(AdvanceTo(*w, kT0 + std::chrono::hours(24 * 365 * 10)).empty());
  EXPECT_EQ(w->size(), 3u);
  EXPECT_EQ(w->TakeAll().size(), 3u);
  EXPECT_EQ(w->size(), 0u);
}

// S10: fire may Set, Move and Remove on its own wheel; a re-armed timer
// due by `now` fires in the same Advance; a nested Advance does nothing.
TEST(LocalWheelCallbacks, FireMayReArmAndChangeOtherTimers) {
  auto w = MakeWheel();
  ASSERT_TRUE(w->SetAt(1, 0, kT0 + milliseconds(10)).ok());  // heartbeat
  ASSERT_TRUE(w->SetAt(2, 0, kT0 + milliseconds(15)).ok());
  ASSERT_TRUE(w->SetAt(3, 0, kT0 + milliseconds(500)).ok());
  std::vector<std::pair<int, int>> fired;
  std::size_t nested = 99;
  TimePoint now = kT0 + milliseconds(55);
  auto fire = [&](int k, int v) {
    fired.emplace_back(k, v);
    if (k == 1) {
      // Re-arm 10 ms after the tick it was due on.
      const TimePoint due = kT0 + milliseconds(10 * (v + 1));
      EXPECT_TRUE(w->SetAt(1, v + 1, due + milliseconds(10)).ok());
      if (v == 0) {
        EXPECT_TRUE(w->Remove(2));
        EXPECT_TRUE(w->MoveAt(3, kT0 + milliseconds(30)).ok());
      }
      nested = w->Advance(now, [](int, int) {});
    }
  };
  EXPECT_EQ(w->Advance(now, fire), 6u);
  EXPECT_EQ(nested, 0u);
  std::sort(fired.begin(), fired.end());
  EXPECT_EQ(fired, (Fired{{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {3, 0}}));
  EXPECT_EQ(w->DeadlineOf(1), kT0 + milliseconds(60));
  EXPECT_FALSE(w->DeadlineOf(2).has_value());
}

// S10: an exception from fire is counted; the tick's other timers fire.
TEST(LocalWheelCallbacks, ExceptionsAreCountedAndTheRestFire) {
  auto w = MakeWheel();
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE(w->SetAt(k, k, kT0 + milliseconds(10)).ok());
  }
  int calls = 0;
  EXPECT_EQ(w->Advance(kT0 + milliseconds(10),
                       [&](int k, int) {
                         ++calls;
                         if (k % 3 == 0) throw std::runtime_error("boom");
                       }),
            10u);
  EXPECT_EQ(calls, 10);
  EXPECT_EQ(w->stats().callback_exceptions, 4u);
  EXPECT_EQ(w->size(), 0u);
}

// Keys of any hashable type: string keys (short and long), their values
// handed back whole.
TEST(LocalWheelKeys, StringKeysAndHeapValues) {
  using W = LocalWheel<std::string, std::unique_ptr<std::string>>;
  auto w = *W::Create({.interval = absl::Milliseconds(1)}, kT0);
  const std::string long_key(100, 'k');
  ASSERT_TRUE(w->SetAt("a", std::make_unique<std::string>("A"),
                       kT0 + milliseconds(1))
                  .ok());
  ASSERT_TRUE(w->SetAt(long_key, std::make_unique<std::string>("L"),
                       kT0 + milliseconds(2))
                  .ok());
  ASSERT_TRUE(w->MoveAt(std::string("a"), kT0 + milliseconds(3)).ok());
  std::vector<std::string> fired;
  w->Advance(kT0 + milliseconds(3),
             [&](std::string k, std::unique_ptr<std::string> v) {
               fired.push_back(k + "=" + *v);
             });
  EXPECT_EQ(fired, (std::vector<std::string>{long_key + "=L", "a=A"}));
}

// Colliding hashes: every key still its own timer.
TEST(LocalWheelKeys, CollidingHashes) {
  struct OneHash {
    std::size_t operator()(int) const { return 42; }
  };
  auto w = *LocalWheel<int, int, OneHash>::Create({}, kT0);
  for (int k = 0; k < 100; ++k) {
    ASSERT_TRUE(w->SetAt(k, k, kT0 + milliseconds(10 * (k % 7 + 1))).ok());
  }
  for (int k = 0; k < 100; k += 2) EXPECT_TRUE(w->Remove(k));
  int sum = 0, count = 0;
  w->Advance(kT0 + std::chrono::seconds(1), [&](int k, int v) {
    EXPECT_EQ(k, v);
    EXPECT_EQ(k % 2, 1);
    sum += k;
    ++count;
  });
  EXPECT_EQ(count, 50);
  EXPECT_EQ(sum, 2500);
}

// Stop's part: TakeAll hands back every pending timer once; the wheel goes
// on working afterwards.
TEST(LocalWheelCommands, TakeAllHandsBackEveryTimer) {
  auto w = MakeWheel();
  for (int k = 0; k < 1000; ++k) {
    ASSERT_TRUE(w->SetAt(k, -k, kT0 + milliseconds(k * 37)).ok());
  }
  std::vector<std::pair<int, int>> all = w->TakeAll();
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), 1000u);
  for (int k = 0; k < 1000; ++k) EXPECT_EQ(all[k], std::make_pair(k, -k));
  EXPECT_TRUE(w->TakeAll().empty());
  EXPECT_TRUE(AdvanceTo(*w, kT0 + std::chrono::hours(1)).empty());
  ASSERT_TRUE(w->SetAt(5, 5, kT0 + std::chrono::hours(2)).ok());
  EXPECT_EQ(AdvanceTo(*w, kT0 + std::chrono::hours(3)), (Fired{{5, 5}}));
}

// E9: memory follows the live set. After a peak the wheel gives memory back
// once it has wanted to for memory_decay of Advance's time, and NextDue
// names when (so a loop that sleeps until NextDue gets there).
TEST(LocalWheelMemory, GivesMemoryBackAfterTheDecay) {
  auto w = MakeWheel({.interval = absl::Milliseconds(10),
                      .memory_decay = absl::Seconds(5)});
  const std::size_t empty = w->MemoryBytes();
  for (int k = 0; k < 200'000; ++k) {
    ASSERT_TRUE(w->SetAt(k, k, kT0 + std::chrono::hours(1)).ok());
  }
  const std::size_t peak = w->MemoryBytes();
  for (int k = 0; k < 200'000; ++k) ASSERT_TRUE(w->Remove(k));
  TimePoint now = kT0 + milliseconds(10);
  AdvanceTo(*w, now);
  EXPECT_EQ(w->NextDue(), now + std::chrono::seconds(5));
  EXPECT_GT(w->MemoryBytes(), peak / 2);  // kept for a burst that returns
  int steps = 0;
  while (w->NextDue() != TimePoint::max() && steps < 100'000) {
    now = std::max(now, w->NextDue());
    AdvanceTo(*w, now);
    ++steps;
  }
  EXPECT_LT(steps, 100'000);
  EXPECT_GE(now, kT0 + std::chrono::seconds(5));
  EXPECT_LT(w->MemoryBytes(), empty + peak / 20);
  EXPECT_TRUE(w->CheckInvariants().ok());
}

// E2/E14: fire_lateness is Advance's `now` minus each timer's tick time.
TEST(LocalWheelStats, LatenessAndMemory) {
  auto w = MakeWheel();
  ASSERT_TRUE(w->SetAt(1, 1, kT0 + milliseconds(10)).ok());
  ASSERT_TRUE(w->SetAt(2, 2, kT0 + milliseconds(20)).ok());
  AdvanceTo(*w, kT0 + milliseconds(23));
  const Stats s = w->stats();
  EXPECT_EQ(s.fire_lateness.count, 2u);
  EXPECT_EQ(s.fire_lateness.max, absl::Milliseconds(13));
  EXPECT_EQ(s.fire_lateness.sum, absl::Milliseconds(16));
  EXPECT_GT(s.memory_bytes, 0u);
  EXPECT_EQ(s.memory_bytes, w->MemoryBytes());
}

// The delay forms count from a read of the steady clock: never early
// against it (generous bounds: real time decides only "not before").
TEST(LocalWheelRealTime, DelaysCountFromTheClock) {
  auto w = *IntWheel::Create({.interval = absl::Milliseconds(1)});
  const TimePoint before = IntWheel::Clock::now();
  ASSERT_TRUE(w->Set(1, 1, absl::Milliseconds(20)).ok());
  ASSERT_TRUE(w->Set(2, 2, milliseconds(5)).ok());
  ASSERT_TRUE(w->Move(2, std::chrono::duration<double>(0.03)).ok());
  ASSERT_TRUE(w->DeadlineOf(1).has_value());
  EXPECT_GE(*w->DeadlineOf(1), before + milliseconds(20));
  std::vector<std::pair<int, TimePoint>> fired;
  const TimePoint end = before + std::chrono::seconds(5);
  while (w->size() > 0 && IntWheel::Clock::now() < end) {
    std::this_thread::sleep_until(std::min(w->NextDue(), end));
    w->Advance(IntWheel::Clock::now(), [&](int k, int) {
      fired.emplace_back(k, IntWheel::Clock::now());
    });
  }
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[0].first, 1);
  EXPECT_GE(fired[0].second, before + milliseconds(20));
  EXPECT_GE(fired[1].second, before + milliseconds(30));
}

#if TIMINGWHEEL_DCHECK_IS_ON
// One owning thread, checked where TW_DCHECK checks.
TEST(LocalWheelDeathTest, AnotherThreadIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto w = MakeWheel();
        ASSERT_TRUE(w->SetAt(1, 1, kT0).ok());
        std::thread([&] { w->Remove(1); }).join();
      },
      "owning thread");
}
#endif

}  // namespace local_wheel_test
}  // namespace timingwheel
