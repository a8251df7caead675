// docs/api.md's Cache rule C4: with sliding, every hit restarts the
// entry's own ttl, and a slid entry never expires early, whatever bounds
// the cache's wheel options carry. ManualTicker time.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cache_fixture.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_sliding_test {

using cache_testing::Fixture;
using cache_testing::kInterval;
using cache_testing::Removal;
using cache_testing::Ttl;

TEST(CacheC4, EveryHitRestartsTheTtl) {
  CacheOptions o = Ttl(3 * kInterval);
  o.sliding = true;
  Fixture f(o);
  ASSERT_TRUE(f.cache->Set("k", 1).ok());
  for (int hit = 0; hit < 5; ++hit) {
    f.ticker->Tick(2);
    EXPECT_EQ(f.cache->Get("k"), 1) << "hit " << hit;
  }
  // Also GetOrLoad's hit slides (and does not load).
  f.ticker->Tick(2);
  auto r = f.cache->GetOrLoad("k", [] { return absl::StatusOr<int>(99); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 1);
  EXPECT_TRUE(f.recorder.Take().empty());
  f.ticker->Tick(2);
  EXPECT_TRUE(f.recorder.Take().empty());
  f.ticker->Tick();  // 3 ticks after the last hit
  std::vector<Removal> calls = f.recorder.Take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (Removal{"k", 1, RemovalCause::kExpired, {}}));
  EXPECT_FALSE(f.cache->Get("k").has_value());
  f.ticker->Tick(10);
  EXPECT_TRUE(f.recorder.Take().empty());
}

// A bounded queue on the cache's wheel must not make a slid entry expire
// early or never: the re-files of a due bucket are wheel commands sent from
// a wheel callback, while a ManualTicker's tick waits for that callback, so
// a bound of 1 command, or a lag bound of 1 ns (the loop is busy with the
// tick), would refuse all but the first (docs/cache.md: the cache's wheel
// is never refused for room).
void ExpectSlidEntriesNeverExpireEarly(const Options& bounds) {
  CacheOptions o = Ttl(4 * kInterval);
  o.sliding = true;
  o.wheel = bounds;
  Fixture f(o);
  constexpr int kKeys = 500;  // over every shard
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(f.cache->Set(std::to_string(k), k).ok()) << k;
  }
  f.ticker->Tick(2);
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_EQ(f.cache->Get(std::to_string(k)), k);  // now due at tick 6
  }
  f.ticker->Tick(2);  // tick 4: every bucket re-files its slid entries
  EXPECT_TRUE(f.recorder.Take().empty());
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(f.cache->Get(std::to_string(k)), k);  // now due at tick 8
  }
  f.ticker->Tick(3);
  EXPECT_TRUE(f.recorder.Take().empty());
  f.ticker->Tick();  // tick 8
  EXPECT_EQ(f.recorder.Take().size(), static_cast<std::size_t>(kKeys));
  EXPECT_EQ(f.cache->size(), 0u);
}

TEST(CacheC4, SlidEntriesNeverExpireEarlyWithABoundedWheelQueue) {
  Options bounds;
  bounds.max_pending = 1;
  ExpectSlidEntriesNeverExpireEarly(bounds);
}

TEST(CacheC4, SlidEntriesNeverExpireEarlyWithAWheelLagBound) {
  Options bounds;
  bounds.max_lag = absl::Nanoseconds(1);
  ExpectSlidEntriesNeverExpireEarly(bounds);
}

TEST(CacheC4, SlidesByTheTtlTheEntryWasSetWith) {
  CacheOptions o = Ttl(2 * kInterval);
  o.sliding = true;
  Fixture f(o);
  ASSERT_TRUE(f.cache->Set("k", 1, 5 * kInterval).ok());
  f.ticker->Tick(4);
  EXPECT_EQ(f.cache->Get("k"), 1);
  f.ticker->Tick(4);
  EXPECT_EQ(f.cache->Get("k"), 1);
  f.ticker->Tick(4);
  EXPECT_EQ(f.cache->Get("k"), 1);
  f.ticker->Tick(5);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.recorder.Take().size(), 1u);
}

TEST(CacheC4, WithoutSlidingHitsDoNotExtend) {
  Fixture f(Ttl(3 * kInterval));
  ASSERT_TRUE(f.cache->Set("k", 1).ok());
  f.ticker->Tick();
  EXPECT_EQ(f.cache->Get("k"), 1);
  f.ticker->Tick();
  EXPECT_EQ(f.cache->Get("k"), 1);
  f.ticker->Tick();
  EXPECT_FALSE(f.cache->Get("k").has_value());
}

}  // namespace cache_sliding_test
}  // namespace timingwheel
