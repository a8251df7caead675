// Internal, below the public API: the key lookup that docs/api.md S2-S4
// (one timer per key, found again by Move and Remove) rest on.
//
// internal::KeyIndex alone: every lookup after every insert and erase agrees
// with a plain map, including clusters that wrap around the table's end,
// where backward-shift deletion is easiest to get wrong.
#include "timingwheel/internal/key_index.h"

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace timingwheel {
namespace internal {
namespace {

// An index plus the truth: entry -> hash. Entries play the keys' role: an
// entry matches a lookup when it is the entry looked for.
class Checked {
 public:
  void Insert(std::uint32_t hash, std::uint32_t entry) {
    ASSERT_EQ(truth_.count(entry), 0u);
    index_.ReserveOneMore();
    index_.Insert(hash, entry);
    truth_[entry] = hash;
  }
  bool Erase(std::uint32_t entry) {
    auto it = truth_.find(entry);
    const std::size_t pos =
        index_.Find(it == truth_.end() ? 0 : it->second,
                    [&](std::uint32_t e) { return e == entry; });
    if (it == truth_.end()) return pos != KeyIndex::kAbsent;  // must be absent
    if (pos == KeyIndex::kAbsent) return true;                // lost
    EXPECT_EQ(index_.EntryAt(pos), entry);
    index_.EraseAt(pos);
    truth_.erase(it);
    return false;
  }
  // Every entry is found under its hash; an absent one is not.
  void ExpectConsistent() const {
    ASSERT_EQ(index_.size(), truth_.size());
    for (const auto& [entry, hash] : truth_) {
      const std::size_t pos =
          index_.Find(hash, [&, e = entry](std::uint32_t x) { return x == e; });
      ASSERT_NE(pos, KeyIndex::kAbsent) << "entry " << entry << " lost";
      ASSERT_EQ(index_.EntryAt(pos), entry);
    }
    std::set<std::uint32_t> seen;
    index_.ForEach(
        [&](std::uint32_t e) { EXPECT_TRUE(seen.insert(e).second); });
    EXPECT_EQ(seen.size(), truth_.size());
  }
  KeyIndex& index() { return index_; }
  const std::map<std::uint32_t, std::uint32_t>& truth() const { return truth_; }

 private:
  KeyIndex index_;
  std::map<std::uint32_t, std::uint32_t> truth_;
};

TEST(KeyIndexTest, EmptyFindsNothing) {
  KeyIndex index;
  EXPECT_EQ(index.Find(7, [](std::uint32_t) { return true; }),
            KeyIndex::kAbsent);
  index.Prefetch(7);  // no table yet: must not touch memory
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.capacity(), 0u);
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
        auto it = c.truth().begin();
        std::advance(it, rng() % c.truth().size());
        ASSERT_FALSE(c.Erase(it->first));
      }
      ASSERT_FALSE(c.Erase(next_entry + 1000));  // absent stays absent
      c.ExpectConsistent();
      if (::testing::Test::HasFatalFailure()) return;
    }
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

}  // namespace
}  // namespace internal
}  // namespace timingwheel
