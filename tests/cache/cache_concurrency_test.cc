// Real time, several threads: every value set is accounted for exactly once
// (returned by the listener once, with a cause, or cleared at the end), Get
// returns only values of the key asked for, and after ~Cache no listener
// call runs. Each run lasts about a second of wall time, so it stays short
// under ThreadSanitizer; its assertions do not depend on timing.

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "../common/event.h"
#include "../common/hang_guard.h"
#include "../common/steady_now.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"

namespace timingwheel {
namespace cache_concurrency_test {

using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::Event;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::NowNs;

constexpr int kThreads = 4;
constexpr int kKeys = 256;
constexpr std::uint64_t kIdsPerThread = 1 << 20;
constexpr absl::Duration kRunFor = absl::Seconds(1);

// value = id * kKeys + key, ids unique per thread range.
std::uint64_t Value(std::uint64_t id, int key) { return id * kKeys + key; }

// Ids of the values set after the threads have finished.
constexpr std::uint64_t kTailIds = kThreads * kIdsPerThread;
constexpr int kTailValues = 10;

struct Accounting {
  std::vector<std::atomic<std::uint8_t>> removed =
      std::vector<std::atomic<std::uint8_t>>(kTailIds + kTailValues);
  std::vector<std::uint8_t> stored = std::vector<std::uint8_t>(
      kTailIds + kTailValues);  // per-thread ranges, then the tail
  std::atomic<int> errors{0};
  std::atomic<bool> destroyed{false};
  std::atomic<std::uint64_t> by_cause[4] = {};
};

void RunAndAccount(CacheOptions options) {
  auto acc = std::make_unique<Accounting>();
  options.wheel.interval = absl::Milliseconds(1);
  auto created = Cache<int, std::uint64_t>::Create(
      options, [&](int key, std::uint64_t value, RemovalCause cause) {
        if (acc->destroyed.load()) acc->errors++;
        if (static_cast<int>(value % kKeys) != key) acc->errors++;
        const std::uint64_t id = value / kKeys;
        if (acc->removed[id].fetch_add(1) != 0) acc->errors++;
        acc->by_cause[static_cast<int>(cause)]++;
      });
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Cache<int, std::uint64_t>> cache = *std::move(created);

  const absl::Time end = absl::Now() + kRunFor;
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> ops{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      std::uint64_t next_id = t * kIdsPerThread;
      const std::uint64_t last_id = (t + 1) * kIdsPerThread;
      std::uint64_t n = 0;
      while (next_id + 1 < last_id && (n % 64 != 0 || absl::Now() < end)) {
        ++n;
        const int key = static_cast<int>(rng() % kKeys);
        const int op = static_cast<int>(rng() % 1000);
        if (op < 400) {
          const std::uint64_t id = next_id++;
          const absl::Duration ttl =
              op < 10 ? absl::InfiniteDuration()
                      : absl::Milliseconds(1 + static_cast<int>(rng() % 20));
          if (cache->Set(key, Value(id, key), ttl).ok()) {
            acc->stored[id] = 1;
          } else {
            acc->errors++;
          }
        } else if (op < 800) {
          auto v = cache->Get(key);
          if (v && static_cast<int>(*v % kKeys) != key) acc->errors++;
        } else if (op < 900) {
          cache->Delete(key);
        } else if (op < 999) {
          const std::uint64_t id = next_id++;
          const bool fail = op % 4 == 0;
          auto r =
              cache->GetOrLoad(key, [&]() -> absl::StatusOr<std::uint64_t> {
                if (fail) return absl::UnavailableError("down");
                return Value(id, key);
              });
          if (r.ok()) {
            if (static_cast<int>(*r % kKeys) != key) acc->errors++;
            if (*r == Value(id, key)) acc->stored[id] = 1;
          }
        } else {
          cache->Clear();
        }
      }
      ops += n;
    });
  }
  for (auto& th : threads) th.join();
  if (options.max_entries != 0) {
    EXPECT_GT(acc->by_cause[static_cast<int>(RemovalCause::kSize)].load(), 0u);
  }
  // Expiry under the same options: a few values in a cache with room for
  // them, which only their time to live can take. (Whether any of the run's
  // values expired depends on speed: with max_entries, eviction may take
  // every one of them first.)
  cache->Clear();
  for (int k = 0; k < kTailValues; ++k) {
    const std::uint64_t id = kTailIds + k;
    if (cache->Set(k, Value(id, k), absl::Milliseconds(1)).ok()) {
      acc->stored[id] = 1;
    } else {
      acc->errors++;
    }
  }
  // Waits for an expiry; the EXPECT_GT below says if none came.
  BecomesTrue([&] {
    return acc->by_cause[static_cast<int>(RemovalCause::kExpired)].load() > 0;
  });
  EXPECT_GT(acc->by_cause[static_cast<int>(RemovalCause::kExpired)].load(), 0u);
  cache->Clear();
  EXPECT_EQ(cache->size(), 0u);
  // Let stale timers fire into the emptied cache: they must find nothing.
  absl::SleepFor(absl::Milliseconds(50));
  cache.reset();
  acc->destroyed = true;
  EXPECT_EQ(acc->errors.load(), 0);
  std::uint64_t stored = 0;
  for (std::uint64_t id = 0; id < acc->stored.size(); ++id) {
    stored += acc->stored[id];
    ASSERT_EQ(acc->removed[id].load(), acc->stored[id]) << "id " << id;
  }
  EXPECT_GT(stored, 1000u);
  std::printf("%llu ops, %llu values stored\n",
              static_cast<unsigned long long>(ops.load()),
              static_cast<unsigned long long>(stored));
}

TEST(CacheConcurrency, EveryValueExactlyOnceAfterWrite) { RunAndAccount({}); }

TEST(CacheConcurrency, EveryValueExactlyOnceSliding) {
  CacheOptions o;
  o.sliding = true;
  RunAndAccount(o);
}

TEST(CacheConcurrency, EveryValueExactlyOnceBounded) {
  CacheOptions o;
  o.max_entries = 100;
  o.wheel.execute_workers = 1;
  RunAndAccount(o);
}

// C2 on real time: no cache calls after the Sets, every entry still removed
// and notified; and, C1 against the steady clock, none before its Set's
// call time + ttl (the clock read just before the call bounds the wheel's
// own reading from below).
TEST(CacheConcurrency, ExpiresWithoutActivity) {
  constexpr int kKeys = 10000;
  std::vector<std::int64_t> earliest(kKeys);
  std::vector<std::atomic<std::int64_t>> expired_at(kKeys);
  std::atomic<int> expired{0};
  CacheOptions o;
  o.wheel.interval = absl::Milliseconds(1);
  auto cache =
      Cache<int, int>::Create(o, [&](int key, int, RemovalCause cause) {
        if (cause != RemovalCause::kExpired) return;
        expired_at[key].store(NowNs());
        expired++;
      });
  ASSERT_TRUE(cache.ok());
  for (int i = 0; i < kKeys; ++i) {
    const absl::Duration ttl = absl::Milliseconds(5 + i % 20);
    earliest[i] = NowNs() + absl::ToInt64Nanoseconds(ttl);
    ASSERT_TRUE((*cache)->Set(i, i, ttl).ok());
  }
  // Waits for every expiry; the EXPECT_EQ below says if some did not come.
  BecomesTrue([&] { return expired.load() >= kKeys; });
  EXPECT_EQ(expired.load(), kKeys);
  EXPECT_EQ((*cache)->size(), 0u);
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_GE(expired_at[i].load(), earliest[i])
        << "key " << i << " expired "
        << (earliest[i] - expired_at[i].load()) / 1000.0 << " us early";
  }
}

// C7 on real time: ~Cache waits for a listener call in flight (one blocked
// inside an expiry here) before it returns, and no call runs after it.
// Values still present are destroyed without a listener call.
TEST(CacheConcurrency, DestructionWaitsForAListenerCallInFlight) {
  Event entered, released;
  std::atomic<bool> destroyed{false};
  std::atomic<int> calls_after{0}, calls{0};
  CacheOptions o;
  o.wheel.interval = absl::Milliseconds(1);
  auto cache = Cache<int, int>::Create(o, [&](int key, int, RemovalCause) {
    if (destroyed.load()) calls_after++;
    calls++;
    if (key != 0) return;
    entered.Notify();
    released.WaitFor(kHangGuard);
  });
  ASSERT_TRUE(cache.ok());
  for (int k = 1; k <= 100; ++k) {
    ASSERT_TRUE((*cache)->Set(k, k, absl::Hours(1)).ok());
  }
  ASSERT_TRUE((*cache)->Set(0, 0, absl::Milliseconds(1)).ok());
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  std::thread destroyer([&] {
    cache->reset();
    destroyed.store(true);
  });
  // A correct ~Cache cannot return while the listener is blocked; a wrong
  // one would have done so long before this.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(destroyed.load());
  released.Notify();
  destroyer.join();
  EXPECT_TRUE(destroyed.load());
  EXPECT_EQ(calls_after.load(), 0);
  EXPECT_EQ(calls.load(), 1);  // the 100 left were destroyed unannounced
}

}  // namespace cache_concurrency_test
}  // namespace timingwheel
