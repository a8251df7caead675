// Internal, below the public API: the key lookup that docs/api.md S2-S4
// (one timer per key, found again by Move and Remove) rest on.
//
// internal::KeyIndex alone: every lookup after every insert and erase agrees
// with a plain map, including clusters that wrap around the table's end,
// where backward-shift deletion is easiest to get wrong; and the same while
// a shrink moves the words to a smaller table a few at a time, where a word
// lost or found twice between the two tables is the risk.
#include "timingwheel/internal/key_index.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace timingwheel {
namespace internal {
namespace {

constexpr std::size_t kOldBit = ~(~std::size_t{0} >> 1);

// The index's home function (Fibonacci hashing), so that the tests can tell
// a lookup whose probe run wrapped around the table's end.
std::size_t HomeFor(std::uint32_t hash, std::size_t capacity) {
  return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >>
                                  (64 - std::countr_zero(capacity)));
}

// An index plus the truth: entry -> hash. Entries play the keys' role: an
// entry matches a lookup when it is the entry looked for. Lookups fail the
// test if the index asks the matcher about anything but a live entry.
class Checked {
 public:
  void Insert(std::uint32_t hash, std::uint32_t entry) {
    ASSERT_EQ(truth_.count(entry), 0u);
    index_.ReserveOneMore();
    index_.Insert(hash, entry);
    truth_[entry] = hash;
  }
  std::size_t Find(std::uint32_t hash, std::uint32_t entry) {
    const std::size_t pos = index_.Find(hash, [&](std::uint32_t x) {
      EXPECT_EQ(truth_.count(x), 1u) << "matcher asked about non-entry " << x;
      return x == entry;
    });
    if (pos != KeyIndex::kAbsent && (pos & kOldBit) != 0) {
      ++old_hits_;
      // During migration ShrinkWorkLeft() is what the cursor has left of the
      // old table, so old_capacity_ - it is the cursor.
      const std::size_t p = pos ^ kOldBit;
      const std::size_t home = HomeFor(hash, old_capacity_);
      const std::size_t cursor = old_capacity_ - index_.ShrinkWorkLeft();
      EXPECT_GE(p, cursor) << "found a word the cursor has passed";
      if (p < home) ++wrapped_old_hits_;
      if (p < home ? cursor > 0 : home < cursor) ++straddling_old_hits_;
    }
    return pos;
  }
  bool Erase(std::uint32_t entry) {
    auto it = truth_.find(entry);
    const std::uint32_t hash = it == truth_.end() ? 0 : it->second;
    const std::size_t pos = Find(hash, entry);
    if (it == truth_.end()) return pos != KeyIndex::kAbsent;  // must be absent
    if (pos == KeyIndex::kAbsent) return true;                // lost
    EXPECT_EQ(index_.EntryAt(pos), entry);
    index_.EraseAt(pos);
    truth_.erase(it);
    return Find(hash, entry) != KeyIndex::kAbsent;  // gone, no stale copy
  }
  // Repoints entry's word to `fresh` through SetEntryAt.
  void Rename(std::uint32_t entry, std::uint32_t fresh) {
    auto it = truth_.find(entry);
    ASSERT_NE(it, truth_.end());
    ASSERT_EQ(truth_.count(fresh), 0u);
    const std::uint32_t hash = it->second;
    const std::size_t pos = Find(hash, entry);
    ASSERT_NE(pos, KeyIndex::kAbsent);
    truth_.erase(it);
    truth_[fresh] = hash;
    index_.SetEntryAt(pos, fresh);
    ASSERT_EQ(index_.EntryAt(pos), fresh);
    ASSERT_EQ(Find(hash, entry), KeyIndex::kAbsent);
    ASSERT_EQ(Find(hash, fresh), pos);
  }
  // Starts a shrink, remembering the table it moves away from.
  void StartShrink() {
    const std::size_t capacity = index_.capacity();
    index_.StartShrink();
    if (index_.Shrinking()) old_capacity_ = capacity;
  }
  // One ShrinkStep: a step that goes on did exactly `budget` words of work,
  // one that ends left none.
  bool Step(std::size_t budget) {
    const std::size_t before = index_.ShrinkWorkLeft();
    const bool more = index_.ShrinkStep(budget);
    EXPECT_EQ(more, index_.Shrinking());
    if (more) {
      EXPECT_EQ(before - index_.ShrinkWorkLeft(), budget);
    } else {
      EXPECT_EQ(index_.ShrinkWorkLeft(), 0u);
      EXPECT_EQ(index_.MemoryBytes(), index_.capacity() * 8);
    }
    return more;
  }
  // Every entry is found under its hash; an absent one is not.
  void ExpectConsistent() {
    ASSERT_EQ(index_.size(), truth_.size());
    ASSERT_LE(index_.size() * 4, index_.capacity() * 3);
    ASSERT_GE(index_.MemoryBytes(), index_.capacity() * 8);
    if (!index_.Shrinking()) {
      ASSERT_EQ(index_.MemoryBytes(), index_.capacity() * 8);
      ASSERT_EQ(index_.ShrinkWorkLeft(), 0u);
    }
    for (const auto& [entry, hash] : truth_) {
      const std::size_t pos = Find(hash, entry);
      ASSERT_NE(pos, KeyIndex::kAbsent) << "entry " << entry << " lost";
      ASSERT_EQ(index_.EntryAt(pos), entry);
    }
    std::set<std::uint32_t> seen;
    index_.ForEach([&](std::uint32_t e) {
      EXPECT_TRUE(seen.insert(e).second) << "entry " << e << " twice";
      EXPECT_EQ(truth_.count(e), 1u) << "stale entry " << e;
    });
    EXPECT_EQ(seen.size(), truth_.size());
  }
  void Clear() {
    index_.Clear();
    truth_.clear();
  }
  KeyIndex& index() { return index_; }
  const std::map<std::uint32_t, std::uint32_t>& truth() const { return truth_; }
  std::uint32_t RandomEntry(std::mt19937& rng) const {
    auto it = truth_.begin();
    std::advance(it, rng() % truth_.size());
    return it->first;
  }
  long old_hits() const { return old_hits_; }
  long wrapped_old_hits() const { return wrapped_old_hits_; }
  long straddling_old_hits() const { return straddling_old_hits_; }

 private:
  KeyIndex index_;
  std::map<std::uint32_t, std::uint32_t> truth_;
  std::size_t old_capacity_ = 0;
  long old_hits_ = 0;
  long wrapped_old_hits_ = 0;
  long straddling_old_hits_ = 0;
};

// Fills c with n entries (from `first`) under random hashes; returns them.
std::vector<std::uint32_t> Fill(Checked& c, std::mt19937& rng, std::uint32_t n,
                                std::uint32_t first = 0) {
  std::vector<std::uint32_t> entries;
  for (std::uint32_t e = first; e < first + n; ++e) {
    c.Insert(static_cast<std::uint32_t>(rng()), e);
    entries.push_back(e);
  }
  return entries;
}

// Erases random entries of c until `keep` remain.
void EraseDownTo(Checked& c, std::mt19937& rng, std::size_t keep) {
  std::vector<std::uint32_t> entries;
  for (const auto& [entry, hash] : c.truth()) entries.push_back(entry);
  std::shuffle(entries.begin(), entries.end(), rng);
  for (std::size_t i = 0; c.truth().size() > keep; ++i) {
    ASSERT_FALSE(c.Erase(entries[i]));
  }
}

// Steps a started shrink until it migrates (capacity drops) and has done
// `more` further steps of `budget`; stays mid-migration.
void StepIntoMigration(Checked& c, std::size_t budget, int more) {
  const std::size_t large = c.index().capacity();
  while (c.index().capacity() == large) ASSERT_TRUE(c.Step(budget));
  for (int i = 0; i < more; ++i) ASSERT_TRUE(c.Step(budget));
}

TEST(KeyIndexTest, EmptyFindsNothing) {
  KeyIndex index;
  EXPECT_EQ(index.Find(7, [](std::uint32_t) { return true; }),
            KeyIndex::kAbsent);
  index.Prefetch(7);  // no table yet: must not touch memory
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.capacity(), 0u);
  EXPECT_FALSE(index.WantsShrink());
  index.StartShrink();  // nothing to shrink
  EXPECT_FALSE(index.Shrinking());
  EXPECT_FALSE(index.ShrinkStep(100));
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

// The same clustered hashes, with the table filled and drained in waves so
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
      const bool was_shrinking = c.index().Shrinking();
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
        if (c.index().Shrinking()) {
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

TEST(KeyIndexTest, SetEntryAtKeepsTheHash) {
  Checked c;
  for (std::uint32_t e = 0; e < 20; ++e) c.Insert(e % 3, e);
  c.Rename(7, 1000);
  c.Rename(0, 0x7FFFFFFF);  // the largest entry the pool hands out
  c.ExpectConsistent();
  EXPECT_FALSE(c.Erase(1000));
  c.ExpectConsistent();
}

// 100k entries erased down to 300: a shrink gives the memory back in steps
// of bounded work while the survivors stay found and others come and go.
TEST(KeyIndexTest, ShrinkGivesMemoryBackInBoundedSteps) {
  std::mt19937 rng(11);
  Checked c;
  Fill(c, rng, 100'000);
  const std::size_t large = c.index().capacity();
  ASSERT_EQ(large, std::size_t{1} << 18);
  EraseDownTo(c, rng, 300);
  ASSERT_FALSE(c.index().Shrinking());  // nothing happens by itself
  ASSERT_EQ(c.index().capacity(), large);
  ASSERT_TRUE(c.index().WantsShrink());

  c.StartShrink();
  ASSERT_TRUE(c.index().Shrinking());
  EXPECT_FALSE(c.index().WantsShrink());
  // 300 words at load <= 3/8 take 1024; the large table stays until the end.
  EXPECT_EQ(c.index().MemoryBytes(), (large + 1024) * 8);
  EXPECT_EQ(c.index().ShrinkWorkLeft(), large + 1024);
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
      EXPECT_EQ(c.index().MemoryBytes(), (large + 1024) * 8);
    }
    // Churn at a constant live count, in whichever table the words are.
    c.Insert(static_cast<std::uint32_t>(rng()), next_entry++);
    ASSERT_FALSE(c.Erase(c.RandomEntry(rng)));
    if (steps % 64 == 0) c.ExpectConsistent();
  }
  // The shrink could not finish sooner than its budget allows for emptying
  // the new table and scanning the live part of the old one.
  EXPECT_GT(steps, 1024 / kBudget + large / kBudget / 2);
  EXPECT_EQ(c.index().capacity(), 1024u);
  EXPECT_EQ(c.index().MemoryBytes(), 1024u * 8);
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
    ASSERT_TRUE(c.index().Shrinking());
    if (more_steps < 0) {
      ASSERT_TRUE(c.Step(100));
    } else {
      StepIntoMigration(c, 64, more_steps);
    }
    const std::uint32_t gone = c.truth().begin()->first;
    const std::uint32_t gone_hash = c.truth().begin()->second;
    c.Clear();
    EXPECT_FALSE(c.index().Shrinking());
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
    EXPECT_TRUE(c.index().Shrinking());
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
    EXPECT_FALSE(c.index().Shrinking());
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
    EXPECT_FALSE(c.index().Shrinking());
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
    EXPECT_FALSE(c.index().Shrinking());
    c.index().Reserve(0);
    EXPECT_TRUE(c.index().WantsShrink());
  }
}

// Inserting faster than the shrink migrates: the growth takes the words of
// both tables at once and ends the shrink.
TEST(KeyIndexTest, GrowthDuringMigrationEndsTheShrink) {
  std::mt19937 rng(9);
  Checked c;
  Fill(c, rng, 10'000);
  EraseDownTo(c, rng, 100);
  c.StartShrink();
  StepIntoMigration(c, 64, 30);
  ASSERT_EQ(c.index().capacity(), 512u);
  std::uint32_t e = 100'000;
  while (c.index().Shrinking()) {
    c.Insert(static_cast<std::uint32_t>(rng()), e++);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(c.index().size(), 385u);  // the 385th word did not fit 512 * 3/4
  EXPECT_EQ(c.index().capacity(), 1024u);
  EXPECT_EQ(c.index().MemoryBytes(), 1024u * 8);
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

}  // namespace
}  // namespace internal
}  // namespace timingwheel
