// Internal: internal::KeyIndex growing in steps (docs/api.md E1: without
// expected_timers the index grows in bounded steps). While a growth moves
// the words to a table twice as large a few at a time, every lookup agrees
// with a plain map (a word lost or found twice between the two tables is
// the risk), inserts do bounded work, the growth ends before either table
// fills, and Clear, Reserve, erases and shrinks meet it correctly; a
// growth from a large table gives the old one back in pieces.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "key_index_checked.h"
#include "timingwheel/internal/wheel/key_index.h"

namespace timingwheel {
namespace internal {
namespace key_index_growth_test {

using key_index_testing::Checked;
using key_index_testing::EraseDownTo;
using key_index_testing::Fill;
using key_index_testing::GrowInto;
using key_index_testing::GrowthEmptying;
using key_index_testing::HomeFor;

// Inserts alone, past five growths in steps: each starts when the table is
// 3/4 full, every insert during it does exactly kGrowStep words of its work,
// and it ends before either table fills (the old one stays below 25/32
// while the new one is being emptied); memory is the two tables meanwhile
// and the new one after. Every key stays found along the way.
TEST(KeyIndexTest, GrowthEndsInTimeWithBoundedStepsDrivenByInserts) {
  std::mt19937 rng(21);
  Checked c;
  constexpr std::size_t kStep = KeyIndex::kGrowStep;
  std::uint32_t e = 0;
  int growths = 0;
  std::size_t from = 0, start_size = 0;
  while (c.index().capacity() < (std::size_t{1} << 17) ||
         c.index().Resizing()) {
    const bool growing = c.index().Growing();
    const bool emptying = GrowthEmptying(c.index());
    const std::size_t capacity = c.index().capacity();
    const std::size_t left = c.index().ResizeWorkLeft();
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
    const std::size_t n = c.index().size();
    if (!growing && c.index().Growing()) {
      ++growths;
      from = capacity;
      start_size = n - 1;
      EXPECT_GE(from, KeyIndex::kResizeMinCapacity);
      EXPECT_EQ(start_size, from / 4 * 3);  // full: at load 3/4
      EXPECT_EQ(c.index().ResizeWorkLeft(), 3 * from - kStep);
      c.ExpectConsistent();
    } else if (growing) {
      if (c.index().Growing()) {
        EXPECT_EQ(left - c.index().ResizeWorkLeft(), kStep);
        EXPECT_EQ(c.index().MemoryBytes(), 3 * from * 8);
        EXPECT_LE(c.index().MemoryBytes(), 32 * n);  // bytes a key
      } else {
        EXPECT_LE(left, kStep);  // the last step did what was left
        EXPECT_EQ(c.index().capacity(), 2 * from);
        EXPECT_EQ(c.index().MemoryBytes(), 2 * from * 8);
        // Phase 1 in 2C / kGrowStep inserts, phase 2 in C / kGrowStep.
        EXPECT_LE(n - start_size, 3 * from / kStep);
        c.ExpectConsistent();
      }
      if (emptying) {
        EXPECT_EQ(capacity, from);
      }
      if (GrowthEmptying(c.index())) {
        EXPECT_LT(n * 32, from * 25);
      }
      if (emptying != GrowthEmptying(c.index())) c.ExpectConsistent();
      if (n % 500 == 0) c.ExpectConsistent();
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(growths, 5);  // 4096 words -> 2^17
  EXPECT_GT(c.old_hits(), 1000);
  c.ExpectConsistent();
}

// A growth started early (StartGrowth, from half full) spreads its 3C words
// of work over the inserts left until the table would be full: each insert
// does the same share, never more than kGrowStep, and the growth is over by
// the time the table reaches 3/4 (from load 45/64 on, as soon as one
// started at 3/4 would be), lookups finding every word throughout.
// Below half full, or during a resize, StartGrowth does nothing.
TEST(KeyIndexTest, EarlyGrowthEndsByTheTimeTheTableWouldBeFull) {
  constexpr std::size_t kC = 16384;
  for (std::size_t start :
       {kC / 2, kC / 8 * 5, kC / 100 * 72, kC / 4 * 3 - 1}) {
    SCOPED_TRACE(start);
    std::mt19937 rng(static_cast<std::uint32_t>(start));
    Checked c;
    Fill(c, rng, static_cast<std::uint32_t>(kC / 2 - 1));
    ASSERT_EQ(c.index().capacity(), kC);
    EXPECT_FALSE(c.index().WantsEarlyGrowth());  // below half full
    c.StartGrowth();
    EXPECT_FALSE(c.index().Resizing());
    std::uint32_t e = static_cast<std::uint32_t>(c.truth().size());
    while (c.index().size() < start) {
      c.Insert(static_cast<std::uint32_t>(rng()), e++);
    }
    ASSERT_FALSE(c.index().Resizing());
    ASSERT_TRUE(c.index().WantsEarlyGrowth());
    c.StartGrowth();
    ASSERT_TRUE(c.index().Growing());
    EXPECT_FALSE(c.index().WantsEarlyGrowth());  // one at a time
    EXPECT_EQ(c.index().ResizeWorkLeft(), 3 * kC);
    const std::size_t room = kC / 4 * 3 - start;
    const std::size_t step =
        std::min(KeyIndex::kGrowStep, (3 * kC + room - 1) / room);
    c.ExpectConsistent();
    bool emptying = true;
    while (c.index().Growing()) {
      const std::size_t left = c.index().ResizeWorkLeft();
      c.Insert(static_cast<std::uint32_t>(rng()), e++);
      if (c.index().Growing()) {
        ASSERT_EQ(left - c.index().ResizeWorkLeft(), step);
      } else {
        ASSERT_LE(left, step);  // the last step did what was left
      }
      // Over before the table was full, or (from load 45/64, where the step
      // is kGrowStep) as soon as a growth started at 3/4 would be.
      ASSERT_LE(c.index().size(),
                std::max(kC / 4 * 3, start + 3 * kC / KeyIndex::kGrowStep));
      if (emptying != GrowthEmptying(c.index())) {
        emptying = false;
        c.ExpectConsistent();
      }
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_EQ(c.index().capacity(), 2 * kC);
    EXPECT_EQ(c.index().MemoryBytes(), 2 * kC * 8);
    c.ExpectConsistent();
  }
}

// Tables that grow in steps from 8 words on, so that runs wrap around the
// ends of small tables all the time, with clustered hashes (one of them the
// tombstone's own in a third of the seeds), filled and drained in waves so
// that growths and shrinks alternate, and every kind of call interleaved
// with both: inserts (which step growths and shrink migrations), erases,
// renames, caller steps of small random budgets, shrinks started, Reserve
// and Clear. Every lookup agrees with the truth after every call.
TEST(KeyIndexTest, RandomOpsDuringGrowthsAndShrinksMatchTheTruth) {
  long old_hits = 0, wrapped = 0, straddling = 0;
  long growths = 0, grown_while_emptying = 0, grown_while_migrating = 0;
  long early_growths = 0;
  long growth_ending_shrink = 0, shrink_soon_after_growth = 0;
  long reserved_mid_growth = 0, rehashed_mid_growth = 0;
  long cleared_emptying = 0, cleared_migrating = 0;
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    Checked c(std::size_t{8} << (seed % 6));
    const std::uint32_t distinct = 2 + seed % 9;
    std::vector<std::uint32_t> hashes(distinct);
    for (std::size_t i = 0; i < distinct; ++i) {
      do {
        hashes[i] = static_cast<std::uint32_t>(rng());
      } while (i % 2 == 1 && HomeFor(hashes[i], 64) != 63);
    }
    if (seed % 3 == 0) hashes[0] = 0xFFFFFFFF;
    // One insert in eight uses a clustered hash: with waves of a thousand
    // words more would make the runs, not the resizes, the whole story.
    auto hash = [&] {
      return rng() % 8 ? static_cast<std::uint32_t>(rng())
                       : hashes[rng() % distinct];
    };
    std::uint32_t next_entry = 0;
    bool filling = true;
    // Waves up to 1500 words: tables of 512 and 1024 words take 24 and 48
    // inserts to grow.
    auto new_high = [&] { return 40 + rng() % 1500; };
    auto new_low = [&] { return rng() % 50; };
    std::size_t high = new_high(), low = new_low();
    int since_growth = 1000;  // ops since a growth ended
    for (int step = 0; step < 5000; ++step) {
      const std::size_t n = c.truth().size();
      if (filling && n >= high) filling = false, low = new_low();
      if (!filling && n <= low) filling = true, high = new_high();
      KeyIndex& index = c.index();
      const bool growing = index.Growing();
      const bool emptying = GrowthEmptying(index);
      const bool shrinking = index.Shrinking();
      const std::size_t capacity = index.capacity();
      const std::uint32_t r = rng() % 32;
      const bool inserting = r < 20 || (r < 28 && index.Shrinking());
      if (r < 20) {
        if (n == 0 || (rng() % 8 != 0) == filling) {
          c.Insert(hash(), next_entry++);
        } else {
          ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
        }
      } else if (r < 22) {
        if (n > 0) c.Rename(c.RandomEntry(rng), next_entry++);
      } else if (r < 28) {
        if (index.Shrinking() && index.capacity() <= 4096 && rng() % 16 == 0) {
          // A burst of inserts, far faster than the caller's steps: the
          // shrink ends (or, still emptying, is dropped) and a growth starts
          // before any table is full.
          const std::size_t burst = index.capacity() / 4 * 3 + 1 - n;
          for (std::size_t b = 0; b < burst && !index.Growing(); ++b) {
            c.Insert(hash(), next_entry++);
            if (b % 64 == 0) c.ExpectConsistent();
          }
          filling = false;
        } else if (index.Resizing()) {
          c.Step(1 + rng() % 4);
        } else if (index.WantsEarlyGrowth() && rng() % 2 == 0) {
          c.StartGrowth();
          early_growths += index.Growing();
        } else if (rng() % 4 == 0) {
          c.StartShrink();
          shrink_soon_after_growth += since_growth < 100 && index.Shrinking();
        }
      } else if (r < 30) {
        ASSERT_FALSE(c.Erase(next_entry + 1000));  // absent stays absent
        index.Prefetch(hash());
      } else if (r < 31) {
        // Mostly within the room the table has, sometimes beyond it.
        index.Reserve(rng() % 4 ? rng() % (n + 20) : n + rng() % (2 * n + 20));
        if (growing) {
          ++reserved_mid_growth;
          rehashed_mid_growth += !index.Resizing();
        }
      } else if (rng() % 8 == 0) {
        c.Clear();
        cleared_emptying += emptying;
        cleared_migrating += growing && !emptying;
      }
      if (!growing && index.Growing()) {
        ++growths;
        growth_ending_shrink += shrinking;  // dropped, or migrated first
      }
      since_growth = growing && !index.Growing() ? 0 : since_growth + 1;
      // One growth at a time: inserts never grow the table further while
      // one is under way (Reserve and Clear may end it).
      if (inserting && growing && !emptying && index.capacity() > capacity) {
        ++grown_while_migrating;
      }
      if (inserting && emptying && index.capacity() > 2 * capacity) {
        ++grown_while_emptying;
      }
      // After every call around a growth, now and then otherwise (the
      // shrink tests, key_index_shrink_test.cc, check every call of a
      // shrink).
      if (growing || index.Growing() || n < 128 || step % 16 == 0) {
        c.ExpectConsistent();
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    old_hits += c.old_hits();
    wrapped += c.wrapped_old_hits();
    straddling += c.straddling_old_hits();
  }
  EXPECT_EQ(grown_while_migrating, 0);
  EXPECT_EQ(grown_while_emptying, 0);
  // The paths this test is about were taken, many times.
  EXPECT_GT(growths, 100);
  EXPECT_GT(early_growths, 30);
  EXPECT_GT(old_hits, 10000);
  EXPECT_GT(wrapped, 300);
  EXPECT_GT(straddling, 1000);
  EXPECT_GT(growth_ending_shrink, 50);
  EXPECT_GT(shrink_soon_after_growth, 50);
  EXPECT_GT(reserved_mid_growth, 200);
  EXPECT_GT(rehashed_mid_growth, 20);
  EXPECT_GT(cleared_emptying, 20);
  EXPECT_GT(cleared_migrating, 3);
}

// Clear during a growth ends it with the table that needs no emptying: the
// old one while the new one is still being emptied, the new one once
// migrating. Nothing is found afterwards, and inserts work on.
TEST(KeyIndexTest, ClearDuringAGrowthEndsIt) {
  for (int phase : {1, 2}) {
    SCOPED_TRACE(phase);
    std::mt19937 rng(31);
    Checked c;
    GrowInto(c, rng, phase, 0);
    const auto [gone, gone_hash] = *c.truth().begin();
    c.Clear();
    EXPECT_FALSE(c.index().Resizing());
    EXPECT_EQ(c.index().capacity(), phase == 1 ? 16384u : 32768u);
    EXPECT_EQ(c.index().MemoryBytes(), c.index().capacity() * 8);
    EXPECT_EQ(c.index().Find(gone_hash, [](std::uint32_t) { return true; }),
              KeyIndex::kAbsent);
    EXPECT_FALSE(c.Erase(gone));
    Fill(c, rng, 20'000, 100'000);
    c.ExpectConsistent();
  }
}

// Reserve during a growth: room the growth's table has changes nothing (the
// growth goes on and ends as usual); more room ends it with one rehash.
TEST(KeyIndexTest, ReserveDuringAGrowth) {
  for (int phase : {1, 2}) {
    SCOPED_TRACE(phase);
    std::mt19937 rng(37);
    {
      Checked c;
      GrowInto(c, rng, phase, 0);
      c.index().Reserve(20'000);  // 32768 words hold 24576
      EXPECT_TRUE(c.index().Growing());
      c.ExpectConsistent();
      while (c.Step(1000)) {
      }
      EXPECT_EQ(c.index().capacity(), 32768u);
      c.ExpectConsistent();
    }
    {
      Checked c;
      GrowInto(c, rng, phase, 0);
      c.index().Reserve(30'000);
      EXPECT_FALSE(c.index().Resizing());
      EXPECT_EQ(c.index().capacity(), 65536u);
      EXPECT_EQ(c.index().MemoryBytes(), 65536u * 8);
      c.ExpectConsistent();
      Fill(c, rng, 15'000, 100'000);  // no growth below the room reserved
      EXPECT_FALSE(c.index().Resizing());
      EXPECT_EQ(c.index().capacity(), 65536u);
    }
  }
}

// A shrink still emptying its table when inserts fill the large one is
// dropped for a growth, which ends as usual.
TEST(KeyIndexTest, GrowthDropsAShrinkStillEmptyingItsTable) {
  std::mt19937 rng(41);
  Checked c;
  Fill(c, rng, 10'000);  // 16384 words
  EraseDownTo(c, rng, 100);
  c.StartShrink();  // to 512 words
  ASSERT_TRUE(c.Step(100));
  std::uint32_t e = 100'000;
  while (!c.index().Growing()) {
    ASSERT_TRUE(c.index().Shrinking());
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
    if (e % 1000 == 0) c.ExpectConsistent();
  }
  EXPECT_EQ(c.index().size(), 16384u / 4 * 3 + 1);
  EXPECT_EQ(c.index().MemoryBytes(), 3 * 16384u * 8);  // no 512-word table
  c.ExpectConsistent();
  while (c.index().Growing()) c.Insert(static_cast<std::uint32_t>(rng()), e++);
  EXPECT_EQ(c.index().capacity(), 32768u);
  c.ExpectConsistent();
}

// Erases do no growth work: a growth they leave under way waits, every
// operation working meanwhile, until ResizeStep (the wheel's compaction)
// ends it; a shrink is wanted right after if the live set fell enough.
TEST(KeyIndexTest, ErasesLeaveAGrowthUnderWayUntilResizeStepEndsIt) {
  for (int phase : {1, 2}) {
    SCOPED_TRACE(phase);
    std::mt19937 rng(43);
    Checked c;
    GrowInto(c, rng, phase, 0);
    const std::size_t left = c.index().ResizeWorkLeft();
    EraseDownTo(c, rng, 1000);
    EXPECT_EQ(c.index().ResizeWorkLeft(), left);
    EXPECT_FALSE(c.index().WantsShrink());  // not during a growth
    c.ExpectConsistent();
    std::uint32_t e = 1'000'000;
    while (c.Step(777)) {
      ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
      c.Insert(static_cast<std::uint32_t>(rng()), e++);
    }
    EXPECT_EQ(c.index().capacity(), 32768u);
    c.ExpectConsistent();
    EXPECT_TRUE(c.index().WantsShrink());  // 1000 * 16 < 32768
    c.StartShrink();
    while (c.Step(777)) {
    }
    EXPECT_EQ(c.index().capacity(), 4096u);  // 1000 at load <= 3/8
    c.ExpectConsistent();
  }
}

// A growth from a table of 16 MiB or more gives the old table back in 2 MiB
// pieces as the cursor passes them, so that freeing it at the end does not
// stop the loop for as long as unmapping 16 MiB at once takes; lookups, which
// inserts drive all through the growth, never read the part given back (it
// reads as zeros there: entry 0, which never lives).
TEST(KeyIndexTest, GrowthOfALargeTableGivesTheOldOneBackInPieces) {
  constexpr std::size_t kLarge = std::size_t{1} << 21;  // 16 MiB of words
  constexpr std::size_t kPiece = std::size_t{1} << 18;  // 2 MiB of words
  std::mt19937 rng(59);
  Checked c;
  std::uint32_t e = 1;  // entry 0 never lives
  while (!(c.index().capacity() == kLarge && c.index().Growing())) {
    ASSERT_NO_FATAL_FAILURE(c.Insert(static_cast<std::uint32_t>(rng()), e++));
  }
  while (c.index().capacity() == kLarge) {  // emptying the doubled table
    ASSERT_NO_FATAL_FAILURE(c.Insert(static_cast<std::uint32_t>(rng()), e++));
  }
  ASSERT_EQ(c.index().OldWordsGivenBack(), 0u);
  // Past three of the old table's eight pieces, on inserts alone.
  while (c.index().ResizeWorkLeft() > kLarge - 3 * kPiece) {
    ASSERT_NO_FATAL_FAILURE(c.Insert(static_cast<std::uint32_t>(rng()), e++));
  }
  ASSERT_TRUE(c.index().Growing());
  EXPECT_EQ(c.index().OldWordsGivenBack(), 3 * kPiece);
  c.ExpectConsistent();  // the matcher complains about entry 0
  for (std::uint32_t h = 0; h < 20'000; ++h) {
    ASSERT_EQ(c.Find(h * 214'013u, 0), KeyIndex::kAbsent);
  }
  while (c.index().Growing()) {
    ASSERT_NO_FATAL_FAILURE(c.Insert(static_cast<std::uint32_t>(rng()), e++));
  }
  EXPECT_EQ(c.index().capacity(), 2 * kLarge);
  EXPECT_EQ(c.index().OldWordsGivenBack(), 0u);
  c.ExpectConsistent();
}

}  // namespace key_index_growth_test
}  // namespace internal
}  // namespace timingwheel
