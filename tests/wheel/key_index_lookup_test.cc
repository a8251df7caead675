// Internal, below the public API: the key lookup that docs/api.md S2-S4
// (one timer per key, found again by Move and Remove) rest on.
//
// internal::KeyIndex without resizes under way: every lookup after every
// insert and erase agrees with a plain map, including clusters that wrap
// around the table's end, where backward-shift deletion is easiest to get
// wrong, and an insert lands where lookups find it whatever changed the
// index between its lookup and the insert. Growths are in
// key_index_growth_test.cc, shrinks in key_index_shrink_test.cc.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "key_index_checked.h"
#include "timingwheel/internal/wheel/key_index.h"

namespace timingwheel {
namespace internal {
namespace key_index_lookup_test {

using key_index_testing::Checked;

TEST(KeyIndexTest, EmptyFindsNothing) {
  KeyIndex index;
  EXPECT_EQ(index.Find(7, [](std::uint32_t) { return true; }),
            KeyIndex::kAbsent);
  index.Prefetch(7);  // no table yet: must not touch memory
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.capacity(), 0u);
  EXPECT_FALSE(index.WantsShrink());
  index.StartShrink();  // nothing to shrink
  EXPECT_FALSE(index.Resizing());
  EXPECT_FALSE(index.ResizeStep(100));
}

TEST(KeyIndexTest, GrowsAtThreeQuartersAndKeepsEverything) {
  Checked c;
  for (std::uint32_t e = 0; e < 1000; ++e) {
    c.Insert(e * 2654435761u, e);
    ASSERT_LE(c.index().size() * 4, c.index().capacity() * 3);
  }
  c.ExpectConsistent();
}

TEST(KeyIndexTest, EqualHashesAreToldApartByTheMatcher) {
  Checked c;
  for (std::uint32_t e = 0; e < 50; ++e) c.Insert(42, e);  // one long run
  c.ExpectConsistent();
  for (std::uint32_t e = 0; e < 50; e += 3) EXPECT_FALSE(c.Erase(e));
  c.ExpectConsistent();
}

// Few distinct hashes in a small table: long runs that wrap past the end,
// erased from the middle in random order, checked after every step.
TEST(KeyIndexTest, RandomOpsOnClusteredHashesMatchTheTruth) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Checked c;
    const std::uint32_t distinct = 1 + seed % 9;
    std::vector<std::uint32_t> hashes(distinct);
    for (auto& h : hashes) h = static_cast<std::uint32_t>(rng());
    std::uint32_t next_entry = 0;
    for (int step = 0; step < 400; ++step) {
      if (c.truth().empty() || rng() % 3 != 0) {
        c.Insert(hashes[rng() % distinct], next_entry++);
      } else {
        ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
      }
      ASSERT_FALSE(c.Erase(next_entry + 1000));  // absent stays absent
      c.ExpectConsistent();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Insert puts the word where FindBeforeInsert's walk ended unless the index
// changed since in a way that moves that place: erases from the middle of
// the run (which shift it back, so the remembered word would sit past a
// gap), other inserts (which may fill it), resize steps and the switch to
// a new table, a Clear. Few distinct hashes make long runs that these hit.
TEST(KeyIndexTest, AnInsertLandsWhereLookupsFindItWhateverHappensBetween) {
  long erased_between = 0, switched_between = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    Checked c(/*grow_in_steps_from=*/64);
    const std::uint32_t distinct = 1 + seed % 5;
    std::vector<std::uint32_t> hashes(distinct);
    for (auto& h : hashes) h = static_cast<std::uint32_t>(rng());
    std::uint32_t next_entry = 0;
    for (int step = 0; step < 600; ++step) {
      const std::uint32_t hash = hashes[rng() % distinct];
      const std::uint32_t entry = next_entry++;
      c.InsertAfter(hash, entry, [&] {
        const std::size_t capacity = c.index().capacity();
        switch (rng() % 8) {
          case 0:
          case 1:
          case 2:
            if (!c.truth().empty()) {
              ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
              ++erased_between;
            }
            break;
          case 3:
            c.Insert(hashes[rng() % distinct], next_entry++);
            break;
          case 4:
            if (c.index().Resizing()) c.Step(1 + rng() % 16);
            break;
          case 5:
            c.StartGrowth();
            c.StartShrink();
            break;
          case 6:
            if (rng() % 16 == 0) c.Clear();
            break;
          default:
            break;
        }
        switched_between += c.index().capacity() != capacity;
      });
      c.ExpectConsistent();
      if (::testing::Test::HasFatalFailure()) return;
      if (rng() % 4 == 0 && !c.truth().empty()) {
        ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
      }
    }
  }
  // The cases the test is for did happen.
  EXPECT_GT(erased_between, 1000);
  EXPECT_GT(switched_between, 10);
}

TEST(KeyIndexTest, SetEntryAtKeepsTheHash) {
  Checked c;
  for (std::uint32_t e = 0; e < 20; ++e) c.Insert(e % 3, e);
  c.Rename(7, 1000);
  c.Rename(0, 0x7FFFFFFF);  // the largest entry the pool hands out
  c.ExpectConsistent();
  EXPECT_FALSE(c.Erase(1000));
  c.ExpectConsistent();
}

TEST(KeyIndexTest, ClearKeepsCapacityAndForgetsEverything) {
  Checked c;
  for (std::uint32_t e = 0; e < 100; ++e) c.Insert(e, e);
  const std::size_t capacity = c.index().capacity();
  c.index().Clear();
  EXPECT_EQ(c.index().size(), 0u);
  EXPECT_EQ(c.index().capacity(), capacity);
  EXPECT_EQ(c.index().Find(5, [](std::uint32_t) { return true; }),
            KeyIndex::kAbsent);
}

TEST(KeyIndexTest, ReserveMakesRoomWithoutLosingWords) {
  Checked c;
  for (std::uint32_t e = 0; e < 10; ++e) c.Insert(e * 7919u, e);
  c.index().Reserve(100'000);
  EXPECT_GE(c.index().capacity() * 3, 100'000u * 4);
  c.ExpectConsistent();
  EXPECT_EQ(c.index().MemoryBytes(), c.index().capacity() * 8);
}

}  // namespace key_index_lookup_test
}  // namespace internal
}  // namespace timingwheel
