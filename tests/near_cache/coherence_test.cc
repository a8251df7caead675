// The near cache's coherence, checked by History (history.h): every value a
// Get returns was Redis's at some moment during the call or within the
// invalidation delay before it. Under writers and readers on hot keys, over
// a reply that races its key's invalidation, over Redis restarting and over
// the invalidation connection dropped alone. Each of the two traps has a
// mutant (near_cache_testing.h), and a test that the checker catches it.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "near_cache/near_cache.h"
#include "tests/near_cache/fixture.h"

namespace near_cache {
namespace {

// How late an invalidation may be applied during the stress run: generous,
// for sanitized builds on a shared machine; the run then waits this long
// before its final reads, which nothing stale may survive.
constexpr absl::Duration kDelay = absl::Seconds(1);
constexpr int kHotKeys = 8;

std::string Summary(const std::vector<std::string>& violations) {
  std::vector<std::string> first(
      violations.begin(),
      violations.begin() + std::min<std::size_t>(violations.size(), 3));
  return absl::StrCat(violations.size(),
                      " stale reads; first: ", absl::StrJoin(first, "; "));
}

// What the checker found in a mutant's run, for the test log.
void Caught(const std::vector<std::string>& violations, std::size_t reads) {
  if (violations.empty()) return;
  std::printf("checker: %zu of %zu reads stale; first: %s\n", violations.size(),
              reads, violations.front().c_str());
}

Mutants NoFlush(bool mutant) {
  Mutants m;
  m.no_flush_on_reconnect = mutant;
  return m;
}

class Coherence : public NearCacheTest {
 protected:
  // Writers (through B, each owning half of the hot keys) and readers
  // (through A: Get, and GetMany now and then) for `run`; then quiet for
  // kDelay, and every key read once more. The checker's findings.
  std::vector<std::string> Stress(NearCache& a, NearCache& b,
                                  absl::Duration run) {
    std::vector<std::string> keys;
    for (int i = 0; i < kHotKeys; ++i) keys.push_back(absl::StrCat("hot", i));
    std::atomic<bool> stop{false};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        for (int n = 0; !stop.load(); ++n) {
          const std::string& key = keys[w + 2 * (n % (kHotKeys / 2))];
          const std::string value = absl::StrCat(key, ":", w, ":", n);
          const absl::Time start = absl::Now();
          if (!b.Set(key, value).ok()) ++errors;
          history_.Wrote(key, value, start, absl::Now());
          absl::SleepFor(absl::Microseconds(300));
        }
      });
    }
    for (int r = 0; r < 4; ++r) {
      threads.emplace_back([&, r] {
        std::minstd_rand rng(r + 1);  // not BitGen: see invalidation_link.cc
        for (int n = 0; !stop.load(); ++n) {
          const absl::Time start = absl::Now();
          if (n % 8 == r) {
            std::vector<std::string> some;
            for (int i = 0; i < 4; ++i) {
              some.push_back(keys[absl::Uniform(rng, 0, kHotKeys)]);
            }
            auto values = a.GetMany(some);
            if (!values.ok()) {
              ++errors;
              continue;
            }
            for (std::size_t i = 0; i < some.size(); ++i) {
              history_.Read(some[i], (*values)[i], start, absl::Now());
            }
          } else {
            const std::string& key = keys[absl::Uniform(rng, 0, kHotKeys)];
            auto value = a.Get(key);
            if (!value.ok()) {
              ++errors;
              continue;
            }
            history_.Read(key, *value, start, absl::Now());
          }
          absl::SleepFor(absl::Microseconds(20));
        }
      });
    }
    absl::SleepFor(run);
    stop.store(true);
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(errors.load(), 0);
    absl::SleepFor(kDelay);
    for (const std::string& key : keys) Read(a, key);
    return history_.Violations(kDelay);
  }

  // A reply held back until `key` has been written by B and A has applied
  // the invalidation: the race the in-flight check exists for, made
  // certain. `mutant` ignores it.
  Mutants HoldBackOnce(const std::string& key, NearCache*& a, NearCache*& b,
                       bool mutant) {
    Mutants m;
    m.ignore_inflight_invalidations = mutant;
    m.before_keep = [this, key, &a, &b, done = std::make_shared<bool>(false)](
                        absl::string_view k) {
      if (k != key || *done) return;
      *done = true;
      const std::uint64_t seen = a->stats().invalidations;
      const absl::Time start = absl::Now();
      ASSERT_TRUE(b->Set(key, "v2").ok());
      history_.Wrote(key, "v2", start, absl::Now());
      ASSERT_TRUE(WaitUntil([&] { return a->stats().invalidations > seen; }));
    };
    return m;
  }

  std::vector<std::string> InflightScenario(bool mutant) {
    NearCache* a_ptr = nullptr;
    NearCache* b_ptr = nullptr;
    auto b = Make();
    b_ptr = b.get();
    auto a = Make(Options(), HoldBackOnce("k", a_ptr, b_ptr, mutant));
    a_ptr = a.get();
    EXPECT_NE(a, nullptr);
    EXPECT_NE(b, nullptr);
    if (a == nullptr || b == nullptr) return {"no cache"};
    ClientSet("k", "v1");
    EXPECT_EQ(Read(*a, "k"), "v1");  // Redis's value during the call
    Read(*a, "k");                   // must not be the copy of v1
    Read(*a, "k");
    return history_.Violations(absl::ZeroDuration());
  }

  // Redis killed and restarted (empty) while A holds copies; then written.
  std::vector<std::string> RestartScenario(bool mutant) {
    auto a = Make(Options(), NoFlush(mutant));
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return {"no cache"};
    std::vector<std::string> keys;
    for (int i = 0; i < 10; ++i) {
      keys.push_back(absl::StrCat("k", i));
      ClientSet(keys.back(), "before");
      Read(*a, keys.back());
    }
    const absl::Time start = absl::Now();
    EXPECT_TRUE(server_->Restart().ok());
    for (const std::string& key : keys) {
      history_.Wrote(key, std::nullopt, start, absl::Now());
    }
    EXPECT_TRUE(WaitUntil([&] { return a->stats().sessions >= 2; }));
    client_->Close();
    for (int i = 0; i < 5; ++i) ClientSet(keys[i], "after");
    for (const std::string& key : keys) Read(*a, key);
    for (const std::string& key : keys) Read(*a, key);
    return history_.Violations(absl::ZeroDuration());
  }

  // A's invalidation connection killed by Redis (CLIENT KILL) while its data
  // connections stay; a write lands before it is back, so its invalidation
  // goes nowhere.
  std::vector<std::string> LinkDropScenario(bool mutant) {
    NearCacheOptions options = Options();
    options.reconnect_min = absl::Milliseconds(300);
    options.reconnect_max = absl::Milliseconds(300);
    auto a = Make(options, NoFlush(mutant));
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return {"no cache"};
    ClientSet("k", "v1");
    Read(*a, "k");
    EXPECT_TRUE(a->Cached("k"));
    EXPECT_NE(Call({"CLIENT", "KILL", "TYPE", "pubsub"}), nullptr);
    EXPECT_TRUE(WaitUntil([&] { return a->stats().link_losses >= 1; }));
    ClientSet("k", "v2");
    Read(*a, "k");  // while the link is down: from Redis, not kept
    EXPECT_TRUE(WaitUntil([&] { return a->stats().sessions >= 2; }));
    Read(*a, "k");
    Read(*a, "k");
    ClientSet("k", "v3");  // announced on the new link
    if (!mutant) {
      EXPECT_TRUE(WaitUntil([&] { return !a->Cached("k"); }));
    }
    Read(*a, "k");
    return history_.Violations(absl::ZeroDuration());
  }

  // A's data connection killed while idle in its pool (redis#11767: Redis
  // then forgets what it tracked, and tells no one); a write lands at once.
  std::vector<std::string> DataLinkDropScenario(bool mutant) {
    auto a = Make(Options(), NoFlush(mutant));
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return {"no cache"};
    ClientSet("k", "v1");
    Read(*a, "k");
    EXPECT_TRUE(a->Cached("k"));
    // Every normal client but this one (SKIPME yes): A's idle data link,
    // not its invalidation link (a pubsub client).
    lease::Reply killed = Call({"CLIENT", "KILL", "TYPE", "normal"});
    EXPECT_TRUE(killed != nullptr && killed->integer == 1);
    ClientSet("k", "v2");  // no one tracks k now: no invalidation goes out
    EXPECT_TRUE(WaitUntil([&] { return a->stats().link_losses >= 1; }));
    Read(*a, "k");
    Read(*a, "k");
    return history_.Violations(absl::ZeroDuration());
  }

  // A run of the near cache as built reads nothing stale.
  static void ExpectCoherent(const std::vector<std::string>& violations) {
    EXPECT_TRUE(violations.empty()) << Summary(violations);
  }

  // A run of a mutant: the checker must catch it (what it found goes to the
  // test log).
  void ExpectCaught(const std::vector<std::string>& violations) {
    EXPECT_FALSE(violations.empty()) << "the checker missed the mutant";
    Caught(violations, history_.reads());
  }
};

TEST_F(Coherence, WritersAndReadersOnHotKeysNeverReadStale) {
  auto a = Make();
  auto b = Make();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ExpectCoherent(Stress(*a, *b, absl::Milliseconds(1500)));
  const NearCacheStats s = a->stats();
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.invalidations, 0u);
  EXPECT_GT(history_.reads(), 100u);
}

// Every reply held back a little, which widens the in-flight window: the
// correct cache still reads nothing stale, and the mutant that keeps a reply
// whose key was invalidated in flight is caught.
Mutants SlowKeeps(bool mutant) {
  return {.ignore_inflight_invalidations = mutant,
          .before_keep = [](absl::string_view) {
            absl::SleepFor(absl::Microseconds(300));
          }};
}

TEST_F(Coherence, SlowKeepsUnderStressStillReadNothingStale) {
  auto a = Make(Options(), SlowKeeps(false));
  auto b = Make();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ExpectCoherent(Stress(*a, *b, absl::Milliseconds(1500)));
  EXPECT_GT(a->stats().refused, 0u);  // the window was hit, and handled
}

TEST_F(Coherence, CheckerCatchesIgnoredInflightInvalidationsUnderStress) {
  auto a = Make(Options(), SlowKeeps(true));
  auto b = Make();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ExpectCaught(Stress(*a, *b, absl::Milliseconds(1500)));
}

TEST_F(Coherence, AReplyThatRacedItsInvalidationIsReturnedButNotKept) {
  ExpectCoherent(InflightScenario(false));
}

TEST_F(Coherence, CheckerCatchesIgnoredInflightInvalidation) {
  ExpectCaught(InflightScenario(true));
}

TEST_F(Coherence, RedisRestartedFlushesBeforeServingAgain) {
  ExpectCoherent(RestartScenario(false));
}

TEST_F(Coherence, CheckerCatchesNoFlushWhenRedisRestarts) {
  ExpectCaught(RestartScenario(true));
}

TEST_F(Coherence, InvalidationLinkDroppedAloneFlushes) {
  ExpectCoherent(LinkDropScenario(false));
}

TEST_F(Coherence, CheckerCatchesNoFlushWhenTheInvalidationLinkDrops) {
  ExpectCaught(LinkDropScenario(true));
}

TEST_F(Coherence, ADataLinkDroppedWhileIdleFlushes) {
  ExpectCoherent(DataLinkDropScenario(false));
}

TEST_F(Coherence, CheckerCatchesNoFlushWhenAnIdleDataLinkDrops) {
  ExpectCaught(DataLinkDropScenario(true));
}

}  // namespace
}  // namespace near_cache
