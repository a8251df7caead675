// docs/api.md's Cache rule C5: size never exceeds max_entries; the
// just-set and the most recently hit entries are never evicted; the
// policy keeps frequent keys through a scan of one-off keys.

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cache_fixture.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"

namespace timingwheel {
namespace cache_size_test {

using cache_testing::Fixture;
using cache_testing::Removal;
using cache_testing::Ttl;

TEST(CacheC5, SizeNeverExceedsMaxEntriesAndTheJustSetStays) {
  for (std::size_t max : {1u, 2u, 10u, 1000u, 5000u}) {
    CacheOptions o = Ttl(absl::InfiniteDuration());
    o.max_entries = max;
    Fixture f(o);
    for (int i = 0; i < 3 * static_cast<int>(max) + 50; ++i) {
      const std::string key = "k" + std::to_string(i);
      ASSERT_TRUE(f.cache->Set(key, i).ok());
      ASSERT_LE(f.cache->size(), max);
      ASSERT_EQ(f.cache->Get(key), i) << "just set, max=" << max;
    }
    EXPECT_EQ(f.cache->size(), max);
    std::vector<Removal> calls = f.recorder.Take();
    EXPECT_EQ(calls.size(), 2 * max + 50);
    for (const Removal& r : calls) {
      EXPECT_EQ(r.cause, RemovalCause::kSize);
      EXPECT_EQ(r.thread, std::this_thread::get_id());
    }
    EXPECT_EQ(f.cache->stats().evicted, 2 * max + 50);
  }
}

TEST(CacheC5, TheMostRecentlyHitIsNeverEvicted) {
  for (std::size_t max : {2u, 3u, 10u, 300u}) {
    CacheOptions o = Ttl(absl::InfiniteDuration());
    o.max_entries = max;
    Fixture f(o);
    ASSERT_TRUE(f.cache->Set("hot", 0).ok());
    // Many one-off keys, never read; the hot key is read before each Set,
    // so it is the most recently hit at every one of them.
    for (int i = 0; i < 20 * static_cast<int>(max); ++i) {
      ASSERT_EQ(f.cache->Get("hot"), 0) << "max=" << max << " i=" << i;
      ASSERT_TRUE(f.cache->Set("k" + std::to_string(i), i).ok());
    }
    EXPECT_EQ(f.cache->Get("hot"), 0);
  }
}

// The policy alone would evict "b" (seen twice) rather than "a" (seen six
// times), but "b" is the most recently hit: "a" goes instead.
TEST(CacheC5, TheMostRecentlyHitIsKeptEvenAgainstThePolicy) {
  CacheOptions o = Ttl(absl::InfiniteDuration());
  o.max_entries = 2;
  Fixture f(o);
  ASSERT_TRUE(f.cache->Set("a", 1).ok());
  for (int i = 0; i < 5; ++i) ASSERT_EQ(f.cache->Get("a"), 1);
  ASSERT_TRUE(f.cache->Set("b", 2).ok());
  ASSERT_EQ(f.cache->Get("b"), 2);
  ASSERT_TRUE(f.cache->Set("c", 3).ok());
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"a", 1, RemovalCause::kSize, {}}));
  EXPECT_EQ(f.cache->Get("b"), 2);
  EXPECT_EQ(f.cache->Get("c"), 3);
}

TEST(CacheC5, ShardedSharesSumToMaxEntries) {
  // Large enough to be split over several shards.
  CacheOptions o = Ttl(absl::InfiniteDuration());
  o.max_entries = 100000;
  Fixture f(o);
  for (int i = 0; i < 300000; ++i) {
    ASSERT_TRUE(f.cache->Set(std::to_string(i), i).ok());
    if (i % 1000 == 0) {
      ASSERT_LE(f.cache->size(), o.max_entries);
    }
  }
  EXPECT_EQ(f.cache->size(), o.max_entries);
  EXPECT_EQ(f.cache->stats().evicted, 200000u);
}

TEST(CacheC5, FrequentKeysSurviveAScanOfOneOffs) {
  CacheOptions o = Ttl(absl::InfiniteDuration());
  o.max_entries = 1000;
  Fixture f(o);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 500; ++i) {
      if (!f.cache->Get("hot" + std::to_string(i))) {
        ASSERT_TRUE(f.cache->Set("hot" + std::to_string(i), i).ok());
      }
    }
  }
  for (int i = 0; i < 20000; ++i) {
    ASSERT_TRUE(f.cache->Set("scan" + std::to_string(i), i).ok());
  }
  int kept = 0;
  for (int i = 0; i < 500; ++i)
    kept += f.cache->Get("hot" + std::to_string(i)).has_value();
  EXPECT_GE(kept, 450);  // an LRU would keep none
}

}  // namespace cache_size_test
}  // namespace timingwheel
