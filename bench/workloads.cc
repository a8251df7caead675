// Runs the workloads W1-W9 of docs/peers.md against the public API of
// timingwheel (values uint64_t; keys uint64_t, and for the "-str" rows
// 36-character std::string keys) and prints one JSON line per result, with
// the parameters used, the machine and the date, so that results files from
// different days and machines can be compared and charted.
//
//   workloads [--only=w1,w5,w5-twice,w1-str,w8,drain] [--n=1000000]
//             [--seconds=5] [--json] [--warm] [--prefault_mb=N]
//             [--w6_spread_seconds=10] [--w8_n=4000000] [--w8_seconds=10]
//             [--w8_lag_ms=1]
//             [--w9_n=5000000]
//             [--w9_chunk=100000] [--w9_idle_seconds=10] [--commit=<git rev>]
//
// The process is cold by default, as a user's is: nothing is faulted in
// ahead. --warm first faults in 1 GiB of heap and keeps it (see main).
//
// Default output: human-readable lines starting with "# " plus the JSON
// lines; --json prints the JSON lines only (what bench/run.sh stores).
//
// Throughput figures are "applied": the clock stops when the loop has applied
// the last command, not when the last call returned. See WaitApplied.
#include <dirent.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/fire_probe.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/memory.h"
#include "support/results.h"
#include "support/rng.h"
#include "support/uuid_key.h"
#include "timingwheel/internal/base/stored_key.h"
#include "timingwheel/internal/wheel/wheel.h"
#include "timingwheel/timing_wheel.h"

namespace {

using Clock = std::chrono::steady_clock;
// The wheel under test: values are uint64_t; keys uint64_t, or std::string
// for the "-str" rows.
template <typename K>
using WheelOf = timingwheel::TimingWheel<K, std::uint64_t>;
using TW = WheelOf<std::uint64_t>;
using bench::AnalyseFirings;
using bench::FireRecorder;
using bench::Firings;
using support::Json;
using support::Mix;
using support::MonoNanos;
using support::ProcessCpuSeconds;
using support::Rng;
using support::ThreadCpuSeconds;
using support::UuidKey;

// ---------------------------------------------------------------- flags --

struct Config {
  support::Selection only;  // --only
  std::int64_t n = 1000000;
  double seconds = 5;  // W6 and W7 measurement windows
  // W8 and W9 have sizes and windows of their own: peers.md sets them apart
  // from W1-W7's 1M, and --n=100000 for a quick look at W1-W7 should not
  // shrink them unasked.
  std::int64_t w8_n = 4000000;
  double w6_spread_seconds = 10;  // W6-spread's window (peers.md: 10 s)
  double w8_seconds = 10;         // W8's window after the filling
  bool w8_presized = false;       // W8 with Options::expected_timers = w8_n
  bool w123_presized = false;     // W1-W3 with expected_timers = n
  double w8_lag_ms = 1;           // W8-lag's Options::max_lag
  // W5-lag's variants, for telling its lateness apart: expected_timers = n,
  // and how a refused caller waits before retrying (0: a yield, as
  // peers.md defines W5; else a sleep of that many microseconds).
  bool w5_lag_presized = false;
  std::int64_t w5_retry_sleep_us = 0;
  std::int64_t w9_n = 5000000;
  std::int64_t w9_chunk = 100000;
  double w9_idle_seconds = 10;
  bool json_only = false;
  std::string commit;
  // Heap faulted in before measuring (see main): 0 (the default) is a cold
  // process; --warm makes it 1024 MiB, --prefault_mb=N any size. warm says
  // whether any is, and goes into every JSON line.
  bool warm = false;
  std::int64_t prefault_mb = 0;
  bool w4_child = false;  // internal: the fresh process of W4
  bool w4_burst = false;  // internal: W4 child submits without pacing
  bool w4_str = false;    // internal: W4 child with string keys
  bool w8_child = false;  // internal: W8's fresh process (its RSS)
  bool w9_child = false;  // internal: the fresh process of W9
};

bool Wanted(const Config& c, const std::string& w) { return c.only.Wanted(w); }

Config ParseFlags(int argc, char** argv) {
  Config c;
  std::string only;
  support::Flags flags(
      "Runs the workloads W1-W9 of docs/peers.md and prints one JSON line per "
      "result.");
  flags.Add(
      "only", &only,
      "comma-separated workloads to run (w1,...,w9,w5-lag,w5-twice,w8-lag,"
      "drain, and with string keys w1-str,w2-str,w3-str,w4-str,w5-str,"
      "w5-twice-str; all)");
  flags.Add("n", &c.n, "timers per workload W1-W7 and drain");
  flags.Add("seconds", &c.seconds, "W6 and W7 measurement window in seconds");
  flags.Add("w6_spread_seconds", &c.w6_spread_seconds,
            "W6-spread measurement window in seconds");
  flags.Add("w8_n", &c.w8_n, "W8 timers");
  flags.Add("w8_seconds", &c.w8_seconds, "W8 window after the filling");
  flags.Add("w8_presized", &c.w8_presized,
            "W8 with Options::expected_timers = w8_n (no index growth)");
  flags.Add("w123_presized", &c.w123_presized,
            "W1-W3 (and W1b-W3b) with Options::expected_timers = n (no index "
            "growth)");
  flags.Add("w8_lag_ms", &c.w8_lag_ms, "W8-lag's Options::max_lag in ms");
  flags.Add("w5_lag_presized", &c.w5_lag_presized,
            "W5-lag with Options::expected_timers = n (no index growth)");
  flags.Add("w5_retry_sleep_us", &c.w5_retry_sleep_us,
            "W5 and W5-lag: a refused call is retried after sleeping this "
            "long instead of after a yield (0)");
  flags.Add("w9_n", &c.w9_n, "W9 timers at the peak");
  flags.Add("w9_chunk", &c.w9_chunk, "W9 commands applied at a time");
  flags.Add("w9_idle_seconds", &c.w9_idle_seconds,
            "W9 idle time before malloc_trim");
  flags.Add("warm", &c.warm,
            "fault in 1 GiB of heap before measuring (off: a cold process, "
            "as a user's is)");
  flags.Add("prefault_mb", &c.prefault_mb,
            "MiB of heap to fault in before measuring; > 0 implies --warm, "
            "--warm alone is 1024");
  flags.Add("json", &c.json_only, "print the JSON lines only");
  flags.Add("commit", &c.commit, "git revision to record in the results");
  flags.Add("w4_child", &c.w4_child, "internal: W4's fresh process");
  flags.Add("w4_burst", &c.w4_burst, "internal: W4's child submits at once");
  flags.Add("w4_str", &c.w4_str, "internal: W4's child with string keys");
  flags.Add("w8_child", &c.w8_child, "internal: W8's fresh process");
  flags.Add("w9_child", &c.w9_child, "internal: W9's fresh process");
  flags.Parse(argc, argv);
  c.only.Parse(only);
  c.n = std::max<std::int64_t>(1, c.n);
  c.seconds = std::max(0.1, c.seconds);
  c.w8_n = std::max<std::int64_t>(1, c.w8_n);
  c.w6_spread_seconds = std::max(0.1, c.w6_spread_seconds);
  c.w8_seconds = std::max(0.1, c.w8_seconds);
  c.w8_lag_ms = std::max(0.001, c.w8_lag_ms);
  c.w9_n = std::max<std::int64_t>(1, c.w9_n);
  c.w9_chunk = std::max<std::int64_t>(1, c.w9_chunk);
  c.w9_idle_seconds = std::max(0.0, c.w9_idle_seconds);
  c.prefault_mb = std::max<std::int64_t>(0, c.prefault_mb);
  if (c.warm && c.prefault_mb == 0) c.prefault_mb = 1024;
  c.warm = c.prefault_mb > 0;
  return c;
}

// ------------------------------------------------------------ utilities --

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

long Tid() { return static_cast<long>(syscall(SYS_gettid)); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One thread of this process: its name (the library names its threads
// "tw-loop", "tw-execute" and "tw-drain") and its CPU time so far, in ns.
struct ThreadCpu {
  std::string name;
  std::int64_t ns = 0;
};

// Every thread of this process, by thread id. schedstat's first field is
// the time on CPU in ns; where the kernel has no schedstat, stat's
// utime+stime (in clock ticks, 10 ms resolution) is used instead. Reading
// /proc is the only way to get another thread's CPU time:
// CLOCK_THREAD_CPUTIME_ID answers for the calling thread only, and the loop
// and worker threads are the library's, not ours.
std::map<long, ThreadCpu> ThreadCpuNs() {
  std::map<long, ThreadCpu> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  static const long kTck = sysconf(_SC_CLK_TCK);
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    const long tid = std::atol(d->d_name);
    const std::string base = std::string("/proc/self/task/") + d->d_name;
    std::string name = ReadFile(base + "/comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    std::string sched = ReadFile(base + "/schedstat");
    if (!sched.empty()) {
      out[tid] = ThreadCpu{std::move(name), std::atoll(sched.c_str())};
      continue;
    }
    const std::string stat = ReadFile(base + "/stat");
    const std::size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    std::string tok;
    std::int64_t utime = 0, stime = 0;
    // After "pid (comm) ", fields start at number 3; utime is 14, stime 15.
    for (int field = 3; field <= 15 && fields >> tok; ++field) {
      if (field == 14) utime = std::atoll(tok.c_str());
      if (field == 15) stime = std::atoll(tok.c_str());
    }
    out[tid] =
        ThreadCpu{std::move(name), (utime + stime) * (1000000000 / kTck)};
  }
  closedir(dir);
  return out;
}

// CPU time between two ThreadCpuNs() snapshots of the threads called `name`
// that lived through both, summed; *busiest (if given) is set to the id of
// the one that used the most, or 0 if there was none. By name, so a
// producer or the main thread is never mistaken for the library's.
std::int64_t CpuOfThreadsNamed(const std::map<long, ThreadCpu>& before,
                               const std::map<long, ThreadCpu>& after,
                               const std::string& name,
                               long* busiest = nullptr) {
  std::int64_t total = 0, most = -1;
  if (busiest != nullptr) *busiest = 0;
  for (const auto& [tid, now] : after) {
    auto it = before.find(tid);
    if (it == before.end() || now.name != name) continue;
    const std::int64_t used = now.ns - it->second.ns;
    total += used;
    if (busiest != nullptr && used > most) {
      most = used;
      *busiest = tid;
    }
  }
  return total;
}

// --------------------------------------------------------------- output --

struct Context {
  Config flags;
  support::ResultLines results;
};

Context MakeContext(const Config& flags) {
  support::Json common;
  common.Raw("warm", flags.warm ? "true" : "false");
  common.Add("prefault_mb", flags.prefault_mb);
  if (!flags.commit.empty()) common.Add("commit", flags.commit);
  return Context{flags, support::ResultLines(flags.json_only, common)};
}

// ---------------------------------------------------- waiting, producers --

// Returns the time at which the loop has applied `target` set/move/remove
// commands in total (stats().applied counts every such command, whether or
// not its key was present).
//
// How: the loop publishes its counters with relaxed stores after every round
// of commands it applies (a round ends when a bulk dequeue of 256 comes back
// short, i.e. the queue is empty, or after 8192 commands) and after every
// tick. So once the last command has been applied, the count we poll for is
// published at the end of that same round: the publication lag is at most
// one batch of commands, microseconds, plus our polling period (20 us, plus
// timer slack). Both are small next to the time these phases take at the
// sizes run (--n of 100,000 and up).
template <typename K>
Clock::time_point WaitApplied(const WheelOf<K>& wheel, std::uint64_t target) {
  while (wheel.stats().applied < target) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return Clock::now();
}

struct ProducerRun {
  Clock::time_point start;  // when the producers were released
  Clock::time_point end;    // when the last of them returned
  double cpu_seconds = 0;   // their CPU time, summed
};

// Runs fn(p) on `producers` threads, released together. Their CPU time is
// measured too: on a loaded machine it says what a call costs where wall
// time cannot.
template <typename Fn>
ProducerRun RunProducers(int producers, Fn fn) {
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<double> cpu(producers, 0);
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      const double c0 = ThreadCpuSeconds();
      fn(p);
      cpu[p] = ThreadCpuSeconds() - c0;
    });
  }
  while (ready.load() != producers) std::this_thread::yield();
  ProducerRun run;
  run.start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& t : threads) t.join();
  run.end = Clock::now();
  for (double c : cpu) run.cpu_seconds += c;
  return run;
}

// K is deduced from nothing: MakeWheel(...) is a uint64_t-keyed wheel,
// MakeWheel<std::string>(...) a string-keyed one.
template <typename K = std::uint64_t>
std::unique_ptr<WheelOf<K>> MakeWheel(
    absl::Duration interval, int slots, int execute_workers,
    typename WheelOf<K>::Execute execute, std::int64_t expected_timers = 0,
    absl::Duration max_lag = absl::ZeroDuration()) {
  timingwheel::Options o;
  o.interval = interval;
  o.num_slots = slots;
  o.execute_workers = execute_workers;
  o.expected_timers = static_cast<std::size_t>(expected_timers);
  o.max_lag = max_lag;
  auto w = WheelOf<K>::Create(o, std::move(execute));
  if (!w.ok()) {
    std::fprintf(stderr, "Create: %s\n", w.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(w);
}

// Runs this program again as a fresh process with `args` and returns the
// `count` integers it prints, or nothing if it failed. The memory workloads
// (W4, W8's RSS, W9) measure there: this process has faulted in its heap
// (see main), so an RSS delta here says nothing about the wheel.
std::vector<std::int64_t> RunFreshProcess(const char* self,
                                          const std::string& args,
                                          std::size_t count) {
  const std::string cmd = std::string("'") + self + "' " + args;
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<std::int64_t> out;
  if (p == nullptr) return out;
  std::int64_t v = 0;
  while (out.size() < count && std::fscanf(p, "%" SCNd64, &v) == 1) {
    out.push_back(v);
  }
  pclose(p);
  if (out.size() != count) out.clear();
  return out;
}

// ----------------------------------------------------------------- keys --

// What the workloads need of a key type: the key of the i-th timer, and the
// suffix of the rows' names. Spread: W1-W4's keys (spread, as real ids);
// Plain: W5's (uint64_t keys are the index itself, as W5 always had).
template <typename K>
struct Keys;

template <>
struct Keys<std::uint64_t> {
  static constexpr const char* kSuffix = "";
  static constexpr const char* kName = "uint64";
  static std::uint64_t Spread(std::uint64_t i) { return Mix(i); }
  static std::uint64_t Plain(std::uint64_t i) { return i; }
};

template <>
struct Keys<std::string> {
  static constexpr const char* kSuffix = "-str";
  static constexpr const char* kName = "string36";
  static std::string Spread(std::uint64_t i) { return UuidKey(i); }
  static std::string Plain(std::uint64_t i) { return UuidKey(i); }
};

// The bytes one 36-character key owns besides what holds it. The wheel
// holds such a key's characters in its entry (base/inline_string.h): its
// own bytes are those 36. A key held as a std::string (a longer one, or
// one with a user's Eq) would own its buffer's malloc chunk instead
// (support::StringHeapBytes).
std::int64_t KeyOwnBytes() {
  const std::string sample = UuidKey(0);
  using Store =
      timingwheel::internal::KeyStore<std::string, std::equal_to<std::string>>;
  if (std::is_same_v<Store::Stored, timingwheel::internal::InlineString> &&
      sample.size() <= timingwheel::internal::InlineString::kCapacity) {
    return static_cast<std::int64_t>(sample.size());
  }
  return support::StringHeapBytes(sample);
}

// The row name for workload `w` with key type K ("W1" -> "W1-str").
template <typename K>
std::string Row(const char* w) {
  return absl::StrCat(w, Keys<K>::kSuffix);
}

// ------------------------------------------------------------ W1 W2 W3 --

// W1 (set 1M distinct keys), then with those present W2 (1M moves of random
// present keys) and W3 (remove all in random order), all from `producers`
// threads that each submit an equal share. Interval 1 s, 512 slots, delays
// uniform in [10 s, 600 s]: nothing fires during the run.
//
// batch > 0: W1b, W2b, W3b, the same with SetTimers, MoveTimers and
// RemoveTimers of `batch` items a call; a batch takes the delay of its
// first item.
//
// K = std::string: W1-str, W2-str, W3-str, with 36-character keys
// (UuidKey). The key strings are built before the clock starts, and each
// call gets a copy, as a caller that keeps its own key passes it by value:
// the copy (a malloc for 36 characters) is part of what a call costs.
std::int64_t MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// The first-touch floor, measured in this process: microseconds to fault in
// one fresh page (a new 64 MiB mapping, touched a page at a time), once per
// process. A cold phase that faults in P pages cannot take less than about
// P times this, whoever takes the faults.
double FirstTouchUsPerPage() {
  static const double us = [] {
    constexpr std::size_t kBytes = std::size_t{64} << 20;
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0.0;
    const long page = sysconf(_SC_PAGESIZE);
    const std::int64_t start = MonoNanos();
    auto* bytes = static_cast<volatile unsigned char*>(p);
    for (std::size_t off = 0; off < kBytes; off += page) bytes[off] = 1;
    const double elapsed_us = (MonoNanos() - start) / 1e3;
    munmap(p, kBytes);
    return elapsed_us / static_cast<double>(kBytes / page);
  }();
  return us;
}

template <typename K = std::uint64_t>
void RunSetMoveRemove(const Context& ctx, int producers, int batch = 0) {
  const std::int64_t n = ctx.flags.n;
  Rng rng(1234 + producers);
  // Everything a producer needs is computed before the clock starts, so
  // the timed loops are a call per element and nothing else.
  std::vector<K> keys(n);
  std::vector<std::int64_t> set_delay_ms(n), move_delay_ms(n);
  std::vector<K> move_keys(n), remove_keys;
  std::vector<std::pair<K, std::uint64_t>> set_items;
  for (std::int64_t i = 0; i < n; ++i) {
    keys[i] = Keys<K>::Spread(static_cast<std::uint64_t>(i));
    set_delay_ms[i] = rng.Between(10000, 600000);
    move_delay_ms[i] = rng.Between(10000, 600000);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    move_keys[i] = keys[rng.Below(n)];
  }
  // A random permutation of the keys, copied in that order: each phase's
  // keys are laid out in the order it uses them (as move_keys are), so a
  // string key's characters are not a cache miss of the bench's own.
  std::vector<std::int64_t> order(n);
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[rng.Below(i + 1)]);
  }
  remove_keys.reserve(n);
  for (std::int64_t i = 0; i < n; ++i) remove_keys.push_back(keys[order[i]]);
  if (batch > 0) {
    for (std::int64_t i = 0; i < n; ++i) {
      set_items.emplace_back(keys[i], static_cast<std::uint64_t>(i));
    }
  }

  const bool presized = ctx.flags.w123_presized;
  auto wheel = MakeWheel<K>(
      absl::Seconds(1), 512, 1, [](K, std::uint64_t) {}, presized ? n : 0);
  std::atomic<std::int64_t> errors{0};
  auto share = [&](int p) {
    return std::pair<std::int64_t, std::int64_t>(n * p / producers,
                                                 n * (p + 1) / producers);
  };
  // One timed phase: submit n commands from the producers, wait until the
  // loop has applied them, report. Besides the applied rate (wall time, at
  // the mercy of whoever else runs on this machine) it reports CPU time per
  // command on each side: the producers' (the call) and the loop thread's
  // (dequeue + apply), which are steadier figures on a shared machine.
  //
  // submit(i, count) submits the commands [i, i + count): one at a time
  // (count 1), or as one batch call.
  auto phase = [&](const char* w, const char* name, auto submit) {
    const std::string workload = Row<K>(w);
    const std::uint64_t before = wheel->stats().applied;
    const double touch_us = FirstTouchUsPerPage();
    const auto cpu_before = ThreadCpuNs();
    const std::int64_t faults_before = MinorFaults();
    const std::int64_t step = batch > 0 ? batch : 1;
    const ProducerRun run = RunProducers(producers, [&](int p) {
      auto [b, e] = share(p);
      for (std::int64_t i = b; i < e; i += step) {
        if (!submit(i, std::min(step, e - i)).ok()) errors.fetch_add(1);
      }
    });
    const Clock::time_point applied =
        WaitApplied(*wheel, before + static_cast<std::uint64_t>(n));
    long loop_tid = 0;
    const std::int64_t loop_ns =
        CpuOfThreadsNamed(cpu_before, ThreadCpuNs(), "tw-loop", &loop_tid);
    const timingwheel::Stats s = wheel->stats();
    const double secs = Seconds(run.start, applied);
    const double enq_secs = Seconds(run.start, run.end);
    const std::int64_t faults = MinorFaults() - faults_before;
    const double floor_s = static_cast<double>(faults) * touch_us / 1e6;
    Json j;
    j.Add("workload", workload)
        .Add("name", name)
        .Add("producers", producers)
        .Add("batch", batch)
        .Add("presized", presized ? 1 : 0)
        .Add("key", Keys<K>::kName)
        .Add("n", n)
        .Add("interval_ms", 1000)
        .Add("slots", 512)
        .Add("delay_ms_min", 10000)
        .Add("delay_ms_max", 600000)
        .Add("seconds", secs)
        .Add("ops_per_s", static_cast<double>(n) / secs)
        .Add("enqueue_ops_per_s", static_cast<double>(n) / enq_secs)
        .Add("producer_cpu_ns_per_op", run.cpu_seconds * 1e9 / n)
        .Add("loop_cpu_ns_per_op", static_cast<double>(loop_ns) / n)
        .Add("applied", s.applied - before)
        .Add("pending_after", static_cast<std::uint64_t>(s.pending))
        .Add("errors", errors.load())
        .Add("minor_faults", faults)
        .Add("first_touch_us_per_page", touch_us)
        .Add("fault_floor_seconds", floor_s);
    ctx.results.Print(
        j,
        absl::StrFormat(
            "%s %s, %d producer(s): %.2f M/s applied (%.2f M/s enqueued), "
            "%.3f s; CPU per op: producers %.0f ns, loop %.0f ns; %zu "
            "pending after; %lld pages faulted in, at %.2f us a first "
            "touch: a %.3f s floor",
            workload, name, producers, n / secs / 1e6, n / enq_secs / 1e6, secs,
            run.cpu_seconds * 1e9 / n, static_cast<double>(loop_ns) / n,
            s.pending, static_cast<long long>(faults), touch_us, floor_s));
  };

  if (batch > 0) {
    phase("W1b", "set batch", [&](std::int64_t i, std::int64_t count) {
      return wheel->SetTimers(absl::MakeSpan(&set_items[i], count),
                              absl::Milliseconds(set_delay_ms[i]));
    });
    if (Wanted(ctx.flags, Row<K>("w2"))) {
      phase("W2b", "move batch", [&](std::int64_t i, std::int64_t count) {
        return wheel->MoveTimers(absl::MakeConstSpan(&move_keys[i], count),
                                 absl::Milliseconds(move_delay_ms[i]));
      });
    }
    if (Wanted(ctx.flags, Row<K>("w3"))) {
      phase("W3b", "remove batch", [&](std::int64_t i, std::int64_t count) {
        return wheel->RemoveTimers(absl::MakeConstSpan(&remove_keys[i], count));
      });
    }
    return;
  }
  phase("W1", "set", [&](std::int64_t i, std::int64_t) {
    return wheel->SetTimer(keys[i], static_cast<std::uint64_t>(i),
                           absl::Milliseconds(set_delay_ms[i]));
  });
  if (Wanted(ctx.flags, Row<K>("w2"))) {
    phase("W2", "move", [&](std::int64_t i, std::int64_t) {
      return wheel->MoveTimer(move_keys[i],
                              absl::Milliseconds(move_delay_ms[i]));
    });
  }
  if (Wanted(ctx.flags, Row<K>("w3"))) {
    phase("W3", "remove", [&](std::int64_t i, std::int64_t) {
      return wheel->RemoveTimer(remove_keys[i]);
    });
  }
}

// ------------------------------------------------------------------ W4 --

// The fresh process of W4 and W8: prints RSS before creating a wheel of 512
// slots ticking at `interval` and after n timers with delays next_delay()
// are applied, and the timers pending then (W8's start firing at once).
// Keys and delays are generated on the fly so that no array of ours adds to
// the delta. Paced: submits in chunks of 64 Ki and waits for each to be
// applied, so the command queue never holds more than one chunk and the
// delta is the wheel's own; burst: submits all at once, so the delta also
// holds the queue blocks the backlog needed (moodycamel keeps them for
// reuse). K = std::string: each key is made in the call and handed over, so
// the delta holds the keys' own heap bytes too (W4-str reports it with and
// without them).
template <typename K = std::uint64_t, typename NextDelay>
int PrintFilledWheelRss(absl::Duration interval, std::int64_t n, bool burst,
                        NextDelay next_delay) {
  const std::int64_t before = support::RssBytes();
  auto wheel = MakeWheel<K>(interval, 512, 1, [](K, std::uint64_t) {});
  constexpr std::int64_t kChunk = 1 << 16;
  for (std::int64_t i = 0; i < n; ++i) {
    wheel
        ->SetTimer(Keys<K>::Spread(static_cast<std::uint64_t>(i)),
                   static_cast<std::uint64_t>(i), next_delay())
        .IgnoreError();
    if (!burst && (i + 1) % kChunk == 0) {
      WaitApplied(*wheel, static_cast<std::uint64_t>(i + 1));
    }
  }
  WaitApplied(*wheel, static_cast<std::uint64_t>(n));
  const std::int64_t after = support::RssBytes();
  std::printf("%" PRId64 " %" PRId64 " %zu\n", before, after,
              wheel->stats().pending);
  std::fflush(stdout);
  // Skip the teardown: the parent has what it needs.
  std::_Exit(0);
}

int RunW4Child(const Config& flags) {
  Rng rng(4);
  auto delay = [&] { return absl::Milliseconds(rng.Between(10000, 600000)); };
  if (flags.w4_str) {
    return PrintFilledWheelRss<std::string>(absl::Seconds(1), flags.n,
                                            flags.w4_burst, delay);
  }
  return PrintFilledWheelRss(absl::Seconds(1), flags.n, flags.w4_burst, delay);
}

// W4 memory: RSS per timer from W4's fresh process, paced and burst, and the
// core's own bytes per entry. W4-str (K = std::string, 36-character keys):
// the same, and each figure also "besides the key's own bytes", less
// KeyOwnBytes() a timer: what the wheel adds to the keys a user holds.
template <typename K = std::uint64_t>
void RunW4(const Context& ctx, const char* self) {
  using Core = timingwheel::internal::Wheel<K, std::uint64_t>;
  const std::int64_t n = ctx.flags.n;
  const bool str = std::is_same_v<K, std::string>;
  auto child = [&](bool burst, std::int64_t* before, std::int64_t* after) {
    const std::vector<std::int64_t> rss = RunFreshProcess(
        self,
        absl::StrCat("--w4_child --n=", n, burst ? " --w4_burst" : "",
                     str ? " --w4_str" : ""),
        3);
    *before = rss.empty() ? 0 : rss[0];
    *after = rss.empty() ? 0 : rss[1];
  };
  std::int64_t before = 0, after = 0, burst_before = 0, burst_after = 0;
  child(false, &before, &after);
  child(true, &burst_before, &burst_after);

  // The in-wheel figure: the core alone, same shape and delays (in ticks).
  // (MemoryBytes counts the wheel's arrays: a string key's heap buffer is
  // not in it.)
  std::unique_ptr<Core> core = std::make_unique<Core>(512);
  Rng rng(4);
  for (std::int64_t i = 0; i < n; ++i) {
    core->Set(Keys<K>::Spread(static_cast<std::uint64_t>(i)),
              static_cast<std::uint64_t>(i),
              static_cast<std::uint64_t>(rng.Between(10, 600)));
  }
  const double rss_per = static_cast<double>(after - before) / n;
  const double rss_burst_per =
      static_cast<double>(burst_after - burst_before) / n;
  const double wheel_per = static_cast<double>(core->MemoryBytes()) / n;
  core.reset();
  const std::int64_t key_own = str ? KeyOwnBytes() : 0;
  const std::string workload = Row<K>("W4");
  Json j;
  j.Add("workload", workload)
      .Add("name", "memory")
      .Add("key", Keys<K>::kName)
      .Add("n", n)
      .Add("interval_ms", 1000)
      .Add("slots", 512)
      .Add("rss_bytes_per_timer", rss_per)
      .Add("rss_before_bytes", before)
      .Add("rss_after_bytes", after)
      .Add("rss_bytes_per_timer_burst", rss_burst_per)
      .Add("wheel_bytes_per_timer", wheel_per)
      .Add("entry_bytes", static_cast<std::uint64_t>(Core::EntryBytes()));
  if (str) {
    j.Add("key_own_bytes", key_own)
        .Add("rss_bytes_per_timer_besides_key", rss_per - key_own)
        .Add("rss_bytes_per_timer_burst_besides_key", rss_burst_per - key_own);
  }
  ctx.results.Print(
      j, absl::StrFormat(
             "%s memory: %.1f B RSS per timer (paced; %.1f B submitting all "
             "at once)%s, %.1f B in the wheel, entry %zu B",
             workload, rss_per, rss_burst_per,
             str ? absl::StrFormat("; besides the key's own %d B: %.1f B "
                                   "(burst %.1f B)",
                                   key_own, rss_per - key_own,
                                   rss_burst_per - key_own)
                 : "",
             wheel_per, Core::EntryBytes()));
}

// ------------------------------------------------------------------ W5 --

// W5's burst: keys[i] with value value_base + i and delay delay_ns[i], for
// every i, submitted as fast as `producers` threads can (each an equal
// share; each call gets a copy of its key, as a caller passes it by value).
// deadline_ns[i] is set to the time read just before the accepted call plus
// the delay: the library reads its own clock later, so its deadline is >=
// ours and "early" can only under-report lateness, never invent earliness.
// A call refused with ResourceExhausted is retried after a yield (or a sleep
// of --w5_retry_sleep_us), and its deadline counts from the accepted call.
struct Burst {
  ProducerRun run;
  std::int64_t refusals = 0;
  std::int64_t errors = 0;
};

template <typename K>
Burst SubmitBurst(const Context& ctx, WheelOf<K>& wheel, int producers,
                  const std::vector<K>& keys, std::uint64_t value_base,
                  const std::vector<std::int64_t>& delay_ns,
                  std::int64_t* deadline_ns) {
  const std::int64_t n = static_cast<std::int64_t>(keys.size());
  std::atomic<std::int64_t> refusals{0}, errors{0};
  Burst b;
  b.run = RunProducers(producers, [&](int p) {
    std::int64_t refused = 0;
    for (std::int64_t i = n * p / producers; i < n * (p + 1) / producers; ++i) {
      for (;;) {
        deadline_ns[i] = MonoNanos() + delay_ns[i];
        const absl::Status st =
            wheel.SetTimer(keys[i], value_base + static_cast<std::uint64_t>(i),
                           absl::Nanoseconds(delay_ns[i]));
        if (!absl::IsResourceExhausted(st)) {
          if (!st.ok()) errors.fetch_add(1);
          break;
        }
        ++refused;
        if (ctx.flags.w5_retry_sleep_us > 0) {
          std::this_thread::sleep_for(
              std::chrono::microseconds(ctx.flags.w5_retry_sleep_us));
        } else {
          std::this_thread::yield();
        }
      }
    }
    refusals.fetch_add(refused);
  });
  b.refusals = refusals.load();
  b.errors = errors.load();
  return b;
}

// Waits until `target` callbacks are logged, or gives up after a generous
// minute; returns how many are.
std::int64_t WaitLogged(const FireRecorder& recorder, std::int64_t target) {
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(60);
  while (recorder.Logged() < target && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return recorder.Logged();
}

// W5's delays: uniform in [50, 150] ms.
std::vector<std::int64_t> W5Delays(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> delay_ns(n);
  Rng rng(seed);
  for (std::int64_t& d : delay_ns) d = rng.Between(50000000, 150000000);
  return delay_ns;
}

// The process's minor page faults so far.
// Interval 1 ms, 128 slots, N timers with delays uniform in [50, 150] ms,
// submitted as fast as one thread can (SubmitBurst); the fire probe logs
// their callbacks, by value (the timer's index).
//
// presized: Options::expected_timers = N, so that the key index never grows
// (while a growth is under way a set costs the loop about twice as much:
// BM_SetPause in wheel_micro.cc).
//
// W5-lag: Options::max_lag = `max_lag` and `producers` threads flooding at
// once. K = std::string: W5-str, with 36-character keys built before the
// clock starts.
template <typename K = std::uint64_t>
void RunW5(const Context& ctx, int workers, bool presized, int producers = 1,
           absl::Duration max_lag = absl::ZeroDuration()) {
  const std::int64_t n = ctx.flags.n;
  const std::vector<std::int64_t> delay_ns = W5Delays(n, 5);
  std::vector<std::int64_t> deadline_ns(n);
  std::vector<K> keys(n);
  for (std::int64_t i = 0; i < n; ++i) {
    keys[i] = Keys<K>::Plain(static_cast<std::uint64_t>(i));
  }
  FireRecorder recorder(workers, n);
  auto wheel = MakeWheel<K>(
      absl::Milliseconds(1), 128, workers,
      [&recorder](K, std::uint64_t id) { recorder.Record(id); },
      presized ? n : 0, max_lag);
  // CPU per timer on each side: the producer (this thread) and the wheel's
  // own threads (loop and workers), to weigh against the 2 cores.
  const double process_cpu0 = ProcessCpuSeconds();
  const std::int64_t start = MonoNanos();
  const Burst b = SubmitBurst(ctx, *wheel, producers, keys, 0, delay_ns,
                              deadline_ns.data());
  const std::int64_t submitted = MonoNanos();
  const double producer_cpu = b.run.cpu_seconds;
  const std::int64_t ran = WaitLogged(recorder, n);
  // Our waiting (1 ms sleeps) is noise next to the wheel's threads' work.
  const double wheel_cpu = ProcessCpuSeconds() - process_cpu0 - producer_cpu;
  // The wheel's own lateness histogram (docs/api.md E14), beside the
  // probe's: from the due tick, at most 2x high (bucket bounds).
  const timingwheel::LatencyHistogram reported = wheel->stats().fire_lateness;
  wheel.reset();  // joins the workers: the logs are ours now
  const Firings f = AnalyseFirings(recorder, deadline_ns,
                                   std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<std::int64_t>::max());
  const double wall = (std::max(start, f.last_ns) - start) / 1e9;
  const bool lag = max_lag > absl::ZeroDuration();
  const std::string workload = Row<K>(lag ? "W5-lag" : "W5");
  Json j;
  j.Add("workload", workload)
      .Add("name", "expire")
      .Add("key", Keys<K>::kName)
      .Add("n", n)
      .Add("interval_ms", 1)
      .Add("slots", 128)
      .Add("execute_workers", workers)
      .Add("producers", producers)
      .Add("max_lag_ms", absl::ToDoubleMilliseconds(max_lag))
      .Add("refusals", b.refusals)
      .Add("errors", b.errors)
      .Add("presized", presized ? 1 : 0)
      .Add("retry_sleep_us", ctx.flags.w5_retry_sleep_us)
      .Add("delay_ms_min", 50)
      .Add("delay_ms_max", 150)
      .Add("submit_seconds", (submitted - start) / 1e9)
      .Add("wall_seconds", wall)
      .Add("late_ms_p50", f.LateMs(0.5))
      .Add("late_ms_p99", f.LateMs(0.99))
      .Add("late_ms_max", f.MaxLateMs())
      .Add("late_ms_min", f.MinLateMs())
      .Add("stats_late_count", reported.count)
      .Add("stats_late_ms_p99_bound",
           absl::ToDoubleMilliseconds(reported.Quantile(0.99)))
      .Add("stats_late_ms_max", absl::ToDoubleMilliseconds(reported.max))
      .Add("callbacks", ran)
      .Add("early", f.early)
      .Add("fired_twice", f.twice)
      .Add("never_fired", f.never)
      .Add("stray", f.stray)
      .Add("producer_cpu_ns_per_timer", producer_cpu * 1e9 / n)
      .Add("wheel_cpu_ns_per_timer", wheel_cpu * 1e9 / n);
  ctx.results.Print(
      j,
      absl::StrFormat(
          "%s expire, %d worker(s), %d producer(s)%s%s: all %" PRId64
          " callbacks done %.3f s after the first submission (submitting "
          "took %.3f s, %" PRId64
          " refusals retried); lateness p50 %.2f ms, p99 %.2f ms, max "
          "%.2f ms; early %" PRId64 ", twice %" PRId64 ", never %" PRId64
          "; stats() saw %" PRIu64 " with p99 under %.2f ms, max %.2f ms",
          workload, workers, producers, presized ? ", index pre-sized" : "",
          lag ? absl::StrCat(", max_lag ", absl::FormatDuration(max_lag)) : "",
          ran, wall, (submitted - start) / 1e9, b.refusals, f.LateMs(0.5),
          f.LateMs(0.99), f.MaxLateMs(), f.early, f.twice, f.never,
          reported.count, absl::ToDoubleMilliseconds(reported.Quantile(0.99)),
          absl::ToDoubleMilliseconds(reported.max)));
}

// W5-twice (peers.md, 0.3): W5's burst twice on ONE long-lived wheel
// (default Options but interval 1 ms, 128 slots, one execute worker): the
// first burst, a wait until every timer of it has fired, 300 ms of nothing,
// then a second burst of the same n keys (as a service's sessions come back)
// with fresh delays. Each round is reported apart: lateness, early, fired
// twice, lost (never fired), the producer's submit time, and the process's
// minor page faults from the round's first call until its last callback
// (what the second round no longer pays, or still does, when the first
// round's memory is kept). Values tell the rounds apart: round r's timer i
// has value r * n + i. K = std::string: W5-twice-str.
// CPU time two busy threads get per second of wall time over `window`:
// 2.0 on two idle cores, about 1.0 when the host gives the VM one core's
// worth. The floor under any workload that keeps three threads busy.
double CoresForTwoThreads(std::chrono::milliseconds window) {
  std::atomic<double> cpu[2] = {0, 0};
  const std::int64_t start = MonoNanos();
  std::vector<std::thread> spinners;
  for (int t = 0; t < 2; ++t) {
    spinners.emplace_back([&, t] {
      const double cpu0 = ThreadCpuSeconds();
      volatile std::uint64_t x = 0;
      while (MonoNanos() - start < window.count() * 1000000) {
        for (int i = 0; i < 10000; ++i) x = x + i;
      }
      cpu[t].store(ThreadCpuSeconds() - cpu0);
    });
  }
  for (std::thread& t : spinners) t.join();
  const double wall = (MonoNanos() - start) / 1e9;
  return (cpu[0].load() + cpu[1].load()) / wall;
}

template <typename K = std::uint64_t>
void RunW5Twice(const Context& ctx) {
  constexpr int kRounds = 2;
  constexpr int kGapMs = 300;
  const std::int64_t n = ctx.flags.n;
  // Inputs of both rounds up front, outside the rounds' page-fault counts;
  // the deadlines zero-filled (faulted in) for the same reason.
  std::vector<std::vector<std::int64_t>> delay_ns;
  for (int r = 0; r < kRounds; ++r) delay_ns.push_back(W5Delays(n, 50 + r));
  std::vector<std::int64_t> deadline_ns(kRounds * n, 0);
  std::vector<K> keys(n);
  for (std::int64_t i = 0; i < n; ++i) {
    keys[i] = Keys<K>::Plain(static_cast<std::uint64_t>(i));
  }
  FireRecorder recorder(1, kRounds * n);
  auto wheel =
      MakeWheel<K>(absl::Milliseconds(1), 128, 1,
                   [&recorder](K, std::uint64_t id) { recorder.Record(id); });

  struct Round {
    std::int64_t start = 0, submitted = 0, done = 0;  // MonoNanos
    Burst burst;
    std::int64_t logged = 0;
    std::int64_t minor_faults = 0;
    std::int64_t rss_end = 0;
    double cores_available = 0, cores_used = 0;
  };
  std::vector<Round> rounds(kRounds);
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(kGapMs));
    Round& round = rounds[r];
    // The machine's floor, in the same run: how much CPU two busy threads
    // get now (a shared VM may give two vCPUs one core's worth). A burst
    // needs its producer, the loop and the execute worker at once.
    round.cores_available = CoresForTwoThreads(std::chrono::milliseconds(200));
    const std::int64_t faults0 = MinorFaults();
    const double cpu0 = ProcessCpuSeconds();
    round.start = MonoNanos();
    round.burst =
        SubmitBurst(ctx, *wheel, 1, keys, static_cast<std::uint64_t>(r * n),
                    delay_ns[r], deadline_ns.data() + r * n);
    round.submitted = MonoNanos();
    round.logged = WaitLogged(recorder, (r + 1) * n) - r * n;
    round.done = MonoNanos();
    round.cores_used =
        (ProcessCpuSeconds() - cpu0) / ((round.done - round.start) / 1e9);
    round.minor_faults = MinorFaults() - faults0;
    round.rss_end = support::RssBytes();
  }
  wheel.reset();  // joins the worker: the log is ours now

  const std::string workload = Row<K>("W5-twice");
  for (int r = 0; r < kRounds; ++r) {
    const Round& round = rounds[r];
    const Firings f = AnalyseFirings(
        recorder, deadline_ns, std::numeric_limits<std::int64_t>::min(),
        std::numeric_limits<std::int64_t>::max(),
        static_cast<std::uint64_t>(r * n), static_cast<std::uint64_t>(n));
    const double wall = (std::max(round.start, f.last_ns) - round.start) / 1e9;
    const double submit = (round.submitted - round.start) / 1e9;
    Json j;
    j.Add("workload", workload)
        .Add("name", absl::StrCat("expire round ", r + 1))
        .Add("round", r + 1)
        .Add("key", Keys<K>::kName)
        .Add("n", n)
        .Add("interval_ms", 1)
        .Add("slots", 128)
        .Add("execute_workers", 1)
        .Add("producers", 1)
        .Add("delay_ms_min", 50)
        .Add("delay_ms_max", 150)
        .Add("gap_ms", r > 0 ? kGapMs : 0)
        .Add("refusals", round.burst.refusals)
        .Add("errors", round.burst.errors)
        .Add("submit_seconds", submit)
        .Add("producer_cpu_ns_per_timer", round.burst.run.cpu_seconds * 1e9 / n)
        .Add("wall_seconds", wall)
        .Add("late_ms_p50", f.LateMs(0.5))
        .Add("late_ms_p99", f.LateMs(0.99))
        .Add("late_ms_max", f.MaxLateMs())
        .Add("late_ms_min", f.MinLateMs())
        .Add("callbacks", round.logged)
        .Add("early", f.early)
        .Add("fired_twice", f.twice)
        .Add("never_fired", f.never)
        .Add("stray", f.stray)
        .Add("minor_faults", round.minor_faults)
        .Add("rss_end_mib", round.rss_end / 1048576.0)
        .Add("cores_available", round.cores_available)
        .Add("cores_used", round.cores_used);
    ctx.results.Print(
        j, absl::StrFormat(
               "%s round %d of %d on one wheel%s: %" PRId64
               " timers submitted in %.3f s, all fired %.3f s after the first "
               "submission; lateness p50 %.2f ms, p99 %.2f ms, max %.2f ms; "
               "early %" PRId64 ", twice %" PRId64 ", lost %" PRId64
               "; %" PRId64 " minor page faults in the round, RSS %.0f MiB; "
               "CPU %.2f cores used, two spinning threads got %.2f",
               workload, r + 1, kRounds,
               r > 0 ? absl::StrFormat(", %d ms after the last firing", kGapMs)
                     : "",
               n, submit, wall, f.LateMs(0.5), f.LateMs(0.99), f.MaxLateMs(),
               f.early, f.twice, f.never, round.minor_faults,
               round.rss_end / 1048576.0, round.cores_used,
               round.cores_available));
  }
}

// ------------------------------------------------------------------ W6 --

// Process CPU seconds per wall second while the program does nothing but
// keep a 1 ms wheel: first empty, then with N timers due in 1 hour. Measured
// with CLOCK_PROCESS_CPUTIME_ID across a sleep of the main thread, after
// setup has finished and settled. W6-spread also reports the loop thread's
// and the execute worker's shares apart, and how many ticks fired: each such
// tick is one timed wake-up of the loop and one hand-off to the worker,
// whose cost the OS sets (bench/wake_floor measures it alone).
void RunW6(const Context& ctx) {
  const std::int64_t n = ctx.flags.n;
  auto wheel = MakeWheel(absl::Milliseconds(1), 512, 1,
                         [](std::uint64_t, std::uint64_t) {});
  struct Window {
    double seconds = 0;
    double process_cpu = 0;
    double loop_cpu = 0;
    double worker_cpu = 0;
  };
  auto measure = [&](double window) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // settle
    const std::map<long, ThreadCpu> threads0 = ThreadCpuNs();
    const double cpu0 = ProcessCpuSeconds();
    const Clock::time_point t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(window));
    const double cpu1 = ProcessCpuSeconds();
    const Clock::time_point t1 = Clock::now();
    const std::map<long, ThreadCpu> threads1 = ThreadCpuNs();
    Window w;
    w.seconds = Seconds(t0, t1);
    w.process_cpu = cpu1 - cpu0;
    w.loop_cpu = CpuOfThreadsNamed(threads0, threads1, "tw-loop") / 1e9;
    w.worker_cpu = CpuOfThreadsNamed(threads0, threads1, "tw-execute") / 1e9;
    return w;
  };
  const Window empty = measure(ctx.flags.seconds);
  for (std::int64_t i = 0; i < n; ++i) {
    wheel
        ->SetTimer(Mix(static_cast<std::uint64_t>(i)),
                   static_cast<std::uint64_t>(i), absl::Hours(1))
        .IgnoreError();
  }
  WaitApplied(*wheel, static_cast<std::uint64_t>(n));
  const Window full = measure(ctx.flags.seconds);
  const std::uint64_t fired = wheel->stats().fired;
  wheel.reset();

  // Beyond peers.md's W6: the same N timers spread uniformly over the next
  // hour, the shape of real session or cache timeouts. A single-level wheel
  // keeps ~N/num_slots entries of later rotations in every slot and walks a
  // slot whenever one of them is due this rotation; a hierarchical one walks
  // nothing, so what is left is waking up for each tick with a timer due:
  // ~N/3600 a second, nearly every one in a tick of its own.
  std::atomic<std::int64_t> last_tick_ms{-1}, firing_ticks{0};
  wheel = MakeWheel(
      absl::Milliseconds(1), 512, 1, [&](std::uint64_t, std::uint64_t) {
        // Counts the distinct milliseconds that callbacks ran in: about the
        // ticks that fired (one worker, so no race between the two atomics).
        const std::int64_t ms = MonoNanos() / 1000000;
        if (last_tick_ms.exchange(ms, std::memory_order_relaxed) != ms) {
          firing_ticks.fetch_add(1, std::memory_order_relaxed);
        }
      });
  Rng rng(6);
  for (std::int64_t i = 0; i < n; ++i) {
    wheel
        ->SetTimer(Mix(static_cast<std::uint64_t>(i)),
                   static_cast<std::uint64_t>(i),
                   absl::Milliseconds(rng.Between(1000, 3600000)))
        .IgnoreError();
  }
  WaitApplied(*wheel, static_cast<std::uint64_t>(n));
  const std::uint64_t fired0 = wheel->stats().fired;
  const std::int64_t ticks0 = firing_ticks.load();
  const Window spread = measure(ctx.flags.w6_spread_seconds);
  const std::uint64_t fired_spread = wheel->stats().fired - fired0;
  const std::int64_t ticks_spread = firing_ticks.load() - ticks0;
  wheel.reset();
  Json j;
  j.Add("workload", "W6")
      .Add("name", "idle")
      .Add("n", n)
      .Add("interval_ms", 1)
      .Add("slots", 512)
      .Add("window_seconds", empty.seconds)
      .Add("cpu_s_per_s_empty", empty.process_cpu / empty.seconds)
      .Add("cpu_s_per_s_full", full.process_cpu / full.seconds)
      .Add("loop_cpu_s_per_s_full", full.loop_cpu / full.seconds)
      .Add("fired", fired)
      .Add("spread_window_seconds", spread.seconds)
      .Add("cpu_s_per_s_spread", spread.process_cpu / spread.seconds)
      .Add("loop_cpu_s_per_s_spread", spread.loop_cpu / spread.seconds)
      .Add("worker_cpu_s_per_s_spread", spread.worker_cpu / spread.seconds)
      .Add("fired_spread", fired_spread)
      .Add("firing_ticks_per_s_spread", ticks_spread / spread.seconds)
      .Add("loop_cpu_us_per_firing_tick",
           ticks_spread > 0 ? spread.loop_cpu * 1e6 / ticks_spread : NAN)
      .Add("worker_cpu_us_per_firing_tick",
           ticks_spread > 0 ? spread.worker_cpu * 1e6 / ticks_spread : NAN);
  ctx.results.Print(
      j,
      absl::StrFormat(
          "W6 idle at 1 ms: %.5f CPU s/s empty, %.5f CPU s/s with %" PRId64
          " timers due in 1 h; spread over the hour %.5f (loop %.5f, worker "
          "%.5f), %.0f firing ticks/s: loop %.1f us, worker %.1f us a tick",
          empty.process_cpu / empty.seconds, full.process_cpu / full.seconds, n,
          spread.process_cpu / spread.seconds, spread.loop_cpu / spread.seconds,
          spread.worker_cpu / spread.seconds, ticks_spread / spread.seconds,
          ticks_spread > 0 ? spread.loop_cpu * 1e6 / ticks_spread : NAN,
          ticks_spread > 0 ? spread.worker_cpu * 1e6 / ticks_spread : NAN));
}

// ------------------------------------------------------------------ W7 --

// N sessions with a 30 s idle timeout on a 10 ms wheel; 2 producers touch
// random sessions (MoveTimer 30 s) as fast as they can for --seconds.
//
// Producers that outrun the loop would pile up a backlog of gigabytes in
// 5 s, so each keeps its own count of submitted touches and, every 1024,
// waits while the total not yet applied exceeds kMaxBacklog. The applied
// rate is what the loop sustains either way.
//
// The loop thread's CPU: per-thread CPU from /proc/self/task/*/schedstat
// before and after the window; the loop thread is the busiest thread that is
// neither ours (main, producers) nor idle (the execute workers have nothing
// to run: no session expires within the run).
void RunW7(const Context& ctx) {
  const std::int64_t n = ctx.flags.n;
  const double window = ctx.flags.seconds;
  constexpr std::int64_t kMaxBacklog = 1 << 21;
  auto wheel = MakeWheel(absl::Milliseconds(10), 512, 1,
                         [](std::uint64_t, std::uint64_t) {});
  for (std::int64_t i = 0; i < n; ++i) {
    wheel
        ->SetTimer(Mix(static_cast<std::uint64_t>(i)),
                   static_cast<std::uint64_t>(i), absl::Seconds(30))
        .IgnoreError();
  }
  const std::uint64_t base = n;
  WaitApplied(*wheel, base);
  const std::uint64_t moved_before = wheel->stats().moved;

  struct alignas(64) Producer {
    std::atomic<std::int64_t> submitted{0};
    std::atomic<long> tid{0};
  };
  Producer prod[2];
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> throttled{0};
  const std::map<long, ThreadCpu> cpu_before = ThreadCpuNs();
  const double proc_before = ProcessCpuSeconds();
  // Ends the window: starts timing once both producers are running.
  std::thread timer([&] {
    while (prod[0].tid.load() == 0 || prod[1].tid.load() == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(window));
    stop.store(true);
  });
  const ProducerRun run = RunProducers(2, [&](int p) {
    prod[p].tid.store(Tid());
    Rng rng(700 + p);
    std::int64_t mine = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int k = 0; k < 1024; ++k) {
        wheel
            ->MoveTimer(Mix(rng.Below(static_cast<std::uint64_t>(n))),
                        absl::Seconds(30))
            .IgnoreError();
      }
      mine += 1024;
      prod[p].submitted.store(mine, std::memory_order_relaxed);
      for (;;) {
        const std::int64_t total =
            prod[0].submitted.load() + prod[1].submitted.load();
        const std::int64_t applied =
            static_cast<std::int64_t>(wheel->stats().applied - base);
        if (total - applied <= kMaxBacklog ||
            stop.load(std::memory_order_relaxed)) {
          break;
        }
        throttled.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  });
  const Clock::time_point start = run.start;
  timer.join();
  const std::int64_t total =
      prod[0].submitted.load() + prod[1].submitted.load();
  const Clock::time_point applied = WaitApplied(*wheel, base + total);
  const std::map<long, ThreadCpu> cpu_after = ThreadCpuNs();
  const double proc_after = ProcessCpuSeconds();
  const double secs = Seconds(start, applied);

  long loop_tid = 0;
  const std::int64_t loop_ns =
      CpuOfThreadsNamed(cpu_before, cpu_after, "tw-loop", &loop_tid);
  const timingwheel::Stats s = wheel->stats();
  Json j;
  j.Add("workload", "W7")
      .Add("name", "sessions")
      .Add("n", n)
      .Add("interval_ms", 10)
      .Add("slots", 512)
      .Add("timeout_s", 30)
      .Add("producers", 2)
      .Add("window_seconds", window)
      .Add("touches", total)
      .Add("seconds", secs)
      .Add("touches_per_s", static_cast<double>(total) / secs)
      .Add("loop_cpu_s_per_s", loop_ns / 1e9 / secs)
      .Add("loop_cpu_ns_per_touch", static_cast<double>(loop_ns) / total)
      .Add("producer_cpu_ns_per_touch", run.cpu_seconds * 1e9 / total)
      .Add("process_cpu_s_per_s", (proc_after - proc_before) / secs)
      .Add("moved", s.moved - moved_before)
      .Add("fired", s.fired)
      .Add("throttled", throttled.load());
  ctx.results.Print(
      j, absl::StrFormat(
             "W7 sessions: %.2f M touches/s applied (%" PRId64
             " in %.2f s), loop thread %.2f CPU s/s (tid %ld), process %.2f",
             total / secs / 1e6, total, secs, loop_ns / 1e9 / secs, loop_tid,
             (proc_after - proc_before) / secs));
}

// ------------------------------------------------------------------ W8 --

// A W8 delay: log-uniform in [10 ms, 24 h], as many timers in each decade
// of delay, the way retries, heartbeats, session and cache timeouts mix in
// one service. About 40% of them come due within 10 s.
absl::Duration W8Delay(Rng& rng) {
  constexpr double kMinNs = 10e6, kMaxNs = 86400e9;
  const double u = static_cast<double>(rng.Next() >> 11) * 0x1p-53;  // [0, 1)
  return absl::Nanoseconds(static_cast<std::int64_t>(
      kMinNs * std::exp(u * std::log(kMaxNs / kMinNs))));
}

// W8's fresh process: RSS of a wheel filled the way RunW8 fills it.
int RunW8Child(const Config& flags) {
  Rng rng(8);
  return PrintFilledWheelRss(absl::Milliseconds(1), flags.w8_n,
                             /*burst=*/false, [&] { return W8Delay(rng); });
}

// W8 mixed: a 1 ms wheel of 512 slots filled from one producer with N
// timers of W8Delay, then left alone for --w8_seconds while the early ones
// come due. Reports the applied rate of the filling; RSS per timer of the
// same filling in a fresh process (this one's heap is prefaulted, see main;
// W8-lag skips it, its filling holds the same timers);
// and, for the window, process CPU per timer fired in it (with the loop
// thread's and the execute worker's shares apart), and the lateness, early
// and twice counts of those timers. Keys are spread (Mix); the value is the
// timer's index, which the probe logs.
//
// W8-lag: the same with Options::max_lag = `max_lag`. A refused call is
// retried after a yield, as in W5-lag, and its deadline counts from the
// accepted call: the producer is held to the loop's pace, so the timers due
// early in the window are not queued behind the rest of the filling.
void RunW8(const Context& ctx, const char* self,
           absl::Duration max_lag = absl::ZeroDuration()) {
  const std::int64_t n = ctx.flags.w8_n;
  const double window = ctx.flags.w8_seconds;
  const bool lag = max_lag > absl::ZeroDuration();
  const std::vector<std::int64_t> rss =
      lag ? std::vector<std::int64_t>{}
          : RunFreshProcess(self, "--w8_child --w8_n=" + std::to_string(n), 3);
  const std::int64_t rss_delta = rss.empty() ? 0 : rss[1] - rss[0];
  const std::int64_t rss_pending = rss.empty() ? 0 : rss[2];

  Rng rng(8);
  std::vector<absl::Duration> delay(n);
  for (absl::Duration& d : delay) d = W8Delay(rng);
  // Zero-filled, not just sized: filling it in the timed loop would add
  // page faults to the producer's time.
  std::vector<std::int64_t> deadline_ns(n, 0);
  FireRecorder recorder(1, n);
  auto wheel = MakeWheel(
      absl::Milliseconds(1), 512, 1,
      [&recorder](std::uint64_t, std::uint64_t i) { recorder.Record(i); },
      ctx.flags.w8_presized ? n : 0, max_lag);

  std::int64_t errors = 0, refusals = 0;
  const double producer_cpu0 = ThreadCpuSeconds();
  const Clock::time_point start = Clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::uint64_t>(i);
    for (;;) {
      // As in W5: the deadline from a time read before the call, so that
      // "early" can only under-report lateness, never invent earliness.
      deadline_ns[i] = MonoNanos() + absl::ToInt64Nanoseconds(delay[i]);
      const absl::Status st = wheel->SetTimer(Mix(id), id, delay[i]);
      if (!absl::IsResourceExhausted(st)) {
        if (!st.ok()) ++errors;
        break;
      }
      ++refusals;
      std::this_thread::yield();
    }
  }
  const Clock::time_point submitted = Clock::now();
  const double producer_cpu = ThreadCpuSeconds() - producer_cpu0;
  const Clock::time_point applied =
      WaitApplied(*wheel, static_cast<std::uint64_t>(n));
  const double set_secs = Seconds(start, applied);
  const std::size_t pending_at_window = wheel->stats().pending;

  // The window. Per-thread CPU (ThreadCpuNs reads /proc, ~ms of our CPU) is
  // sampled outside the process CPU readings, so it is not charged.
  const std::uint64_t fired_stat0 = wheel->stats().fired;
  const std::map<long, ThreadCpu> threads_before = ThreadCpuNs();
  const double cpu0 = ProcessCpuSeconds();
  const std::int64_t from = MonoNanos();
  std::this_thread::sleep_for(std::chrono::duration<double>(window));
  const std::int64_t to = MonoNanos();
  const double process_cpu = ProcessCpuSeconds() - cpu0;
  const std::map<long, ThreadCpu> threads_after = ThreadCpuNs();
  const std::uint64_t fired_stat = wheel->stats().fired - fired_stat0;
  const std::int64_t worker_ns =
      CpuOfThreadsNamed(threads_before, threads_after, "tw-execute");
  long loop_tid = 0;
  const std::int64_t loop_ns =
      CpuOfThreadsNamed(threads_before, threads_after, "tw-loop", &loop_tid);
  wheel.reset();  // joins the worker: the log is ours now

  const Firings f = AnalyseFirings(recorder, deadline_ns, from, to);
  const double secs = (to - from) / 1e9;
  auto us_per_fired = [&](double cpu_seconds) {
    return f.fired > 0 ? cpu_seconds * 1e6 / f.fired : NAN;
  };
  Json j;
  j.Add("workload", lag ? "W8-lag" : "W8")
      .Add("name", ctx.flags.w8_presized ? "mixed presized" : "mixed")
      .Add("presized", ctx.flags.w8_presized ? 1 : 0)
      .Add("max_lag_ms", absl::ToDoubleMilliseconds(max_lag))
      .Add("refusals", refusals)
      .Add("n", n)
      .Add("interval_ms", 1)
      .Add("slots", 512)
      .Add("delay_ms_min", 10)
      .Add("delay_ms_max", 86400000)
      .Add("set_seconds", set_secs)
      .Add("ops_per_s", static_cast<double>(n) / set_secs)
      .Add("enqueue_ops_per_s", n / Seconds(start, submitted))
      .Add("producer_cpu_ns_per_op", producer_cpu * 1e9 / n)
      .Add("errors", errors)
      .Add("rss_bytes_per_timer",
           lag ? NAN : static_cast<double>(rss_delta) / n)
      .Add("rss_bytes_per_pending",
           rss_pending > 0 ? static_cast<double>(rss_delta) / rss_pending : NAN)
      .Add("rss_delta_bytes", rss_delta)
      .Add("rss_pending", rss_pending)
      .Add("pending_at_window", static_cast<std::uint64_t>(pending_at_window))
      .Add("window_seconds", secs)
      .Add("fired_before_window", f.before)
      .Add("fired", f.fired)
      .Add("fired_stat", fired_stat)
      .Add("process_cpu_s", process_cpu)
      .Add("loop_cpu_s", loop_ns / 1e9)
      .Add("worker_cpu_s", worker_ns / 1e9)
      .Add("cpu_us_per_fired", us_per_fired(process_cpu))
      .Add("loop_cpu_us_per_fired", us_per_fired(loop_ns / 1e9))
      .Add("process_cpu_s_per_s", process_cpu / secs)
      .Add("loop_cpu_s_per_s", loop_ns / 1e9 / secs)
      .Add("late_ms_p50", f.LateMs(0.5))
      .Add("late_ms_p99", f.LateMs(0.99))
      .Add("late_ms_max", f.MaxLateMs())
      .Add("late_ms_min", f.MinLateMs())
      .Add("early", f.early)
      .Add("fired_twice", f.twice)
      .Add("stray", f.stray);
  ctx.results.Print(
      j,
      absl::StrFormat(
          "%s mixed, %" PRId64
          " timers over 10 ms-24 h%s: %.2f M/s applied (%" PRId64
          " refusals retried); %.1f B RSS per timer "
          "(fresh process); next %.1f s: %" PRId64
          " fired, %.2f us process CPU per fired (loop %.2f us, tid %ld; "
          "worker %.2f us), lateness p50 %.2f ms, p99 %.2f ms, max %.2f ms; "
          "early %" PRId64 ", twice %" PRId64,
          lag ? "W8-lag" : "W8", n,
          lag ? absl::StrCat(", max_lag ", absl::FormatDuration(max_lag)) : "",
          n / set_secs / 1e6, refusals,
          lag ? NAN : static_cast<double>(rss_delta) / n, secs, f.fired,
          us_per_fired(process_cpu), us_per_fired(loop_ns / 1e9), loop_tid,
          us_per_fired(worker_ns / 1e9), f.LateMs(0.5), f.LateMs(0.99),
          f.MaxLateMs(), f.early, f.twice));
}

// ------------------------------------------------------------------ W9 --

// W9's fresh process: prints RSS before creating the wheel, at the peak of
// N timers (1 s interval, 512 slots, delays 1 h: none fires), right after
// removing them all, after --w9_idle_seconds idle, and after malloc_trim(0);
// then the timers pending at the peak and at the end. The wheel stays alive
// throughout: the question is what a running wheel gives back after a peak.
int RunW9Child(const Config& flags) {
  const std::int64_t n = flags.w9_n;
  const std::int64_t before = support::RssBytes();
  auto wheel =
      MakeWheel(absl::Seconds(1), 512, 1, [](std::uint64_t, std::uint64_t) {});
  // Commands in chunks, each applied before the next: the command queue
  // never holds more than a chunk, so the peak is the wheel's own and not a
  // backlog's. Keys in the same order both ways.
  std::uint64_t submitted = 0;
  auto in_chunks = [&](auto submit_one) {
    for (std::int64_t i = 0; i < n; ++i) {
      submit_one(Mix(static_cast<std::uint64_t>(i)), i);
      if (++submitted % flags.w9_chunk == 0 || i + 1 == n) {
        WaitApplied(*wheel, submitted);
      }
    }
  };
  in_chunks([&](std::uint64_t key, std::int64_t i) {
    wheel->SetTimer(key, static_cast<std::uint64_t>(i), absl::Hours(1))
        .IgnoreError();
  });
  const std::int64_t peak = support::RssBytes();
  const std::size_t pending_peak = wheel->stats().pending;
  in_chunks([&](std::uint64_t key, std::int64_t) {
    wheel->RemoveTimer(key).IgnoreError();
  });
  const std::int64_t removed = support::RssBytes();
  std::this_thread::sleep_for(
      std::chrono::duration<double>(flags.w9_idle_seconds));
  const std::int64_t idle = support::RssBytes();
  malloc_trim(0);
  const std::int64_t after = support::RssBytes();
  std::printf(
      "%" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %zu %zu\n",
      before, peak, removed, idle, after, pending_peak, wheel->stats().pending);
  std::fflush(stdout);
  std::_Exit(0);  // as W4's child: the parent has what it needs
}

// W9 memory after a peak: retained = (RSS after - before) / (peak - before),
// from W9's fresh process; 0 is everything given back, 1 nothing.
void RunW9(const Context& ctx, const char* self) {
  const Config& c = ctx.flags;
  const std::vector<std::int64_t> r = RunFreshProcess(
      self,
      absl::StrFormat("--w9_child --w9_n=%d --w9_chunk=%d --w9_idle_seconds=%g",
                      c.w9_n, c.w9_chunk, c.w9_idle_seconds),
      7);
  const std::int64_t before = r.empty() ? 0 : r[0];
  const std::int64_t peak = r.empty() ? 0 : r[1];
  auto retained = [&](std::int64_t rss) {
    return peak > before ? static_cast<double>(rss - before) / (peak - before)
                         : NAN;
  };
  auto mib = [](std::int64_t bytes) { return bytes / 1048576.0; };
  const std::int64_t removed = r.empty() ? 0 : r[2];
  const std::int64_t idle = r.empty() ? 0 : r[3];
  const std::int64_t after = r.empty() ? 0 : r[4];
  Json j;
  j.Add("workload", "W9")
      .Add("name", "memory after a peak")
      .Add("n", c.w9_n)
      .Add("chunk", c.w9_chunk)
      .Add("interval_ms", 1000)
      .Add("slots", 512)
      .Add("delay_s", 3600)
      .Add("idle_seconds", c.w9_idle_seconds)
      .Add("retained", retained(after))
      .Add("retained_before_trim", retained(idle))
      .Add("rss_before_mib", mib(before))
      .Add("rss_peak_mib", mib(peak))
      .Add("rss_removed_mib", mib(removed))
      .Add("rss_idle_mib", mib(idle))
      .Add("rss_after_mib", mib(after))
      .Add("rss_bytes_per_timer_peak",
           static_cast<double>(peak - before) / c.w9_n)
      .Add("pending_peak", r.empty() ? 0 : r[5])
      .Add("pending_end", r.empty() ? 0 : r[6]);
  ctx.results.Print(
      j, absl::StrFormat(
             "W9 memory after a peak of %" PRId64
             " timers: retained %.3f after malloc_trim (%.3f after %g s "
             "idle); RSS before %.1f MiB, peak %.1f, all removed %.1f, idle "
             "%.1f, trimmed %.1f",
             c.w9_n, retained(after), retained(idle), c.w9_idle_seconds,
             mib(before), mib(peak), mib(removed), mib(idle), mib(after)));
}

// --------------------------------------------------------------- drain --

// Drain: n timers present (1 s interval, delays of an hour, so nothing
// fires), then one Drain with a fn that only adds the value to a per-thread
// sum, on the default 8 drain workers; then 8 entries whose fn sleeps
// 200 ms, on 4 workers (2 fn times when they overlap, 8 when they don't).
// Both from a fresh wheel, so the first includes starting the pool.
void RunDrain(const Context& ctx) {
  const std::int64_t n = ctx.flags.n;
  auto wheel =
      MakeWheel(absl::Seconds(1), 512, 1, [](std::uint64_t, std::uint64_t) {});
  for (std::int64_t i = 0; i < n; ++i) {
    (void)wheel->SetTimer(Mix(static_cast<std::uint64_t>(i)),
                          static_cast<std::uint64_t>(i), absl::Hours(1));
  }
  WaitApplied(*wheel, static_cast<std::uint64_t>(n));
  std::atomic<std::uint64_t> total{0};
  const Clock::time_point start = Clock::now();
  const absl::Status status = wheel->Drain([&](std::uint64_t, std::uint64_t v) {
    thread_local std::uint64_t sum = 0;
    sum += v;
    if (v == static_cast<std::uint64_t>(n - 1)) total.fetch_add(1);
  });
  const double secs = Seconds(start, Clock::now());
  Json j;
  j.Add("workload", "drain")
      .Add("name", "drain 1M cheap")
      .Add("n", n)
      .Add("drain_workers", 8)
      .Add("seconds", secs)
      .Add("entries_per_s", static_cast<double>(n) / secs)
      .Add("ok", status.ok() && total.load() == 1 ? 1 : 0);
  ctx.results.Print(
      j, absl::StrFormat("drain of %d cheap entries on 8 workers: %.1f ms, "
                         "%.1f M entries/s",
                         n, secs * 1e3, n / secs / 1e6));

  timingwheel::Options o;
  o.interval = absl::Seconds(1);
  o.drain_workers = 4;
  auto slow = *TW::Create(o, [](std::uint64_t, std::uint64_t) {});
  for (std::uint64_t k = 0; k < 8; ++k) {
    (void)slow->SetTimer(k, k, absl::Hours(1));
  }
  const Clock::time_point slow_start = Clock::now();
  (void)slow->Drain([](std::uint64_t, std::uint64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  const double slow_secs = Seconds(slow_start, Clock::now());
  Json k;
  k.Add("workload", "drain")
      .Add("name", "drain 8 slow")
      .Add("n", 8)
      .Add("drain_workers", 4)
      .Add("fn_ms", 200)
      .Add("seconds", slow_secs);
  ctx.results.Print(
      k, absl::StrFormat("drain of 8 entries, fn 200 ms, 4 workers: %.0f ms",
                         slow_secs * 1e3));
}

}  // namespace

int main(int argc, char** argv) {
  const Config flags = ParseFlags(argc, argv);
  // The children (W4, W8's RSS, W9) are fresh, cold processes whether or
  // not this one is warm: they measure the RSS a process gains, which a
  // heap faulted in ahead would hide. They are started without --warm, and
  // return here before any pre-faulting all the same.
  if (flags.w4_child) return RunW4Child(flags);
  if (flags.w8_child) return RunW8Child(flags);
  if (flags.w9_child) return RunW9Child(flags);
  // Cold by default: nothing faulted in ahead, as in a user's process after
  // a deploy or a quiet night. Where fresh memory is slow to back (a VM
  // with nested virtualization or free-page reporting) a fresh wheel filled
  // in W5 then spends much of its time in page faults, and that is what a
  // user sees. --warm faults in 1 GiB of heap first and keeps it, as a
  // long-running service that reuses its memory (or a JVM's heap) would
  // have: the wheel's own cost, without the first touch of its memory.
  support::PrefaultHeap(flags.prefault_mb);
  const Context ctx = MakeContext(flags);
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[len > 0 ? len : 0] = '\0';

  if (Wanted(flags, "w1") || Wanted(flags, "w2") || Wanted(flags, "w3")) {
    RunSetMoveRemove(ctx, 1);
    RunSetMoveRemove(ctx, 2);
    RunSetMoveRemove(ctx, 1, /*batch=*/256);
  }
  if (Wanted(flags, "w1-str") || Wanted(flags, "w2-str") ||
      Wanted(flags, "w3-str")) {
    RunSetMoveRemove<std::string>(ctx, 1);
  }
  if (Wanted(flags, "w4")) RunW4(ctx, self);
  if (Wanted(flags, "w4-str")) RunW4<std::string>(ctx, self);
  if (Wanted(flags, "w5")) {
    RunW5(ctx, 1, /*presized=*/false);
    RunW5(ctx, 2, /*presized=*/false);
    RunW5(ctx, 1, /*presized=*/true);
  }
  if (Wanted(flags, "w5-str")) RunW5<std::string>(ctx, 1, /*presized=*/false);
  if (Wanted(flags, "w5-twice")) RunW5Twice(ctx);
  if (Wanted(flags, "w5-twice-str")) RunW5Twice<std::string>(ctx);
  if (Wanted(flags, "w5-lag")) {
    RunW5(ctx, 1, ctx.flags.w5_lag_presized, /*producers=*/2,
          /*max_lag=*/absl::Milliseconds(2));
  }
  if (Wanted(flags, "w6")) RunW6(ctx);
  if (Wanted(flags, "w7")) RunW7(ctx);
  if (Wanted(flags, "w8")) RunW8(ctx, self);
  if (Wanted(flags, "w8-lag")) {
    RunW8(ctx, self, /*max_lag=*/absl::Milliseconds(flags.w8_lag_ms));
  }
  if (Wanted(flags, "w9")) RunW9(ctx, self);
  if (Wanted(flags, "drain")) RunDrain(ctx);
  return 0;
}
