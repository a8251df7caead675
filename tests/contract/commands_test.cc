// docs/api.md S2 (SetTimer on a present key replaces value and deadline), S3
// (MoveTimer), S4 (RemoveTimer), S6 (every accepted timer ends exactly one
// way) and S9 (one thread's commands apply in its order), through the public
// header only, with a ManualTicker: outcomes are decided by tick counts.

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace commands_test {

using ::timingwheel::testing::Entries;
using ::timingwheel::testing::Fire;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::StopSorted;

// ---------------------------------------------------------------------------
// docs/api.md S2: SetTimer on a present key.

TEST(S2Replace, LaterDeadlineNewValueFiresOnce) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 10, 5 * kInterval).ok());
  w.Tick(2);
  ASSERT_TRUE(w.wheel().SetTimer(1, 20, 10 * kInterval).ok());
  w.Tick(20);
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1)[0].tick, 12);
  EXPECT_EQ(w.FiresOf(1)[0].value, 20);
  EXPECT_EQ(w.wheel().stats().superseded, 1u);
}

TEST(S2Replace, EarlierDeadlineNewValueFiresOnce) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 10, 30 * kInterval).ok());
  w.Tick(1);
  ASSERT_TRUE(w.wheel().SetTimer(1, 30, 2 * kInterval).ok());
  w.Tick(40);
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1)[0].tick, 3);
  EXPECT_EQ(w.FiresOf(1)[0].value, 30);
}

TEST(S2Replace, ManyReplacementsBeforeAnyTick) {
  ManualWheel w(4);
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(w.wheel().SetTimer(7, i, ((i * 7) % 13 + 1) * kInterval).ok());
  }
  // The last one wins: value 50, delay (350 % 13 + 1) = 13 intervals.
  w.Tick(20);
  ASSERT_EQ(w.FiresOf(7).size(), 1u);
  EXPECT_EQ(w.FiresOf(7)[0].value, 50);
  EXPECT_EQ(w.FiresOf(7)[0].tick, 13);
  EXPECT_EQ(w.wheel().stats().superseded, 49u);
}

TEST(S2Replace, SetAfterFireInsertsAgain) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  w.Tick();
  ASSERT_TRUE(w.wheel().SetTimer(1, 2, kInterval).ok());
  w.Tick();
  ASSERT_EQ(w.FiresOf(1).size(), 2u);
  EXPECT_EQ(w.FiresOf(1)[1].value, 2);
  EXPECT_EQ(w.FiresOf(1)[1].tick, 2);
  EXPECT_EQ(w.wheel().stats().superseded, 0u);
}

// ---------------------------------------------------------------------------
// docs/api.md S3: MoveTimer.

TEST(S3Move, LaterAndEarlierKeepTheValue) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 11, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 22, 30 * kInterval).ok());
  w.Tick(2);
  ASSERT_TRUE(w.wheel().MoveTimer(1, 10 * kInterval).ok());  // later
  ASSERT_TRUE(w.wheel().MoveTimer(2, 4 * kInterval).ok());   // earlier
  w.Tick(40);
  EXPECT_EQ(w.FireTick(1), 12);
  EXPECT_EQ(w.FireTick(2), 6);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 11);
  EXPECT_EQ(w.FiresOf(2).at(0).value, 22);
  EXPECT_EQ(w.wheel().stats().moved, 2u);
}

// The session-idle pattern: touched every tick, it never fires until the
// touches stop, however many rotations that spans.
TEST(S3Move, RepeatedLaterMovesAcrossManyCircles) {
  ManualWheel w(4);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 5 * kInterval).ok());
  for (int i = 0; i < 60; ++i) {
    w.Tick();
    ASSERT_TRUE(w.wheel().MoveTimer(1, 5 * kInterval).ok());
  }
  EXPECT_TRUE(w.fires().empty());
  w.Tick(4);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 65);
}

TEST(S3Move, AlternatingLaterAndEarlierMoves) {
  ManualWheel w(4);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 2 * kInterval).ok());
  // Moves between ticks: 17, 3, 25, 1.5, 9, 6 intervals from the time of
  // each move; the last one counts.
  const double delays[] = {17, 3, 25, 1.5, 9, 6};
  for (double d : delays) {
    ASSERT_TRUE(w.wheel().MoveTimer(1, kInterval * d).ok());
  }
  w.Tick(1);
  // Now from tick 1: far (3 circles), then near, then far again.
  for (double d : {13.0, 2.0, 21.0, 11.0}) {
    ASSERT_TRUE(w.wheel().MoveTimer(1, kInterval * d).ok());
  }
  w.Tick(30);
  EXPECT_EQ(w.FireTick(1), 12);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 1);
}

TEST(S3Move, AbsentKeyIsANoOp) {
  ManualWheel w(8);
  EXPECT_TRUE(w.wheel().MoveTimer(42, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  w.Tick();
  EXPECT_TRUE(w.wheel().MoveTimer(1, kInterval).ok());  // already fired
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(2).ok());
  EXPECT_TRUE(w.wheel().MoveTimer(2, kInterval).ok());  // removed
  w.Tick(10);
  EXPECT_EQ(w.fires().size(), 1u);
  EXPECT_EQ(w.wheel().stats().moved, 0u);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// A deterministic random walk of Set/Move/Remove over a few keys on a tiny
// wheel, compared tick by tick with a model of docs/api.md S1-S4.
TEST(S3Move, RandomOpsMatchModelExactly) {
  for (int num_slots : {1, 3, 4, 8}) {
    SCOPED_TRACE(absl::StrCat("num_slots ", num_slots));
    ManualWheel w(num_slots);
    std::mt19937 rng(1234 + num_slots);
    struct Entry {
      int value;
      int due;
    };
    std::map<int, Entry> model;
    std::vector<Fire> expected;
    int next_value = 1;
    for (int tick = 1; tick <= 300; ++tick) {
      const int ops = static_cast<int>(rng() % 4);
      for (int i = 0; i < ops; ++i) {
        const int key = static_cast<int>(rng() % 12);
        // Delays from a tenth of an interval to 30 intervals (~4 circles of
        // an 8-slot wheel), fractional half the time. Whole tenths keep the
        // durations exact.
        int tenths = 1 + static_cast<int>(rng() % 300);
        if (rng() % 2 == 0) tenths = std::max(10, tenths / 10 * 10);
        const absl::Duration delay = kInterval * tenths / 10;
        const int delay_ticks = (tenths + 9) / 10;
        const int now = tick - 1;
        switch (rng() % 3) {
          case 0: {
            const int v = next_value++;
            ASSERT_TRUE(w.wheel().SetTimer(key, v, delay).ok());
            model[key] = {v, now + delay_ticks};
            break;
          }
          case 1:
            ASSERT_TRUE(w.wheel().MoveTimer(key, delay).ok());
            if (auto it = model.find(key); it != model.end()) {
              it->second.due = now + delay_ticks;
            }
            break;
          default:
            ASSERT_TRUE(w.wheel().RemoveTimer(key).ok());
            model.erase(key);
        }
      }
      w.Tick();
      for (auto it = model.begin(); it != model.end();) {
        if (it->second.due == tick) {
          expected.push_back({tick, it->first, it->second.value, {}});
          it = model.erase(it);
        } else {
          ++it;
        }
      }
    }
    auto key_of = [](const Fire& f) {
      return std::make_tuple(f.tick, f.key, f.value);
    };
    std::vector<std::tuple<int, int, int>> want, got;
    for (const Fire& f : expected) want.push_back(key_of(f));
    for (const Fire& f : w.fires()) got.push_back(key_of(f));
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
    Entries rest;
    for (const auto& [k, e] : model) rest.push_back({k, e.value});
    EXPECT_EQ(StopSorted(w.wheel()), rest);
  }
}

// ---------------------------------------------------------------------------
// docs/api.md S4: RemoveTimer.

TEST(S4Remove, PresentKeyNeverFires) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 20 * kInterval).ok());
  w.Tick(2);
  ASSERT_TRUE(w.wheel().RemoveTimer(1).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(2).ok());
  w.Tick(30);
  EXPECT_TRUE(w.fires().empty());
  EXPECT_EQ(w.wheel().stats().removed, 2u);
  EXPECT_EQ(w.wheel().stats().pending, 0u);
}

TEST(S4Remove, AbsentKeyIsANoOpAndKeyCanBeSetAgain) {
  ManualWheel w(8);
  EXPECT_TRUE(w.wheel().RemoveTimer(5).ok());
  ASSERT_TRUE(w.wheel().SetTimer(5, 1, 2 * kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(5).ok());
  EXPECT_TRUE(w.wheel().RemoveTimer(5).ok());
  ASSERT_TRUE(w.wheel().SetTimer(5, 2, 4 * kInterval).ok());
  w.Tick(10);
  ASSERT_EQ(w.FiresOf(5).size(), 1u);
  EXPECT_EQ(w.FiresOf(5)[0].tick, 4);
  EXPECT_EQ(w.FiresOf(5)[0].value, 2);
  EXPECT_EQ(w.wheel().stats().removed, 1u);
}

// ---------------------------------------------------------------------------
// docs/api.md S6: every accepted timer ends exactly one way.

TEST(S6Accounting, MixedScenarioEndsEachTimerOnce) {
  ManualWheel w(4);
  IntWheel& wheel = w.wheel();
  // Values are unique per SetTimer; track how each one ends.
  int next = 1;
  std::map<int, std::string> ended;  // value -> how
  std::set<int> accepted;
  auto set = [&](int key, int delay_ticks) {
    const int v = next++;
    ASSERT_TRUE(wheel.SetTimer(key, v, delay_ticks * kInterval).ok());
    accepted.insert(v);
  };
  for (int k = 0; k < 40; ++k) set(k, 1 + k % 13);
  for (int k = 0; k < 40; k += 4) set(k, 2 + k % 7);  // 10 superseded
  for (int k = 1; k < 40; k += 5) ASSERT_TRUE(wheel.RemoveTimer(k).ok());  // 8
  for (int k = 2; k < 40; k += 6)
    ASSERT_TRUE(wheel.MoveTimer(k, 20 * kInterval).ok());
  w.Tick(6);
  ASSERT_TRUE(wheel.RemoveTimer(1000).ok());  // absent
  for (int k = 40; k < 50; ++k) set(k, 30);
  std::vector<std::pair<int, int>> drained;
  std::mutex mu;
  ASSERT_TRUE(wheel
                  .Drain([&](int key, int value) {
                    std::lock_guard<std::mutex> lock(mu);
                    drained.push_back({key, value});
                  })
                  .ok());
  for (int k = 50; k < 60; ++k) set(k, 1 + k % 5);
  w.Tick(3);
  for (int k = 50; k < 60; k += 3) set(k, 40);  // some fired, some superseded
  auto stopped = wheel.Stop();
  ASSERT_TRUE(stopped.ok());

  auto end = [&](int v, const std::string& how) {
    auto [it, fresh] = ended.emplace(v, how);
    EXPECT_TRUE(fresh) << "value " << v << " ended as " << it->second
                       << " and as " << how;
  };
  for (const Fire& f : w.fires()) end(f.value, "fired");
  for (const auto& [k, v] : drained) end(v, "drained");
  for (const auto& [k, v] : *stopped) end(v, "stopped");
  const Stats s = wheel.stats();
  EXPECT_EQ(s.removed, 8u);
  // Superseded and removed values never reach the test: everything else must.
  EXPECT_EQ(ended.size() + s.superseded + s.removed, accepted.size());
  for (const auto& [v, how] : ended) EXPECT_TRUE(accepted.contains(v)) << v;
  EXPECT_EQ(s.fired, w.fires().size());
  EXPECT_EQ(s.drained, drained.size());
  EXPECT_EQ(s.pending, 0u);
  EXPECT_GT(s.fired, 0u);
  EXPECT_GT(drained.size(), 0u);
  EXPECT_GT(stopped->size(), 0u);
  // 10 before any tick, then keys 53 and 59 (still pending at tick 9; 50 and
  // 56 had fired, so their Sets were fresh inserts).
  EXPECT_EQ(s.superseded, 12u);
}

// ---------------------------------------------------------------------------
// docs/api.md S9: per-thread order.

TEST(S9Order, OneThreadsCommandsApplyInOrder) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  // Set, Move, Remove, Set: only the last Set survives.
  ASSERT_TRUE(wheel.SetTimer(1, 1, 5 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(1, 2 * kInterval).ok());
  ASSERT_TRUE(wheel.RemoveTimer(1).ok());
  ASSERT_TRUE(wheel.SetTimer(1, 2, 3 * kInterval).ok());
  // Remove before Set: the Set wins. Set before Remove: nothing.
  ASSERT_TRUE(wheel.RemoveTimer(2).ok());
  ASSERT_TRUE(wheel.SetTimer(2, 20, 4 * kInterval).ok());
  ASSERT_TRUE(wheel.SetTimer(3, 30, 4 * kInterval).ok());
  ASSERT_TRUE(wheel.RemoveTimer(3).ok());
  // Move before Set: no-op on an absent key, then the Set's own deadline.
  ASSERT_TRUE(wheel.MoveTimer(4, kInterval).ok());
  ASSERT_TRUE(wheel.SetTimer(4, 40, 6 * kInterval).ok());
  // Set then Move: the Move's deadline.
  ASSERT_TRUE(wheel.SetTimer(5, 50, 6 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(5, kInterval).ok());
  w.Tick(10);
  EXPECT_EQ(w.FireTick(1), 3);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 2);
  EXPECT_EQ(w.FireTick(2), 4);
  EXPECT_EQ(w.FireTick(3), -1);
  EXPECT_EQ(w.FireTick(4), 6);
  EXPECT_EQ(w.FireTick(5), 1);
}

// Several threads, each with its own keys and a long op sequence whose final
// state is known only if that thread's order was kept. No thread but the
// producers' own orders the commands, so the final state is read with Stop
// (which applies every accepted command), not with a Tick.
TEST(S9Order, ConcurrentThreadsEachKeepTheirOrder) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  constexpr int kThreads = 4, kKeys = 50, kRounds = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&wheel, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kKeys; ++i) {
          const int key = t * 1000 + i;
          EXPECT_TRUE(wheel.SetTimer(key, 2 * r, 100 * kInterval).ok());
          EXPECT_TRUE(wheel.MoveTimer(key, (1 + i % 9) * kInterval).ok());
          switch ((i + r) % 3) {
            case 0:
              EXPECT_TRUE(wheel.RemoveTimer(key).ok());
              break;
            case 1:
              EXPECT_TRUE(wheel.RemoveTimer(key).ok());
              EXPECT_TRUE(wheel.SetTimer(key, 2 * r + 1, kInterval).ok());
              break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Entries want;
  constexpr int r = kRounds - 1;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kKeys; ++i) {
      switch ((i + r) % 3) {
        case 1:
          want.push_back({t * 1000 + i, 2 * r + 1});
          break;
        case 2:
          want.push_back({t * 1000 + i, 2 * r});
          break;
      }
    }
  }
  EXPECT_EQ(StopSorted(wheel), want);
  EXPECT_TRUE(w.fires().empty());
}

}  // namespace commands_test
}  // namespace timingwheel
