// docs/api.md's Cache errors: what Create, Set and GetOrLoad refuse, and
// that a refusal changes nothing.

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cache_fixture.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_errors_test {

using ::absl::StatusCode;
using cache_testing::Fixture;
using cache_testing::IntCache;
using cache_testing::Ttl;

TEST(CacheErrors, CreateRefusesNonPositiveTtl) {
  for (absl::Duration ttl : {absl::ZeroDuration(), absl::Nanoseconds(-1),
                             -absl::InfiniteDuration()}) {
    auto c = IntCache::Create(Ttl(ttl));
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << ttl;
  }
}

TEST(CacheErrors, CreateForwardsTheWheelsRefusal) {
  CacheOptions o;
  o.wheel.interval = absl::ZeroDuration();
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.wheel.num_slots = 0;
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.wheel.execute_workers = 0;
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
  // The cache starts no drain workers, yet a count the wheel would refuse
  // is refused here too.
  o = {};
  o.wheel.drain_workers = 0;
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
  // The cache's own wheel runs without max_lag, but a max_lag the wheel
  // would refuse is still refused.
  o = {};
  o.wheel.max_lag = absl::Nanoseconds(-1);
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.wheel.max_lag = absl::InfiniteDuration();
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
  o.wheel.max_lag = absl::Milliseconds(2);  // valid: accepted
  EXPECT_TRUE(IntCache::Create(o).ok());
  // A ManualTicker drives one wheel: the second cache's wheel is refused.
  o = {};
  o.wheel.ticker = std::make_shared<ManualTicker>();
  auto first = IntCache::Create(o);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(IntCache::Create(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(CacheErrors, SetRefusesNonPositiveTtlAndStoresNothing) {
  Fixture f;
  EXPECT_EQ(f.cache->Set("k", 1, absl::ZeroDuration()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.cache->Set("k", 1, absl::Seconds(-3)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.cache->Set("k", 1, std::chrono::milliseconds(0)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.cache->size(), 0u);
  // A present value is left alone by a refused Set.
  ASSERT_TRUE(f.cache->Set("k", 1).ok());
  EXPECT_EQ(f.cache->Set("k", 2, -absl::InfiniteDuration()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.cache->Get("k"), 1);
  EXPECT_TRUE(f.recorder.Take().empty());
}

TEST(CacheErrors, GetOrLoadRefusesAnEmptyLoader) {
  Fixture f;
  EXPECT_EQ(f.cache->GetOrLoad("k", nullptr).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.cache->stats().loads + f.cache->stats().load_failures, 0u);
}

}  // namespace cache_errors_test
}  // namespace timingwheel
