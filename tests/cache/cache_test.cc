// docs/api.md's Cache rules C1-C8 and its errors, one test (or a few) per rule.
// Time is a ManualTicker's: outcomes are decided by tick counts, never by
// sleeps. Where threads meet (C6), the hand-offs are std::mutex and the
// cache's own counters, so no test depends on timing.

#include "timingwheel/cache.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace {

using ::absl::StatusCode;

constexpr absl::Duration kInterval = absl::Seconds(1);

using IntCache = Cache<int, int>;

// Every listener call, with the thread it ran on.
struct Removal {
  std::string key;
  int value;
  RemovalCause cause;
  std::thread::id thread;
  bool operator==(const Removal& o) const {
    return key == o.key && value == o.value && cause == o.cause;
  }
};

class Recorder {
 public:
  Cache<std::string, int>::RemovalListener Listener() {
    return [this](std::string key, int value, RemovalCause cause) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(
          {std::move(key), value, cause, std::this_thread::get_id()});
    };
  }
  std::vector<Removal> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(calls_, {});
  }

 private:
  std::mutex mu_;
  std::vector<Removal> calls_;
};

struct Fixture {
  explicit Fixture(CacheOptions options = {}) {
    options.wheel.interval = kInterval;
    options.wheel.ticker = ticker;
    auto c = Cache<std::string, int>::Create(options, recorder.Listener());
    EXPECT_TRUE(c.ok()) << c.status();
    cache = *std::move(c);
  }
  std::shared_ptr<ManualTicker> ticker = std::make_shared<ManualTicker>();
  Recorder recorder;
  std::unique_ptr<Cache<std::string, int>> cache;
};

CacheOptions Ttl(absl::Duration ttl) {
  CacheOptions o;
  o.ttl = ttl;
  return o;
}

// ---- Errors ----------------------------------------------------------------

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

// ---- C1 time ---------------------------------------------------------------

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

TEST(CacheC1, ChronoTtl) {
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

// ---- C2 expiry needs no activity -------------------------------------------

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

// ---- C3 replace, delete, clear ---------------------------------------------

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

// ---- C4 sliding -------------------------------------------------------------

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

// ---- C5 size ----------------------------------------------------------------

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

// ---- C6 load ----------------------------------------------------------------

// Blocks load() until released; counts its calls.
class Gate {
 public:
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// N threads miss the same key while one load() blocks: load runs once and
// every thread gets its outcome. The gate opens only once all N have been
// counted as misses, i.e. all are waiting on the one load.
void LoadOnce(const std::function<absl::StatusOr<int>()>& outcome,
              const std::function<void(const absl::StatusOr<int>&)>& check) {
  Fixture f(Ttl(5 * kInterval));
  constexpr int kThreads = 8;
  Gate gate;
  std::atomic<int> calls{0};
  std::vector<absl::StatusOr<int>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      results[t] = f.cache->GetOrLoad("k", [&]() -> absl::StatusOr<int> {
        calls.fetch_add(1);
        gate.Wait();
        return outcome();
      });
    });
  }
  while (f.cache->stats().misses < kThreads) std::this_thread::yield();
  gate.Release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& r : results) check(r);
}

TEST(CacheC6, OneLoadForConcurrentCallersAndEachGetsTheValue) {
  LoadOnce([] { return absl::StatusOr<int>(42); },
           [](const absl::StatusOr<int>& r) {
             ASSERT_TRUE(r.ok()) << r.status();
             EXPECT_EQ(*r, 42);
           });
}

TEST(CacheC6, AnErrorGoesToEveryWaiter) {
  LoadOnce([] { return absl::StatusOr<int>(absl::NotFoundError("no")); },
           [](const absl::StatusOr<int>& r) {
             EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
           });
}

TEST(CacheC6, AnExceptionBecomesInternalForEveryWaiter) {
  LoadOnce([]() -> absl::StatusOr<int> { throw std::runtime_error("boom"); },
           [](const absl::StatusOr<int>& r) {
             EXPECT_EQ(r.status().code(), StatusCode::kInternal);
           });
}

TEST(CacheC6, OkIsStoredWithOptionsTtlErrorsAreNot) {
  Fixture f(Ttl(3 * kInterval));
  int calls = 0;
  auto fail = [&]() -> absl::StatusOr<int> {
    ++calls;
    return absl::UnavailableError("down");
  };
  EXPECT_EQ(f.cache->GetOrLoad("k", fail).status().code(),
            StatusCode::kUnavailable);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.cache->GetOrLoad("k", fail).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(calls, 2);  // not stored: loaded again
  auto thrower = [&]() -> absl::StatusOr<int> { throw 7; };
  EXPECT_EQ(f.cache->GetOrLoad("k", thrower).status().code(),
            StatusCode::kInternal);
  auto ok = [&]() -> absl::StatusOr<int> {
    ++calls;
    return 5;
  };
  EXPECT_EQ(f.cache->GetOrLoad("k", ok).value(), 5);
  EXPECT_EQ(f.cache->GetOrLoad("k", ok).value(), 5);  // a hit
  EXPECT_EQ(calls, 3);
  f.ticker->Tick(2);
  EXPECT_EQ(f.cache->Get("k"), 5);
  f.ticker->Tick();
  EXPECT_FALSE(f.cache->Get("k").has_value());
  CacheStats st = f.cache->stats();
  EXPECT_EQ(st.loads, 1u);
  EXPECT_EQ(st.load_failures, 3u);
}

// A write of the key while its load runs wins: the loaded value (perhaps
// older) goes to the caller but is not stored, and does not replace the
// newer value; it goes to the listener as kReplaced, as if stored and at
// once replaced, so that it too leaves exactly once.
TEST(CacheC6, ASetDeleteOrClearDuringTheLoadWins) {
  Fixture f(Ttl(10 * kInterval));
  auto loaded = f.cache->GetOrLoad("k", [&]() -> absl::StatusOr<int> {
    EXPECT_TRUE(f.cache->Set("k", 2).ok());
    return 1;
  });
  EXPECT_EQ(loaded.value(), 1);
  EXPECT_EQ(f.cache->Get("k"), 2);
  EXPECT_EQ(f.recorder.Take(),
            (std::vector<Removal>{{"k", 1, RemovalCause::kReplaced, {}}}));

  ASSERT_TRUE(f.cache->Delete("k"));
  f.recorder.Take();
  loaded = f.cache->GetOrLoad("k", [&]() -> absl::StatusOr<int> {
    EXPECT_TRUE(f.cache->Set("k", 3).ok());
    EXPECT_TRUE(f.cache->Delete("k"));
    return 1;
  });
  EXPECT_EQ(loaded.value(), 1);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.recorder.Take(),
            (std::vector<Removal>{{"k", 3, RemovalCause::kExplicit, {}},
                                  {"k", 1, RemovalCause::kReplaced, {}}}));

  loaded = f.cache->GetOrLoad("k", [&]() -> absl::StatusOr<int> {
    f.cache->Clear();
    return 1;
  });
  EXPECT_EQ(loaded.value(), 1);
  EXPECT_FALSE(f.cache->Get("k").has_value());
  EXPECT_EQ(f.cache->size(), 0u);
  EXPECT_EQ(f.recorder.Take(),
            (std::vector<Removal>{{"k", 1, RemovalCause::kReplaced, {}}}));

  // With nothing in the way, the loaded value is stored.
  loaded = f.cache->GetOrLoad("k", [] { return absl::StatusOr<int>(4); });
  EXPECT_EQ(f.cache->Get("k"), 4);
  EXPECT_EQ(f.cache->stats().loads, 4u);
}

TEST(CacheC6, LoadMayCallTheCache) {
  // One shard (small max_entries), so every key shares the lock a held
  // lock would deadlock on.
  CacheOptions o = Ttl(absl::InfiniteDuration());
  o.max_entries = 100;
  Fixture f(o);
  ASSERT_TRUE(f.cache->Set("other", 1).ok());
  auto r = f.cache->GetOrLoad("k", [&]() -> absl::StatusOr<int> {
    EXPECT_EQ(f.cache->Get("other"), 1);
    EXPECT_TRUE(f.cache->Set("third", 3).ok());
    auto inner =
        f.cache->GetOrLoad("fourth", [] { return absl::StatusOr<int>(4); });
    EXPECT_EQ(inner.value(), 4);
    EXPECT_TRUE(f.cache->Delete("other"));
    return 2;
  });
  EXPECT_EQ(r.value(), 2);
  EXPECT_EQ(f.cache->Get("k"), 2);
  EXPECT_EQ(f.cache->Get("third"), 3);
  EXPECT_EQ(f.cache->Get("fourth"), 4);
  EXPECT_EQ(f.cache->size(), 3u);
}

// A load() that destroys the cache: GetOrLoad returns what it loaded
// without touching the cache again (nothing to store it in), and the
// values the cache held die with it.
TEST(CacheC6, ALoadThatDestroysTheCacheGetsItsResult) {
  using SharedCache = Cache<int, std::shared_ptr<int>>;
  auto c = SharedCache::Create(Ttl(absl::Hours(1)));
  ASSERT_TRUE(c.ok());
  std::unique_ptr<SharedCache> cache = std::move(*c);
  std::vector<std::weak_ptr<int>> held;
  for (int k = 0; k < 100; ++k) {
    auto v = std::make_shared<int>(k);
    held.push_back(v);
    ASSERT_TRUE(cache->Set(k, std::move(v)).ok());
  }
  SharedCache* const raw = cache.get();
  auto loaded =
      raw->GetOrLoad(1000, [&]() -> absl::StatusOr<std::shared_ptr<int>> {
        cache.reset();
        return std::make_shared<int>(1000);
      });
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE(*loaded, nullptr);
  EXPECT_EQ(**loaded, 1000);
  EXPECT_EQ(loaded->use_count(), 1);  // stored nowhere
  EXPECT_EQ(cache, nullptr);
  for (const auto& w : held) EXPECT_TRUE(w.expired());
}

// A load that asks for its own key, directly or through another key's load
// on the same thread, would wait for itself: that inner call returns
// FailedPrecondition (as Guava and Caffeine throw), the outer load goes on,
// and while it runs other threads still wait for it, as for any load.
TEST(CacheC6, ALoadAskingForItsOwnKeyFailsInsteadOfHanging) {
  Fixture f(Ttl(absl::InfiniteDuration()));
  absl::StatusCode direct = absl::StatusCode::kOk;
  absl::StatusCode through_b = absl::StatusCode::kOk;
  std::atomic<int> other_thread_value{0};
  std::thread waiter;
  auto r = f.cache->GetOrLoad("a", [&]() -> absl::StatusOr<int> {
    direct = f.cache->GetOrLoad("a", [] { return absl::StatusOr<int>(9); })
                 .status()
                 .code();
    // Another thread missing "a" now waits for this load, and gets its
    // value.
    waiter = std::thread([&] {
      auto v = f.cache->GetOrLoad("a", [] { return absl::StatusOr<int>(8); });
      other_thread_value.store(v.ok() ? *v : -1);
    });
    auto b = f.cache->GetOrLoad("b", [&]() -> absl::StatusOr<int> {
      through_b = f.cache->GetOrLoad("a", [] { return absl::StatusOr<int>(7); })
                      .status()
                      .code();
      return 2;
    });
    EXPECT_EQ(b.value(), 2);
    // The waiter cannot finish before this load does: let it block first.
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_EQ(other_thread_value.load(), 0);
    return 1;
  });
  waiter.join();
  EXPECT_EQ(r.value(), 1);
  EXPECT_EQ(direct, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(through_b, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.cache->Get("a"), 1);
  EXPECT_EQ(f.cache->Get("b"), 2);
  EXPECT_EQ(other_thread_value.load(), 1);
  EXPECT_EQ(f.cache->stats().loads, 2u);
}

// ---- C7 listener
// --------------------------------------------------------------

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
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (!SharedCache::Create(o).ok()) {
    ASSERT_LT(absl::Now(), give_up) << "the ticker was never freed";
    absl::SleepFor(absl::Milliseconds(1));
  }
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
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(d.mu);
        if (d.destroyed) break;
      }
      ASSERT_LT(absl::Now(), give_up) << "the listener was never called";
      absl::SleepFor(absl::Milliseconds(1));
    }
    // The destroying worker drops its untold removals once its listener
    // call returns; a call wrongly started after ~Cache would show by then.
    while (!d.AllValuesDead()) {
      ASSERT_LT(absl::Now(), give_up) << "values outlived the cache";
      absl::SleepFor(absl::Milliseconds(1));
    }
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

// ---- C8 stats
// -----------------------------------------------------------------

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

// ---- memory
// -------------------------------------------------------------------

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

}  // namespace
}  // namespace timingwheel
