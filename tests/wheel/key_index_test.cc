// Internal, below the public API: the key lookup that docs/api.md S2-S4
// (one timer per key, found again by Move and Remove) rest on.
//
// internal::KeyIndex alone: every lookup after every insert and erase agrees
// with a plain map, including clusters that wrap around the table's end,
// where backward-shift deletion is easiest to get wrong; and the same while
// a growth or a shrink moves the words to another table a few at a time,
// where a word lost or found twice between the two tables is the risk, and
// a growth that does not end before a table fills would be another.
#include "timingwheel/internal/wheel/key_index.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <unordered_map>
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
  explicit Checked(
      std::size_t grow_in_steps_from = KeyIndex::kResizeMinCapacity)
      : index_(grow_in_steps_from) {}
  void Insert(std::uint32_t hash, std::uint32_t entry) {
    ASSERT_EQ(truth_.count(entry), 0u);
    // As Wheel::Set inserts: the lookup that finds no word (remembering
    // where the word goes), then room, then the insert.
    ASSERT_EQ(index_.FindBeforeInsert(
                  hash, [&](std::uint32_t x) { return x == entry; }),
              KeyIndex::kAbsent);
    const std::size_t before = index_.ResizeWorkLeft();
    const bool growing = index_.Growing(), shrinking = index_.Shrinking();
    index_.ReserveOneMore();
    // The work an insert does for a resize under way is bounded (a growth
    // started early asks less of each: see
    // EarlyGrowthEndsByTheTimeTheTableWouldBeFull).
    const std::size_t after = index_.ResizeWorkLeft();
    if (growing && index_.Growing()) {
      EXPECT_GE(before - after, 1u);
      EXPECT_LE(before - after, KeyIndex::kGrowStep);
    } else if (shrinking && index_.Shrinking()) {
      EXPECT_LE(before - after, 4 * KeyIndex::kMaxShrinkFactor);
    }
    index_.Insert(hash, entry);
    AddTruth(entry, hash);
  }
  // An insert whose lookup (FindBeforeInsert) comes before `between`, which
  // may change the index in any way; then room and the insert, as in
  // Insert. Wherever between() leaves the remembered position, the word
  // must land where lookups find it.
  template <typename Between>
  void InsertAfter(std::uint32_t hash, std::uint32_t entry, Between&& between) {
    ASSERT_EQ(truth_.count(entry), 0u);
    ASSERT_EQ(index_.FindBeforeInsert(
                  hash, [&](std::uint32_t x) { return x == entry; }),
              KeyIndex::kAbsent);
    between();
    if (::testing::Test::HasFatalFailure()) return;
    index_.ReserveOneMore();
    index_.Insert(hash, entry);
    AddTruth(entry, hash);
  }
  std::size_t Find(std::uint32_t hash, std::uint32_t entry) {
    const std::size_t pos = index_.Find(hash, [&](std::uint32_t x) {
      EXPECT_EQ(truth_.count(x), 1u) << "matcher asked about non-entry " << x;
      return x == entry;
    });
    if (pos != KeyIndex::kAbsent && (pos & kOldBit) != 0) {
      ++old_hits_;
      // During migration the index holds the new table and the old one, and
      // ResizeWorkLeft() is what the cursor has left of the old table.
      const std::size_t old_capacity =
          index_.MemoryBytes() / 8 - index_.capacity();
      const std::size_t p = pos ^ kOldBit;
      EXPECT_LT(p, old_capacity);
      const std::size_t home = HomeFor(hash, old_capacity);
      const std::size_t cursor = old_capacity - index_.ResizeWorkLeft();
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
    RemoveTruth(entry);
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
    RemoveTruth(entry);
    AddTruth(fresh, hash);
    index_.SetEntryAt(pos, fresh);
    ASSERT_EQ(index_.EntryAt(pos), fresh);
    ASSERT_EQ(Find(hash, entry), KeyIndex::kAbsent);
    ASSERT_EQ(Find(hash, fresh), pos);
  }
  void StartShrink() { index_.StartShrink(); }
  void StartGrowth() { index_.StartGrowth(); }
  // One ResizeStep: a step that goes on did exactly `budget` words of work,
  // one that ends left none.
  bool Step(std::size_t budget) {
    const std::size_t before = index_.ResizeWorkLeft();
    const bool more = index_.ResizeStep(budget);
    EXPECT_EQ(more, index_.Resizing());
    if (more) {
      EXPECT_EQ(before - index_.ResizeWorkLeft(), budget);
    } else {
      EXPECT_EQ(index_.ResizeWorkLeft(), 0u);
      EXPECT_EQ(index_.MemoryBytes(), index_.capacity() * 8);
    }
    return more;
  }
  // Every entry is found under its hash; an absent one is not.
  void ExpectConsistent() {
    ASSERT_EQ(index_.size(), truth_.size());
    if (index_.Growing()) {
      ASSERT_LT(index_.size() * 32, index_.capacity() * 25);
    } else {
      ASSERT_LE(index_.size() * 4, index_.capacity() * 3);
    }
    ASSERT_GE(index_.MemoryBytes(), index_.capacity() * 8);
    if (!index_.Resizing()) {
      ASSERT_EQ(index_.MemoryBytes(), index_.capacity() * 8);
      ASSERT_EQ(index_.ResizeWorkLeft(), 0u);
    }
    for (const auto& [entry, hash] : truth_) {
      const std::size_t pos = Find(hash, entry);
      ASSERT_NE(pos, KeyIndex::kAbsent) << "entry " << entry << " lost";
      ASSERT_EQ(index_.EntryAt(pos), entry);
    }
    // Every entry is found (above), so ForEach naming only live entries, as
    // many as there are, names each once.
    std::size_t seen = 0;
    index_.ForEach([&](std::uint32_t e) {
      ++seen;
      EXPECT_EQ(truth_.count(e), 1u) << "stale entry " << e;
    });
    EXPECT_EQ(seen, truth_.size()) << "an entry seen twice";
  }
  void Clear() {
    index_.Clear();
    truth_.clear();
    live_.clear();
    slot_.clear();
  }
  KeyIndex& index() { return index_; }
  const std::unordered_map<std::uint32_t, std::uint32_t>& truth() const {
    return truth_;
  }
  std::uint32_t RandomEntry(std::mt19937& rng) const {
    return live_[rng() % live_.size()];
  }
  long old_hits() const { return old_hits_; }
  long wrapped_old_hits() const { return wrapped_old_hits_; }
  long straddling_old_hits() const { return straddling_old_hits_; }

 private:
  KeyIndex index_;
  void AddTruth(std::uint32_t entry, std::uint32_t hash) {
    truth_[entry] = hash;
    slot_[entry] = live_.size();
    live_.push_back(entry);
  }
  void RemoveTruth(std::uint32_t entry) {
    truth_.erase(entry);
    const std::size_t slot = slot_[entry];
    slot_.erase(entry);
    if (slot + 1 != live_.size()) {
      live_[slot] = live_.back();
      slot_[live_[slot]] = slot;
    }
    live_.pop_back();
  }

  // entry -> hash; and the live entries in a vector, for random picks.
  std::unordered_map<std::uint32_t, std::uint32_t> truth_;
  std::vector<std::uint32_t> live_;
  std::unordered_map<std::uint32_t, std::size_t> slot_;
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

// Ends a growth under way (inserts leave one under way for a while).
void FinishGrowth(Checked& c) {
  while (c.index().Growing()) ASSERT_NO_FATAL_FAILURE(c.Step(4096));
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

// True during a growth's phase 1: the index holds its table and one twice
// as large (in phase 2 it holds the large one and one half as large).
bool GrowthEmptying(KeyIndex& index) {
  return index.Growing() && index.MemoryBytes() == 3 * index.capacity() * 8;
}

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
      // shrink tests above check every call of a shrink).
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

// Starts a growth of a 16384-word table and steps it with inserts until
// `phase` (1: emptying the new table, 2: migrating) has done a few steps.
void GrowInto(Checked& c, std::mt19937& rng, int phase,
              std::uint32_t first_entry) {
  Fill(c, rng, 16384 / 4 * 3 + 1, first_entry);
  ASSERT_TRUE(GrowthEmptying(c.index()));
  std::uint32_t e = first_entry + 16384;
  if (phase == 2) {
    while (GrowthEmptying(c.index())) {
      c.Insert(static_cast<std::uint32_t>(rng()), e++);
    }
  }
  for (int i = 0; i < 10; ++i) c.Insert(static_cast<std::uint32_t>(rng()), e++);
  ASSERT_TRUE(c.index().Growing());
  ASSERT_EQ(GrowthEmptying(c.index()), phase == 1);
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

// A growth from a table of 16 MiB or more gives the old table back in 2 MiB
// pieces as the cursor passes them, so that freeing it at the end does not
// stop the loop (unmapping it whole took milliseconds), and lookups, which
// inserts drive all through the growth, never read the part given back
// (it reads as zeros there: entry 0, which never lives).
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

}  // namespace
}  // namespace internal
}  // namespace timingwheel
