// A Set that moves a present, unexpired key's one-word value to a later
// deadline, in a cache without a size bound, runs without its shard's lock
// (CacheImpl::SetWithoutLock); every other Set takes the lock. Shown by
// holding every shard's lock from the test: a lock-free Set finishes
// meanwhile, any other waits for the lock. Time is a ManualTicker, so
// "later" and "expired" are decided by tick counts; only "waits" is a
// wait, and it fails quickly if the Set does not wait.

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_set_without_lock_test {

using ::timingwheel::internal::CacheTestPeer;
using Heard = std::tuple<int, std::uint64_t, RemovalCause>;
using WordCache = Cache<int, std::uint64_t>;

// Generous: a lock-free Set takes microseconds.
constexpr auto kFinishes = std::chrono::seconds(30);
// How long a Set that must take the lock is seen waiting for it.
constexpr auto kWaits = std::chrono::milliseconds(100);

struct Fixture {
  std::shared_ptr<ManualTicker> ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::vector<Heard> heard;
  std::unique_ptr<WordCache> cache;

  explicit Fixture(std::size_t max_entries = 0) {
    CacheOptions o;
    o.ttl = absl::Seconds(10);
    o.max_entries = max_entries;
    o.wheel.interval = absl::Seconds(1);
    o.wheel.ticker = ticker;
    auto created = WordCache::Create(
        o, [this](int key, std::uint64_t value, RemovalCause cause) {
          std::lock_guard<std::mutex> lock(mu);
          heard.emplace_back(key, value, cause);
        });
    EXPECT_TRUE(created.ok()) << created.status();
    cache = *std::move(created);
  }
  std::vector<Heard> HeardSoFar() {
    std::lock_guard<std::mutex> lock(mu);
    return heard;
  }
};

// Holds every shard's lock of `cache` while alive.
class AllShardsLocked {
 public:
  explicit AllShardsLocked(WordCache& cache) {
    for (std::size_t k = 0; k < CacheTestPeer::Shards(cache); ++k) {
      auto& mu = CacheTestPeer::Mu(CacheTestPeer::Shard(cache, k));
      mu.Lock();
      held_.push_back(&mu);
    }
  }
  ~AllShardsLocked() { Release(); }
  void Release() {
    for (auto* mu : held_) mu->Unlock();
    held_.clear();
  }

 private:
  std::vector<internal::Mutex*> held_;
};

std::future<absl::Status> SetOnAnotherThread(WordCache& cache, int key,
                                             std::uint64_t value,
                                             absl::Duration ttl) {
  return std::async(std::launch::async, [&cache, key, value, ttl] {
    return cache.Set(key, value, ttl);
  });
}

TEST(CacheSetWithoutLock, ALaterSetOfAPresentKeyPassesTheHeldLock) {
  Fixture f;
  ASSERT_TRUE(f.cache->Set(1, 10).ok());  // due at 10 s
  f.ticker->Tick();
  {
    AllShardsLocked locked(*f.cache);
    auto set = SetOnAnotherThread(*f.cache, 1, 11, absl::Seconds(10));  // 11 s
    ASSERT_EQ(set.wait_for(kFinishes), std::future_status::ready)
        << "the Set waited for the shard's lock";
    EXPECT_EQ(set.get(), absl::OkStatus());
  }
  EXPECT_EQ(f.cache->Get(1), std::optional<std::uint64_t>(11));
  EXPECT_EQ(f.HeardSoFar(),
            (std::vector<Heard>{{1, 10, RemovalCause::kReplaced}}));
  EXPECT_EQ(f.cache->stats().replaced, 1u);
  EXPECT_EQ(f.cache->size(), 1u);
  EXPECT_EQ(CacheTestPeer::CheckInvariants(*f.cache), absl::OkStatus());

  // The entry stays in the bucket of 10 s, which moves it on: it lives its
  // whole new time to live, then expires once.
  f.ticker->Tick(9);  // 10 s
  EXPECT_EQ(f.cache->Get(1), std::optional<std::uint64_t>(11));
  f.ticker->Tick();  // 11 s
  EXPECT_EQ(f.cache->Get(1), std::nullopt);
  EXPECT_EQ(f.HeardSoFar().size(), 2u);
  EXPECT_EQ(f.HeardSoFar().back(), (Heard{1, 11, RemovalCause::kExpired}));
  EXPECT_EQ(CacheTestPeer::CheckInvariants(*f.cache), absl::OkStatus());
}

// Each of these Sets must take the lock: it waits while the test holds it,
// then finishes once it is released, with the usual result.
void ExpectSetWaitsForTheLock(Fixture& f, int key, std::uint64_t value,
                              absl::Duration ttl) {
  AllShardsLocked locked(*f.cache);
  auto set = SetOnAnotherThread(*f.cache, key, value, ttl);
  EXPECT_EQ(set.wait_for(kWaits), std::future_status::timeout)
      << "Set(" << key << ", " << value << ") did not wait for the lock";
  locked.Release();
  ASSERT_EQ(set.wait_for(kFinishes), std::future_status::ready);
  EXPECT_EQ(set.get(), absl::OkStatus());
}

TEST(CacheSetWithoutLock, OtherSetsTakeTheLock) {
  Fixture f;
  ASSERT_TRUE(f.cache->Set(1, 10).ok());                  // due at 10 s
  ExpectSetWaitsForTheLock(f, 2, 20, absl::Seconds(10));  // absent
  ExpectSetWaitsForTheLock(f, 1, 11, absl::Seconds(5));   // earlier: 5 s
  ExpectSetWaitsForTheLock(f, 1, 12, absl::Seconds(5));   // not later
  f.ticker->Tick(5);                                      // 1 expires
  ExpectSetWaitsForTheLock(f, 1, 13, absl::Seconds(10));  // gone again
  EXPECT_EQ(f.cache->Get(1), std::optional<std::uint64_t>(13));
  EXPECT_EQ(f.cache->Get(2), std::optional<std::uint64_t>(20));
  EXPECT_EQ(f.HeardSoFar(),
            (std::vector<Heard>{{1, 10, RemovalCause::kReplaced},
                                {1, 11, RemovalCause::kReplaced},
                                {1, 12, RemovalCause::kExpired}}));
  EXPECT_EQ(CacheTestPeer::CheckInvariants(*f.cache), absl::OkStatus());
}

TEST(CacheSetWithoutLock, ABoundedCacheTakesTheLock) {
  Fixture f(/*max_entries=*/16);
  ASSERT_TRUE(f.cache->Set(1, 10).ok());
  f.ticker->Tick();
  // Later, present, unexpired: lock-free but for the policy.
  ExpectSetWaitsForTheLock(f, 1, 11, absl::Seconds(10));
  EXPECT_EQ(f.cache->Get(1), std::optional<std::uint64_t>(11));
}

// While a GetOrLoad is open on a shard, Sets there take the lock, so that
// one that outdates its load marks it superseded: the load's value then
// leaves at once, replaced, and the Set's value stays.
TEST(CacheSetWithoutLock, AnOpenLoadSendsSetsToTheLock) {
  Fixture f;
  int near = 3;  // a key in key 2's shard
  while (CacheTestPeer::ShardOf(*f.cache, near) !=
         CacheTestPeer::ShardOf(*f.cache, 2)) {
    ++near;
  }
  ASSERT_TRUE(f.cache->Set(near, 10).ok());
  f.ticker->Tick();
  std::promise<void> loading, release;
  auto load = std::async(std::launch::async, [&] {
    return f.cache->GetOrLoad(2, [&]() -> absl::StatusOr<std::uint64_t> {
      loading.set_value();
      release.get_future().wait();
      return 21;
    });
  });
  loading.get_future().wait();
  ExpectSetWaitsForTheLock(f, near, 11, absl::Seconds(10));  // in place
  ExpectSetWaitsForTheLock(f, 2, 20, absl::Seconds(10));  // outdates the load
  release.set_value();
  const absl::StatusOr<std::uint64_t> loaded = load.get();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, 21u);
  EXPECT_EQ(f.cache->Get(2), std::optional<std::uint64_t>(20));
  EXPECT_EQ(f.HeardSoFar(),
            (std::vector<Heard>{{near, 10, RemovalCause::kReplaced},
                                {2, 21, RemovalCause::kReplaced}}));

  // Closed again: the next later Set of a present key is lock-free.
  f.ticker->Tick();
  AllShardsLocked locked(*f.cache);
  auto set = SetOnAnotherThread(*f.cache, near, 12, absl::Seconds(10));
  ASSERT_EQ(set.wait_for(kFinishes), std::future_status::ready);
  EXPECT_EQ(set.get(), absl::OkStatus());
}

}  // namespace cache_set_without_lock_test
}  // namespace timingwheel
