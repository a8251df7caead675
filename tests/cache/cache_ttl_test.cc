// docs/api.md's Cache rules C1 (present until the k-th following tick,
// never an expired entry), C2 (expiry needs no activity), C3 (Set replaces,
// Delete, Clear) and C8 (stats), and mass expiry. Time is a ManualTicker's:
// outcomes are decided by tick counts, never by sleeps.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cache_fixture.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_ttl_test {

using cache_testing::Fixture;
using cache_testing::IntCache;
using cache_testing::kInterval;
using cache_testing::Removal;
using cache_testing::Ttl;

// ---- C1 time ----------------------------------------------------------------

TEST(CacheC1, PresentUntilTheKthFollowingTickAndAbsentAfter) {
  for (int k : {1, 2, 5}) {
    Fixture f(Ttl(absl::Seconds(100)));
    f.ticker->Tick(3);  // any phase
    ASSERT_TRUE(f.cache->Set("k", 7, k * kInterval).ok());
    for (int j = 1; j < k; ++j) {
      f.ticker->Tick();
      EXPECT_EQ(f.cache->Get("k"), 7) << "k=" << k << " after tick " << j;
    }
    f.ticker->Tick();
    EXPECT_FALSE(f.cache->Get("k").has_value()) << "k=" << k;
  }
}

// A ttl between two multiples of the interval: gone on the first tick at or
// after the deadline, present before it.
TEST(CacheC1, TtlNotAMultipleOfTheInterval) {
  Fixture f;
  f.ticker->Tick();
  ASSERT_TRUE(f.cache->Set("k", 7, 2 * kInterval + kInterval / 2).ok());
  f.ticker->Tick(2);
  EXPECT_EQ(f.cache->Get("k"), 7);
  EXPECT_TRUE(f.recorder.Take().empty());
  f.ticker->Tick();
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.recorder.Take().size(), 1u);
}

TEST(CacheC1, DefaultTtlIsOptionsTtl) {
  Fixture f(Ttl(3 * kInterval));
  ASSERT_TRUE(f.cache->Set("k", 7).ok());
  f.ticker->Tick(2);
  EXPECT_EQ(f.cache->Get("k"), 7);
  f.ticker->Tick();
  EXPECT_FALSE(f.cache->Get("k").has_value());
}

TEST(CacheC1, ChronoTtlExpiresOnItsTick) {
  Fixture f;
  ASSERT_TRUE(f.cache->Set("k", 7, std::chrono::seconds(2)).ok());
  f.ticker->Tick();
  EXPECT_EQ(f.cache->Get("k"), 7);
  f.ticker->Tick();
  EXPECT_FALSE(f.cache->Get("k").has_value());
}

TEST(CacheC1, InfiniteTtlNeverExpires) {
  Fixture f(Ttl(absl::InfiniteDuration()));
  ASSERT_TRUE(f.cache->Set("k", 7).ok());
  ASSERT_TRUE(f.cache->Set("j", 8, absl::InfiniteDuration()).ok());
  f.ticker->Tick(1000);
  EXPECT_EQ(f.cache->Get("k"), 7);
  EXPECT_EQ(f.cache->Get("j"), 8);
  EXPECT_TRUE(f.recorder.Take().empty());
}

// Many entries due on the same tick, spread over the shards, whose buckets
// the wheel hands over one by one: from the listener of the first ones
// removed, the others are expired on the wheel's clock but not yet removed,
// and Get must miss them all.
TEST(CacheC1, GetNeverReturnsAnExpiredEntryTheWheelHasNotRemovedYet) {
  constexpr int kKeys = 64;
  auto ticker = std::make_shared<ManualTicker>();
  std::unique_ptr<Cache<int, int>> cache;
  std::atomic<int> listener_calls{0}, stale_hits{0};
  CacheOptions o;
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  auto c = IntCache::Create(o, [&](int, int, RemovalCause cause) {
    if (cause != RemovalCause::kExpired) return;
    listener_calls++;
    for (int k = 0; k < kKeys; ++k) stale_hits += cache->Get(k).has_value();
  });
  ASSERT_TRUE(c.ok());
  cache = *std::move(c);
  for (int k = 0; k < kKeys; ++k)
    ASSERT_TRUE(cache->Set(k, k, 2 * kInterval).ok());
  ticker->Tick(2);
  EXPECT_EQ(listener_calls.load(), kKeys);
  EXPECT_EQ(stale_hits.load(), 0);
}

// ---- C2 expiry needs no activity --------------------------------------------

TEST(CacheC2, ExpiredAndListenerCalledBeforeTheTickReturns) {
  Fixture f(Ttl(3 * kInterval));
  ASSERT_TRUE(f.cache->Set("a", 1).ok());
  ASSERT_TRUE(f.cache->Set("b", 2, 5 * kInterval).ok());
  f.ticker->Tick(2);
  EXPECT_TRUE(f.recorder.Take().empty());
  f.ticker->Tick();  // no cache call since the Sets
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"a", 1, RemovalCause::kExpired, {}}));
  EXPECT_NE(calls[0].thread, std::this_thread::get_id());  // a wheel worker
  EXPECT_EQ(f.cache->size(), 1u);
  f.ticker->Tick(2);
  calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"b", 2, RemovalCause::kExpired, {}}));
  EXPECT_EQ(f.cache->size(), 0u);
  f.ticker->Tick(10);
  EXPECT_TRUE(f.recorder.Take().empty());  // exactly once
}

// ---- C3 replace, delete, clear ----------------------------------------------

TEST(CacheC3, SetReplacesAndRestartsTheTtl) {
  Fixture f;
  ASSERT_TRUE(f.cache->Set("k", 1, 3 * kInterval).ok());
  f.ticker->Tick(2);
  ASSERT_TRUE(f.cache->Set("k", 2, 5 * kInterval).ok());
  std::vector<Removal> calls = f.recorder.Take();  // before Set returned
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"k", 1, RemovalCause::kReplaced, {}}));
  EXPECT_EQ(calls[0].thread, std::this_thread::get_id());
  EXPECT_EQ(f.cache->size(), 1u);
  f.ticker->Tick(4);  // past the first value's deadline: the old timer is void
  EXPECT_EQ(f.cache->Get("k"), 2);
  EXPECT_TRUE(f.recorder.Take().empty());
  f.ticker->Tick();
  EXPECT_FALSE(f.cache->Get("k").has_value());
  calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"k", 2, RemovalCause::kExpired, {}}));
}

TEST(CacheC3, ReplaceWithAShorterTtlExpiresEarlier) {
  Fixture f;
  ASSERT_TRUE(f.cache->Set("k", 1, 10 * kInterval).ok());
  ASSERT_TRUE(f.cache->Set("k", 2, 2 * kInterval).ok());
  f.ticker->Tick(2);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], (Removal{"k", 2, RemovalCause::kExpired, {}}));
  f.ticker->Tick(20);
  EXPECT_TRUE(f.recorder.Take().empty());
}

TEST(CacheC3, ReplaceFiniteWithInfiniteAndBack) {
  Fixture f;
  ASSERT_TRUE(f.cache->Set("k", 1, 2 * kInterval).ok());
  ASSERT_TRUE(f.cache->Set("k", 2, absl::InfiniteDuration()).ok());
  f.ticker->Tick(5);
  EXPECT_EQ(f.cache->Get("k"), 2);
  ASSERT_TRUE(f.cache->Set("k", 3, 2 * kInterval).ok());
  f.ticker->Tick(2);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2], (Removal{"k", 3, RemovalCause::kExpired, {}}));
}

TEST(CacheC3, DeleteRemovesAndSaysWhetherPresent) {
  Fixture f(Ttl(3 * kInterval));
  ASSERT_TRUE(f.cache->Set("k", 1).ok());
  EXPECT_FALSE(f.cache->Delete("absent"));
  EXPECT_TRUE(f.cache->Delete("k"));
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"k", 1, RemovalCause::kExplicit, {}}));
  EXPECT_EQ(calls[0].thread, std::this_thread::get_id());
  EXPECT_FALSE(f.cache->Delete("k"));
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.cache->size(), 0u);
  f.ticker->Tick(5);
  EXPECT_TRUE(f.recorder.Take().empty());  // its timer is void
  // Set again after a Delete: a new value with its own timer.
  ASSERT_TRUE(f.cache->Set("k", 2).ok());
  f.ticker->Tick(3);
  calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"k", 2, RemovalCause::kExpired, {}}));
}

// C3's Delete "returns whether the key was present and unexpired": from the
// first expiry's listener call, the other keys due on that tick are expired
// and some not yet removed by the wheel. Deleting them returns false, and
// each value is still told once, as expired.
TEST(CacheC3, DeleteOfAnExpiredEntryTheWheelHasNotRemovedYetReturnsFalse) {
  constexpr int kKeys = 64;
  auto ticker = std::make_shared<ManualTicker>();
  std::unique_ptr<Cache<int, int>> cache;
  std::atomic<int> expired{0}, other{0}, deleted_true{0}, deletes{0};
  CacheOptions o;
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  auto c = IntCache::Create(o, [&](int, int, RemovalCause cause) {
    if (cause != RemovalCause::kExpired) {
      other++;
      return;
    }
    if (expired++ != 0) return;
    for (int k = 0; k < kKeys; ++k) {
      deletes++;
      deleted_true += cache->Delete(k);
    }
  });
  ASSERT_TRUE(c.ok());
  cache = *std::move(c);
  for (int k = 0; k < kKeys; ++k)
    ASSERT_TRUE(cache->Set(k, k, 2 * kInterval).ok());
  ticker->Tick(2);
  EXPECT_EQ(deletes.load(), kKeys);
  EXPECT_EQ(deleted_true.load(), 0);
  EXPECT_EQ(expired.load(), kKeys);  // every value told once...
  EXPECT_EQ(other.load(), 0);        // ...and as expired
  EXPECT_EQ(cache->size(), 0u);
}

TEST(CacheC3, ClearRemovesEverything) {
  Fixture f(Ttl(3 * kInterval));
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(f.cache->Set("k" + std::to_string(i), i).ok());
  }
  ASSERT_TRUE(f.cache->Set("forever", -1, absl::InfiniteDuration()).ok());
  f.cache->Clear();
  EXPECT_EQ(f.cache->size(), 0u);
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 101u);
  std::vector<int> values;
  for (const Removal& r : calls) {
    EXPECT_EQ(r.cause, RemovalCause::kExplicit);
    EXPECT_EQ(r.thread, std::this_thread::get_id());
    values.push_back(r.value);
  }
  std::sort(values.begin(), values.end());
  for (int i = -1; i < 100; ++i) EXPECT_EQ(values[i + 1], i);
  EXPECT_FALSE(f.cache->Get("k5").has_value());
  f.ticker->Tick(5);
  EXPECT_TRUE(f.recorder.Take().empty());
  // Usable again.
  ASSERT_TRUE(f.cache->Set("k5", 5).ok());
  EXPECT_EQ(f.cache->Get("k5"), 5);
}

// ---- C8 stats ---------------------------------------------------------------

TEST(CacheC8, CountsEverything) {
  CacheOptions o = Ttl(2 * kInterval);
  o.max_entries = 3;
  Fixture f(o);
  EXPECT_FALSE(f.cache->Get("a").has_value());  // miss
  ASSERT_TRUE(f.cache->Set("a", 1).ok());
  EXPECT_TRUE(f.cache->Get("a").has_value());                   // hit
  EXPECT_TRUE(f.cache->GetOrLoad("a", [] { return 9; }).ok());  // hit
  EXPECT_TRUE(f.cache->GetOrLoad("b", [] { return 2; }).ok());  // miss, load
  EXPECT_FALSE(f.cache
                   ->GetOrLoad("c",
                               [] {  // miss, failure
                                 return absl::StatusOr<int>(
                                     absl::AbortedError("x"));
                               })
                   .ok());
  ASSERT_TRUE(f.cache->Set("c", 3).ok());
  ASSERT_TRUE(f.cache->Set("d", 4).ok());  // evicts one
  CacheStats st = f.cache->stats();
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.misses, 3u);
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.load_failures, 1u);
  EXPECT_EQ(st.evicted, 1u);
  EXPECT_EQ(st.expired, 0u);
  EXPECT_EQ(st.size, 3u);
  f.ticker->Tick(2);
  st = f.cache->stats();
  EXPECT_EQ(st.expired, 3u);
  EXPECT_EQ(st.size, 0u);
  EXPECT_EQ(f.cache->size(), 0u);
}

// ---- mass expiry ------------------------------------------------------------

TEST(CacheMemory, ReusedAfterMassExpiry) {
  Fixture f(Ttl(kInterval));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20000; ++i) {
      ASSERT_TRUE(f.cache->Set(std::to_string(round * 20000 + i), i).ok());
    }
    EXPECT_EQ(f.cache->size(), 20000u);
    f.ticker->Tick();
    EXPECT_EQ(f.cache->size(), 0u);
    EXPECT_EQ(f.recorder.Take().size(), 20000u);
  }
}

}  // namespace cache_ttl_test
}  // namespace timingwheel
