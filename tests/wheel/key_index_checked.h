// The harness of the key index tests (key_index_*_test.cc):
// internal::KeyIndex beside the truth, a plain map from entry to hash,
// with every lookup checked against it, and the steps that fill, empty
// and resize a table.
#ifndef TIMINGWHEEL_TESTS_WHEEL_KEY_INDEX_CHECKED_H_
#define TIMINGWHEEL_TESTS_WHEEL_KEY_INDEX_CHECKED_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/wheel/key_index.h"

namespace timingwheel {
namespace internal {
namespace key_index_testing {

inline constexpr std::size_t kOldBit = ~(~std::size_t{0} >> 1);

// The index's home function (Fibonacci hashing), so that the tests can tell
// a lookup whose probe run wrapped around the table's end.
inline std::size_t HomeFor(std::uint32_t hash, std::size_t capacity) {
  return FibonacciHome(hash, 64 - std::countr_zero(capacity));
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
inline std::vector<std::uint32_t> Fill(Checked& c, std::mt19937& rng,
                                       std::uint32_t n,
                                       std::uint32_t first = 0) {
  std::vector<std::uint32_t> entries;
  for (std::uint32_t e = first; e < first + n; ++e) {
    c.Insert(static_cast<std::uint32_t>(rng()), e);
    entries.push_back(e);
  }
  return entries;
}

// Ends a growth under way (inserts leave one under way for a while).
inline void FinishGrowth(Checked& c) {
  while (c.index().Growing()) ASSERT_NO_FATAL_FAILURE(c.Step(4096));
}

// Erases random entries of c until `keep` remain.
inline void EraseDownTo(Checked& c, std::mt19937& rng, std::size_t keep) {
  std::vector<std::uint32_t> entries;
  for (const auto& [entry, hash] : c.truth()) entries.push_back(entry);
  std::shuffle(entries.begin(), entries.end(), rng);
  for (std::size_t i = 0; c.truth().size() > keep; ++i) {
    ASSERT_FALSE(c.Erase(entries[i]));
  }
}

// Steps a started shrink until it migrates (capacity drops) and has done
// `more` further steps of `budget`; stays mid-migration.
inline void StepIntoMigration(Checked& c, std::size_t budget, int more) {
  const std::size_t large = c.index().capacity();
  while (c.index().capacity() == large) ASSERT_TRUE(c.Step(budget));
  for (int i = 0; i < more; ++i) ASSERT_TRUE(c.Step(budget));
}

// True during a growth's phase 1: the index holds its table and one twice
// as large (in phase 2 it holds the large one and one half as large).
inline bool GrowthEmptying(KeyIndex& index) {
  return index.Growing() && index.MemoryBytes() == 3 * index.capacity() * 8;
}

// Starts a growth of a 16384-word table and steps it with inserts until
// `phase` (1: emptying the new table, 2: migrating) has done a few steps.
inline void GrowInto(Checked& c, std::mt19937& rng, int phase,
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

}  // namespace key_index_testing
}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_WHEEL_KEY_INDEX_CHECKED_H_
