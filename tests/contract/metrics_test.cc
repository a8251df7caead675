// docs/api.md E14 (the wheel's metrics), C10 (the cache's) and the
// Prometheus text export, through the public headers: each figure against a
// schedule the test controls (a ManualTicker, a held loop, a blocked
// callback, a slow load), and the text parsed back into the same numbers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/event.h"
#include "../common/hang_guard.h"
#include "../common/held_loop.h"
#include "../common/manual_wheel.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/prometheus.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace metrics_test {

using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::Event;
using ::timingwheel::testing::HeldLoop;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::TestOptions;

std::uint64_t BucketSum(const LatencyHistogram& h) {
  std::uint64_t n = 0;
  for (std::uint64_t c : h.buckets) n += c;
  return n;
}

// Under a ManualTicker a callback of tick k runs at tick k's time: every
// fired timer is counted, 0 late, and none is pending once Tick returns.
TEST(WheelMetrics, ManualTimeCountsEveryFiringAsOnTime) {
  auto ticker = std::make_shared<ManualTicker>();
  auto wheel = IntWheel::Create(ManualOptions(ticker), [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 50; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, (1 + k % 3) * kInterval).ok());
  }
  ticker->Tick(3);
  const Stats s = (*wheel)->stats();
  EXPECT_EQ(s.fired, 50u);
  EXPECT_EQ(s.fire_lateness.count, 50u);
  EXPECT_EQ(BucketSum(s.fire_lateness), 50u);
  EXPECT_EQ(s.fire_lateness.buckets[0], 50u);
  EXPECT_EQ(s.fire_lateness.max, absl::ZeroDuration());
  EXPECT_EQ(s.callbacks_pending, 0u);
  EXPECT_EQ(s.commands_queued, 0u);
  EXPECT_EQ(s.loop_lag, absl::ZeroDuration());
  EXPECT_EQ(s.lag_limit_commands, 0u);  // no max_lag
}

// Real time: the first timer's callback holds the only execute worker for
// 60 ms, so the second, due 1 ms later, starts about 59 ms late and waits
// (callbacks_pending) meanwhile.
TEST(WheelMetrics, ABlockedWorkerShowsInLatenessAndPendingCallbacks) {
  Options options = TestOptions();
  options.interval = absl::Milliseconds(1);
  Event first_started;
  std::atomic<int> calls{0};
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    if (key == 1) {
      first_started.Notify();
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
    calls.fetch_add(1);
  });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(1, 0, absl::Milliseconds(5)).ok());
  ASSERT_TRUE((*wheel)->SetTimer(2, 0, absl::Milliseconds(6)).ok());
  ASSERT_TRUE(first_started.WaitFor(kHangGuard));
  EXPECT_TRUE(BecomesTrue([&] { return (*wheel)->stats().fired == 2; }));
  const Stats during = (*wheel)->stats();
  if (calls.load() == 0) {  // the first callback still sleeps
    EXPECT_GE(during.callbacks_pending, 1u);
  }
  EXPECT_TRUE(BecomesTrue([&] { return calls.load() == 2; }));
  const Stats s = (*wheel)->stats();
  EXPECT_EQ(s.fire_lateness.count, 2u);
  EXPECT_EQ(s.callbacks_pending, 0u);
  // The second started at least 59 ms after its tick, less the 1 ms between
  // the two deadlines: [32.8 ms, 65.5 ms) or a later bucket on a slow run.
  EXPECT_GE(s.fire_lateness.max, absl::Milliseconds(50));
  EXPECT_GE(
      LatencyHistogram::BucketOf(absl::ToInt64Nanoseconds(s.fire_lateness.max)),
      LatencyHistogram::BucketOf(
          absl::ToInt64Nanoseconds(absl::Milliseconds(33))));
  EXPECT_EQ(s.fire_lateness.Quantile(1.0), s.fire_lateness.max);
  EXPECT_GE(s.fire_lateness.sum, s.fire_lateness.max);
}

// A held loop takes nothing from its queue: commands_queued counts what
// waits, and loop_lag grows with the wait; both go back to 0 once it runs.
TEST(WheelMetrics, AHeldLoopShowsQueuedCommandsAndLag) {
  HeldLoop held(TestOptions());
  ASSERT_TRUE(held.Held());
  auto& wheel = held.w().wheel();
  for (int k = 0; k < 100; ++k) {
    ASSERT_TRUE(wheel.SetTimer(k, k, absl::Hours(1)).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const Stats s = wheel.stats();
  EXPECT_GE(s.commands_queued, 100u);
  EXPECT_GE(s.loop_lag, absl::Milliseconds(30));
  held.Release();
  EXPECT_TRUE(BecomesTrue([&] {
    const Stats after = wheel.stats();
    return after.commands_queued == 0 && after.pending == 101;
  }));
  EXPECT_EQ(wheel.stats().loop_lag, absl::ZeroDuration());
}

TEST(WheelMetrics, MaxLagShowsItsLimit) {
  auto wheel = IntWheel::Create(
      testing::TestOptionsWithMaxLag(absl::Milliseconds(20)), [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 1000; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Hours(1)).ok());
  }
  EXPECT_TRUE(BecomesTrue([&] { return (*wheel)->stats().pending == 1000; }));
  EXPECT_GT((*wheel)->stats().lag_limit_commands, 0u);
}

// Every removal cause is counted once, and the hit ratio is hits over
// lookups.
TEST(CacheMetrics, RemovalsByCauseAndHitRatio) {
  auto ticker = std::make_shared<ManualTicker>();
  CacheOptions options;
  options.ttl = 2 * kInterval;
  options.max_entries = 3;
  options.wheel = ManualOptions(ticker);
  auto cache = Cache<int, int>::Create(options);
  ASSERT_TRUE(cache.ok());
  Cache<int, int>& c = **cache;
  ASSERT_TRUE(c.Set(1, 10).ok());
  ASSERT_TRUE(c.Set(1, 11).ok());  // replaced
  EXPECT_TRUE(c.Delete(1));        // deleted
  ASSERT_TRUE(c.Set(2, 20).ok());
  ASSERT_TRUE(c.Set(3, 30).ok());
  ASSERT_TRUE(c.Set(4, 40).ok());
  ASSERT_TRUE(c.Set(5, 50).ok());  // evicts (max 3); never 5, just set
  EXPECT_TRUE(c.Get(5).has_value());
  EXPECT_FALSE(c.Get(99).has_value());
  EXPECT_TRUE(c.Get(5).has_value());
  EXPECT_TRUE(c.Get(5).has_value());
  ticker->Tick(2);  // those left expire
  EXPECT_TRUE(BecomesTrue([&] { return c.stats().size == 0; }));
  const CacheStats s = c.stats();
  EXPECT_EQ(s.replaced, 1u);
  EXPECT_EQ(s.deleted, 1u);
  // Keys 2-5 over a bound of 3 (split over shards: which go, and how many,
  // follows the hashes): at least one evicted, the rest expired.
  EXPECT_GE(s.evicted, 1u);
  EXPECT_EQ(s.evicted + s.expired, 4u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_DOUBLE_EQ(s.hit_ratio(), 0.75);
  EXPECT_DOUBLE_EQ(CacheStats{}.hit_ratio(), 0.0);
}

TEST(CacheMetrics, LoadLatencyCountsEveryLoad) {
  auto cache = Cache<int, int>::Create(CacheOptions{});
  ASSERT_TRUE(cache.ok());
  auto slow = (*cache)->GetOrLoad(1, []() -> absl::StatusOr<int> {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 7;
  });
  ASSERT_TRUE(slow.ok());
  auto failed = (*cache)->GetOrLoad(
      2, []() -> absl::StatusOr<int> { return absl::NotFoundError("no"); });
  EXPECT_FALSE(failed.ok());
  const CacheStats s = (*cache)->stats();
  EXPECT_EQ(s.load_latency.count, 2u);
  EXPECT_EQ(BucketSum(s.load_latency), 2u);
  EXPECT_GE(s.load_latency.max, absl::Milliseconds(20));
  // The slow one is in [16.4, 32.8) ms or above; the failed one below it.
  EXPECT_GE(
      LatencyHistogram::BucketOf(absl::ToInt64Nanoseconds(s.load_latency.max)),
      LatencyHistogram::BucketOf(20'000'000));
  EXPECT_EQ(s.load_latency.Quantile(0.5) < absl::Milliseconds(16), true);
}

// The text export, parsed back: sample name (with labels) -> value, and the
// TYPE of every metric family.
struct Parsed {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
};

Parsed Parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_FALSE(line.empty());
    if (line.rfind("# TYPE ", 0) == 0) {
      std::vector<std::string> parts = absl::StrSplit(line.substr(7), ' ');
      EXPECT_EQ(parts.size(), 2u) << line;
      if (parts.size() == 2) p.types[parts[0]] = parts[1];
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    const std::size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    EXPECT_EQ(p.samples.count(name), 0u) << "twice: " << name;
    p.samples[name] = std::stod(line.substr(space + 1));
  }
  return p;
}

TEST(PrometheusText, WheelStatsRoundTrip) {
  Stats s;
  s.pending = 12;
  s.ticks = 345;
  s.applied = 6789;
  s.fired = 100;
  s.moved = 3;
  s.removed = 4;
  s.superseded = 5;
  s.drained = 6;
  s.callback_exceptions = 7;
  s.refiled = 8;
  s.memory_bytes = 1 << 20;
  s.commands_queued = 9;
  s.loop_lag = absl::Milliseconds(3);
  s.lag_limit_commands = 4096;
  s.callbacks_pending = 2;
  // 90 fires in [512, 1024) us, 10 in [32.8, 65.5) ms.
  s.fire_lateness.buckets[10] = 90;
  s.fire_lateness.buckets[16] = 10;
  s.fire_lateness.count = 100;
  s.fire_lateness.sum = absl::Milliseconds(90 * 0.75 + 10 * 40);
  s.fire_lateness.max = absl::Milliseconds(41);
  const Parsed p = Parse(PrometheusText(s, "tw", "wheel=\"sessions\""));
  const auto at = [&](const std::string& name) {
    auto it = p.samples.find(name);
    EXPECT_NE(it, p.samples.end()) << name;
    return it == p.samples.end() ? -1.0 : it->second;
  };
  EXPECT_EQ(at("tw_pending_timers{wheel=\"sessions\"}"), 12);
  EXPECT_EQ(at("tw_ticks_total{wheel=\"sessions\"}"), 345);
  EXPECT_EQ(at("tw_commands_applied_total{wheel=\"sessions\"}"), 6789);
  EXPECT_EQ(at("tw_fired_total{wheel=\"sessions\"}"), 100);
  EXPECT_EQ(at("tw_moved_total{wheel=\"sessions\"}"), 3);
  EXPECT_EQ(at("tw_removed_total{wheel=\"sessions\"}"), 4);
  EXPECT_EQ(at("tw_superseded_total{wheel=\"sessions\"}"), 5);
  EXPECT_EQ(at("tw_drained_total{wheel=\"sessions\"}"), 6);
  EXPECT_EQ(at("tw_callback_exceptions_total{wheel=\"sessions\"}"), 7);
  EXPECT_EQ(at("tw_refiled_total{wheel=\"sessions\"}"), 8);
  EXPECT_EQ(at("tw_memory_bytes{wheel=\"sessions\"}"), 1 << 20);
  EXPECT_EQ(at("tw_commands_queued{wheel=\"sessions\"}"), 9);
  EXPECT_DOUBLE_EQ(at("tw_loop_lag_seconds{wheel=\"sessions\"}"), 0.003);
  EXPECT_EQ(at("tw_lag_limit_commands{wheel=\"sessions\"}"), 4096);
  EXPECT_EQ(at("tw_callbacks_pending{wheel=\"sessions\"}"), 2);
  // Cumulative buckets up to the last non-empty one, then +Inf.
  const std::string b =
      "tw_fire_lateness_seconds_bucket{wheel=\"sessions\",le=";
  EXPECT_EQ(at(b + "\"1e-06\"}"), 0);
  EXPECT_EQ(at(b + "\"0.001024\"}"), 90);
  EXPECT_EQ(at(b + "\"0.032768\"}"), 90);
  EXPECT_EQ(at(b + "\"0.065536\"}"), 100);
  EXPECT_EQ(at(b + "\"+Inf\"}"), 100);
  EXPECT_EQ(p.samples.count(b + "\"0.131072\"}"), 0u);
  EXPECT_EQ(at("tw_fire_lateness_seconds_count{wheel=\"sessions\"}"), 100);
  EXPECT_NEAR(at("tw_fire_lateness_seconds_sum{wheel=\"sessions\"}"),
              absl::ToDoubleSeconds(s.fire_lateness.sum), 1e-12);
  EXPECT_EQ(p.types.at("tw_fired_total"), "counter");
  EXPECT_EQ(p.types.at("tw_pending_timers"), "gauge");
  EXPECT_EQ(p.types.at("tw_fire_lateness_seconds"), "histogram");
  // Every sample belongs to a family with a TYPE.
  for (const auto& [name, value] : p.samples) {
    std::string family = name.substr(0, name.find('{'));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (family.size() > sfx.size() &&
          family.compare(family.size() - sfx.size(), sfx.size(), sfx) == 0 &&
          p.types.count(family) == 0) {
        family.resize(family.size() - sfx.size());
      }
    }
    EXPECT_EQ(p.types.count(family), 1u) << name;
  }
}

// A live wheel's and cache's snapshots export the same numbers stats()
// gave (no labels: bare names).
TEST(PrometheusText, LiveSnapshotsRoundTrip) {
  auto ticker = std::make_shared<ManualTicker>();
  CacheOptions options;
  options.wheel = ManualOptions(ticker);
  auto cache = Cache<int, int>::Create(options);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE((*cache)->Set(1, 1).ok());
  EXPECT_TRUE((*cache)->Get(1).has_value());
  EXPECT_FALSE((*cache)->Get(2).has_value());
  (void)(*cache)->GetOrLoad(3, []() -> absl::StatusOr<int> { return 3; });
  const CacheStats cs = (*cache)->stats();
  const Parsed cp = Parse(PrometheusText(cs));
  EXPECT_EQ(cp.samples.at("timingwheel_cache_hits_total"), cs.hits);
  EXPECT_EQ(cp.samples.at("timingwheel_cache_misses_total"), cs.misses);
  EXPECT_DOUBLE_EQ(cp.samples.at("timingwheel_cache_hit_ratio"),
                   cs.hit_ratio());
  EXPECT_EQ(cp.samples.at("timingwheel_cache_loads_total"), 1);
  EXPECT_EQ(cp.samples.at("timingwheel_cache_entries"), cs.size);
  EXPECT_EQ(cp.samples.at("timingwheel_cache_load_latency_seconds_count"), 1);
  EXPECT_EQ(cp.types.at("timingwheel_cache_evicted_total"), "counter");

  auto wheel_ticker = std::make_shared<ManualTicker>();  // one wheel each
  auto wheel = IntWheel::Create(ManualOptions(wheel_ticker), [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(1, 1, kInterval).ok());
  wheel_ticker->Tick();
  const Stats ws = (*wheel)->stats();
  const Parsed wp = Parse(PrometheusText(ws));
  EXPECT_EQ(wp.samples.at("timingwheel_fired_total"), 1);
  EXPECT_EQ(
      wp.samples.at("timingwheel_fire_lateness_seconds_bucket{le=\"+Inf\"}"),
      1);
  EXPECT_EQ(
      wp.samples.at("timingwheel_fire_lateness_seconds_bucket{le=\"1e-06\"}"),
      1);
}

}  // namespace metrics_test
}  // namespace timingwheel
