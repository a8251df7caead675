// Gets without a lock, raced on a small cache against Sets, Deletes, expiry
// and eviction, all at once, on real time. The values are heap strings, so
// a Get that copied a value being destroyed shows under AddressSanitizer,
// and one racing a writer under ThreadSanitizer. Checked:
//   - every value set leaves exactly once (listener, or the final Clear);
//   - a Get returns only a value set for its key, never one whose removal
//     the listener heard of before the Get began, and (expiry after write)
//     never one past its time to live when the Get began (C1);
//   - the structures' invariants hold afterwards.
// Each run lasts about a second; its assertions do not depend on timing.
// And, under a ManualTicker, when a value a Get may be reading is freed.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/steady_now.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/internal/cache/epoch.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace {

using ::timingwheel::internal::CacheTestPeer;
using ::timingwheel::testing::NowNs;

constexpr int kKeys = 64;
constexpr int kWriters = 2;
constexpr int kReaders = 2;
constexpr std::uint64_t kIdsPerWriter = 1 << 18;
constexpr absl::Duration kRunFor = absl::Seconds(1);
// How far ahead of the steady clock the cache's clock may read
// (CycleClock::kMaxAheadNs), and then some.
constexpr std::int64_t kClockSlackNs = 100'000;

// A value: its id in ten digits, then padding, so that it lives on the heap.
std::string ValueOf(std::uint64_t id) {
  return absl::StrFormat("%010d-value-on-the-heap-not-in-the-string",
                         static_cast<long long>(id));
}
std::uint64_t IdOf(const std::string& v) {
  std::uint64_t id = 0;
  if (v.size() < 10 || !absl::SimpleAtoi(v.substr(0, 10), &id)) return ~0ull;
  return id;
}

struct Value {
  int key = -1;
  std::int64_t ttl_ns = 0;
  std::atomic<std::int64_t> set_done_ns{0};  // 0: not (yet) accepted
  std::atomic<std::int64_t> removed_ns{0};   // when the listener heard
  std::atomic<int> removals{0};
};

struct Run {
  std::vector<Value> values = std::vector<Value>(kWriters * kIdsPerWriter);
  std::atomic<int> errors{0};
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> by_cause[4] = {};

  void Error(const char* what, std::uint64_t id) {
    if (errors.fetch_add(1) < 10) {
      std::fprintf(stderr, "%s: value %llu\n", what,
                   static_cast<unsigned long long>(id));
    }
  }
};

void RaceGetsAgainstWriters(CacheOptions options) {
  auto run = std::make_unique<Run>();
  options.wheel.interval = absl::Milliseconds(1);
  using StringCache = Cache<int, std::string>;
  auto created = StringCache::Create(
      options, [&](int key, std::string value, RemovalCause cause) {
        const std::uint64_t id = IdOf(value);
        if (id >= run->values.size()) return run->Error("listener: bad", id);
        Value& v = run->values[id];
        if (v.key != key) run->Error("listener: wrong key", id);
        v.removed_ns.store(NowNs());
        if (v.removals.fetch_add(1) != 0) run->Error("removed twice", id);
        run->by_cause[static_cast<int>(cause)]++;
      });
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<StringCache> cache = *std::move(created);

  const absl::Time end = absl::Now() + kRunFor;
  std::atomic<bool> writing{true};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w + 1);
      std::uint64_t id = w * kIdsPerWriter;
      const std::uint64_t last = (w + 1) * kIdsPerWriter;
      for (std::uint64_t n = 0; id < last && (n % 64 != 0 || absl::Now() < end);
           ++n) {
        const int key = static_cast<int>(rng() % kKeys);
        if (rng() % 8 == 0) {
          cache->Delete(key);
          continue;
        }
        Value& v = run->values[id];
        v.key = key;
        v.ttl_ns = 1'000'000 * static_cast<std::int64_t>(1 + rng() % 5);
        if (cache->Set(key, ValueOf(id), absl::Nanoseconds(v.ttl_ns)).ok()) {
          v.set_done_ns.store(NowNs());
        } else {
          run->Error("Set refused", id);
        }
        ++id;
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      while (writing.load(std::memory_order_relaxed)) {
        for (int k = 0; k < 256; ++k) {
          const int key = static_cast<int>(rng() % kKeys);
          const std::int64_t began = NowNs();
          const std::optional<std::string> got = cache->Get(key);
          if (!got.has_value()) continue;
          run->hits++;
          const std::uint64_t id = IdOf(*got);
          if (id >= run->values.size()) {
            run->Error("Get: not a value", id);
            continue;
          }
          const Value& v = run->values[id];
          if (v.key != key) run->Error("Get: another key's value", id);
          const std::int64_t removed = v.removed_ns.load();
          if (removed != 0 && removed < began) {
            run->Error("Get: a value removed before it began", id);
          }
          const std::int64_t done = v.set_done_ns.load();
          if (!options.sliding && done != 0 &&
              began > done + v.ttl_ns + kClockSlackNs) {
            run->Error("Get: a value past its time to live", id);
          }
        }
      }
    });
  }
  for (int t = 0; t < kWriters; ++t) threads[t].join();
  writing.store(false);
  for (int t = kWriters; t < kWriters + kReaders; ++t) threads[t].join();

  EXPECT_EQ(CacheTestPeer::CheckInvariants(*cache), absl::OkStatus());
  cache->Clear();
  EXPECT_EQ(cache->size(), 0u);
  absl::SleepFor(absl::Milliseconds(20));  // stale bucket timers fire
  cache.reset();
  EXPECT_EQ(run->errors.load(), 0);
  std::uint64_t accepted = 0;
  for (std::uint64_t id = 0; id < run->values.size(); ++id) {
    const Value& v = run->values[id];
    const int expected = v.set_done_ns.load() != 0 ? 1 : 0;
    accepted += expected;
    ASSERT_EQ(v.removals.load(), expected) << "value " << id;
  }
  EXPECT_GT(accepted, 1000u);
  EXPECT_GT(run->hits.load(), 1000u);
  if (options.max_entries != 0) {
    EXPECT_GT(run->by_cause[static_cast<int>(RemovalCause::kSize)].load(), 0u);
  }
  std::printf("%llu values, %llu hits; expired %llu, evicted %llu\n",
              static_cast<unsigned long long>(accepted),
              static_cast<unsigned long long>(run->hits.load()),
              static_cast<unsigned long long>(
                  run->by_cause[static_cast<int>(RemovalCause::kExpired)]),
              static_cast<unsigned long long>(
                  run->by_cause[static_cast<int>(RemovalCause::kSize)]));
}

// A value removed while a Get may be reading it outlives that Get and no
// more: freed by the shard's next write, or without one by the reclaim
// timer an interval later. With no Get reading, the removal frees it.
TEST(CacheReclaim, AValueAGetMayReadLivesUntilTheGetEnds) {
  CacheOptions o;
  o.wheel.interval = absl::Seconds(1);
  auto ticker = std::make_shared<ManualTicker>();
  o.wheel.ticker = ticker;
  auto created = Cache<int, std::shared_ptr<int>>::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  auto& cache = **created;
  auto value = std::make_shared<int>(1);
  const std::weak_ptr<int> first = value;
  ASSERT_TRUE(cache.Set(1, std::move(value)).ok());
  {
    internal::CacheReadSection read(CacheTestPeer::Epochs(cache));
    ASSERT_TRUE(read.active());
    EXPECT_TRUE(cache.Delete(1));
    EXPECT_FALSE(first.expired()) << "freed under a Get's read section";
  }
  EXPECT_FALSE(first.expired());  // no write since, no tick
  EXPECT_EQ(CacheTestPeer::CheckInvariants(cache), absl::OkStatus());
  ticker->Tick();  // the reclaim timer
  EXPECT_TRUE(first.expired()) << "left retired after the Get ended";

  value = std::make_shared<int>(2);
  const std::weak_ptr<int> second = value;
  ASSERT_TRUE(cache.Set(2, std::move(value)).ok());
  EXPECT_TRUE(cache.Delete(2));
  EXPECT_TRUE(second.expired()) << "kept with no Get reading";
  EXPECT_EQ(CacheTestPeer::CheckInvariants(cache), absl::OkStatus());
}

TEST(CacheRace, GetsAgainstWritesExpiryAndEviction) {
  CacheOptions o;
  o.max_entries = 32;
  RaceGetsAgainstWriters(o);
}

TEST(CacheRace, SlidingGetsAgainstWritesExpiryAndEviction) {
  CacheOptions o;
  o.max_entries = 32;
  o.sliding = true;
  RaceGetsAgainstWriters(o);
}

TEST(CacheRace, GetsAgainstWritesAndExpiryUnbounded) {
  RaceGetsAgainstWriters({});
}

}  // namespace
}  // namespace timingwheel
