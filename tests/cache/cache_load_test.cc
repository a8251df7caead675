// docs/api.md's Cache rule C6, GetOrLoad: one load for concurrent callers,
// its outcome (value, error, exception) to every waiter, only values
// stored; a load may call the cache, a write of the key during the load
// wins, a load asking for its own key fails instead of hanging, and a load
// may destroy the cache. Where threads meet, the hand-offs are std::mutex
// and the cache's own counters, so no outcome depends on timing.

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "../common/event.h"
#include "../common/hang_guard.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache_fixture.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"

namespace timingwheel {
namespace cache_load_test {

using ::absl::StatusCode;
using cache_testing::Fixture;
using cache_testing::kInterval;
using cache_testing::Removal;
using cache_testing::Ttl;
using ::timingwheel::testing::Event;
using ::timingwheel::testing::kHangGuard;

// N threads miss the same key while one load() blocks: load runs once and
// every thread gets its outcome. The gate opens only once all N have been
// counted as misses, i.e. all are waiting on the one load.
void LoadOnce(const std::function<absl::StatusOr<int>()>& outcome,
              const std::function<void(const absl::StatusOr<int>&)>& check) {
  Fixture f(Ttl(5 * kInterval));
  constexpr int kThreads = 8;
  Event gate;
  std::atomic<int> calls{0};
  std::vector<absl::StatusOr<int>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      results[t] = f.cache->GetOrLoad("k", [&]() -> absl::StatusOr<int> {
        calls.fetch_add(1);
        gate.WaitFor(kHangGuard);
        return outcome();
      });
    });
  }
  while (f.cache->stats().misses < kThreads) std::this_thread::yield();
  gate.Notify();
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
// FailedPrecondition, the outer load goes on, and while it runs other
// threads still wait for it, as for any load.
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

}  // namespace cache_load_test
}  // namespace timingwheel
