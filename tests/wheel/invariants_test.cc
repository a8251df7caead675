// CheckInvariants of the wheel's structures catches what it is there for.
// Each test builds a small EntryPool, KeyIndex or Wheel, checks that
// CheckInvariants passes, breaks one thing on purpose (through the public
// API where that can break it, else through WheelTestPeer), checks that
// CheckInvariants reports it, then repairs it so the structure can be
// destroyed. The model tests run the checks after every operation; these
// show that a pass means something.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "timingwheel/internal/wheel/entry_pool.h"
#include "timingwheel/internal/wheel/key_index.h"
#include "timingwheel/internal/wheel/wheel.h"

namespace timingwheel {
namespace internal {

// What the tests reach inside KeyIndex and Wheel (both befriend it).
class WheelTestPeer {
 public:
  static std::uint64_t& Word(KeyIndex& index, std::size_t pos) {
    return index.words_[pos];
  }
  static std::uint64_t Empty() { return KeyIndex::kEmpty; }
  static std::uint64_t Tombstone() { return KeyIndex::kTombstone; }
  static std::size_t& Size(KeyIndex& index) { return index.size_; }

  template <typename W>
  static KeyIndex& Index(W& wheel) {
    return wheel.index_;
  }
  template <typename W>
  static Level& Level0(W& wheel) {
    return wheel.levels_[0];
  }
  template <typename W>
  static std::size_t& RemovedInLists(W& wheel) {
    return wheel.removed_in_lists_;
  }
  // The pool index of the entry of a present key.
  template <typename W, typename K>
  static std::uint32_t EntryIndex(W& wheel, const K& key) {
    return wheel.Find(key, wheel.HashOf(key)).i;
  }
  // The entry at a pool index: its deadline and links.
  template <typename W>
  static auto& Entry(W& wheel, std::uint32_t i) {
    return wheel.pool_.At(i);
  }
};

namespace invariants_test {

// Expects a failed check whose message contains `what`.
void ExpectCaught(const absl::Status& status, absl::string_view what) {
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(what), absl::string_view::npos) << status;
}

// --- EntryPool ---------------------------------------------------------

struct PoolEntry {
  std::uint32_t prev;
  std::uint32_t next;
};
using TestPool = EntryPool<PoolEntry>;

std::uint32_t Take(TestPool& pool) {
  pool.ReserveOne();
  return pool.Allocate();
}

TEST(EntryPoolInvariants, HoldThroughAllocationsFreesAndAShrink) {
  TestPool pool;
  std::vector<std::uint32_t> live;
  for (int i = 0; i < 5 * 4096; ++i) live.push_back(Take(pool));
  ASSERT_EQ(pool.CheckInvariants(), absl::OkStatus());
  for (std::uint32_t i : live) {
    if (i % 16 != 0) pool.Free(i);
  }
  ASSERT_EQ(pool.CheckInvariants(), absl::OkStatus());
  ASSERT_TRUE(pool.WantsShrink());
  pool.StartShrink();
  ASSERT_TRUE(pool.Shrinking());
  ASSERT_EQ(pool.CheckInvariants(), absl::OkStatus());
  for (int round = 0; pool.Shrinking(); ++round) {
    ASSERT_LT(round, 100'000);
    std::size_t budget = 64;
    for (std::uint32_t from; (from = pool.NextToRelocate(budget)) !=
                             TestPool::kNil;) {
      pool.Allocate();  // where `from` moves: nothing to copy here
      pool.Free(from);
    }
    ASSERT_EQ(pool.CheckInvariants(), absl::OkStatus()) << "round " << round;
  }
  // Allocations after a shrink take the lazy region's free entries.
  for (int i = 0; i < 100; ++i) Take(pool);
  EXPECT_EQ(pool.CheckInvariants(), absl::OkStatus());
}

TEST(EntryPoolInvariants, CatchAnIndexOnTheFreeListTwice) {
  TestPool pool;
  const std::uint32_t a = Take(pool), b = Take(pool);
  Take(pool);
  pool.Free(a);
  pool.Free(b);  // the list: b, a
  ASSERT_EQ(pool.CheckInvariants(), absl::OkStatus());
  pool.At(a).next = b;  // b, a, b, ...
  ExpectCaught(pool.CheckInvariants(), "on the free list twice");
  pool.At(a).next = TestPool::kNil;
  EXPECT_EQ(pool.CheckInvariants(), absl::OkStatus());
}

TEST(EntryPoolInvariants, CatchAFreeIndexOffTheList) {
  TestPool pool;
  Take(pool);
  const std::uint32_t b = Take(pool);
  Take(pool);
  pool.At(b).prev = TestPool::kFreeMark;  // marked free, never listed
  ExpectCaught(pool.CheckInvariants(), "is not on the free list");
  pool.At(b).prev = 0;
  EXPECT_EQ(pool.CheckInvariants(), absl::OkStatus());
}

TEST(EntryPoolInvariants, CatchALiveIndexOnTheList) {
  TestPool pool;
  const std::uint32_t a = Take(pool);
  Take(pool);
  pool.Free(a);
  pool.At(a).prev = 0;  // listed, yet marked live
  ExpectCaught(pool.CheckInvariants(), "free list holds live index");
  pool.At(a).prev = TestPool::kFreeMark;
  EXPECT_EQ(pool.CheckInvariants(), absl::OkStatus());
}

// --- KeyIndex ------------------------------------------------------------

std::uint32_t HashOfEntry(std::uint32_t entry) { return entry * 2654435761u; }

std::size_t PositionOf(const KeyIndex& index, std::uint32_t entry) {
  return index.Find(HashOfEntry(entry),
                    [entry](std::uint32_t e) { return e == entry; });
}

// One entry, in a table of 8 words.
KeyIndex& WithOneWord(KeyIndex& index) {
  index.ReserveOneMore();
  index.Insert(HashOfEntry(1), 1);
  return index;
}

TEST(KeyIndexInvariants, HoldThroughGrowthsAndAShrink) {
  // Tables from 64 words grow in steps, so both phases of a growth are
  // seen, and the shrink's too.
  KeyIndex index(/*grow_in_steps_from=*/64);
  constexpr std::uint32_t kEntries = 3000;
  for (std::uint32_t e = 0; e < kEntries; ++e) {
    index.FindBeforeInsert(HashOfEntry(e), [](std::uint32_t) { return false; });
    index.ReserveOneMore();
    index.Insert(HashOfEntry(e), e);
    ASSERT_EQ(index.CheckInvariants(), absl::OkStatus()) << "insert " << e;
  }
  for (std::uint32_t e = 0; e < kEntries; ++e) {
    if (e % 32 == 0) continue;
    index.EraseAt(PositionOf(index, e));
    if (e % 7 == 0) {
      ASSERT_EQ(index.CheckInvariants(), absl::OkStatus()) << "erase " << e;
    }
  }
  index.StartShrink();
  ASSERT_TRUE(index.Shrinking());
  for (int step = 0; index.ResizeStep(16); ++step) {
    ASSERT_EQ(index.CheckInvariants(), absl::OkStatus()) << "step " << step;
  }
  EXPECT_EQ(index.CheckInvariants(), absl::OkStatus());
}

TEST(KeyIndexInvariants, CatchAWordPastAnEmptyWord) {
  KeyIndex index;
  WithOneWord(index);
  ASSERT_EQ(index.capacity(), 8u);
  const std::size_t pos = PositionOf(index, 1);
  const std::size_t later = (pos + 2) & 7;  // an empty word between
  std::swap(WheelTestPeer::Word(index, pos),
            WheelTestPeer::Word(index, later));
  ExpectCaught(index.CheckInvariants(), "lies past an empty word");
  std::swap(WheelTestPeer::Word(index, pos),
            WheelTestPeer::Word(index, later));
  EXPECT_EQ(index.CheckInvariants(), absl::OkStatus());
}

TEST(KeyIndexInvariants, CatchATombstoneInTheCurrentTable) {
  KeyIndex index;
  WithOneWord(index);
  const std::size_t empty = (PositionOf(index, 1) + 1) & 7;
  WheelTestPeer::Word(index, empty) = WheelTestPeer::Tombstone();
  ExpectCaught(index.CheckInvariants(), "tombstone");
  WheelTestPeer::Word(index, empty) = WheelTestPeer::Empty();
  EXPECT_EQ(index.CheckInvariants(), absl::OkStatus());
}

TEST(KeyIndexInvariants, CatchASizeThatMiscounts) {
  KeyIndex index;
  WithOneWord(index);
  ++WheelTestPeer::Size(index);
  ExpectCaught(index.CheckInvariants(), "live words, size 2");
  --WheelTestPeer::Size(index);
  EXPECT_EQ(index.CheckInvariants(), absl::OkStatus());
}

TEST(KeyIndexInvariants, CatchAnInsertWithoutReserveOneMore) {
  KeyIndex index;
  WithOneWord(index);
  // Through the API: a table of 8 is full at 6 words, and only
  // ReserveOneMore grows it.
  for (std::uint32_t e = 2; e <= 7; ++e) index.Insert(HashOfEntry(e), e);
  ExpectCaught(index.CheckInvariants(), "7 words in 8");
}

TEST(KeyIndexInvariants, CatchAnEntryWithTheTagBit) {
  KeyIndex index;
  WithOneWord(index);
  const std::size_t pos = PositionOf(index, 1);
  index.SetEntryAt(pos, 0x80000001u);
  ExpectCaught(index.CheckInvariants(), "names entry 2147483649");
  index.SetEntryAt(pos, 1);
  EXPECT_EQ(index.CheckInvariants(), absl::OkStatus());
}

// --- Wheel ---------------------------------------------------------------

using TestWheel = Wheel<std::uint32_t, int>;

// Keys 0..8 due at tick 5 on a wheel of 8 slots: one level-0 slot, whose
// lane 0 holds entries 0 and 8 (entry 8 first: lists are pushed at the
// front).
void SetNineAtFive(TestWheel& w) {
  for (std::uint32_t k = 0; k <= 8; ++k) w.Set(k, static_cast<int>(k), 5);
  ASSERT_EQ(WheelTestPeer::EntryIndex(w, 0u), 0u);
  ASSERT_EQ(WheelTestPeer::EntryIndex(w, 8u), 8u);
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, HoldThroughCompaction) {
  // Five chunks of timers, most of them then removed (on level 0, lazily,
  // on the coarse levels at once), so that compaction purges the removed
  // entries, shrinks the index and relocates entries out of the pool's
  // high chunks: checked after every bounded step.
  TestWheel w(64, {}, {}, /*level_slots=*/4);
  constexpr std::uint32_t kKeys = 5 * 4096;
  for (std::uint32_t k = 0; k < kKeys; ++k) {
    w.Set(k, static_cast<int>(k), 1 + (k * 7919) % 5000);
  }
  for (std::uint32_t k = 0; k < kKeys; ++k) {
    if (k % 16 != 0) {
      ASSERT_TRUE(w.Remove(k));
    }
  }
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  ASSERT_TRUE(w.WantsCompaction());
  // As the loop does: a step each round while the wheel wants one.
  int steps = 0;
  for (; steps < 100'000 && w.WantsCompaction(); ++steps) {
    w.Compact(64);
    ASSERT_EQ(w.CheckInvariants(), absl::OkStatus()) << "step " << steps;
  }
  EXPECT_GT(steps, 10);
  EXPECT_FALSE(w.WantsCompaction());
  std::uint32_t fired = 0;
  w.AdvanceTo(10'000, [&](std::uint64_t, std::uint32_t&&, int&&) { ++fired; });
  EXPECT_EQ(fired, kKeys / 16);
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchABrokenBackLink) {
  TestWheel w(8);
  SetNineAtFive(w);
  auto& e0 = WheelTestPeer::Entry(w, 0);
  const std::uint32_t prev = e0.prev;
  e0.prev = 3;
  ExpectCaught(w.CheckInvariants(), "links back to 3, not 8");
  e0.prev = prev;
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchAnEntryCutOffItsList) {
  TestWheel w(8);
  SetNineAtFive(w);
  auto& e8 = WheelTestPeer::Entry(w, 8);
  const std::uint32_t next = e8.next;
  e8.next = 0xFFFFFFFFu;  // the end of the list: drops entry 0
  ExpectCaught(w.CheckInvariants(), "live entry 0 is in no list");
  e8.next = next;
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchAnIndexWordNamingAnotherEntry) {
  TestWheel w(8);
  SetNineAtFive(w);
  KeyIndex& index = WheelTestPeer::Index(w);
  const std::size_t pos =
      index.Find(w.HashOf(1), [](std::uint32_t e) { return e == 1; });
  index.SetEntryAt(pos, 2);  // key 1's word names key 2's entry
  ExpectCaught(w.CheckInvariants(), "does not find it");
  index.SetEntryAt(pos, 1);
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchAnOccupiedSlotUnmarked) {
  TestWheel w(8);
  SetNineAtFive(w);
  Level& level0 = WheelTestPeer::Level0(w);
  level0.Unmark(level0.SlotOfTick(5));
  ExpectCaught(w.CheckInvariants(), "an unmarked slot of level 0");
  level0.Mark(level0.SlotOfTick(5));
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchAnEmptySlotMarked) {
  TestWheel w(8);
  SetNineAtFive(w);
  Level& level0 = WheelTestPeer::Level0(w);
  level0.Mark(level0.SlotOfTick(6));
  ExpectCaught(w.CheckInvariants(), "is empty but marked");
  level0.Unmark(level0.SlotOfTick(6));
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchAMiscountOfRemovedEntries) {
  TestWheel w(8);
  SetNineAtFive(w);
  ASSERT_TRUE(w.Remove(3));  // lazily: the entry stays in its list
  ASSERT_EQ(w.removed_in_lists(), 1u);
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  --WheelTestPeer::RemovedInLists(w);
  ExpectCaught(w.CheckInvariants(), "counted 0");
  ++WheelTestPeer::RemovedInLists(w);
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchATimerFiledAfterItsDeadline) {
  TestWheel w(8);
  SetNineAtFive(w);
  auto& e4 = WheelTestPeer::Entry(w, 4);
  e4.deadline = 2;  // earlier, yet left in tick 5's slot
  ExpectCaught(w.CheckInvariants(), "due at 2 is in slot 5 of level 0");
  e4.deadline = 5;
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

TEST(WheelInvariants, CatchACoarseTimerFiledAfterItsDeadline) {
  // Level 0 of 2 slots a rotation, levels of 4 above: tick 40 is filed on
  // level 2, in its slot 5 (ticks 40 to 47).
  TestWheel w(2, {}, {}, /*level_slots=*/4);
  w.Set(1, 1, 40);
  ASSERT_EQ(w.CheckInvariants(), absl::OkStatus());
  auto& e = WheelTestPeer::Entry(w, WheelTestPeer::EntryIndex(w, 1u));
  // Earlier, yet left where it was: its slot comes too late for it (and a
  // remove would take it for a level-0 entry and leave it in its list).
  e.deadline = 1;
  ExpectCaught(w.CheckInvariants(), "is in slot 5 of level 2");
  e.deadline = 40;
  EXPECT_EQ(w.CheckInvariants(), absl::OkStatus());
}

}  // namespace invariants_test
}  // namespace internal
}  // namespace timingwheel
