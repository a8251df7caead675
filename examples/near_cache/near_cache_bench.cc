// What a near cache in front of Redis buys, measured on one machine:
//
//   --mode=latency    a local hit against a Redis GET on loopback;
//   --mode=staleness  from another instance's Set returning to this one's
//                     copy dropped (the window in which it may serve the old
//                     value), p50/p99/max;
//   --mode=zipf       one process of a Zipf read workload at a fixed rate,
//                     with the near cache (--near) or GETs straight to Redis;
//                     bench/near_cache_run.sh runs four at once and reads
//                     Redis's own counters of GETs served and CPU used.
//
// Each prints a live line a second on stderr and one JSON result line on
// stdout. By default it starts its own redis-server on a free loopback port
// (Debian: apt-get install redis-server); --port uses a running one.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lease/redis_link.h"
#include "lease/redis_server.h"
#include "near_cache/near_cache.h"
#include "support/flags.h"
#include "support/json.h"

namespace {

struct Config {
  std::string mode = "latency";
  int port = 0;  // 0: start a redis-server here
  std::int64_t keys = 1000;
  std::int64_t value_bytes = 100;
  std::int64_t samples = 2000;      // staleness: Set/drop pairs
  double seconds = 10;              // zipf: how long
  std::int64_t rate = 5000;         // zipf: reads a second, paced
  double zipf_q = 1.1;              // zipf: skew (absl::Zipf's q)
  double write_ratio = 0.01;        // zipf: writes per read
  std::int64_t max_entries = 2000;  // zipf: local copies
  bool near = true;                 // zipf: through the near cache
  bool populate = true;             // zipf: write every key first
};

std::string Key(std::int64_t i) { return absl::StrCat("bench:", i); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i =
      std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()));
  return v[i];
}

absl::StatusOr<std::unique_ptr<near_cache::NearCache>> Near(
    const Config& c, std::size_t max_entries) {
  near_cache::NearCacheOptions o;
  o.port = c.port;
  o.max_entries = max_entries;
  o.ttl = absl::Minutes(10);
  return near_cache::NearCache::Create(o);
}

int Latency(const Config& c) {
  auto cache = Near(c, c.keys * 2);
  if (!cache.ok())
    return std::fprintf(stderr, "%s\n", cache.status().ToString().c_str()), 1;
  const std::string value(c.value_bytes, 'v');
  for (std::int64_t i = 0; i < c.keys; ++i) {
    if (!(*cache)->Set(Key(i), value).ok()) return 1;
  }
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < c.keys; ++i) keys.push_back(Key(i));
  for (const std::string& k : keys) (void)(*cache)->Get(k);  // now local

  // Local hits: a batch per key set, timed as a whole (a clock read per
  // call would cost a fair part of one).
  const int rounds =
      static_cast<int>(std::max<std::int64_t>(1, 2'000'000 / c.keys));
  std::size_t bytes = 0;
  const absl::Time h0 = absl::Now();
  for (int r = 0; r < rounds; ++r) {
    for (const std::string& k : keys) bytes += (*(*cache)->Get(k))->size();
  }
  const double hit_ns =
      absl::ToDoubleNanoseconds(absl::Now() - h0) / (rounds * keys.size());

  // Redis GETs, one round trip each, timed one by one.
  lease::RedisLink link("127.0.0.1", c.port, absl::Seconds(1));
  std::vector<double> get_us;
  for (int i = 0; i < 20'000; ++i) {
    const absl::Time t0 = absl::Now();
    absl::StatusOr<lease::Reply> r = link.Call({"GET", keys[i % keys.size()]});
    if (!r.ok())
      return std::fprintf(stderr, "%s\n", r.status().ToString().c_str()), 1;
    bytes += (*r)->len;
    get_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
  }
  const double get_p50 = Percentile(get_us, 0.5);
  const near_cache::NearCacheStats s = (*cache)->stats();
  std::fprintf(stderr,
               "local hit %.1f ns; redis GET p50 %.1f us p99 %.1f us; %.0fx "
               "(%zu bytes read)\n",
               hit_ns, get_p50, Percentile(get_us, 0.99),
               get_p50 * 1000 / hit_ns, bytes);
  std::printf("%s\n", support::Json()
                          .Add("mode", "latency")
                          .Add("hit_ns", hit_ns)
                          .Add("get_p50_us", get_p50)
                          .Add("get_p99_us", Percentile(get_us, 0.99))
                          .Add("ratio", get_p50 * 1000 / hit_ns)
                          .Add("hits", s.hits)
                          .str()
                          .c_str());
  return 0;
}

int Staleness(const Config& c) {
  auto a = Near(c, 1000);
  auto b = Near(c, 1000);
  if (!a.ok() || !b.ok()) return std::fprintf(stderr, "no near cache\n"), 1;
  std::vector<double> us;
  std::int64_t early = 0, lost = 0;
  absl::Time last_line = absl::Now();
  for (std::int64_t i = 0; i < c.samples; ++i) {
    const std::string key = Key(i % 16);
    for (int tries = 0; tries < 100 && !(*a)->Cached(key); ++tries) {
      (void)(*a)->Get(key);
    }
    if (!(*a)->Cached(key)) {
      ++lost;
      continue;
    }
    if (!(*b)->Set(key, absl::StrCat("v", i)).ok()) return 1;
    const absl::Time set_returned = absl::Now();
    if (!(*a)->Cached(key)) {
      ++early;  // dropped before B's Set had returned
      us.push_back(0);
      continue;
    }
    const absl::Time give_up = set_returned + absl::Seconds(1);
    while ((*a)->Cached(key) && absl::Now() < give_up)
      std::this_thread::yield();
    if ((*a)->Cached(key)) {
      ++lost;
      continue;
    }
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - set_returned));
    if (absl::Now() - last_line > absl::Seconds(1)) {
      last_line = absl::Now();
      std::fprintf(stderr, "%lld samples, p50 %.1f us, p99 %.1f us\n",
                   static_cast<long long>(us.size()), Percentile(us, 0.5),
                   Percentile(us, 0.99));
    }
  }
  const double max = us.empty() ? 0 : *std::max_element(us.begin(), us.end());
  std::fprintf(stderr,
               "staleness p50 %.1f us, p99 %.1f us, max %.1f us; %lld dropped "
               "before the Set returned, %lld never dropped within 1 s\n",
               Percentile(us, 0.5), Percentile(us, 0.99), max,
               static_cast<long long>(early), static_cast<long long>(lost));
  std::printf("%s\n", support::Json()
                          .Add("mode", "staleness")
                          .Add("samples", static_cast<std::int64_t>(us.size()))
                          .Add("p50_us", Percentile(us, 0.5))
                          .Add("p99_us", Percentile(us, 0.99))
                          .Add("max_us", max)
                          .Add("early", early)
                          .Add("never_dropped", lost)
                          .str()
                          .c_str());
  return lost == 0 ? 0 : 1;
}

int Zipf(const Config& c) {
  std::unique_ptr<near_cache::NearCache> cache;
  lease::RedisLink link("127.0.0.1", c.port, absl::Seconds(1));
  if (c.near) {
    auto made = Near(c, c.max_entries);
    if (!made.ok())
      return std::fprintf(stderr, "%s\n", made.status().ToString().c_str()), 1;
    cache = std::move(*made);
  }
  const std::string value(c.value_bytes, 'v');
  if (absl::Status s = link.Connect(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  if (c.populate) {  // pipelined, a thousand at a time
    for (std::int64_t i = 0; i < c.keys; i += 1000) {
      const std::int64_t n = std::min<std::int64_t>(1000, c.keys - i);
      for (std::int64_t j = 0; j < n; ++j)
        link.Append({"SET", Key(i + j), value});
      for (std::int64_t j = 0; j < n; ++j) {
        if (!link.Read().ok())
          return std::fprintf(stderr, "populate failed\n"), 1;
      }
    }
  }
  absl::BitGen rng;
  std::uint64_t reads = 0, writes = 0, errors = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(c.seconds);
  absl::Time next_line = start + absl::Seconds(1);
  std::uint64_t line_reads = 0, line_hits = 0;
  // Paced in steps of 1 ms: the same reads a second with and without the
  // near cache, so that Redis's work is compared at equal load.
  for (std::int64_t step = 0;; ++step) {
    const absl::Time due = start + absl::Milliseconds(step);
    if (due >= end) break;
    if (absl::Now() < due) absl::SleepFor(due - absl::Now());
    const std::int64_t target = (step + 1) * c.rate / 1000;
    while (static_cast<std::int64_t>(reads) < target) {
      const std::string key =
          Key(absl::Zipf<std::int64_t>(rng, c.keys - 1, c.zipf_q));
      if (absl::Bernoulli(rng, c.write_ratio)) {
        ++writes;
        const absl::Status s = c.near ? cache->Set(key, value)
                                      : link.Call({"SET", key, value}).status();
        errors += !s.ok();
      }
      ++reads;
      if (c.near) {
        errors += !cache->Get(key).ok();
      } else {
        errors += !link.Call({"GET", key}).ok();
      }
    }
    if (absl::Now() >= next_line) {
      next_line += absl::Seconds(1);
      const std::uint64_t hits = c.near ? cache->stats().hits : 0;
      std::fprintf(
          stderr, "[%s] %.0f s: %llu reads/s, local hits %.1f%%, %llu errors\n",
          c.near ? "near" : "plain", absl::ToDoubleSeconds(absl::Now() - start),
          static_cast<unsigned long long>(reads - line_reads),
          reads == line_reads
              ? 0.0
              : 100.0 * (hits - line_hits) / (reads - line_reads),
          static_cast<unsigned long long>(errors));
      line_reads = reads;
      line_hits = hits;
    }
  }
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  near_cache::NearCacheStats s;
  if (c.near) s = cache->stats();
  std::printf("%s\n",
              support::Json()
                  .Add("mode", "zipf")
                  .Add("near", c.near ? "yes" : "no")
                  .Add("reads", reads)
                  .Add("writes", writes)
                  .Add("errors", errors)
                  .Add("seconds", elapsed)
                  .Add("hit_ratio",
                       reads == 0 ? 0.0 : static_cast<double>(s.hits) / reads)
                  .Add("invalidations", s.invalidations)
                  .Add("refused", s.refused)
                  .str()
                  .c_str());
  return errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  support::Flags flags(
      "A near cache in front of Redis: latency, staleness, load.");
  flags.Add("mode", &c.mode, "latency, staleness or zipf");
  flags.Add("port", &c.port, "a running Redis on 127.0.0.1; 0: start one");
  flags.Add("keys", &c.keys, "distinct keys");
  flags.Add("value_bytes", &c.value_bytes, "bytes a value");
  flags.Add("samples", &c.samples, "staleness: Set-to-drop samples");
  flags.Add("seconds", &c.seconds, "zipf: run time");
  flags.Add("rate", &c.rate, "zipf: reads a second");
  flags.Add("zipf_q", &c.zipf_q, "zipf: skew");
  flags.Add("write_ratio", &c.write_ratio, "zipf: writes per read");
  flags.Add("max_entries", &c.max_entries, "zipf: local copies kept");
  flags.Add("near", &c.near, "zipf: through the near cache (else GET)");
  flags.Add("populate", &c.populate, "zipf: write every key first");
  flags.Parse(argc, argv);

  std::unique_ptr<lease::RedisServer> server;
  if (c.port == 0) {
    absl::StatusOr<std::unique_ptr<lease::RedisServer>> started =
        lease::RedisServer::Start();
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    server = std::move(*started);
    c.port = server->port();
  }
  if (c.mode == "latency") return Latency(c);
  if (c.mode == "staleness") return Staleness(c);
  if (c.mode == "zipf") return Zipf(c);
  std::fprintf(stderr, "unknown --mode %s\n", c.mode.c_str());
  return 2;
}
