// Random operations against a simple reference model, compared after every
// operation: listener calls (key, value, cause), Get/Delete/GetOrLoad
// results, size and stats. Time is a ManualTicker's, so the model knows
// exactly which tick expires what. With max_entries = 0 the model predicts
// everything; with eviction the cache's choice of victim is accepted, but
// checked: only present values, never the entry just set or the most
// recently hit, size within the bound, and every value accounted for
// exactly once. The cache's CheckInvariants runs after every operation too.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cache_test_peer.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_model_test {

constexpr absl::Duration kInterval = absl::Seconds(1);
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
constexpr int kKeys = 16;
constexpr int kDefaultTtlTicks = 3;

using Event = std::tuple<int, int, RemovalCause>;  // key, value, cause

struct Params {
  bool sliding;
  std::size_t max_entries;
  std::uint64_t seed;
};

class Model {
 public:
  explicit Model(Params p) : p_(p) {}

  struct Entry {
    int value;
    std::int64_t expiry;  // tick at which it is gone; kNever
    std::int64_t ttl;     // ticks; kNever
  };

  std::map<int, Entry> entries;
  std::vector<Event> events;  // expected listener calls since last check
  std::vector<int> stored;    // every value ever stored
  std::int64_t ticks = 0;
  int last_hit = -1;
  std::uint64_t hits = 0, misses = 0, loads = 0, load_failures = 0, expired = 0;

  void Remove(int key, RemovalCause cause) {
    events.emplace_back(key, entries.at(key).value, cause);
    entries.erase(key);
    if (key == last_hit) last_hit = -1;
  }
  void Set(int key, int value, std::int64_t ttl) {
    stored.push_back(value);
    if (entries.count(key)) {
      events.emplace_back(key, entries.at(key).value, RemovalCause::kReplaced);
    }
    entries[key] = {value, ttl == kNever ? kNever : ticks + ttl, ttl};
  }
  // A lookup that counts as Get: returns the value or -1.
  int Hit(int key) {
    auto it = entries.find(key);
    if (it == entries.end()) {
      ++misses;
      return -1;
    }
    ++hits;
    last_hit = key;
    if (p_.sliding && it->second.ttl != kNever) {
      it->second.expiry = ticks + it->second.ttl;
    }
    return it->second.value;
  }
  void Tick() {
    ++ticks;
    std::vector<int> due;
    for (const auto& [k, e] : entries) {
      if (e.expiry <= ticks) due.push_back(k);
    }
    for (int k : due) {
      Remove(k, RemovalCause::kExpired);
      ++expired;
    }
  }

 private:
  Params p_;
};

class CacheModelTest : public ::testing::TestWithParam<Params> {};

std::int64_t TicksOf(absl::Duration d) {
  return d == absl::InfiniteDuration() ? kNever : d / kInterval;
}

TEST_P(CacheModelTest, MatchesTheModel) {
  const Params p = GetParam();
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::vector<Event> got;
  CacheOptions o;
  o.ttl = kDefaultTtlTicks * kInterval;
  o.sliding = p.sliding;
  o.max_entries = p.max_entries;
  o.wheel.interval = kInterval;
  o.wheel.ticker = ticker;
  auto created =
      Cache<int, int>::Create(o, [&](int key, int value, RemovalCause cause) {
        std::lock_guard<std::mutex> lock(mu);
        got.emplace_back(key, value, cause);
      });
  ASSERT_TRUE(created.ok());
  std::unique_ptr<Cache<int, int>> cache = *std::move(created);

  Model model(p);
  std::mt19937_64 rng(p.seed);
  auto pick = [&](int n) {
    return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng));
  };
  int next_value = 1;
  std::map<int, int> removed_count;  // value -> listener calls
  std::size_t evicted = 0;

  // Compares the listener calls since the last check with the model's,
  // taking the cache's evictions (when bounded) as given after checking
  // them. `just_set` is the key the last operation set, or -1.
  auto check = [&](const std::string& what, int just_set) {
    // The structure first: a broken one explains any difference below.
    ASSERT_EQ(internal::CacheTestPeer::CheckInvariants(*cache),
              absl::OkStatus())
        << what;
    std::vector<Event> calls;
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.swap(got);
    }
    std::vector<Event> rest;
    for (const Event& e : calls) {
      removed_count[std::get<1>(e)]++;
      if (std::get<2>(e) != RemovalCause::kSize) {
        rest.push_back(e);
        continue;
      }
      ASSERT_NE(p.max_entries, 0u) << what;
      const int key = std::get<0>(e);
      ASSERT_TRUE(model.entries.count(key))
          << what << " evicted absent " << key;
      ASSERT_EQ(model.entries.at(key).value, std::get<1>(e)) << what;
      ASSERT_NE(key, just_set) << what << ": evicted the entry just set";
      // With room for one entry, the one just set has priority.
      if (p.max_entries > 1) {
        ASSERT_NE(key, model.last_hit) << what << ": evicted the last hit";
      }
      model.entries.erase(key);
      ++evicted;
    }
    std::sort(rest.begin(), rest.end());
    std::sort(model.events.begin(), model.events.end());
    ASSERT_EQ(rest, model.events) << what;
    model.events.clear();
    ASSERT_EQ(cache->size(), model.entries.size()) << what;
    if (p.max_entries != 0) {
      ASSERT_LE(cache->size(), p.max_entries) << what;
    }
    const CacheStats st = cache->stats();
    ASSERT_EQ(st.hits, model.hits) << what;
    ASSERT_EQ(st.misses, model.misses) << what;
    ASSERT_EQ(st.loads, model.loads) << what;
    ASSERT_EQ(st.load_failures, model.load_failures) << what;
    ASSERT_EQ(st.expired, model.expired) << what;
    ASSERT_EQ(st.evicted, evicted) << what;
    ASSERT_EQ(st.size, model.entries.size()) << what;
  };

  const absl::Duration ttls[] = {kInterval,     2 * kInterval,
                                 3 * kInterval, 5 * kInterval,
                                 8 * kInterval, absl::InfiniteDuration()};
  for (int step = 0; step < 4000; ++step) {
    const int key = pick(kKeys);
    const int op = pick(100);
    std::string what = "step " + std::to_string(step) + " op " +
                       std::to_string(op) + " key " + std::to_string(key);
    int just_set = -1;
    if (op < 30) {  // Set
      const int value = next_value++;
      if (pick(3) == 0) {
        ASSERT_TRUE(cache->Set(key, value).ok());
        model.Set(key, value, kDefaultTtlTicks);
      } else {
        const absl::Duration ttl = ttls[pick(6)];
        ASSERT_TRUE(cache->Set(key, value, ttl).ok());
        model.Set(key, value, TicksOf(ttl));
      }
      just_set = key;
    } else if (op < 60) {  // Get
      const int want = model.Hit(key);
      const std::optional<int> v = cache->Get(key);
      ASSERT_EQ(v.value_or(-1), want) << what;
    } else if (op < 70) {  // Delete
      const bool want = model.entries.count(key) > 0;
      if (want) model.Remove(key, RemovalCause::kExplicit);
      ASSERT_EQ(cache->Delete(key), want) << what;
    } else if (op < 80) {           // GetOrLoad
      const int outcome = pick(4);  // 0, 1: OK; 2: error; 3: throws
      const int value = next_value++;
      const int want = model.Hit(key);
      bool loaded = false;
      auto r = cache->GetOrLoad(key, [&]() -> absl::StatusOr<int> {
        loaded = true;
        if (outcome == 3) throw std::runtime_error("load failed");
        if (outcome == 2) return absl::NotFoundError("none");
        return value;
      });
      ASSERT_EQ(loaded, want < 0) << what;
      if (want >= 0) {
        ASSERT_EQ(r.value_or(-2), want) << what;
      } else if (outcome <= 1) {
        ASSERT_EQ(r.value_or(-2), value) << what;
        model.Set(key, value, kDefaultTtlTicks);
        ++model.loads;
        just_set = key;
      } else {
        ASSERT_EQ(r.status().code(), outcome == 2 ? absl::StatusCode::kNotFound
                                                  : absl::StatusCode::kInternal)
            << what;
        ++model.load_failures;
      }
    } else if (op < 82) {  // Clear
      std::vector<int> keys;
      for (const auto& [k, e] : model.entries) keys.push_back(k);
      for (int k : keys) model.Remove(k, RemovalCause::kExplicit);
      cache->Clear();
    } else {  // Tick
      const int n = 1 + pick(2);
      ticker->Tick(n);
      for (int i = 0; i < n; ++i) model.Tick();
    }
    check(what, just_set);
    if (HasFatalFailure()) return;
  }
  // Every value stored left exactly once (after a final Clear).
  std::vector<int> keys;
  for (const auto& [k, e] : model.entries) keys.push_back(k);
  for (int k : keys) model.Remove(k, RemovalCause::kExplicit);
  cache->Clear();
  check("final clear", -1);
  ASSERT_EQ(removed_count.size(), model.stored.size());
  for (int value : model.stored) {
    ASSERT_EQ(removed_count[value], 1) << "value " << value;
  }
}

std::vector<Params> AllParams() {
  std::vector<Params> v;
  for (bool sliding : {false, true}) {
    for (std::size_t max : {0u, 1u, 3u, 8u}) {
      for (std::uint64_t seed : {1u, 2u, 3u}) v.push_back({sliding, max, seed});
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, CacheModelTest, ::testing::ValuesIn(AllParams()),
                         [](const ::testing::TestParamInfo<Params>& info) {
                           return std::string(info.param.sliding
                                                  ? "Sliding"
                                                  : "AfterWrite") +
                                  "_Max" +
                                  std::to_string(info.param.max_entries) +
                                  "_Seed" + std::to_string(info.param.seed);
                         });

}  // namespace cache_model_test
}  // namespace timingwheel
