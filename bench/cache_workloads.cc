// Runs the cache workloads C1-C5 of docs/peers.md against the public API of
// timingwheel::Cache<uint64_t, uint64_t> (docs/api.md, "Cache"), and C1 and
// C3 also with 36-character string keys (C1-str, C3-str), and the floors
// of C1 and C2 (`floor`: the same lookups with no cache around them), and
// prints
// one JSON line per result, with the parameters used, the machine, the date,
// load1 and the commit, in the format of bench/workloads.cc. The Java peers
// (Caffeine, Guava) run the same workloads in bench/java/CacheBench.java and
// print the same keys; bench/cache_run.sh runs both, interleaved.
//
//   cache_workloads [--only=c1,c1-str,floor,c5] [--n=1000000] [--seconds=5]
//                   [--warmup=1] [--threads=2] [--trace=PATH] [--json]
//                   [--commit=REV]
//   cache_workloads --write_trace=PATH   (writes C5's trace and exits)
//
// Written against docs/api.md alone: nothing here knows how Cache works.
// Flags, clocks, RSS, the generator and the result lines come from
// support/; the Zipf sampler and the heap pre-faulting are local.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/json.h"
#include "support/memory.h"
#include "support/results.h"
#include "support/rng.h"
#include "support/uuid_key.h"
#include "timingwheel/cache.h"

namespace {

using Clock = std::chrono::steady_clock;
using CacheU64 = timingwheel::Cache<std::uint64_t, std::uint64_t>;
using support::Json;
using support::Mix;
using support::Rng;

// ---------------------------------------------------------------- flags --

struct Flags {
  support::Selection only;     // --only
  std::int64_t n = 1000000;    // entries of C1, C2, C3
  std::int64_t c4_n = 100000;  // entries of C4
  std::int64_t c5_capacity = 100000;
  std::int64_t c5_keys = 10000000;
  std::int64_t c5_accesses = 10000000;
  double seconds = 5;  // C1, C2 measurement windows
  double warmup = 1;   // C1, C2: run this long before measuring
  int threads = 2;     // C1, C2
  bool json_only = false;
  std::string commit;
  std::string trace;        // C5: read the trace from here if present
  std::string write_trace;  // write C5's trace here and exit
  std::int64_t prefault_mb = 1024;
  bool c3_child = false;  // internal: the fresh process of C3
  bool c3_str = false;    // internal: C3's child with string keys
};

bool Wanted(const Flags& f, const std::string& w) { return f.only.Wanted(w); }

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  std::string only;
  support::Flags flags(
      "The cache workloads C1-C5 of docs/peers.md on timingwheel::Cache, one "
      "JSON line per result.");
  flags.Add("only", &only, "comma-separated workloads, e.g. c1,c5 (all)");
  flags.Add("n", &f.n, "entries of C1, C2, C3");
  flags.Add("c4_n", &f.c4_n, "entries of C4");
  flags.Add("c5_capacity", &f.c5_capacity, "C5 max_entries");
  flags.Add("c5_keys", &f.c5_keys, "C5 distinct ranks of the Zipf law");
  flags.Add("c5_accesses", &f.c5_accesses, "C5 trace length");
  flags.Add("seconds", &f.seconds, "C1, C2 measurement window");
  flags.Add("warmup", &f.warmup, "C1, C2 warm-up before the window");
  flags.Add("threads", &f.threads, "C1, C2 threads");
  flags.Add("json", &f.json_only, "JSON lines only");
  flags.Add("commit", &f.commit, "git revision to record");
  flags.Add("trace", &f.trace,
            "C5 trace file: read if it holds the trace, else written");
  flags.Add("write_trace", &f.write_trace, "write C5's trace here and exit");
  flags.Add("prefault_mb", &f.prefault_mb, "heap faulted in up front");
  flags.Add("c3_child", &f.c3_child, "internal: C3's fresh process");
  flags.Add("c3_str", &f.c3_str, "internal: C3's child, string keys");
  flags.Parse(argc, argv);
  f.only.Parse(only);
  f.n = std::max<std::int64_t>(1, f.n);
  f.c4_n = std::max<std::int64_t>(1, f.c4_n);
  f.c5_capacity = std::max<std::int64_t>(1, f.c5_capacity);
  f.c5_keys = std::max<std::int64_t>(1, f.c5_keys);
  f.c5_accesses = std::max<std::int64_t>(1, f.c5_accesses);
  f.seconds = std::max(0.1, f.seconds);
  f.warmup = std::max(0.0, f.warmup);
  f.threads = std::max(1, f.threads);
  f.prefault_mb = std::max<std::int64_t>(0, f.prefault_mb);
  return f;
}

// ------------------------------------------------------------ utilities --

// support::Rng and support::Mix are the generator; CacheBench.java has the
// same two functions, so both sides draw the same sequences from the same
// seeds. Uniform in [0, 1), 53 bits:
double NextDouble(Rng& rng) {
  return static_cast<double>(rng.Next() >> 11) * 0x1.0p-53;
}

// Zipf over 1..n with exponent s, by rejection-inversion (W. Hormann and
// G. Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", 1996), as Apache Commons RNG's
// ZipfRejectionInversionSampler: O(1) a sample, no table. CacheBench.java
// has the same code.
class Zipf {
 public:
  Zipf(std::int64_t n, double exponent) : n_(n), e_(exponent) {
    h_integral_x1_ = HIntegral(1.5) - 1.0;
    h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
    s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
  }
  std::int64_t Sample(Rng& rng) const {
    for (;;) {
      const double u =
          h_integral_n_ + NextDouble(rng) * (h_integral_x1_ - h_integral_n_);
      const double x = HIntegralInverse(u);
      std::int64_t k = static_cast<std::int64_t>(x + 0.5);
      if (k < 1) {
        k = 1;
      } else if (k > n_) {
        k = n_;
      }
      const double kd = static_cast<double>(k);
      if (kd - x <= s_ || u >= HIntegral(kd + 0.5) - H(kd)) return k;
    }
  }

 private:
  double HIntegral(double x) const {
    const double log_x = std::log(x);
    return Helper2((1.0 - e_) * log_x) * log_x;
  }
  double H(double x) const { return std::exp(-e_ * std::log(x)); }
  double HIntegralInverse(double x) const {
    double t = x * (1.0 - e_);
    if (t < -1.0) t = -1.0;
    return std::exp(Helper1(t) * x);
  }
  static double Helper1(double x) {  // log1p(x) / x
    if (std::fabs(x) > 1e-8) return std::log1p(x) / x;
    return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double Helper2(double x) {  // expm1(x) / x
    if (std::fabs(x) > 1e-8) return std::expm1(x) / x;
    return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
  }

  std::int64_t n_;
  double e_;
  double h_integral_x1_, h_integral_n_, s_;
};

std::int64_t NowNs() { return support::MonoNanos(); }

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

using support::ProcessCpuSeconds;
using support::RssBytes;
using support::ThreadCpuSeconds;

// --------------------------------------------------------------- output --

struct Context {
  Flags flags;
  std::unique_ptr<support::ResultLines> out;
};

Context MakeContext(const Flags& flags) {
  Context c;
  c.flags = flags;
  Json common;
  common.Add("prefault_mb", flags.prefault_mb);
  if (!flags.commit.empty()) common.Add("commit", flags.commit);
  c.out = std::make_unique<support::ResultLines>(flags.json_only, common);
  return c;
}

// Every line starts with workload, name, impl; then its own fields; then
// load1, machine, date, prefault_mb and commit.
void Emit(const Context& ctx, Json result, const std::string& human) {
  ctx.out->Print(std::move(result), human);
}

Json Head(const char* workload, const char* name) {
  Json j;
  j.Add("workload", workload).Add("name", name).Add("impl", "timingwheel");
  return j;
}

template <typename K = std::uint64_t>
std::unique_ptr<timingwheel::Cache<K, std::uint64_t>> MakeCache(
    timingwheel::CacheOptions o,
    typename timingwheel::Cache<K, std::uint64_t>::RemovalListener l =
        nullptr) {
  auto c =
      timingwheel::Cache<K, std::uint64_t>::Create(std::move(o), std::move(l));
  if (!c.ok()) {
    std::fprintf(stderr, "Cache::Create: %s\n", c.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(c);
}

std::int64_t Ms(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// ------------------------------------------------------------ C1 and C2 --

// `threads` threads run ops on the cache for warmup + seconds; only the last
// `seconds` count. Each thread draws its keys from an array filled before
// the clock starts (2 Mi keys, cycled), so the timed loop is a cache call
// and an index increment: sampling Zipf in the loop would cost as much as
// the call. Every 20th op of a thread is a Set when `set_every_20th`.
template <typename K = std::uint64_t>
struct alignas(64) Worker {
  std::vector<K> keys;
  std::int64_t ops_at_start = 0, ops_at_end = 0;
  double cpu_at_start = 0, cpu_at_end = 0;
  std::int64_t hits = 0, errors = 0;
};

struct ThroughputResult {
  std::int64_t ops = 0;
  double seconds = 0;
  double thread_cpu_seconds = 0;
  double process_cpu_seconds = 0;
  std::int64_t hits = 0, gets = 0, errors = 0;
};

template <typename K>
ThroughputResult RunOps(const Context& ctx,
                        timingwheel::Cache<K, std::uint64_t>& cache,
                        std::vector<Worker<K>>& workers, bool set_every_20th) {
  // 0: warming up, 1: measuring, 2: stop.
  std::atomic<int> phase{0};
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  constexpr std::int64_t kCheck = 1024;
  for (Worker<K>& w : workers) {
    threads.emplace_back([&, wp = &w] {
      Worker<K>& me = *wp;
      const std::uint64_t mask = me.keys.size() - 1;
      const K* keys = me.keys.data();
      std::int64_t i = 0, hits = 0, errors = 0, hits_at_start = 0;
      int seen = 0;
      ready.fetch_add(1);
      for (;;) {
        for (std::int64_t k = 0; k < kCheck; ++k, ++i) {
          const K& key = keys[static_cast<std::uint64_t>(i) & mask];
          if (set_every_20th && i % 20 == 19) {
            if (!cache.Set(key, static_cast<std::uint64_t>(i)).ok()) ++errors;
          } else if (cache.Get(key).has_value()) {
            ++hits;
          }
        }
        const int p = phase.load(std::memory_order_relaxed);
        if (p != seen) {
          if (seen == 0) {
            me.ops_at_start = i;
            me.cpu_at_start = ThreadCpuSeconds();
            hits_at_start = hits;
          }
          if (p == 2) {
            me.ops_at_end = i;
            me.cpu_at_end = ThreadCpuSeconds();
            me.hits = hits - hits_at_start;
            me.errors = errors;
            break;
          }
          seen = p;
        }
      }
    });
  }
  while (ready.load() != static_cast<int>(workers.size())) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(ctx.flags.warmup));
  const double proc0 = ProcessCpuSeconds();
  const Clock::time_point t0 = Clock::now();
  phase.store(1);
  std::this_thread::sleep_for(std::chrono::duration<double>(ctx.flags.seconds));
  phase.store(2);
  const Clock::time_point t1 = Clock::now();
  const double proc1 = ProcessCpuSeconds();
  for (std::thread& t : threads) t.join();
  ThroughputResult r;
  r.seconds = Seconds(t0, t1);
  r.process_cpu_seconds = proc1 - proc0;
  for (const Worker<K>& w : workers) {
    const std::int64_t ops = w.ops_at_end - w.ops_at_start;
    r.ops += ops;
    r.thread_cpu_seconds += w.cpu_at_end - w.cpu_at_start;
    r.hits += w.hits;
    r.errors += w.errors;
    if (set_every_20th) {
      r.gets += ops - ops / 20;  // every 20th op is a Set (within 1)
    } else {
      r.gets += ops;
    }
  }
  return r;
}

// The key of the cache's i-th entry: spread, as real ids are. For strings,
// a 36-character UUID text (support/uuid_key.h), as services key caches.
template <typename K>
K KeyOf(std::uint64_t i);
template <>
std::uint64_t KeyOf<std::uint64_t>(std::uint64_t i) {
  return Mix(i);
}
template <>
std::string KeyOf<std::string>(std::uint64_t i) {
  return support::UuidKey(i);
}

template <typename K>
void Populate(timingwheel::Cache<K, std::uint64_t>& cache, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    cache
        .Set(KeyOf<K>(static_cast<std::uint64_t>(i)),
             static_cast<std::uint64_t>(i))
        .IgnoreError();
  }
}

// Keys a thread cycles through: 2 Mi of 8-byte keys; 1 Mi strings (80 MB a
// thread with their heap blocks), still far more than the caches' lines.
template <typename K>
constexpr std::size_t kKeysPerThread =
    std::is_same_v<K, std::string> ? std::size_t{1} << 20
                                   : std::size_t{1} << 21;

void EmitThroughput(const Context& ctx, const char* workload, const char* name,
                    const timingwheel::CacheOptions& o, const char* keys,
                    const ThroughputResult& r, std::size_t size_after) {
  const double ops_per_s = static_cast<double>(r.ops) / r.seconds;
  Json j = Head(workload, name);
  j.Add("n", ctx.flags.n)
      .Add("threads", ctx.flags.threads)
      .Add("ttl_ms", Ms(o.ttl))
      .Add("sliding", o.sliding ? 1 : 0)
      .Add("interval_ms", Ms(o.wheel.interval))
      .Add("keys", keys)
      .Add("get_fraction",
           std::string(workload).rfind("C1", 0) == 0 ? 0.95 : 1.0)
      .Add("warmup_seconds", ctx.flags.warmup)
      .Add("seconds", r.seconds)
      .Add("ops", r.ops)
      .Add("ops_per_s", ops_per_s)
      .Add("thread_cpu_ns_per_op",
           r.ops ? r.thread_cpu_seconds * 1e9 / r.ops : NAN)
      .Add("process_cpu_s_per_s", r.process_cpu_seconds / r.seconds)
      .Add("process_cpu_ns_per_op",
           r.ops ? r.process_cpu_seconds * 1e9 / r.ops : NAN)
      .Add("get_hit_ratio", r.gets ? static_cast<double>(r.hits) / r.gets : NAN)
      .Add("size_after", static_cast<std::uint64_t>(size_after))
      .Add("errors", r.errors);
  Emit(ctx, j,
       absl::StrFormat(
           "%s %s: %.2f M ops/s with %d threads; CPU %.0f ns/op on the "
           "calling threads, %.0f ns/op for the process; %.3f of Gets hit",
           workload, name, ops_per_s / 1e6, ctx.flags.threads,
           r.ops ? r.thread_cpu_seconds * 1e9 / r.ops : NAN,
           r.ops ? r.process_cpu_seconds * 1e9 / r.ops : NAN,
           r.gets ? static_cast<double>(r.hits) / r.gets : NAN));
}

// C1 read-mostly: N entries, ttl 10 min (expire after write), `threads`
// threads, keys Zipf(0.99) over the N keys, 95% Get / 5% Set. C1-str: the
// same with 36-character string keys, each call given the caller's key.
template <typename K>
void RunC1(const Context& ctx) {
  constexpr bool kStr = std::is_same_v<K, std::string>;
  timingwheel::CacheOptions o;
  o.ttl = absl::Minutes(10);
  auto cache = MakeCache<K>(o);
  Populate(*cache, ctx.flags.n);
  std::vector<Worker<K>> workers(ctx.flags.threads);
  const Zipf zipf(ctx.flags.n, 0.99);
  for (int t = 0; t < ctx.flags.threads; ++t) {
    Rng rng(100 + t);
    workers[t].keys.resize(kKeysPerThread<K>);
    for (K& k : workers[t].keys) {
      k = KeyOf<K>(static_cast<std::uint64_t>(zipf.Sample(rng) - 1));
    }
  }
  const ThroughputResult r = RunOps(ctx, *cache, workers, true);
  EmitThroughput(ctx, kStr ? "C1-str" : "C1", "read-mostly", o,
                 kStr ? "zipf0.99 string36" : "zipf0.99", r, cache->size());
}

// C2 sliding sessions: N entries, sliding ttl 30 s, `threads` threads of
// uniformly random Gets.
void RunC2(const Context& ctx) {
  timingwheel::CacheOptions o;
  o.ttl = absl::Seconds(30);
  o.sliding = true;
  auto cache = MakeCache(o);
  Populate(*cache, ctx.flags.n);
  std::vector<Worker<>> workers(ctx.flags.threads);
  for (int t = 0; t < ctx.flags.threads; ++t) {
    Rng rng(200 + t);
    workers[t].keys.resize(kKeysPerThread<std::uint64_t>);
    for (std::uint64_t& k : workers[t].keys) {
      k = Mix(rng.Below(static_cast<std::uint64_t>(ctx.flags.n)));
    }
  }
  const ThroughputResult r = RunOps(ctx, *cache, workers, false);
  EmitThroughput(ctx, "C2", "sliding", o, "uniform", r, cache->size());
}

// ------------------------------------------------------------- floors --

// What a lookup costs on this machine with no cache around it: one thread
// finds C1's and C2's key streams (the same keys, in the same order) among
// the same N keys in an absl::flat_hash_map from key to a node number, then
// reads that node in an array of 48-byte nodes (key, value, deadline; in
// the order of insertion) and compares its key and deadline: one index
// probe and one entry read, the least a Get can do with the cache's
// layout. The cache's CPU per op over this is its own cost; this is the
// machine's memory latency for two dependent reads, overlapped as far as
// the processor can. Each is timed twice: comparing the deadline with a
// time read once, and with a steady_clock read per lookup, as an expiring
// cache must (here the clock's counter read waits for the loads before it,
// so lookups no longer overlap).
void RunFloors(const Context& ctx) {
  struct Node {
    std::uint64_t key;
    std::uint64_t value;
    std::int64_t deadline;
    std::uint64_t links[3];
  };
  static_assert(sizeof(Node) == 48);
  absl::flat_hash_map<std::uint64_t, std::uint32_t> index;
  std::vector<Node> nodes(static_cast<std::size_t>(ctx.flags.n));
  const std::int64_t deadline = NowNs() + std::int64_t{600000000000};
  for (std::int64_t i = 0; i < ctx.flags.n; ++i) {
    const std::uint64_t key =
        KeyOf<std::uint64_t>(static_cast<std::uint64_t>(i));
    nodes[static_cast<std::size_t>(i)] =
        Node{key, static_cast<std::uint64_t>(i), deadline, {}};
    index[key] = static_cast<std::uint32_t>(i);
  }
  const Zipf zipf(ctx.flags.n, 0.99);
  for (const bool uniform : {false, true}) {
    for (const bool clock : {false, true}) {
      std::vector<std::uint64_t> keys(kKeysPerThread<std::uint64_t>);
      Rng rng(uniform ? 200 : 100);
      for (std::uint64_t& k : keys) {
        k = uniform ? Mix(rng.Below(static_cast<std::uint64_t>(ctx.flags.n)))
                    : KeyOf<std::uint64_t>(
                          static_cast<std::uint64_t>(zipf.Sample(rng) - 1));
      }
      const std::int64_t now = NowNs();
      std::uint64_t sum = 0;
      std::int64_t ops = 0;
      const double cpu0 = ThreadCpuSeconds();
      const std::int64_t end =
          NowNs() + static_cast<std::int64_t>(ctx.flags.seconds * 1e9);
      while (NowNs() < end) {
        for (std::size_t k = 0; k < (std::size_t{1} << 16); ++k, ++ops) {
          const std::uint64_t key =
              keys[static_cast<std::size_t>(ops) & (keys.size() - 1)];
          auto it = index.find(key);
          if (it == index.end()) continue;
          const Node& n = nodes[it->second];
          if (n.key == key && (clock ? NowNs() : now) < n.deadline) {
            sum += n.value;
          }
        }
      }
      const double ns =
          (ThreadCpuSeconds() - cpu0) * 1e9 / static_cast<double>(ops);
      const char* workload = uniform ? (clock ? "C2-floor-clock" : "C2-floor")
                                     : (clock ? "C1-floor-clock" : "C1-floor");
      Json j;
      j.Add("workload", workload)
          .Add("name", clock ? "index probe + entry read + clock read"
                             : "index probe + entry read")
          .Add("impl", "absl::flat_hash_map + node array")
          .Add("n", ctx.flags.n)
          .Add("threads", 1)
          .Add("keys", uniform ? "uniform" : "zipf0.99")
          .Add("ops", ops)
          .Add("thread_cpu_ns_per_op", ns)
          .Add("checksum", sum);
      Emit(ctx, j,
           absl::StrFormat("%s: an index probe and an entry read of the same "
                           "keys%s cost %.0f ns of CPU (one thread, no cache)",
                           workload, clock ? ", with a clock read," : "", ns));
    }
  }
}

// ------------------------------------------------------------------ C3 --

// The fresh process (not pre-faulted): RSS before Create and after N Sets
// (ttl 10 min). The wheel applies its commands asynchronously, and the API
// has no "applied" counter, so the Sets are paced (a 2 ms pause every
// 16 Ki, time for the loop to apply them at any rate above 8 M/s) and the
// RSS is read after a 500 ms settle: the delta is then the cache's own
// structures, not a backlog of queued commands.
template <typename K>
int RunC3Child(const Flags& flags) {
  const std::int64_t n = flags.n;
  const std::int64_t before = RssBytes();
  timingwheel::CacheOptions o;
  o.ttl = absl::Minutes(10);
  auto cache = MakeCache<K>(o);
  for (std::int64_t i = 0; i < n; ++i) {
    cache
        ->Set(KeyOf<K>(static_cast<std::uint64_t>(i)),
              static_cast<std::uint64_t>(i))
        .IgnoreError();
    if ((i + 1) % 16384 == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::int64_t after = RssBytes();
  std::printf("%" PRId64 " %" PRId64 " %zu\n", before, after, cache->size());
  std::fflush(stdout);
  std::_Exit(0);  // skip the teardown
}

// C3-str: the same with 36-character string keys. The cache holds each key
// as a std::string, so each entry also owns its key's malloc chunk
// (key_heap_bytes: support::StringHeapBytes), reported
// apart as rss_bytes_per_entry_besides_key.
void RunC3(const Context& ctx, const char* self, bool str) {
  const std::int64_t n = ctx.flags.n;
  const std::string cmd = std::string("'") + self +
                          "' --c3_child --n=" + std::to_string(n) +
                          (str ? " --c3_str" : "");
  FILE* p = popen(cmd.c_str(), "r");
  std::int64_t before = 0, after = 0;
  std::size_t size = 0;
  if (p == nullptr || std::fscanf(p, "%" SCNd64 " %" SCNd64 " %zu", &before,
                                  &after, &size) != 3) {
    before = after = 0;
  }
  if (p != nullptr) pclose(p);
  const double per = static_cast<double>(after - before) / n;
  const std::int64_t key_heap =
      str ? support::StringHeapBytes(KeyOf<std::string>(0)) : 0;
  Json j = Head(str ? "C3-str" : "C3", "memory");
  j.Add("n", n)
      .Add("ttl_ms", Ms(absl::Minutes(10)))
      .Add("interval_ms", Ms(timingwheel::Options().interval))
      .Add("keys", str ? "string36" : "uint64")
      .Add("key_bytes", str ? 36 : 8)
      .Add("key_heap_bytes", key_heap)
      .Add("rss_bytes_per_entry_besides_key",
           per - static_cast<double>(key_heap))
      .Add("value_bytes", 8)
      .Add("rss_bytes_per_entry", per)
      .Add("rss_before_bytes", before)
      .Add("rss_after_bytes", after)
      .Add("size", static_cast<std::uint64_t>(size));
  Emit(ctx, j,
       absl::StrCat(
           absl::StrFormat("%s memory: %.1f B RSS per entry at %" PRId64
                           " entries (fresh process; %zu present)",
                           str ? "C3-str" : "C3", per, n, size),
           str ? absl::StrFormat("; %.1f B besides the key's own %d B",
                                 per - static_cast<double>(key_heap), key_heap)
               : ""));
}

// ------------------------------------------------------------------ C4 --

// N entries with ttl uniform in [1 s, 2 s] on a 10 ms wheel, then no cache
// call for 4 s. The listener is the probe: for a kExpired notification of
// entry i (value i) it stores the time; lateness = that time minus the
// entry's deadline, which is the time read just before its Set plus its
// ttl (the cache reads its own clock later, so its deadline is >= ours and
// "early" can only under-report lateness).
void RunC4(const Context& ctx) {
  const std::int64_t n = ctx.flags.c4_n;
  constexpr double kQuietSeconds = 4;
  std::vector<std::int64_t> deadline_ns(n);
  std::vector<std::atomic<std::int64_t>> notified_ns(n);
  std::vector<std::atomic<std::uint32_t>> count(n);
  std::atomic<std::int64_t> other_causes{0}, stray{0};
  for (std::int64_t i = 0; i < n; ++i) {
    notified_ns[i].store(0, std::memory_order_relaxed);
    count[i].store(0, std::memory_order_relaxed);
  }
  timingwheel::CacheOptions o;
  o.ttl = absl::Seconds(2);
  o.wheel.interval = absl::Milliseconds(10);
  auto cache = MakeCache(o, [&](std::uint64_t, std::uint64_t value,
                                timingwheel::RemovalCause cause) {
    const std::int64_t t = NowNs();
    if (cause != timingwheel::RemovalCause::kExpired) {
      other_causes.fetch_add(1, std::memory_order_relaxed);
    } else if (value >= static_cast<std::uint64_t>(n)) {
      stray.fetch_add(1, std::memory_order_relaxed);
    } else if (count[value].fetch_add(1, std::memory_order_relaxed) == 0) {
      notified_ns[value].store(t, std::memory_order_relaxed);
    }
  });
  Rng rng(4);
  std::vector<std::int64_t> ttl_ns(n);
  for (std::int64_t i = 0; i < n; ++i) {
    ttl_ns[i] = rng.Between(1000000000, 2000000000);
  }
  std::int64_t errors = 0;
  const std::int64_t start = NowNs();
  for (std::int64_t i = 0; i < n; ++i) {
    deadline_ns[i] = NowNs() + ttl_ns[i];
    if (!cache
             ->Set(Mix(static_cast<std::uint64_t>(i)),
                   static_cast<std::uint64_t>(i), absl::Nanoseconds(ttl_ns[i]))
             .ok()) {
      ++errors;
    }
  }
  const std::int64_t submitted = NowNs();
  std::this_thread::sleep_for(std::chrono::duration<double>(kQuietSeconds));
  // What came within the quiet window; the cache is then destroyed, and any
  // later notification is not counted.
  std::vector<std::int64_t> late;
  late.reserve(n);
  std::int64_t notified = 0, twice = 0, early = 0, last = start;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t c = count[i].load();
    if (c == 0) continue;
    ++notified;
    if (c > 1) ++twice;
    const std::int64_t t = notified_ns[i].load();
    if (t < deadline_ns[i]) ++early;
    late.push_back(t - deadline_ns[i]);
    last = std::max(last, t);
  }
  const timingwheel::CacheStats s = cache->stats();
  cache.reset();
  std::sort(late.begin(), late.end());
  auto pct = [&](double q) -> double {
    if (late.empty()) return NAN;
    const std::size_t i = std::min(
        late.size() - 1, static_cast<std::size_t>(q * (late.size() - 1)));
    return late[i] / 1e6;
  };
  Json j = Head("C4", "expiry-idle");
  j.Add("n", n)
      .Add("interval_ms", Ms(o.wheel.interval))
      .Add("ttl_ms_min", 1000)
      .Add("ttl_ms_max", 2000)
      .Add("quiet_seconds", kQuietSeconds)
      .Add("submit_seconds", (submitted - start) / 1e9)
      .Add("notified_expired", notified)
      .Add("never_notified", n - notified)
      .Add("late_ms_p50", pct(0.5))
      .Add("late_ms_p99", pct(0.99))
      .Add("late_ms_max", late.empty() ? NAN : late.back() / 1e6)
      .Add("late_ms_min", late.empty() ? NAN : late.front() / 1e6)
      .Add("early", early)
      .Add("notified_twice", twice)
      .Add("other_causes", other_causes.load())
      .Add("stray", stray.load())
      .Add("stats_expired", s.expired)
      .Add("size_after", static_cast<std::uint64_t>(s.size))
      .Add("errors", errors);
  Emit(ctx, j,
       absl::StrFormat(
           "C4 expiry with no activity: %" PRId64 " of %" PRId64
           " notified kExpired within %.0f s (never %" PRId64
           "); lateness p50 %.2f ms, p99 %.2f ms, max %.2f ms; early %" PRId64
           ", twice %" PRId64,
           notified, n, kQuietSeconds, n - notified, pct(0.5), pct(0.99),
           late.empty() ? NAN : late.back() / 1e6, early, twice));
}

// ------------------------------------------------------------------ C5 --

// The trace: `accesses` keys, key = Mix(rank - 1) with rank Zipf(0.99) over
// 1..keys, seed 5. Written as raw little-endian uint64 so that the Java
// harness replays exactly the same sequence (--trace there too).
std::vector<std::uint64_t> MakeTrace(const Flags& f) {
  std::vector<std::uint64_t> trace(f.c5_accesses);
  const Zipf zipf(f.c5_keys, 0.99);
  Rng rng(5);
  for (std::uint64_t& k : trace) {
    k = Mix(static_cast<std::uint64_t>(zipf.Sample(rng) - 1));
  }
  return trace;
}

bool WriteTrace(const std::string& path, const std::vector<std::uint64_t>& t) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(t.data(), sizeof(t[0]), t.size(), f) == t.size();
  if (std::fclose(f) != 0 || !ok) return false;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool ReadTrace(const std::string& path, std::size_t count,
               std::vector<std::uint64_t>* t) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  t->resize(count);
  const bool ok = std::fread(t->data(), sizeof((*t)[0]), count, f) == count &&
                  std::fgetc(f) == EOF;
  std::fclose(f);
  return ok;
}

// Order-sensitive checksum, printed by both harnesses: equal checksums say
// they replayed the same trace.
std::uint64_t TraceChecksum(const std::vector<std::uint64_t>& t) {
  std::uint64_t h = 0;
  for (std::uint64_t k : t) h = Mix(h ^ k);
  return h;
}

void RunC5(const Context& ctx) {
  const Flags& f = ctx.flags;
  std::vector<std::uint64_t> trace;
  std::string source = "generated";
  if (!f.trace.empty() &&
      ReadTrace(f.trace, static_cast<std::size_t>(f.c5_accesses), &trace)) {
    source = "file";
  } else {
    trace = MakeTrace(f);
    if (!f.trace.empty()) WriteTrace(f.trace, trace);
  }
  std::int64_t distinct = 0;
  {
    std::vector<std::uint64_t> sorted = trace;
    std::sort(sorted.begin(), sorted.end());
    distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
  }
  timingwheel::CacheOptions o;
  o.ttl = absl::InfiniteDuration();
  o.max_entries = static_cast<std::size_t>(f.c5_capacity);
  auto cache = MakeCache(o);
  std::int64_t hits = 0, errors = 0;
  const double cpu0 = ThreadCpuSeconds();
  const Clock::time_point t0 = Clock::now();
  for (std::uint64_t k : trace) {
    if (cache->Get(k).has_value()) {
      ++hits;
    } else if (!cache->Set(k, k).ok()) {
      ++errors;
    }
  }
  const double secs = Seconds(t0, Clock::now());
  const double cpu = ThreadCpuSeconds() - cpu0;
  const timingwheel::CacheStats s = cache->stats();
  const double ratio = static_cast<double>(hits) / trace.size();
  Json j = Head("C5", "hit-ratio");
  j.Add("capacity", f.c5_capacity)
      .Add("keys", f.c5_keys)
      .Add("accesses", static_cast<std::int64_t>(trace.size()))
      .Add("zipf_exponent", 0.99)
      .Add("seed", 5)
      .Add("trace", source)
      .Add("trace_checksum",
           absl::StrFormat("%016" PRIx64, TraceChecksum(trace)))
      .Add("distinct_keys", distinct)
      .Add("hits", hits)
      .Add("hit_ratio", ratio)
      .Add("seconds", secs)
      .Add("ops_per_s", trace.size() / secs)
      .Add("thread_cpu_ns_per_op", cpu * 1e9 / trace.size())
      .Add("evicted", s.evicted)
      .Add("size_after", static_cast<std::uint64_t>(s.size))
      .Add("errors", errors);
  Emit(ctx, j,
       absl::StrFormat("C5 hit ratio: %.4f (%" PRId64
                       " of %zu; capacity %" PRId64 ", %" PRId64
                       " distinct keys); %.2f M accesses/s on one thread",
                       ratio, hits, trace.size(), f.c5_capacity, distinct,
                       trace.size() / secs / 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  if (flags.c3_child) {
    return flags.c3_str ? RunC3Child<std::string>(flags)
                        : RunC3Child<std::uint64_t>(flags);
  }
  if (!flags.write_trace.empty()) {
    const std::vector<std::uint64_t> trace = MakeTrace(flags);
    if (!WriteTrace(flags.write_trace, trace)) {
      std::fprintf(stderr, "cannot write %s\n", flags.write_trace.c_str());
      return 1;
    }
    std::printf("%s: %zu keys, checksum %016" PRIx64 "\n",
                flags.write_trace.c_str(), trace.size(), TraceChecksum(trace));
    return 0;
  }
  // As bench/workloads.cc (see support/memory.h); the JVM peers run with a
  // pre-touched heap likewise.
  support::PrefaultHeap(flags.prefault_mb);
  const Context ctx = MakeContext(flags);
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[len > 0 ? len : 0] = '\0';

  if (Wanted(flags, "c1")) RunC1<std::uint64_t>(ctx);
  if (Wanted(flags, "c1-str")) RunC1<std::string>(ctx);
  if (Wanted(flags, "c2")) RunC2(ctx);
  if (Wanted(flags, "floor")) RunFloors(ctx);
  if (Wanted(flags, "c3")) RunC3(ctx, self, false);
  if (Wanted(flags, "c3-str")) RunC3(ctx, self, true);
  if (Wanted(flags, "c4")) RunC4(ctx);
  if (Wanted(flags, "c5")) RunC5(ctx);
  return 0;
}
