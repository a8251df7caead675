// Internal: internal::KeyIndex giving memory back (docs/api.md E9). A
// shrink moves the words to a smaller table in steps of bounded work while
// every lookup agrees with a plain map; inserts finish its migration
// before the small table fills; Clear and Reserve end it correctly; the
// thresholds leave room both ways, so the table does not oscillate; and
// lookups never read the part of the old table already given back.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "key_index_checked.h"
#include "timingwheel/internal/wheel/key_index.h"

namespace timingwheel {
namespace internal {
namespace key_index_shrink_test {

using key_index_testing::Checked;
using key_index_testing::EraseDownTo;
using key_index_testing::Fill;
using key_index_testing::FinishGrowth;
using key_index_testing::HomeFor;
using key_index_testing::StepIntoMigration;

// Clustered hashes as in RandomOpsOnClusteredHashesMatchTheTruth
// (key_index_lookup_test.cc), with the table filled and drained in waves so
// that it grows and shrinks, and every operation interleaved with shrink
// steps of small random budgets: words move between the tables mid-run,
// runs wrap past the old table's end, erases leave tombstones there. One
// hash is all ones, the tombstone's own hash, in a third of the seeds.
TEST(KeyIndexTest, RandomOpsDuringShrinksMatchTheTruth) {
  long old_hits = 0, wrapped = 0, straddling = 0, shrinks_done = 0;
  long grown_mid_shrink = 0, cleared_mid_shrink = 0;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    Checked c;
    const std::uint32_t distinct = 1 + seed % 9;
    std::vector<std::uint32_t> hashes(distinct);
    for (std::size_t i = 0; i < distinct; ++i) {
      // Every other hash has its home in the last 64th of any table, so
      // that its runs wrap around the end.
      do {
        hashes[i] = static_cast<std::uint32_t>(rng());
      } while (i % 2 == 1 && HomeFor(hashes[i], 64) != 63);
    }
    if (seed % 3 == 0) hashes[0] = 0xFFFFFFFF;
    std::uint32_t next_entry = 0;
    bool filling = true;
    std::size_t high = 40 + rng() % 300, low = rng() % 12;
    for (int step = 0; step < 2500; ++step) {
      const std::size_t n = c.truth().size();
      if (filling && n >= high) filling = false, low = rng() % 12;
      if (!filling && n <= low) filling = true, high = 40 + rng() % 300;
      const bool was_shrinking = c.index().Resizing();
      const std::size_t capacity = c.index().capacity();
      const std::uint32_t r = rng() % 32;
      if (r < 12) {
        if (n == 0 || (rng() % 4 != 0) == filling) {
          c.Insert(hashes[rng() % distinct], next_entry++);
        } else {
          ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
        }
      } else if (r < 15) {
        if (n > 0) c.Rename(c.RandomEntry(rng), next_entry++);
      } else if (r < 26) {
        if (c.index().Resizing()) {
          shrinks_done += !c.Step(1 + rng() % 8);
        } else if (rng() % 4 == 0) {
          c.StartShrink();
        }
      } else if (r < 29) {
        ASSERT_FALSE(c.Erase(next_entry + 1000));  // absent stays absent
        c.index().Prefetch(hashes[rng() % distinct]);
      } else if (r < 31) {
        c.index().Reserve(rng() % (2 * n + 20));
        if (was_shrinking && c.index().capacity() > capacity)
          ++grown_mid_shrink;
      } else if (rng() % 8 == 0) {
        c.Clear();
        cleared_mid_shrink += was_shrinking;
      }
      if (was_shrinking && r < 12 && c.index().capacity() > capacity)
        ++grown_mid_shrink;
      c.ExpectConsistent();
      if (::testing::Test::HasFatalFailure()) return;
    }
    old_hits += c.old_hits();
    wrapped += c.wrapped_old_hits();
    straddling += c.straddling_old_hits();
  }
  // The paths this test is about were taken, many times.
  EXPECT_GT(shrinks_done, 50);
  EXPECT_GT(old_hits, 10000);
  EXPECT_GT(wrapped, 1000);
  EXPECT_GT(straddling, 1000);
  EXPECT_GT(grown_mid_shrink, 20);
  EXPECT_GT(cleared_mid_shrink, 10);
}

// 100k entries erased down to 300: a shrink gives the memory back in steps
// of bounded work while the survivors stay found and others come and go.
TEST(KeyIndexTest, ShrinkGivesMemoryBackInBoundedSteps) {
  std::mt19937 rng(11);
  Checked c;
  Fill(c, rng, 100'000);
  FinishGrowth(c);
  const std::size_t large = c.index().capacity();
  ASSERT_EQ(large, std::size_t{1} << 18);
  EraseDownTo(c, rng, 300);
  ASSERT_FALSE(c.index().Resizing());  // nothing happens by itself
  ASSERT_EQ(c.index().capacity(), large);
  ASSERT_TRUE(c.index().WantsShrink());

  c.StartShrink();
  ASSERT_TRUE(c.index().Resizing());
  EXPECT_FALSE(c.index().WantsShrink());
  // 300 words at load <= 3/8 take 1024, but a shrink divides the capacity
  // by kMaxShrinkFactor at most; the large table stays until the end.
  constexpr std::size_t kSmall = (1 << 18) / KeyIndex::kMaxShrinkFactor;
  EXPECT_EQ(c.index().MemoryBytes(), (large + kSmall) * 8);
  EXPECT_EQ(c.index().ResizeWorkLeft(), large + kSmall);
  c.ExpectConsistent();

  constexpr std::size_t kBudget = 97;
  std::size_t steps = 0;
  std::uint32_t next_entry = 1'000'000;
  bool more = true;
  while (more) {
    more = c.Step(kBudget);
    ++steps;
    ASSERT_FALSE(::testing::Test::HasFailure()) << "step " << steps;
    if (more) {
      EXPECT_EQ(c.index().MemoryBytes(), (large + kSmall) * 8);
    }
    // Churn at a constant live count, in whichever table the words are
    // (while migrating, each insert scans some old positions too).
    c.Insert(static_cast<std::uint32_t>(rng()), next_entry++);
    ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
    if (steps % 64 == 0) c.ExpectConsistent();
  }
  // The shrink could not finish sooner than its budget allows for emptying
  // the new table and scanning the live part of the old one (most of it),
  // inserts' scans included.
  EXPECT_GT(steps, kSmall / kBudget +
                       large / 2 / (kBudget + 4 * KeyIndex::kMaxShrinkFactor));
  EXPECT_EQ(c.index().capacity(), kSmall);
  EXPECT_EQ(c.index().MemoryBytes(), kSmall * 8);
  EXPECT_FALSE(c.index().WantsShrink());  // small now
  EXPECT_GT(c.old_hits(), 1000);
  c.ExpectConsistent();
}

TEST(KeyIndexTest, ClearDuringAShrinkEndsItWithTheSmallTable) {
  for (int more_steps : {-1, 0, 20}) {  // -1: while emptying the new table
    SCOPED_TRACE(more_steps);
    std::mt19937 rng(3);
    Checked c;
    Fill(c, rng, 10'000);
    EraseDownTo(c, rng, 100);
    ASSERT_EQ(c.index().capacity(), 16384u);
    c.StartShrink();
    ASSERT_TRUE(c.index().Resizing());
    if (more_steps < 0) {
      ASSERT_TRUE(c.Step(100));
    } else {
      StepIntoMigration(c, 64, more_steps);
    }
    const std::uint32_t gone = c.truth().begin()->first;
    const std::uint32_t gone_hash = c.truth().begin()->second;
    c.Clear();
    EXPECT_FALSE(c.index().Resizing());
    EXPECT_EQ(c.index().size(), 0u);
    EXPECT_EQ(c.index().capacity(), 512u);  // 100 words at load <= 3/8
    EXPECT_EQ(c.index().MemoryBytes(), 512u * 8);
    EXPECT_EQ(c.index().Find(gone_hash, [](std::uint32_t) { return true; }),
              KeyIndex::kAbsent);
    EXPECT_FALSE(c.Erase(gone));
    Fill(c, rng, 300, 50'000);
    c.ExpectConsistent();
  }
}

// Reserve sets a floor: a reserved table is not shrunk away under the
// caller, and a shrink that would go below the floor does not happen.
TEST(KeyIndexTest, ReserveDuringAShrink) {
  std::mt19937 rng(5);
  {  // Room the shrink's table has: nothing changes, the shrink ends well.
    Checked c;
    Fill(c, rng, 10'000);
    EraseDownTo(c, rng, 100);
    c.StartShrink();
    StepIntoMigration(c, 64, 10);
    c.index().Reserve(300);  // 512 words hold 384
    EXPECT_TRUE(c.index().Resizing());
    EXPECT_EQ(c.index().capacity(), 512u);
    c.ExpectConsistent();
    while (c.Step(50)) {
    }
    EXPECT_EQ(c.index().capacity(), 512u);
    c.ExpectConsistent();
  }
  {  // More room than the new table has, while migrating: a growth ends it.
    Checked c;
    Fill(c, rng, 10'000, 10'000);
    EraseDownTo(c, rng, 100);
    c.StartShrink();
    StepIntoMigration(c, 64, 10);
    c.index().Reserve(2000);
    EXPECT_FALSE(c.index().Resizing());
    EXPECT_EQ(c.index().capacity(), 4096u);
    c.ExpectConsistent();
  }
  {  // More room than the new table has, while emptying it: abandoned.
    Checked c;
    Fill(c, rng, 10'000, 20'000);
    EraseDownTo(c, rng, 100);
    c.StartShrink();
    ASSERT_TRUE(c.Step(100));
    c.index().Reserve(2000);
    EXPECT_FALSE(c.index().Resizing());
    EXPECT_EQ(c.index().capacity(), 16384u);
    c.ExpectConsistent();
    // The floor is 4096 words: the next shrink stops there.
    ASSERT_TRUE(c.index().WantsShrink());
    c.StartShrink();
    while (c.Step(1000)) {
    }
    EXPECT_EQ(c.index().capacity(), 4096u);
    c.ExpectConsistent();
  }
  {  // A floor at the capacity: no shrink wanted until Reserve(0).
    Checked c;
    c.index().Reserve(100'000);
    Fill(c, rng, 100'000, 30'000);
    EraseDownTo(c, rng, 10);
    EXPECT_FALSE(c.index().WantsShrink());
    c.StartShrink();
    EXPECT_FALSE(c.index().Resizing());
    c.index().Reserve(0);
    EXPECT_TRUE(c.index().WantsShrink());
  }
}

// Inserting while a shrink migrates: each insert scans old positions too,
// enough that the migration ends before the smaller table is full, however
// few steps its caller spends; only then does the table grow.
TEST(KeyIndexTest, InsertsFinishAShrinksMigrationBeforeItsTableIsFull) {
  std::mt19937 rng(9);
  Checked c;
  Fill(c, rng, 10'000);
  EraseDownTo(c, rng, 100);
  c.StartShrink();
  StepIntoMigration(c, 64, 30);
  ASSERT_EQ(c.index().capacity(), 512u);
  std::uint32_t e = 100'000;
  while (c.index().Resizing()) {
    ASSERT_LT(c.index().size(), 384u);  // 512 * 3/4: full
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
    if (e % 16 == 0) c.ExpectConsistent();
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_LE(c.index().size(), 384u);
  EXPECT_EQ(c.index().capacity(), 512u);
  EXPECT_EQ(c.index().MemoryBytes(), 512u * 8);
  c.ExpectConsistent();
  while (c.index().capacity() == 512) {
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
  }
  EXPECT_EQ(c.index().size(), 385u);  // the 385th word did not fit 512 * 3/4
  EXPECT_EQ(c.index().capacity(), 1024u);  // small: grown at once
  EXPECT_FALSE(c.index().Resizing());
  c.ExpectConsistent();
}

// Inserting while the new table is being emptied: once the live set would
// fill more than half of it, the shrink is abandoned when it would start
// migrating (it would be too tight); the large table then simply stays.
TEST(KeyIndexTest, ShrinkOutgrownBeforeMigratingIsAbandoned) {
  std::mt19937 rng(13);
  Checked c;
  Fill(c, rng, 10'000);
  EraseDownTo(c, rng, 100);
  c.StartShrink();  // to 512 words
  ASSERT_TRUE(c.Step(100));
  Fill(c, rng, 200, 100'000);  // 300 live words: over half of 512
  while (c.Step(100)) {
  }
  EXPECT_EQ(c.index().capacity(), 16384u);
  c.ExpectConsistent();
  EXPECT_TRUE(c.index().WantsShrink());  // and a new one aims higher
  c.StartShrink();
  while (c.Step(100)) {
  }
  EXPECT_EQ(c.index().capacity(), 1024u);
  c.ExpectConsistent();
}

// No oscillation: after a shrink the live set must double before the table
// grows, and after a growth fall to a sixth before it shrinks again.
TEST(KeyIndexTest, ThresholdsLeaveRoomBothWays) {
  std::mt19937 rng(17);
  Checked c;
  Fill(c, rng, 40'000);       // 65536 words
  EraseDownTo(c, rng, 5000);  // load 5000/65536: not yet sparse
  std::uint32_t e = 1'000'000;
  while (!c.index().WantsShrink()) {
    ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
  }
  EXPECT_LT(c.truth().size() * 16, c.index().capacity());
  EXPECT_GE((c.truth().size() + 1) * 16, c.index().capacity());
  c.StartShrink();
  while (c.Step(256)) {
  }
  const std::size_t shrunk_to = c.index().capacity();
  const std::size_t live = c.truth().size();
  EXPECT_LE(live * 8, shrunk_to * 3);   // load <= 3/8
  EXPECT_GT(live * 16, shrunk_to * 3);  // load > 3/16
  EXPECT_FALSE(c.index().WantsShrink());
  while (c.index().capacity() == shrunk_to) {
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
    EXPECT_FALSE(c.index().WantsShrink());
  }
  EXPECT_GE(c.truth().size(), 2 * live);
  while (c.index().Growing()) {  // inserts drive the growth to its end
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
    EXPECT_FALSE(c.index().WantsShrink());
  }
  const std::size_t grown_to = c.index().capacity();
  const std::size_t peak = c.truth().size();
  while (!c.index().WantsShrink()) {
    ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
  }
  EXPECT_EQ(c.index().capacity(), grown_to);
  EXPECT_LE(c.truth().size() * 6, peak);
  c.ExpectConsistent();
}

// Erasing in the old table writes a tombstone whose hash is all ones: a
// lookup of that hash must never take it for a word.
TEST(KeyIndexTest, TombstonesAreNotWordsOfTheAllOnesHash) {
  Checked c;
  for (std::uint32_t e = 0; e < 40; ++e) c.Insert(0xFFFFFFFF, e);  // 64 words
  for (std::uint32_t e = 0; e < 30; ++e) ASSERT_FALSE(c.Erase(e));
  c.StartShrink();  // 10 words: to 32
  StepIntoMigration(c, 1, 0);
  ASSERT_EQ(c.index().capacity(), 32u);
  for (std::uint32_t e = 39; e >= 35; --e) ASSERT_FALSE(c.Erase(e));
  EXPECT_GT(c.old_hits(), 0);
  c.ExpectConsistent();
  while (c.Step(1)) c.ExpectConsistent();
  c.ExpectConsistent();
}

// The steepest shrink (by kMaxShrinkFactor) with inserts only and no caller
// steps once migrating: each insert scans at most 4 * kMaxShrinkFactor old
// positions, and the migration ends before the small table is full.
TEST(KeyIndexTest, SteepestShrinkEndsBeforeItsTableFillsOnInsertsAlone) {
  std::mt19937 rng(47);
  Checked c;
  Fill(c, rng, 150'000);
  FinishGrowth(c);
  ASSERT_EQ(c.index().capacity(), std::size_t{1} << 18);
  EraseDownTo(c, rng, 300);
  c.StartShrink();
  StepIntoMigration(c, 4096, 0);
  ASSERT_EQ(c.index().capacity(), 4096u);  // 2^18 / kMaxShrinkFactor
  std::uint32_t e = 1'000'000;
  std::size_t inserts = 0;
  while (c.index().Shrinking()) {
    ASSERT_LT(c.index().size(), 3072u);                // 4096 * 3/4: full
    c.Insert(static_cast<std::uint32_t>(rng()), e++);  // checks the bound
    if (++inserts % 64 == 0) c.ExpectConsistent();
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(c.index().capacity(), 4096u);
  EXPECT_GT(inserts,
            (std::size_t{1} << 18) / (4 * KeyIndex::kMaxShrinkFactor) / 2);
  c.ExpectConsistent();
}

// A shrink of a table of several huge pages gives back the pages its cursor
// has passed as it goes; lookups never read that part (they start at the
// cursor instead), so a given-back page, all zeros now, is never taken for
// words (a zero word would be hash 0, entry 0, which is not live here).
TEST(KeyIndexTest, LookupsNeverReadTheOldTablesGivenBackPart) {
  std::mt19937 rng(53);
  Checked c;
  Fill(c, rng, 700'000, 1);  // entry 0 never lives
  FinishGrowth(c);
  ASSERT_EQ(c.index().capacity(), std::size_t{1} << 20);  // 8 MiB
  EraseDownTo(c, rng, 16'000);
  c.StartShrink();
  StepIntoMigration(c, 4096, 0);
  // Past three of the four 2 MiB pieces.
  while (c.index().ResizeWorkLeft() > (std::size_t{1} << 18) / 2) {
    ASSERT_TRUE(c.Step(4096));
  }
  c.ExpectConsistent();  // the matcher complains about entry 0
  for (std::uint32_t h = 0; h < 20'000; ++h) {
    ASSERT_EQ(c.Find(h * 214'013u, 0), KeyIndex::kAbsent);
    c.index().Prefetch(h * 214'013u);
  }
  while (c.Step(4096)) {
  }
  c.ExpectConsistent();
}

}  // namespace key_index_shrink_test
}  // namespace internal
}  // namespace timingwheel
