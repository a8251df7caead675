// docs/api.md's Cache rule C7: the removal listener is called exactly once
// per value, never under a lock (it may call the cache), on the thread of
// the call that removed the value or on the wheel's worker; none after
// ~Cache, also when the cache is destroyed from its own listener; a
// throwing listener is caught and counted.

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/hang_guard.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache_fixture.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_listener_test {

using cache_testing::IntCache;
using cache_testing::kInterval;
using cache_testing::Ttl;
using ::timingwheel::testing::BecomesTrue;

// The listener calls the cache (same shard) for every cause; a lock held
// around it would deadlock.
TEST(CacheC7, ListenerMayCallTheCacheForEveryCause) {
  auto ticker = std::make_shared<ManualTicker>();
  std::unique_ptr<Cache<std::string, int>> cache;
  std::mutex mu;
  std::vector<RemovalCause> causes;
  CacheOptions o;
  o.ttl = 2 * kInterval;
  o.max_entries = 2;
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  auto c = Cache<std::string, int>::Create(
      o, [&](std::string, int, RemovalCause cause) {
        cache->Get("side");
        cache->Delete("side");
        cache->stats();
        std::lock_guard<std::mutex> lock(mu);
        causes.push_back(cause);
      });
  ASSERT_TRUE(c.ok());
  cache = *std::move(c);
  ASSERT_TRUE(cache->Set("a", 1).ok());
  ASSERT_TRUE(cache->Set("a", 2).ok());  // kReplaced
  EXPECT_TRUE(cache->Delete("a"));       // kExplicit
  ASSERT_TRUE(cache->Set("b", 1).ok());
  ASSERT_TRUE(cache->Set("c", 1).ok());
  ASSERT_TRUE(cache->Set("d", 1).ok());  // kSize
  cache->Clear();                        // kExplicit x2
  ASSERT_TRUE(cache->Set("e", 1).ok());
  ticker->Tick(2);  // kExpired
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(causes, (std::vector<RemovalCause>{
                        RemovalCause::kReplaced, RemovalCause::kExplicit,
                        RemovalCause::kSize, RemovalCause::kExplicit,
                        RemovalCause::kExplicit, RemovalCause::kExpired}));
}

TEST(CacheC7, NoListenerCallAfterDestructionAndValuesAreDestroyed) {
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> calls{0};
  std::vector<std::weak_ptr<int>> values;
  {
    CacheOptions o;
    o.ttl = 2 * kInterval;
    o.wheel.interval = kInterval;
    o.wheel.ticker = ticker;
    auto c = Cache<int, std::shared_ptr<int>>::Create(
        o, [&](int, std::shared_ptr<int>, RemovalCause) { calls++; });
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < 100; ++i) {
      auto v = std::make_shared<int>(i);
      values.push_back(v);
      ASSERT_TRUE((*c)->Set(i, std::move(v), (1 + i % 5) * kInterval).ok());
    }
    ticker->Tick();  // 20 expire
    EXPECT_EQ(calls.load(), 20);
  }
  EXPECT_EQ(calls.load(), 20);
  ticker->Tick(10);  // detached: nothing
  EXPECT_EQ(calls.load(), 20);
  for (const auto& w : values) EXPECT_TRUE(w.expired());
}

// A cache destroyed from its own listener. The call that removed the value
// returns without touching the cache again; every value dies exactly once,
// the ones not yet told untold (as ~Cache destroys the values present); no
// listener call starts after ~Cache returns. Under ASan and TSan these are
// also the checks that nothing touches the freed cache.
using SharedCache = Cache<int, std::shared_ptr<int>>;

struct DestroyingListener {
  std::mutex mu;
  std::unique_ptr<SharedCache> cache;  // guarded by mu
  int calls = 0;                       // guarded by mu
  bool armed = true;                   // guarded by mu: may destroy
  bool destroyed = false;              // guarded by mu: ~Cache has returned
  int calls_after = 0;                 // guarded by mu: calls starting after
  int told_twice = 0;                  // guarded by mu
  std::set<int> told;                  // guarded by mu
  std::vector<std::weak_ptr<int>> values;

  SharedCache::RemovalListener Listener() {
    return [this](int key, std::shared_ptr<int>, RemovalCause) {
      std::unique_ptr<SharedCache> victim;
      {
        std::lock_guard<std::mutex> lock(mu);
        ++calls;
        if (destroyed) ++calls_after;
        if (!told.insert(key).second) ++told_twice;
        if (armed) victim = std::move(cache);
      }
      if (victim == nullptr) return;
      victim.reset();  // not under mu: other listener calls may need it
      std::lock_guard<std::mutex> lock(mu);
      destroyed = true;
    };
  }
  void Fill(int n, absl::Duration ttl) {
    for (int i = 0; i < n; ++i) {
      auto v = std::make_shared<int>(i);
      values.push_back(v);
      ASSERT_TRUE(cache->Set(i, std::move(v), ttl).ok());
    }
  }
  bool AllValuesDead() const {
    for (const auto& w : values) {
      if (!w.expired()) return false;
    }
    return true;
  }
};

TEST(CacheC7, DestroyedFromItsOwnListenerInSetAndClear) {
  for (const bool clear : {false, true}) {
    DestroyingListener d;
    auto c = SharedCache::Create(Ttl(absl::Hours(1)), d.Listener());
    ASSERT_TRUE(c.ok());
    d.cache = std::move(*c);
    d.Fill(100, absl::Hours(1));
    if (clear) {
      d.cache->Clear();  // 100 removals: the first destroys the cache
    } else {
      ASSERT_TRUE(d.cache->Set(7, nullptr).ok());  // kReplaced: destroys
    }
    std::lock_guard<std::mutex> lock(d.mu);
    EXPECT_TRUE(d.destroyed);
    EXPECT_EQ(d.calls, 1);
    EXPECT_TRUE(d.AllValuesDead());
  }
}

TEST(CacheC7, DestroyedFromItsOwnListenerOnTheWheelWorker) {
  auto ticker = std::make_shared<ManualTicker>();
  DestroyingListener d;
  CacheOptions o;
  o.ttl = kInterval;
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  auto c = SharedCache::Create(o, d.Listener());
  ASSERT_TRUE(c.ok());
  d.cache = std::move(*c);
  // All in the same tick: about 300 in each of the 64 shards, more than
  // one batch of an expiring bucket (OnBucket goes on after the first).
  d.Fill(20000, kInterval);
  ticker->Tick(2);  // returns, though the worker destroyed the cache
  {
    std::lock_guard<std::mutex> lock(d.mu);
    EXPECT_TRUE(d.destroyed);
    EXPECT_EQ(d.calls, 1);
    EXPECT_TRUE(d.AllValuesDead());
  }
  // The rest of the wheel's teardown runs on its worker once the callback
  // has returned; then the ticker is free to drive a new cache.
  ASSERT_TRUE(BecomesTrue([&] { return SharedCache::Create(o).ok(); }))
      << "the ticker was never freed";
}

// Two workers expire shards at once: the one destroying the cache waits
// for the other's bucket, which may call the listener meanwhile.
TEST(CacheC7, DestroyedFromItsOwnListenerWithTwoWorkersExpiring) {
  for (int round = 0; round < 5; ++round) {
    DestroyingListener d;
    CacheOptions o;
    o.ttl = absl::Milliseconds(200);
    o.wheel.interval = absl::Milliseconds(5);
    o.wheel.execute_workers = 2;
    auto c = SharedCache::Create(o, d.Listener());
    ASSERT_TRUE(c.ok());
    d.cache = std::move(*c);
    // Armed only once filled (under sanitizers the first entries may expire
    // meanwhile); the last ones expire after that, many shards per tick.
    {
      std::lock_guard<std::mutex> lock(d.mu);
      d.armed = false;
    }
    d.Fill(20000, absl::Milliseconds(200));
    {
      std::lock_guard<std::mutex> lock(d.mu);
      d.armed = true;
    }
    ASSERT_TRUE(BecomesTrue([&] {
      std::lock_guard<std::mutex> lock(d.mu);
      return d.destroyed;
    })) << "the listener was never called";
    // The destroying worker drops its untold removals once its listener
    // call returns; a call wrongly started after ~Cache would show by then.
    ASSERT_TRUE(BecomesTrue([&] { return d.AllValuesDead(); }))
        << "values outlived the cache";
    absl::SleepFor(absl::Milliseconds(20));
    std::lock_guard<std::mutex> lock(d.mu);
    EXPECT_EQ(d.calls_after, 0);
    EXPECT_EQ(d.told_twice, 0);
    EXPECT_GE(d.calls, 1);
  }
}

// A listener that throws: each exception is caught and counted; every
// removal is still told (the next ones of a Clear, the rest of an expiring
// bucket), the calls that removed them return normally, and the entries are
// gone.
TEST(CacheC7, AThrowingListenerIsCaughtAndTheOthersAreStillTold) {
  auto ticker = std::make_shared<ManualTicker>();
  CacheOptions o;
  o.ttl = absl::InfiniteDuration();
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  std::mutex mu;
  std::vector<std::pair<int, RemovalCause>> told;
  auto c = IntCache::Create(o, [&](int key, int, RemovalCause cause) {
    {
      std::lock_guard<std::mutex> lock(mu);
      told.emplace_back(key, cause);
    }
    throw std::runtime_error("listener failed");
  });
  ASSERT_TRUE(c.ok());
  IntCache& cache = **c;
  for (int k = 0; k < 4; ++k) ASSERT_TRUE(cache.Set(k, k).ok());
  EXPECT_TRUE(cache.Delete(0));
  ASSERT_TRUE(cache.Set(1, 10).ok());  // replaces: kReplaced
  cache.Clear();                       // 1, 2, 3: kExplicit
  for (int k = 10; k < 13; ++k) {
    ASSERT_TRUE(cache.Set(k, k, kInterval).ok());
  }
  ticker->Tick(2);  // one bucket, three expiries
  EXPECT_EQ(cache.size(), 0u);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(told.size(), 8u);
  EXPECT_EQ(told[0], std::make_pair(0, RemovalCause::kExplicit));
  EXPECT_EQ(told[1], std::make_pair(1, RemovalCause::kReplaced));
  int expired = 0;
  for (std::size_t i = 5; i < told.size(); ++i) {
    expired += told[i].second == RemovalCause::kExpired;
  }
  EXPECT_EQ(expired, 3);
  const CacheStats st = cache.stats();
  EXPECT_EQ(st.listener_exceptions, 8u);
  EXPECT_EQ(st.expired, 3u);
}

TEST(CacheC7, ExactlyOnceWithoutAListenerToo) {
  // No listener: removals still happen and are counted.
  auto ticker = std::make_shared<ManualTicker>();
  CacheOptions o;
  o.ttl = kInterval;
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  auto c = IntCache::Create(o);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*c)->Set(i, i).ok());
  ticker->Tick();
  EXPECT_EQ((*c)->size(), 0u);
  EXPECT_EQ((*c)->stats().expired, 10u);
}

}  // namespace cache_listener_test
}  // namespace timingwheel
