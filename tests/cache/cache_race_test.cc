// Gets without a lock, raced on a small cache against Sets, Deletes,
// GetOrLoads, expiry and eviction, all at once, on real time. The values are
// heap strings, so a Get that copied a value being destroyed shows under
// AddressSanitizer, and one racing a writer under ThreadSanitizer; or 8-byte
// words, which a Set replaces in the node a Get reads
// (CacheNode::kValueInPlace), so a Get that paired a value with another value's
// deadline shows. Checked:
//   - every value set leaves exactly once (listener, or the final Clear);
//   - a Get returns only a value set for its key, never one whose removal
//     the listener heard of before the Get began, and (expiry after write)
//     never one past its time to live when the Get began (C1);
//   - the structures' invariants hold afterwards.
// Each run lasts about a second; its assertions do not depend on timing.
// And, under a ManualTicker, when a value a Get may be reading is freed,
// and when a Set stores a value in place.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../common/steady_now.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/cache/epoch.h"
#include "timingwheel/internal/cache/node.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_race_test {

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

// A value of type V standing for value number `id`, and back.
template <typename V>
struct Ids;
// Its id in ten digits, then padding, so that it lives on the heap.
template <>
struct Ids<std::string> {
  static std::string ValueOf(std::uint64_t id) {
    return absl::StrFormat("%010d-value-on-the-heap-not-in-the-string",
                           static_cast<long long>(id));
  }
  static std::uint64_t IdOf(const std::string& v) {
    std::uint64_t id = 0;
    if (v.size() < 10 || !absl::SimpleAtoi(v.substr(0, 10), &id)) return ~0ull;
    return id;
  }
};
// The id itself: a value stored in place.
template <>
struct Ids<std::uint64_t> {
  static std::uint64_t ValueOf(std::uint64_t id) { return id; }
  static std::uint64_t IdOf(std::uint64_t v) { return v; }
};
static_assert(!internal::kCacheValueInPlace<std::string>);
static_assert(internal::kCacheValueInPlace<std::uint64_t>);

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

template <typename V>
void RaceGetsAgainstWriters(CacheOptions options) {
  using Id = Ids<V>;
  auto run = std::make_unique<Run>();
  options.ttl = absl::Milliseconds(3);  // GetOrLoad's
  options.wheel.interval = absl::Milliseconds(1);
  using RaceCache = Cache<int, V>;
  auto created =
      RaceCache::Create(options, [&](int key, V value, RemovalCause cause) {
        const std::uint64_t id = Id::IdOf(value);
        if (id >= run->values.size()) return run->Error("listener: bad", id);
        Value& v = run->values[id];
        if (v.key != key) run->Error("listener: wrong key", id);
        v.removed_ns.store(NowNs());
        if (v.removals.fetch_add(1) != 0) run->Error("removed twice", id);
        run->by_cause[static_cast<int>(cause)]++;
      });
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<RaceCache> cache = *std::move(created);

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
        const std::uint64_t op = rng() % 16;
        if (op < 2) {
          cache->Delete(key);
          continue;
        }
        Value& v = run->values[id];
        if (op == 2) {
          // A load open on the shard sends Sets there to the lock; its
          // value, if stored, leaves once as any other.
          bool loaded = false;
          const absl::StatusOr<V> got = cache->GetOrLoad(key, [&] {
            loaded = true;
            v.key = key;
            v.ttl_ns = absl::ToInt64Nanoseconds(options.ttl);
            return Id::ValueOf(id);
          });
          if (!got.ok()) run->Error("GetOrLoad failed", id);
          if (loaded) {
            v.set_done_ns.store(NowNs());
            ++id;
          }
          continue;
        }
        v.key = key;
        v.ttl_ns = 1'000'000 * static_cast<std::int64_t>(1 + rng() % 5);
        if (cache->Set(key, Id::ValueOf(id), absl::Nanoseconds(v.ttl_ns))
                .ok()) {
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
          const std::optional<V> got = cache->Get(key);
          if (!got.has_value()) continue;
          run->hits++;
          const std::uint64_t id = Id::IdOf(*got);
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
  std::uint64_t lock_free_sets = 0;
  for (int i = 0; i < internal::kCacheReaderSlots; ++i) {
    lock_free_sets += CacheTestPeer::Epochs(*cache).slot(i).replaced.load();
  }
  if (internal::kCacheValueInPlace<V> && options.max_entries == 0) {
    EXPECT_GT(lock_free_sets, 0u) << "no Set went without the lock";
  } else {
    EXPECT_EQ(lock_free_sets, 0u);
  }
  std::printf("%llu Sets without the lock\n",
              static_cast<unsigned long long>(lock_free_sets));
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

// A Set that moves an 8-byte value's deadline later stores the value into
// the node Gets read: nothing is retired, even with a Get's read section
// open. One that would move the deadline earlier swaps in a new node, and
// the old one waits for that section. Either way the listener hears each
// old value once, and Gets see the new one.
TEST(CacheInPlace, ALaterSetStoresTheValueInPlaceAnEarlierOneSwapsTheNode) {
  CacheOptions o;
  o.ttl = absl::Seconds(10);
  o.wheel.interval = absl::Seconds(1);
  auto ticker = std::make_shared<ManualTicker>();
  o.wheel.ticker = ticker;
  using Heard = std::tuple<int, std::uint64_t, RemovalCause>;
  std::mutex mu;
  std::vector<Heard> heard;
  auto created = Cache<int, std::uint64_t>::Create(
      o, [&](int key, std::uint64_t value, RemovalCause cause) {
        std::lock_guard<std::mutex> lock(mu);
        heard.emplace_back(key, value, cause);
      });
  ASSERT_TRUE(created.ok()) << created.status();
  auto& cache = **created;
  const auto retired = [&] {
    std::size_t n = 0;
    for (std::size_t k = 0; k < CacheTestPeer::Shards(cache); ++k) {
      auto& shard = CacheTestPeer::Shard(cache, k);
      n += CacheTestPeer::RetiredNodes(shard);
    }
    return n;
  };
  const auto heard_now = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return heard;
  };

  ASSERT_TRUE(cache.Set(1, 10).ok());
  ticker->Tick();
  {
    internal::CacheReadSection read(CacheTestPeer::Epochs(cache));
    ASSERT_TRUE(read.active());
    ASSERT_TRUE(cache.Set(1, 11).ok());  // due at 11 s, was 10 s: in place
    EXPECT_EQ(retired(), 0u);
    EXPECT_EQ(cache.Get(1), std::optional<std::uint64_t>(11));
    ASSERT_TRUE(cache.Set(1, 12, absl::Seconds(2)).ok());  // 3 s: a new node
    EXPECT_EQ(retired(), 1u);
    EXPECT_EQ(CacheTestPeer::CheckInvariants(cache), absl::OkStatus());
  }
  EXPECT_EQ(cache.Get(1), std::optional<std::uint64_t>(12));
  EXPECT_EQ(heard_now(),
            (std::vector<Heard>{{1, 10, RemovalCause::kReplaced},
                                {1, 11, RemovalCause::kReplaced}}));
  ticker->Tick(2);  // 3 s: the value set with 2 s expires
  EXPECT_EQ(cache.Get(1), std::nullopt);
  EXPECT_EQ(heard_now().size(), 3u);
  EXPECT_EQ(heard_now().back(), (Heard{1, 12, RemovalCause::kExpired}));
  EXPECT_EQ(retired(), 0u);
  EXPECT_EQ(CacheTestPeer::CheckInvariants(cache), absl::OkStatus());

  // A value stored in place stays in the bucket of the deadline it
  // replaced, which re-files it: it lives its whole new time to live.
  ASSERT_TRUE(cache.Set(2, 20).ok());  // at 3 s: due at 13 s
  ticker->Tick();
  ASSERT_TRUE(cache.Set(2, 21).ok());  // at 4 s: 14 s, in place
  ticker->Tick(9);                     // 13 s: the first bucket
  EXPECT_EQ(cache.Get(2), std::optional<std::uint64_t>(21));
  EXPECT_EQ(CacheTestPeer::CheckInvariants(cache), absl::OkStatus());
  ticker->Tick();  // 14 s
  EXPECT_EQ(cache.Get(2), std::nullopt);
  EXPECT_EQ(heard_now().size(), 5u);
  EXPECT_EQ(heard_now()[3], (Heard{2, 20, RemovalCause::kReplaced}));
  EXPECT_EQ(heard_now()[4], (Heard{2, 21, RemovalCause::kExpired}));
}

// Each race runs with heap-string values and with 8-byte values stored in
// place.
template <typename V>
class CacheRace : public ::testing::Test {};
using RaceValues = ::testing::Types<std::string, std::uint64_t>;
TYPED_TEST_SUITE(CacheRace, RaceValues);

TYPED_TEST(CacheRace, GetsAgainstWritesExpiryAndEviction) {
  CacheOptions o;
  o.max_entries = 32;
  RaceGetsAgainstWriters<TypeParam>(o);
}

TYPED_TEST(CacheRace, SlidingGetsAgainstWritesExpiryAndEviction) {
  CacheOptions o;
  o.max_entries = 32;
  o.sliding = true;
  RaceGetsAgainstWriters<TypeParam>(o);
}

// Unbounded, a Set that moves a one-word value's deadline later stores it
// without the shard's lock (CacheImpl::SetWithoutLock), raced here against
// the locked writers too.
TYPED_TEST(CacheRace, GetsAgainstWritesAndExpiryUnbounded) {
  RaceGetsAgainstWriters<TypeParam>({});
}

TYPED_TEST(CacheRace, SlidingGetsAgainstWritesAndExpiryUnbounded) {
  CacheOptions o;
  o.sliding = true;
  RaceGetsAgainstWriters<TypeParam>(o);
}

}  // namespace cache_race_test
}  // namespace timingwheel
