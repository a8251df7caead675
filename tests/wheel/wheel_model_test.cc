// Internal, below the public API: the Wheel that docs/api.md S1-S6 rest on,
// against a model of those rules.
//
// internal::Wheel against the naive WheelModel: exhaustively on small wheels
// (every cursor position, deadline and move target), then on seeded random
// op sequences decoded exactly as the fuzzer decodes its inputs.
#include "wheel_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace timingwheel {
namespace testing {
namespace wheel_model_test {

Op SetAt(std::uint32_t key, std::uint64_t deadline) {
  return Op{OpKind::kSet, key, deadline, /*absolute=*/true};
}
Op MoveTo(std::uint32_t key, std::uint64_t deadline) {
  return Op{OpKind::kMove, key, deadline, /*absolute=*/true};
}
Op AdvanceBy(std::uint64_t ticks) { return Op{OpKind::kAdvance, 0, ticks}; }

// Ends a program by advancing far enough that everything fires: tick by tick
// (NextDueTick and the one-tick path checked at every step) or in one jump.
void Finish(Program& p, std::uint64_t ticks, bool one_by_one) {
  if (one_by_one) {
    for (std::uint64_t i = 0; i < ticks; ++i) p.ops.push_back(AdvanceBy(1));
  } else {
    p.ops.push_back(AdvanceBy(ticks));
  }
}

TEST(WheelModelTest, ModelSanity) {
  // The model is the spec: make sure it says what the spec says.
  WheelModel m;
  EXPECT_FALSE(m.Set(1, 10, 0));
  EXPECT_EQ(m.DeadlineOf(1), 1u);
  EXPECT_TRUE(m.Set(1, 11, 5));
  EXPECT_TRUE(m.Move(1, 3));
  EXPECT_FALSE(m.Move(2, 3));
  EXPECT_EQ(m.NextFireTick(), 3u);
  EXPECT_TRUE(m.AdvanceTo(2).empty());
  EXPECT_EQ(m.AdvanceTo(10), (std::vector<Fired>{{3, 1, 11}}));
  EXPECT_EQ(m.NextFireTick(), kNever);
  m.Set(2, 1, kNever);
  EXPECT_EQ(m.DeadlineOf(2), kMaxTick);
  EXPECT_EQ(m.AdvanceTo(kNever), (std::vector<Fired>{{kMaxTick, 2, 1}}));
}

TEST(WheelModelTest, DecoderIsTotalAndDeterministic) {
  const std::uint8_t bytes[] = {0x03, 0x01, 0x05, 0xA0, 0xA1, 0x42,
                                0x10, 0xE0, 0x00, 0x00, 0x40, 0xF0};
  const Program a = Decode(bytes, sizeof(bytes));
  const Program b = Decode(bytes, sizeof(bytes));
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].kind, b.ops[i].kind);
    EXPECT_EQ(a.ops[i].key, b.ops[i].key);
    EXPECT_EQ(a.ops[i].delta, b.ops[i].delta);
  }
  EXPECT_EQ(a.num_slots, 4u);
  EXPECT_GT(a.ops.size(), 5u);
  EXPECT_EQ(RunDifferential(a), "");
  EXPECT_EQ(RunDifferential(Decode(nullptr, 0)), "");
}

// A wheel that fires every timer one tick late but reports the requested
// deadline: the harness must notice, or its silence proves nothing.
class OneTickLateWheel {
 public:
  OneTickLateWheel(std::uint32_t n, SwitchableHash h,
                   std::equal_to<std::uint32_t> eq, std::uint32_t level_slots)
      : w_(n, h, eq, level_slots) {}
  std::uint64_t now() const { return w_.now(); }
  std::size_t size() const { return w_.size(); }
  // Always "the next tick" (allowed: early, never late), so that only the
  // fire ticks themselves give the bug away.
  std::uint64_t NextDueTick() const {
    return w_.NextDueTick() == kNever ? kNever : w_.now() + 1;
  }
  std::size_t removed_in_lists() const { return w_.removed_in_lists(); }
  std::uint32_t num_slots() const { return w_.num_slots(); }
  bool Set(std::uint32_t k, std::unique_ptr<std::uint64_t> v, std::uint64_t d) {
    return w_.Set(k, std::move(v), Late(d));
  }
  bool Move(std::uint32_t k, std::uint64_t d) { return w_.Move(k, Late(d)); }
  bool Remove(std::uint32_t k) { return w_.Remove(k); }
  std::optional<std::uint64_t> DeadlineOf(std::uint32_t k) const {
    auto d = w_.DeadlineOf(k);
    if (d) --*d;
    return d;
  }
  template <typename S, typename Kept>
  void AdvanceTo(std::uint64_t t, S&& s, Kept&& kept) {
    w_.AdvanceTo(t, s, kept);
  }
  bool Cascade(std::size_t budget) { return w_.Cascade(budget); }
  template <typename S>
  void TakeAll(S&& s) {
    w_.TakeAll(s);
  }
  absl::Status CheckInvariants() const { return w_.CheckInvariants(); }

 private:
  std::uint64_t Late(std::uint64_t d) const {
    return std::max(d, w_.now() + 1) + 1;
  }
  ModelWheel w_;
};

// The string-keyed adapter hands keys back whole, either side of the
// inline capacity, and its key set spans it.
TEST(WheelModelTest, StringKeysSpanTheInlineCapacity) {
  std::size_t shortest = 1000, longest = 0;
  for (std::uint32_t k = 0; k < 12; ++k) {
    const std::string key = StringKeyedWheel::KeyOf(k);
    EXPECT_EQ(StringKeyedWheel::Number(key), k);
    shortest = std::min(shortest, key.size());
    longest = std::max(longest, key.size());
  }
  EXPECT_LE(shortest, internal::InlineString::kCapacity);
  EXPECT_GT(longest, internal::InlineString::kCapacity);
  Program p;
  p.num_slots = 4;
  for (std::uint32_t k = 0; k < 12; ++k) p.ops.push_back(SetAt(k, 1 + k));
  p.ops.push_back(AdvanceBy(20));
  EXPECT_EQ(RunDifferential<StringKeyedWheel>(p), "");
}

TEST(WheelModelTest, HarnessCatchesALateFire) {
  Program p;
  p.num_slots = 4;
  p.ops = {SetAt(1, 3), AdvanceBy(10)};
  const std::string err = RunDifferential<OneTickLateWheel>(p);
  EXPECT_NE(err.find("AdvanceTo"), std::string::npos) << err;
}

// The ticks in [now0, d1) at which to issue a move of a timer due at d1:
// at once, one tick later, half-way, the last tick before d1, and around one
// rotation before d1 (where the cursor has just passed d1's slot). Every
// tick would cost a fresh Wheel each, which under ASan (a 128 KiB pool chunk
// mapped and unmapped per wheel) would make this test take minutes.
std::vector<std::uint64_t> MoveTimes(std::uint64_t now0, std::uint64_t d1,
                                     std::uint64_t n) {
  std::vector<std::uint64_t> at = {now0, now0 + 1, (now0 + d1) / 2, d1 - 1};
  for (std::uint64_t back : {n + 1, n, n - 1}) {
    if (d1 >= back) at.push_back(d1 - back);
  }
  std::erase_if(at, [&](std::uint64_t t) { return t < now0 || t >= d1; });
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

// The program of one timer and one move: an optional background timer (key
// 9, due at `background`, 0 for none) that keeps the wheel non-empty so the
// cursor really travels, time advanced to now0, key 5 set at d1, time
// advanced to `at`, key 5 moved to d2, then `ticks` more ticks (one by one
// or in one jump, depending on the case's parity).
Program SingleMove(std::uint32_t n, std::uint32_t level_slots,
                   std::uint64_t background, std::uint64_t now0,
                   std::uint64_t d1, std::uint64_t at, std::uint64_t d2,
                   std::uint64_t ticks) {
  Program p;
  p.num_slots = n;
  p.level_slots = level_slots;
  if (background != 0) p.ops.push_back(SetAt(9, background));
  if (now0 > 0) p.ops.push_back(AdvanceBy(now0));
  p.ops.push_back(SetAt(5, d1));
  if (at > now0) p.ops.push_back(AdvanceBy(at - now0));
  p.ops.push_back(MoveTo(5, d2));
  Finish(p, ticks, (d1 + d2 + at) % 2 == 0);
  return p;
}

// One timer, one move, on wheels of 1..8 slots: every cursor position in two
// rotations, every deadline and move target within three rotations of it,
// and the move issued at the interesting ticks before the first deadline
// (MoveTimes). With and without a second timer that keeps the wheel
// non-empty while it advances, so the cursor really travels (an empty wheel
// just jumps).
TEST(WheelModelTest, ExhaustiveSingleMove) {
  int cases = 0;
  for (std::uint32_t n = 1; n <= 8; ++n) {
    for (std::uint64_t now0 = 0; now0 < 2 * n; ++now0) {
      for (int background = 0; background < 2; ++background) {
        for (std::uint64_t d1 = now0 + 1; d1 <= now0 + 3 * n; ++d1) {
          for (std::uint64_t d2 = now0 + 1; d2 <= now0 + 3 * n; ++d2) {
            for (std::uint64_t at : MoveTimes(now0, d1, n)) {
              const Program p =
                  SingleMove(n, 64, background ? 2 * n + 1 + now0 / 2 : 0, now0,
                             d1, at, d2, 4 * n + 2);
              const std::string err = RunDifferential(p);
              ASSERT_EQ(err, "") << "n=" << n << " now0=" << now0
                                 << " background=" << background << " d1=" << d1
                                 << " d2=" << d2 << " move at " << at;
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 50'000);
}

// Three successive moves (any mix of later and earlier) issued at once, and
// again spread over the ticks before each current deadline. (Wheels of up
// to 3 slots: 4 would be 4x the cases for little more; the random tests go
// further.)
TEST(WheelModelTest, ExhaustiveThreeMoves) {
  for (std::uint32_t n = 1; n <= 3; ++n) {
    for (std::uint64_t now0 = 0; now0 < n; ++now0) {
      const std::uint64_t lo = now0 + 1;
      const std::uint64_t hi = now0 + 3 * n;
      for (std::uint64_t d1 = lo; d1 <= hi; ++d1) {
        for (std::uint64_t d2 = lo; d2 <= hi; ++d2) {
          for (std::uint64_t d3 = lo; d3 <= hi; ++d3) {
            for (std::uint64_t d4 = lo; d4 <= hi; ++d4) {
              for (int spread = 0; spread < 2; ++spread) {
                Program p;
                p.num_slots = n;
                if (now0 > 0) p.ops.push_back(AdvanceBy(now0));
                // A neighbour in the first deadline's slot.
                p.ops.push_back(SetAt(2, d1 + n));
                p.ops.push_back(SetAt(1, d1));
                std::uint64_t deadline = d1;
                std::uint64_t now = now0;
                for (std::uint64_t d : {d2, d3, d4}) {
                  // Advance half-way to the current deadline before moving.
                  if (spread && deadline > now + 1) {
                    const std::uint64_t step = (deadline - now) / 2;
                    if (step > 0) p.ops.push_back(AdvanceBy(step));
                    now += step;
                  }
                  p.ops.push_back(MoveTo(1, d));
                  deadline = std::max(d, now + 1);
                }
                Finish(p, 5 * n + 2, (d1 + d2 + d3 + d4) % 2 == 0);
                const std::string err = RunDifferential(p);
                ASSERT_EQ(err, "")
                    << "n=" << n << " now0=" << now0 << " d=" << d1 << "," << d2
                    << "," << d3 << "," << d4 << " spread=" << spread;
              }
            }
          }
        }
      }
    }
  }
}

// One timer, one move, on hierarchies of tiny levels (2 or 4 slots above a
// level 0 of 1, 2 or 4), where a deadline a few ticks out already sits two
// to four levels up: every deadline and move target within kSpan ticks, from
// starting ticks at and around level boundaries (powers of two), the move
// issued at the MoveTimes and at every boundary before the first deadline.
// Every cascade on the way is checked tick by tick against the model.
TEST(WheelModelTest, ExhaustiveSingleMoveAcrossLevels) {
  constexpr std::uint64_t kStarts[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 31, 64};
  constexpr std::uint64_t kSpan = 16;
  int cases = 0;
  for (std::uint32_t level_slots : {2u, 4u}) {
    for (std::uint32_t n : {1u, 2u, 4u}) {
      for (std::uint64_t now0 : kStarts) {
        for (int background = 0; background < 2; ++background) {
          for (std::uint64_t d1 = now0 + 1; d1 <= now0 + kSpan; ++d1) {
            std::vector<std::uint64_t> times = MoveTimes(now0, d1, n);
            for (std::uint64_t b = 1; b < d1; b *= 2) {
              if (b > now0) times.push_back(b);
            }
            std::sort(times.begin(), times.end());
            times.erase(std::unique(times.begin(), times.end()), times.end());
            for (std::uint64_t d2 = now0 + 1; d2 <= now0 + kSpan; ++d2) {
              for (std::uint64_t at : times) {
                const Program p = SingleMove(n, level_slots,
                                             background ? now0 + kSpan + 3 : 0,
                                             now0, d1, at, d2, 2 * kSpan + 4);
                const std::string err = RunDifferential(p);
                ASSERT_EQ(err, "")
                    << "level_slots=" << level_slots << " n=" << n
                    << " now0=" << now0 << " background=" << background
                    << " d1=" << d1 << " d2=" << d2 << " move at " << at;
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 100'000);
}

// Timers at and around every power of two up to kMaxTick, on tiny levels
// and on the default ones, reached by jumps that land on, just before and
// just after each boundary: the largest deadlines cascade through every
// level and still fire on their own tick.
TEST(WheelModelTest, DeadlinesAtEveryLevelBoundary) {
  for (std::uint32_t level_slots : {2u, 4u, 64u}) {
    for (std::uint32_t n : {1u, 4u, 512u}) {
      Program p;
      p.num_slots = n;
      p.level_slots = level_slots;
      std::uint32_t key = 0;
      for (int bit = 1; bit <= 62; ++bit) {
        const std::uint64_t b = std::uint64_t{1} << bit;
        for (std::uint64_t d : {b - 1, b, b + 1}) {
          p.ops.push_back(SetAt(key++ % 4096, d));
        }
      }
      p.ops.push_back(SetAt(5000, kMaxTick));
      for (int bit = 1; bit <= 62; ++bit) {
        // Jump to just before the next boundary, then tick across it.
        const std::uint64_t b = std::uint64_t{1} << bit;
        p.ops.push_back(Op{OpKind::kAdvance, 0, b - 2, /*absolute=*/true});
        for (int k = 0; k < 4; ++k) p.ops.push_back(AdvanceBy(1));
      }
      p.ops.push_back(AdvanceBy(kNever));
      const std::string err = RunDifferential(p);
      ASSERT_EQ(err, "") << "level_slots=" << level_slots << " n=" << n;
    }
  }
}

// Advances both to `target` and returns "" if they fired the same timers at
// the same ticks.
std::string AdvanceBoth(ModelWheel& w, WheelModel& m, std::uint64_t target) {
  std::vector<Fired> got;
  w.AdvanceTo(target, [&](std::uint64_t tick, std::uint32_t&& key,
                          std::unique_ptr<std::uint64_t>&& value) {
    got.push_back({tick, key, *value});
  });
  std::sort(got.begin(), got.end());
  const std::vector<Fired> want = m.AdvanceTo(target);
  if (got == want) return "";
  return "AdvanceTo(" + std::to_string(target) + ") fired " +
         std::to_string(got.size()) + " timers, model " +
         std::to_string(want.size());
}

// Memory follows the live set: 150,000 timers, all but 1% removed, then the
// wheel compacts in small random steps while sets, moves, removes and ticks
// go on between them. Every timer still fires exactly on its tick (the
// relocated ones included: their links, lanes and index words were
// rewritten), and the wheel ends holding a fraction of its peak. On the
// wheel of 4096 slots every timer is filed on level 0, so a removed one's
// entry stays in its list (a lazy remove) until compaction unlinks it.
TEST(WheelModelTest, CompactionKeepsEveryTimer) {
  constexpr std::uint32_t kKeys = 150'000;
  struct Shape {
    std::uint32_t num_slots, level_slots, spread;
  };
  constexpr Shape kShapes[] = {
      {64, 4, 100'000}, {64, 64, 100'000}, {4096, 64, 4000}};
  for (const auto [num_slots, level_slots, spread] : kShapes) {
    std::mt19937_64 rng(level_slots);
    ModelWheel w(num_slots, SwitchableHash{}, std::equal_to<std::uint32_t>(),
                 level_slots);
    WheelModel m;
    std::uint64_t next_value = 1;
    auto set = [&](std::uint32_t key, std::uint64_t deadline) {
      const std::uint64_t v = next_value++;
      ASSERT_EQ(w.Set(key, std::make_unique<std::uint64_t>(v), deadline),
                m.Set(key, v, deadline));
    };
    for (std::uint32_t k = 0; k < kKeys; ++k) set(k, 1 + rng() % spread);
    for (std::uint32_t k = 0; k < kKeys; ++k) {
      if (k % 100 != 0) {
        ASSERT_EQ(w.Remove(k), m.Remove(k));
      }
    }
    ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
    const std::size_t peak = w.MemoryBytes();
    if (spread < num_slots) {
      EXPECT_GT(w.removed_in_lists(), kKeys * 9 / 10);
    } else {
      EXPECT_LT(w.removed_in_lists(), kKeys / 100);
    }
    int rounds = 0;
    while (w.Compact(1 + rng() % 512)) {
      ASSERT_LT(++rounds, 1'000'000);
      // A full check costs a walk of every timer: now and then.
      if (rounds % 128 == 0) {
        ASSERT_EQ(w.CheckInvariants(), absl::OkStatus()) << "round " << rounds;
      }
      for (int j = 0; j < 4; ++j) {
        const std::uint32_t key = rng() % kKeys;
        const std::uint64_t deadline = m.now() + 1 + rng() % spread;
        switch (rng() % 5) {
          case 0:
            set(key, deadline);
            break;
          case 1:
            ASSERT_EQ(w.Move(key, deadline), m.Move(key, deadline));
            break;
          case 2:
            ASSERT_EQ(w.Remove(key), m.Remove(key));
            break;
          default:
            ASSERT_EQ(AdvanceBoth(w, m, m.now() + 1 + rng() % 50), "");
            break;
        }
      }
    }
    EXPECT_GT(rounds, 10);
    ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
    EXPECT_LT(w.MemoryBytes(), peak / 5) << "num_slots=" << num_slots;
    EXPECT_EQ(w.size(), m.size());
    ASSERT_EQ(AdvanceBoth(w, m, kNever), "") << "level_slots=" << level_slots;
    EXPECT_EQ(w.size(), 0u);
  }
}

// Removes during a pool shrink: entries removed while filed on level 0
// stay in their lists, so the shrink finds some of them above its kept
// range and must move them as they are (no key, no index word), and the
// scan of their slots later frees them where they went.
TEST(WheelModelTest, RemovedEntriesMeetAShrinkUnderWay) {
  constexpr std::uint32_t kKeys = 100'000;
  ModelWheel w(4096, SwitchableHash{}, std::equal_to<std::uint32_t>(), 64);
  WheelModel m;
  for (std::uint32_t k = 0; k < kKeys; ++k) {
    const std::uint64_t deadline = 1 + k % 4000;
    ASSERT_EQ(w.Set(k, std::make_unique<std::uint64_t>(k), deadline),
              m.Set(k, k, deadline));
  }
  // As the loop does, finish the growth the sets left under way.
  while (w.GrowStep(8192)) continue;
  for (std::uint32_t k = 0; k < kKeys; ++k) {
    if (k % 10 != 0) {
      ASSERT_EQ(w.Remove(k), m.Remove(k));
    }
  }
  const std::size_t peak = w.MemoryBytes();
  EXPECT_EQ(w.removed_in_lists(), kKeys / 10 * 9);
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  // Compaction first unlinks those, then starts the shrink.
  int rounds = 0;
  while (w.removed_in_lists() != 0) {
    ASSERT_TRUE(w.Compact(512));
    ASSERT_LT(++rounds, 10'000);
  }
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  ASSERT_TRUE(w.Compact(1));  // the shrink starts, and moves one entry
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  // Half the survivors removed while it is under way: lazily, wherever
  // they are.
  for (std::uint32_t k = 0; k < kKeys; k += 20) {
    ASSERT_EQ(w.Remove(k), m.Remove(k));
  }
  EXPECT_EQ(w.removed_in_lists(), kKeys / 20);
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  // As the loop does: a step each round while the wheel wants one (a
  // step may end a shrink that leaves the next one wanted).
  for (int i = 0; i < 100'000 && w.WantsCompaction(); ++i) {
    w.Compact(64);
    if (i % 64 == 0) {
      ASSERT_EQ(w.CheckInvariants(), absl::OkStatus()) << "step " << i;
    }
  }
  EXPECT_FALSE(w.WantsCompaction());
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  EXPECT_LT(w.MemoryBytes(), peak / 5);
  ASSERT_EQ(AdvanceBoth(w, m, kNever), "");
  EXPECT_EQ(w.size(), 0u);
  EXPECT_EQ(w.removed_in_lists(), 0u);
}

// The key index grows without Reserve, in steps that sets drive, while
// moves, removes, ticks, compaction steps and growth steps go on between
// the sets, and growths also start early, from
// half full, as the loop starts them: every timer is found and fires
// exactly on its tick, whichever table its index word is in. With hashes
// that fold to one value too, so that every lookup walks a run across both
// tables.
TEST(WheelModelTest, IndexGrowthKeepsEveryTimer) {
  for (auto mode : {SwitchableHash::kGood, SwitchableHash::kFoldCollides}) {
    const std::uint32_t keys = mode == SwitchableHash::kGood ? 100'000 : 5'000;
    std::mt19937_64 rng(7 + mode);
    SwitchableHash hash;
    hash.mode = mode;
    ModelWheel w(64, hash, std::equal_to<std::uint32_t>(), 4);
    WheelModel m;
    std::uint64_t next_value = 1;
    std::uint32_t next_key = 0;
    int early_growths = 0;
    for (int op = 1; next_key < keys; ++op) {
      // A full check walks every timer (and with folding hashes, a lookup
      // walks them all): now and then, and as each early growth starts.
      if (op % 2048 == 0) {
        ASSERT_EQ(w.CheckInvariants(), absl::OkStatus()) << "op " << op;
      }
      const std::uint64_t deadline = m.now() + 1 + rng() % 100'000;
      switch (rng() % 16) {
        case 5:
          if (w.WantsEarlyGrowth() && rng() % 4 == 0) {
            w.StartGrowth();
            ++early_growths;
            ASSERT_EQ(w.CheckInvariants(), absl::OkStatus()) << "op " << op;
          } else {
            w.GrowStep(1 + rng() % 64);
          }
          break;
        case 0: {
          const std::uint32_t key = rng() % (next_key + 1);
          ASSERT_EQ(w.Move(key, deadline), m.Move(key, deadline));
          break;
        }
        case 1: {
          const std::uint32_t key = rng() % (next_key + 1);
          ASSERT_EQ(w.Remove(key), m.Remove(key));
          break;
        }
        case 2:
          ASSERT_EQ(AdvanceBoth(w, m, m.now() + 1 + rng() % 20), "");
          break;
        case 3:
          w.Compact(1 + rng() % 64);
          break;
        case 4: {
          const std::uint32_t key = rng() % (next_key + 1);
          ASSERT_EQ(w.DeadlineOf(key), m.DeadlineOf(key));
          break;
        }
        default: {
          const std::uint64_t v = next_value++;
          ASSERT_EQ(
              w.Set(next_key, std::make_unique<std::uint64_t>(v), deadline),
              m.Set(next_key, v, deadline));
          ++next_key;
          break;
        }
      }
    }
    // Tables from 4096 words up to 131072 (good hashes) or 8192.
    EXPECT_GE(early_growths, mode == SwitchableHash::kGood ? 3 : 1);
    ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
    EXPECT_EQ(w.size(), m.size());
    ASSERT_EQ(AdvanceBoth(w, m, kNever), "") << "hash mode " << int{mode};
    EXPECT_EQ(w.size(), 0u);
  }
}

// Random byte strings through the fuzzer's decoder. Wheels of 1..16 slots
// and all three hash modes; the decoder mixes sets, earlier and later
// moves, moves and removes of absent keys, short and huge advances and
// TakeAll. Seeds are fixed so a failure is reproducible from its index.
TEST(WheelModelTest, RandomDifferential) {
  constexpr int kPrograms = 20000;
  std::mt19937_64 rng(20261101);
  for (int i = 0; i < kPrograms; ++i) {
    std::vector<std::uint8_t> bytes(64 + rng() % 512);
    for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng());
    // Header: 1..16 slots (bit 7 clear), hash mode from bits 4..6.
    bytes[0] &= 0x7F;
    const Program p = Decode(bytes.data(), bytes.size());
    ASSERT_GE(p.num_slots, 1u);
    ASSERT_LE(p.num_slots, 16u);
    const std::string err = RunDifferential(p);
    ASSERT_EQ(err, "") << "program #" << i;
    // Every fourth again with string keys (StringKeyedWheel).
    if (i % 4 == 0) {
      const std::string str_err = RunDifferential<StringKeyedWheel>(p);
      ASSERT_EQ(str_err, "") << "program #" << i << " with string keys";
    }
  }
}

// As above with the wheel busier: few removes and big jumps, many sets, so
// slots hold long lists with mixed circles and lazy entries.
TEST(WheelModelTest, RandomDifferentialCrowded) {
  constexpr int kPrograms = 2000;
  std::mt19937_64 rng(7);
  for (int i = 0; i < kPrograms; ++i) {
    Program p;
    p.num_slots = 1 + rng() % 16;
    p.level_slots = std::uint32_t{2} << rng() % 6;  // 2 .. 64
    p.hash_mode = static_cast<SwitchableHash::Mode>(rng() % 3);
    const std::uint64_t n = p.num_slots;
    for (int j = 0; j < 600; ++j) {
      const std::uint32_t key = rng() % 64;
      switch (rng() % 10) {
        case 0:
        case 1:
        case 2:
          p.ops.push_back({OpKind::kSet, key, rng() % (4 * n + 2)});
          break;
        case 3:
        case 4:
        case 5:
          p.ops.push_back({OpKind::kMove, key, rng() % (4 * n + 2)});
          break;
        case 6:
          p.ops.push_back({OpKind::kRemove, key});
          break;
        case 7:
          p.ops.push_back({OpKind::kCascade, 0, 1 + rng() % 3});
          break;
        default:
          p.ops.push_back(AdvanceBy(1 + rng() % (n + 1)));
          break;
      }
    }
    const std::string err = RunDifferential(p);
    ASSERT_EQ(err, "") << "program #" << i;
    // Every fourth again with string keys (StringKeyedWheel).
    if (i % 4 == 0) {
      const std::string str_err = RunDifferential<StringKeyedWheel>(p);
      ASSERT_EQ(str_err, "") << "program #" << i << " with string keys";
    }
  }
}

// Every input in fuzz/corpus/ (the hand-made seeds, and any minimized
// finding added there) replays as a regression test.
TEST(WheelModelTest, FuzzCorpusReplays) {
  const char* dir = std::getenv("WHEEL_FUZZ_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "WHEEL_FUZZ_CORPUS not set";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                          std::istreambuf_iterator<char>());
    const Program p = Decode(bytes.data(), bytes.size());
    EXPECT_EQ(RunDifferential(p), "") << entry.path();
    EXPECT_EQ(RunDifferential<StringKeyedWheel>(p), "")
        << entry.path() << " with string keys";
    ++files;
  }
  EXPECT_GT(files, 0) << "no inputs in " << dir;
}

}  // namespace wheel_model_test
}  // namespace testing
}  // namespace timingwheel
