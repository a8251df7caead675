// A TTL cache on a timing wheel, like go-zero's collection.Cache.
//
// TtlCache<V> keeps its items in an absl::flat_hash_map and one timer per key
// on the wheel: Set arms it for the TTL, a hit on Get pushes it back (sliding
// expiry, the cheap MoveTimer), Delete cancels it, and when it fires the
// wheel's callback evicts the key. A simulated workload with Zipf-skewed keys
// runs against it for a few seconds, then stops so every key expires.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/format.h"
#include "support/progress.h"
#include "timingwheel/timing_wheel.h"

namespace {

using support::Human;
using support::MonoNanos;
using support::WithCommas;

// A cache whose entries expire `ttl` after they were last set or read.
//
// Each item's timer is keyed by (key, generation), where a generation is one
// life of the key from the Set that created it to its Delete or eviction.
// The wheel applies commands in order per thread only, so a Delete on one
// thread and a Set of the same key on another may reach it in either order;
// were timers keyed by the key alone, a late RemoveTimer could cancel the new
// item's timer and leave it in the map forever. With a generation in the
// timer key, commands about an old life never touch the new one.
template <class V>
class TtlCache {
 public:
  struct Counters {
    std::uint64_t hits = 0, misses = 0, evictions = 0, rearmed = 0;
    std::size_t size = 0;
  };

  // `interval` is the wheel's tick: items live between ttl and ttl + interval.
  static absl::StatusOr<std::unique_ptr<TtlCache>> Create(
      absl::Duration ttl, absl::Duration interval) {
    if (ttl <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("ttl must be positive");
    }
    auto cache = std::unique_ptr<TtlCache>(new TtlCache(ttl));
    timingwheel::Options options;
    options.interval = interval;
    auto wheel =
        Wheel::Create(options, [c = cache.get()](TimerKey key, NoValue) {
          c->Expire(std::move(key));
        });
    if (!wheel.ok()) return wheel.status();
    cache->wheel_ = std::move(*wheel);
    return cache;
  }

  // The value of `key`, and on a hit its TTL starts over.
  std::optional<V> Get(const std::string& key) {
    const std::int64_t now = MonoNanos();
    std::optional<V> value;
    std::uint64_t generation;
    {
      std::lock_guard lock(mu_);
      auto it = items_.find(key);
      if (it == items_.end()) {
        ++counters_.misses;
        return std::nullopt;
      }
      generation = it->second.generation;
      if (now >= it->second.expires_ns) {
        // Expired, and its timer fires at the next tick: a miss. Erasing it
        // here keeps reads exact.
        items_.erase(it);
        ++counters_.misses;
        ++counters_.evictions;
        value.reset();
      } else {
        it->second.expires_ns = now + ttl_ns_;
        ++counters_.hits;
        value = it->second.value;
      }
    }
    // Outside the lock: submitting is a lock-free enqueue. The wheel reads
    // the clock after expires_ns was computed, so it never fires before it.
    // Errors only once the wheel is stopped.
    if (value.has_value()) {
      wheel_->MoveTimer({key, generation}, ttl_).IgnoreError();
    } else {
      wheel_->RemoveTimer({key, generation}).IgnoreError();
    }
    return value;
  }

  void Set(const std::string& key, V value) {
    const std::int64_t now = MonoNanos();
    std::uint64_t generation;
    {
      std::lock_guard lock(mu_);
      auto [it, inserted] = items_.try_emplace(key);
      if (inserted) it->second.generation = next_generation_++;
      it->second.value = std::move(value);
      it->second.expires_ns = now + ttl_ns_;
      generation = it->second.generation;
    }
    wheel_->SetTimer({key, generation}, NoValue{}, ttl_).IgnoreError();
  }

  void Delete(const std::string& key) {
    std::uint64_t generation;
    {
      std::lock_guard lock(mu_);
      auto it = items_.find(key);
      if (it == items_.end()) return;
      generation = it->second.generation;
      items_.erase(it);
    }
    // Frees the timer now instead of letting it fire into nothing.
    wheel_->RemoveTimer({key, generation}).IgnoreError();
  }

  Counters counters() const {
    std::lock_guard lock(mu_);
    Counters c = counters_;
    c.size = items_.size();
    return c;
  }

  // Timers pending on the wheel (the snapshot may lag by a batch of commands).
  std::size_t timers() const { return wheel_->stats().pending; }

 private:
  // A user struct as the wheel's key: hashable through AbslHashValue.
  struct TimerKey {
    std::string key;
    std::uint64_t generation;

    bool operator==(const TimerKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const TimerKey& k) {
      return H::combine(std::move(h), k.key, k.generation);
    }
  };
  struct NoValue {};  // the map holds the values; the wheel only needs keys
  using Wheel = timingwheel::TimingWheel<TimerKey, NoValue>;

  struct Item {
    V value{};
    std::int64_t expires_ns = 0;  // monotonic; pushed back by Set and hits
    std::uint64_t generation = 0;
  };

  explicit TtlCache(absl::Duration ttl)
      : ttl_(ttl), ttl_ns_(absl::ToInt64Nanoseconds(ttl)) {}

  // The wheel's callback, on its execute worker.
  void Expire(TimerKey timer) {
    const std::int64_t now = MonoNanos();
    std::int64_t remaining_ns;
    {
      std::lock_guard lock(mu_);
      auto it = items_.find(timer.key);
      if (it == items_.end() || it->second.generation != timer.generation) {
        return;  // a timer of a life that already ended
      }
      remaining_ns = it->second.expires_ns - now;
      if (remaining_ns <= 0) {
        items_.erase(it);
        ++counters_.evictions;
        return;
      }
      ++counters_.rearmed;
    }
    // Refreshed by a hit on another thread whose MoveTimer the wheel had not
    // applied yet when this timer came due: re-arm for the rest of the TTL
    // (a callback may set timers on its own wheel).
    wheel_
        ->SetTimer(std::move(timer), NoValue{}, absl::Nanoseconds(remaining_ns))
        .IgnoreError();
  }

  const absl::Duration ttl_;
  const std::int64_t ttl_ns_;
  // Guards the three members below. std::mutex rather than absl::Mutex only
  // because Debian's Abseil is not built with TSan, which then cannot see
  // absl::Mutex and reports false races; either works.
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Item> items_;
  std::uint64_t next_generation_ = 0;
  Counters counters_;
  // Declared last so it is destroyed first: the wheel's destructor stops it
  // and waits for callbacks in flight before the map goes away.
  std::unique_ptr<Wheel> wheel_;
};

struct Config {
  std::int64_t keys = 100000;     // key space: user:0 .. user:N-1
  int threads = 2;                // worker threads using the cache
  std::int64_t qps = 200000;      // cache operations per second, all threads
  double seconds = 5;             // how long the workload runs
  std::int64_t ttl_ms = 1000;     // time to live after the last Set or hit
  std::int64_t interval_ms = 10;  // wheel tick
  double zipf = 1.1;              // key skew (> 1); higher = hotter hot keys
  int delete_percent = 1;         // share of operations that are deletes
};

// One worker: mostly reads with read-through on a miss, a few deletes.
void Worker(const Config& config, TtlCache<std::string>& cache,
            const std::atomic<bool>& stop) {
  std::mt19937_64 rng{std::random_device{}()};
  const double per_thread = static_cast<double>(config.qps) / config.threads;
  const std::int64_t start = MonoNanos();
  std::uint64_t done = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    // Pace to the target rate instead of spinning the CPU.
    const double allowed = per_thread * ((MonoNanos() - start) / 1e9);
    if (static_cast<double>(done) >= allowed) {
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    for (int i = 0; i < 64; ++i, ++done) {
      const auto n =
          absl::Zipf<std::int64_t>(rng, config.keys - 1, config.zipf);
      const std::string key = absl::StrCat("user:", n);
      if (absl::Uniform(rng, 0, 100) < config.delete_percent) {
        cache.Delete(key);
      } else if (!cache.Get(key)) {
        cache.Set(key, absl::StrCat("profile of user ", n));  // "loaded"
      }
    }
  }
}

std::string Line(double t, const TtlCache<std::string>::Counters& c,
                 const TtlCache<std::string>::Counters& prev) {
  const std::uint64_t hits = c.hits - prev.hits;
  const std::uint64_t lookups = hits + c.misses - prev.misses;
  // The hit rate of this interval only, so it shows the cache warming up.
  const std::string rate =
      lookups == 0 ? "-" : absl::StrFormat("%.1f%%", 100.0 * hits / lookups);
  return absl::StrFormat(
      "%5.1fs | size %7s | hits %9s | misses %9s | hit rate %6s | "
      "evictions %9s",
      t, WithCommas(c.size), WithCommas(c.hits), WithCommas(c.misses), rate,
      WithCommas(c.evictions));
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  support::Flags flags(
      "A TTL cache (like go-zero's collection.Cache) built on the wheel, "
      "under a Zipf-skewed read-through workload.");
  flags.Add("keys", &config.keys, "distinct keys");
  flags.Add("threads", &config.threads, "threads using the cache");
  flags.Add("qps", &config.qps, "cache operations per second, all threads");
  flags.Add("seconds", &config.seconds, "how long the workload runs");
  flags.Add("ttl_ms", &config.ttl_ms, "time to live in ms");
  flags.Add("interval_ms", &config.interval_ms, "wheel tick in ms");
  flags.Add("zipf", &config.zipf, "key skew, > 1");
  flags.Add("delete_percent", &config.delete_percent,
            "percent of operations that delete");
  flags.Parse(argc, argv);
  if (config.keys < 2 || config.threads < 1 || config.qps < 1 ||
      config.seconds <= 0 || config.ttl_ms < 1 || config.interval_ms < 1 ||
      config.zipf <= 1 || config.delete_percent < 0 ||
      config.delete_percent > 100) {
    absl::FPrintF(stderr, "flag out of range; see --help\n");
    return 2;
  }

  auto cache =
      TtlCache<std::string>::Create(absl::Milliseconds(config.ttl_ms),
                                    absl::Milliseconds(config.interval_ms));
  if (!cache.ok()) {
    absl::FPrintF(stderr, "error: %s\n", cache.status().ToString());
    return 1;
  }
  absl::PrintF(
      "%s keys (Zipf %.2f), %d threads at %s ops/s, TTL %s, %g s; then no "
      "traffic until every key expired\n",
      WithCommas(config.keys), config.zipf, config.threads, Human(config.qps),
      absl::FormatDuration(absl::Milliseconds(config.ttl_ms)), config.seconds);

  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int i = 0; i < config.threads; ++i) {
    workers.emplace_back([&] { Worker(config, **cache, stop); });
  }

  support::ProgressLine progress;
  const std::int64_t start = MonoNanos();
  const auto elapsed = [start] { return (MonoNanos() - start) / 1e9; };
  TtlCache<std::string>::Counters prev;
  while (elapsed() < config.seconds) {
    absl::SleepFor(
        std::min(progress.period(), absl::Seconds(config.seconds - elapsed())));
    const auto c = (*cache)->counters();
    progress.Show(Line(elapsed(), c, prev));
    prev = c;
  }
  stop.store(true);
  for (std::thread& t : workers) t.join();
  progress.Done();
  const double load_seconds = elapsed();
  const auto at_end = (*cache)->counters();

  // No more traffic: every item must now expire within TTL plus a tick.
  absl::PrintF("traffic stopped at %.1fs; waiting for the wheel to evict...\n",
               load_seconds);
  const absl::Duration grace = absl::Milliseconds(config.ttl_ms) +
                               absl::Milliseconds(config.interval_ms * 2) +
                               absl::Milliseconds(200);
  const double give_up = elapsed() + absl::ToDoubleSeconds(grace);
  while ((*cache)->counters().size != 0 && elapsed() < give_up) {
    absl::SleepFor(std::min(progress.period(), absl::Milliseconds(500)));
    const auto c = (*cache)->counters();
    progress.Show(Line(elapsed(), c, prev));
    prev = c;
  }
  progress.Done();
  const auto final = (*cache)->counters();
  const std::uint64_t lookups = at_end.hits + at_end.misses;

  absl::PrintF("\nSummary\n");
  absl::PrintF("  lookups          %12s  (%s/s)\n", WithCommas(lookups),
               Human(lookups / load_seconds));
  absl::PrintF("  hits             %12s  (%.1f%%)\n", WithCommas(at_end.hits),
               lookups == 0 ? 0.0 : 100.0 * at_end.hits / lookups);
  absl::PrintF("  misses           %12s  (each loaded and Set)\n",
               WithCommas(at_end.misses));
  absl::PrintF("  size at %.1fs     %12s\n", load_seconds,
               WithCommas(at_end.size));
  absl::PrintF("  evictions        %12s  (%s after traffic stopped)\n",
               WithCommas(final.evictions),
               WithCommas(final.evictions - at_end.evictions));
  absl::PrintF("  timers re-armed  %12s  (refreshed while coming due)\n",
               WithCommas(final.rearmed));
  absl::PrintF("  size after TTL   %12s  (must be 0), wheel timers %s\n",
               WithCommas(final.size), WithCommas((*cache)->timers()));
  return final.size == 0 ? 0 : 1;
}
