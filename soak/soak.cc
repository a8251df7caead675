// soak: hours of mixed, paced load on one real-time TimingWheel, printing
// RSS and fire lateness every few seconds. Not a test and not run in CI: it
// exists to show that memory stays flat and lateness stays bounded over a
// long run, and to catch what only shows up after millions of operations
// (leaks, lost or duplicated timers, early fires).
//
// Load. `--producers` threads share a fixed key space, each owning a
// disjoint range so that the order of commands on one key is well defined
// (api.md S9 orders commands per submitting thread only). Each producer
// issues `--rate / --producers` ops per second, paced against the clock:
// SetTimer (50 ms .. 30 s, and some 20 .. 200 ms timers so that there is a
// steady stream of fires), MoveTimer later and earlier, RemoveTimer.
//
// Checking. Per key the producer records, before submitting, the deadline it
// asked for (steady_clock now + delay, read just before the call, so never
// later than the wheel's own deadline). The callback reads it: lateness =
// callback time - deadline, and a negative lateness is an early fire. A
// timer that is about to fire must not be touched, or the callback could
// read a deadline whose command the loop has not applied yet and report a
// false early fire: producers only touch a key whose timer is absent (never
// set, removed, or fired and acknowledged by the callback) or due more than
// kGuard from now, and not within kGuard of its previous command (so that at
// most one command per key is in flight). A fire at the key's previous
// deadline while its newer
// command still waits in the queue is counted apart, as a stale fire (the
// loop got that far behind). The callback also catches duplicate fires, fires
// after RemoveTimer and fires with a superseded value, and at the end Stop()'s
// leftovers are reconciled with the producers' view to find lost timers
// (api.md S6).
//
//   soak --minutes=60 --rate=100000 --out=soak.csv
//
// Flags (--name=value or --name value; --help lists them with defaults):
// minutes, seconds (overrides minutes, for a quick try), rate, producers,
// keys, interval_ms, slots, workers, report_s, warmup_s, out.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/memory.h"
#include "support/rng.h"
#include "timingwheel/timing_wheel.h"

namespace {

using Clock = std::chrono::steady_clock;
using Wheel = timingwheel::TimingWheel<std::uint64_t, std::int64_t>;

// A key whose timer is due within this long, or whose last command was
// submitted less than this long ago, is left alone (see the header comment).
// It only has to exceed the time a command waits in the queue before the
// loop applies it, normally microseconds; a second leaves room for a badly
// overloaded machine. Beyond it (see `stale` and its age in the summary) the
// early/duplicate/value checks can misfire.
constexpr std::int64_t kGuardNs = 1'000'000'000;

struct Config {
  double minutes = 10;
  double seconds = 0;  // > 0 overrides minutes
  std::int64_t rate = 200000;
  int producers = 2;
  std::int64_t keys = 1000000;
  int interval_ms = 10;
  int slots = 512;
  int workers = 1;
  int report_s = 5;
  int warmup_s = 120;
  std::string out;
};

Config ParseFlags(int argc, char** argv) {
  Config c;
  support::Flags flags(
      "soak: hours of mixed, paced load on one wheel, reporting RSS and fire "
      "lateness (see docs/soak.md).");
  flags.Add("minutes", &c.minutes, "run length in minutes");
  flags.Add("seconds", &c.seconds, "run length in seconds; overrides minutes");
  flags.Add("rate", &c.rate, "commands per second, all producers together");
  flags.Add("producers", &c.producers, "producer threads");
  flags.Add("keys", &c.keys, "key space, split between the producers");
  flags.Add("interval_ms", &c.interval_ms, "wheel tick in ms");
  flags.Add("slots", &c.slots, "wheel slots");
  flags.Add("workers", &c.workers, "execute workers");
  flags.Add("report_s", &c.report_s, "seconds between report lines");
  flags.Add("warmup_s", &c.warmup_s,
            "seconds before RSS and p99 count in the summary");
  flags.Add("out", &c.out, "also write the report lines to this CSV file");
  flags.Parse(argc, argv);
  if (c.minutes < 0 || c.seconds < 0 || c.producers < 1 ||
      c.keys < c.producers || c.rate < 1 || c.interval_ms < 1 || c.slots < 1 ||
      c.workers < 1 || c.report_s < 1 || c.warmup_s < 0) {
    std::fprintf(stderr, "soak: a flag is out of range; see --help\n");
    std::exit(2);
  }
  return c;
}

// Nanoseconds since the program started, plus one so that 0 can mean "no
// timer" in the per-key arrays.
const std::int64_t kStartNs = support::MonoNanos();
std::int64_t NowNs() { return support::MonoNanos() - kStartNs + 1; }

// VmRSS of this process in MiB.
double RssMib() { return support::RssBytes() / (1024.0 * 1024.0); }

// Log-linear histogram of lateness in microseconds: exact below 1024 us,
// 64 sub-buckets per power of two above (under 1.6% error), so p99 is good
// to a few microseconds in the normal range and a stall of minutes still
// lands in a bucket. Atomic buckets so the callback records without a lock
// and the reporter takes and zeroes a period's counts with exchange().
class Histogram {
 public:
  static constexpr int kLinear = 1024;
  static constexpr int kSub = 64;
  static constexpr int kBuckets = kLinear + (64 - 10) * kSub;

  static int Index(std::uint64_t us) {
    if (us < kLinear) return static_cast<int>(us);
    const int log2 = 63 - __builtin_clzll(us);
    return kLinear + (log2 - 10) * kSub +
           static_cast<int>((us >> (log2 - 6)) & (kSub - 1));
  }
  // The lower bound of bucket i, in microseconds.
  static double Lower(int i) {
    if (i < kLinear) return i;
    const int log2 = (i - kLinear) / kSub + 10;
    const int sub = (i - kLinear) % kSub;
    return std::ldexp(1.0 + sub / static_cast<double>(kSub), log2);
  }

  void Add(std::uint64_t us) {
    counts_[Index(us)].fetch_add(1, std::memory_order_relaxed);
  }
  // Moves this period's counts into `into` (added) and `period` (replaced).
  void Take(std::vector<std::uint64_t>& period,
            std::vector<std::uint64_t>& into) {
    period.assign(kBuckets, 0);
    for (int i = 0; i < kBuckets; ++i) {
      period[i] = counts_[i].exchange(0, std::memory_order_relaxed);
      into[i] += period[i];
    }
  }

  // Quantile q of counts, in milliseconds (the bucket's lower bound, so a
  // report never overstates); -1 when empty.
  static double QuantileMs(const std::vector<std::uint64_t>& counts, double q) {
    std::uint64_t total = 0;
    for (std::uint64_t c : counts) total += c;
    if (total == 0) return -1;
    const auto rank =
        static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
    std::uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen >= std::max<std::uint64_t>(rank, 1)) return Lower(i) / 1000.0;
    }
    return Lower(kBuckets - 1) / 1000.0;
  }

 private:
  std::atomic<std::uint64_t> counts_[kBuckets] = {};
};

void AtomicMax(std::atomic<std::int64_t>& a, std::int64_t v) {
  std::int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur &&
         !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

enum Op : std::uint8_t { kNone, kSet, kMove, kRemove };

// Everything the producers, the callback and the reporter share.
struct Shared {
  explicit Shared(std::int64_t keys)
      : deadline(new std::atomic<std::int64_t>[keys]),
        acked(new std::atomic<std::int64_t>[keys]),
        set_value(new std::atomic<std::int64_t>[keys]),
        prev_deadline(new std::atomic<std::int64_t>[keys]),
        submitted_at(new std::atomic<std::int64_t>[keys]),
        last_op(new std::atomic<std::uint8_t>[keys]) {
    for (std::int64_t k = 0; k < keys; ++k) {
      prev_deadline[k].store(0, std::memory_order_relaxed);
      submitted_at[k].store(0, std::memory_order_relaxed);
      last_op[k].store(kNone, std::memory_order_relaxed);
      deadline[k].store(0, std::memory_order_relaxed);
      acked[k].store(0, std::memory_order_relaxed);
      set_value[k].store(0, std::memory_order_relaxed);
    }
  }

  // Per key, written by its producer before each command: the deadline in
  // NowNs() units of the latest SetTimer/MoveTimer, 0 after RemoveTimer.
  std::unique_ptr<std::atomic<std::int64_t>[]> deadline;
  // Per key, written by the callback: the deadline it fired for. A key whose
  // acked == deadline has no timer in the wheel.
  std::unique_ptr<std::atomic<std::int64_t>[]> acked;
  // Per key: the value of the latest SetTimer (a unique tag), which is what
  // the timer must fire with even after MoveTimer (api.md S2, S3).
  std::unique_ptr<std::atomic<std::int64_t>[]> set_value;
  // Per key, also written before each command: the deadline the key had
  // before it (0 = none), when it was submitted and what it was. They tell a
  // stale fire (see OnFire) from an early one.
  std::unique_ptr<std::atomic<std::int64_t>[]> prev_deadline;
  std::unique_ptr<std::atomic<std::int64_t>[]> submitted_at;
  std::unique_ptr<std::atomic<std::uint8_t>[]> last_op;

  Histogram lateness;
  std::atomic<std::int64_t> period_max_late_ns{0};
  std::atomic<std::int64_t> fires{0};
  std::atomic<std::int64_t> early{0};
  std::atomic<std::int64_t> worst_early_ns{0};
  std::atomic<std::int64_t> duplicate{0};
  std::atomic<std::int64_t> after_remove{0};
  std::atomic<std::int64_t> wrong_value{0};
  std::atomic<std::int64_t> stale{0};
  std::atomic<std::int64_t> stale_max_age_ns{0};
  std::atomic<std::int64_t> submitted{0};
  std::atomic<std::int64_t> errors{0};
  std::atomic<std::int64_t> shortfall{0};  // ops given up when behind pace
  std::atomic<bool> stop{false};
};

void OnFire(Shared& sh, std::uint64_t key, std::int64_t value) {
  const std::int64_t now = NowNs();
  const std::int64_t d = sh.deadline[key].load(std::memory_order_acquire);
  sh.fires.fetch_add(1, std::memory_order_relaxed);
  // A stale fire: the timer fired at the deadline the key had before its
  // latest command, because the loop had not applied that command yet (it
  // applies a bounded number of commands per round, then ticks, so a deep
  // command backlog lets ticks overtake commands submitted seconds before).
  // Counted apart from early fires, which would break S1 outright.
  const std::int64_t prev =
      sh.prev_deadline[key].load(std::memory_order_acquire);
  if ((d == 0 || now < d) && prev != 0 && now >= prev) {
    sh.stale.fetch_add(1, std::memory_order_relaxed);
    AtomicMax(sh.stale_max_age_ns,
              now - sh.submitted_at[key].load(std::memory_order_relaxed));
    // After a stale fire a queued MoveTimer will find nothing, so the key
    // is now absent; a queued SetTimer will still insert and fire, so the
    // key is not; a queued RemoveTimer has d == 0 (absent) already.
    if (sh.last_op[key].load(std::memory_order_acquire) == kMove) {
      sh.acked[key].store(d, std::memory_order_release);
    }
    return;
  }
  if (d == 0) {
    sh.after_remove.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (value != sh.set_value[key].load(std::memory_order_acquire)) {
    sh.wrong_value.fetch_add(1, std::memory_order_relaxed);
  }
  if (sh.acked[key].exchange(d, std::memory_order_acq_rel) == d) {
    sh.duplicate.fetch_add(1, std::memory_order_relaxed);
  }
  const std::int64_t late = now - d;
  if (late < 0) {
    sh.early.fetch_add(1, std::memory_order_relaxed);
    AtomicMax(sh.worst_early_ns, -late);
    return;
  }
  sh.lateness.Add(static_cast<std::uint64_t>(late / 1000));
  AtomicMax(sh.period_max_late_ns, late);
}

constexpr std::int64_t kMs = 1'000'000;

// A delay for a new timer: one in four short (20..200 ms), so that fires
// keep coming even though most long timers are moved or replaced before
// they are due; the rest uniform over 50 ms .. 30 s.
std::int64_t NewDelayNs(support::Rng& rng) {
  if (rng.Next() % 4 == 0) return rng.Between(20 * kMs, 200 * kMs);
  return rng.Between(50 * kMs, 30'000 * kMs);
}

// Notes what a command is about to change, before the new deadline is
// stored (the callback reads the deadline first, with acquire).
void Record(Shared& sh, std::uint64_t k, std::int64_t prev, std::int64_t now,
            Op op) {
  sh.prev_deadline[k].store(prev, std::memory_order_relaxed);
  sh.submitted_at[k].store(now, std::memory_order_relaxed);
  sh.last_op[k].store(op, std::memory_order_relaxed);
}

// One producer: paced ops over keys [lo, hi).
void Produce(Wheel& wheel, Shared& sh, std::uint64_t lo, std::uint64_t hi,
             double ops_per_s, std::uint64_t seed) {
  support::Rng rng(support::Mix(seed));  // producers' streams unrelated
  const auto t0 = Clock::now();
  std::int64_t done = 0;
  std::int64_t tag = static_cast<std::int64_t>(seed << 40);
  const std::uint64_t span = hi - lo;
  while (!sh.stop.load(std::memory_order_relaxed)) {
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - t0).count();
    auto due = static_cast<std::int64_t>(elapsed * ops_per_s);
    if (done >= due) {
      // Sleep until the next op is due; paced, not flat out.
      std::this_thread::sleep_until(
          t0 + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>((done + 1) / ops_per_s)));
      continue;
    }
    // More than a second behind: give the debt up rather than burst later,
    // and count it so the report shows that the target was not met.
    if (due - done > static_cast<std::int64_t>(ops_per_s)) {
      sh.shortfall.fetch_add(due - done, std::memory_order_relaxed);
      done = due;
      continue;
    }
    const std::int64_t batch = std::min<std::int64_t>(due - done, 512);
    for (std::int64_t i = 0; i < batch; ++i) {
      // A few tries to find a key that is safe to touch (see kGuardNs);
      // nearly every key is.
      for (int attempt = 0; attempt < 8; ++attempt) {
        const std::uint64_t k = lo + rng.Below(span);
        const std::int64_t now = NowNs();
        const std::int64_t d = sh.deadline[k].load(std::memory_order_relaxed);
        const bool absent =
            d == 0 || sh.acked[k].load(std::memory_order_acquire) == d;
        if (!absent && d <= now + kGuardNs) continue;
        // At most one command per key in flight: with two queued, a fire at
        // the deadline before both could not be told from an early one.
        if (sh.submitted_at[k].load(std::memory_order_relaxed) + kGuardNs >
                now &&
            sh.submitted_at[k].load(std::memory_order_relaxed) != 0) {
          continue;
        }
        absl::Status s;
        const std::uint64_t r = rng.Next() % 100;
        if (absent || r < 30) {
          const std::int64_t nd = now + NewDelayNs(rng);
          Record(sh, k, absent ? 0 : d, now, kSet);
          sh.set_value[k].store(++tag, std::memory_order_release);
          sh.deadline[k].store(nd, std::memory_order_release);
          s = wheel.SetTimer(k, tag, absl::Nanoseconds(nd - now));
        } else if (r < 80) {
          // Later: up to 10 s past the current deadline. Earlier: anywhere
          // between 50 ms from now and the current deadline.
          const std::int64_t nd = r < 55 ? d + rng.Between(kMs, 10'000 * kMs)
                                         : rng.Between(now + 50 * kMs, d);
          Record(sh, k, d, now, kMove);
          sh.deadline[k].store(nd, std::memory_order_release);
          s = wheel.MoveTimer(k, absl::Nanoseconds(nd - now));
        } else {
          Record(sh, k, d, now, kRemove);
          sh.deadline[k].store(0, std::memory_order_release);
          s = wheel.RemoveTimer(k);
        }
        if (!s.ok()) sh.errors.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    done += batch;
    sh.submitted.fetch_add(batch, std::memory_order_relaxed);
  }
}

struct Row {
  double t;    // elapsed seconds
  double rss;  // MiB
};

}  // namespace

int main(int argc, char** argv) {
  const Config flags = ParseFlags(argc, argv);
  const double run_s = flags.seconds > 0 ? flags.seconds : flags.minutes * 60;

  std::FILE* csv = nullptr;
  if (!flags.out.empty()) {
    csv = std::fopen(flags.out.c_str(), "w");
    if (csv == nullptr) {
      std::perror(flags.out.c_str());
      return 2;
    }
    std::fprintf(
        csv,
        "elapsed_s,rss_mib,pending,submitted_ops_s,applied_ops_s,"
        "fired_s,late_p50_ms,late_p99_ms,late_max_ms,early_total,stale_total,"
        "callback_exceptions,queued,tick_lag,cpu_pct\n");
  }

  auto sh = std::make_unique<Shared>(flags.keys);
  timingwheel::Options options;
  options.interval = absl::Milliseconds(flags.interval_ms);
  options.num_slots = flags.slots;
  options.execute_workers = flags.workers;
  Shared* shp = sh.get();
  auto created =
      Wheel::Create(options, [shp](std::uint64_t key, std::int64_t value) {
        OnFire(*shp, key, value);
      });
  if (!created.ok()) {
    std::fprintf(stderr, "Create: %s\n", created.status().ToString().c_str());
    return 2;
  }
  Wheel& wheel = **created;
  const auto wheel_start = Clock::now();

  std::printf("soak: %.0f s, rate %" PRId64 " ops/s, %d producers, %" PRId64
              " keys, interval %d ms, %d slots, %d execute workers\n",
              run_s, flags.rate, flags.producers, flags.keys, flags.interval_ms,
              flags.slots, flags.workers);
  std::printf("%8s %8s %9s %9s %9s %8s %8s %8s %9s %6s %6s %4s %8s %5s %5s\n",
              "t_s", "rss_MiB", "pending", "submit/s", "applied/s", "fired/s",
              "p50_ms", "p99_ms", "max_ms", "early", "stale", "exc", "queued",
              "lag", "cpu%");
  std::fflush(stdout);

  std::vector<std::thread> producers;
  const std::int64_t per = flags.keys / flags.producers;
  for (int p = 0; p < flags.producers; ++p) {
    const auto lo = static_cast<std::uint64_t>(p * per);
    const auto hi = static_cast<std::uint64_t>(
        p + 1 == flags.producers ? flags.keys : (p + 1) * per);
    producers.emplace_back(Produce, std::ref(wheel), std::ref(*sh), lo, hi,
                           static_cast<double>(flags.rate) / flags.producers,
                           static_cast<std::uint64_t>(p + 1));
  }

  std::vector<std::uint64_t> period, total(Histogram::kBuckets, 0);
  std::vector<Row> rows;
  timingwheel::Stats prev = wheel.stats();
  std::int64_t prev_submitted = 0;
  double prev_cpu = support::ProcessCpuSeconds();
  double max_late_ms = 0;
  double worst_p99_ms = 0;
  const auto t0 = Clock::now();
  auto next = t0;
  for (;;) {
    next += std::chrono::seconds(flags.report_s);
    std::this_thread::sleep_until(next);
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - t0).count();
    const double period_s = flags.report_s;
    const timingwheel::Stats st = wheel.stats();
    const double rss = RssMib();
    const double cpu = support::ProcessCpuSeconds();
    const std::int64_t submitted = sh->submitted.load();
    sh->lateness.Take(period, total);
    const double p50 = Histogram::QuantileMs(period, 0.50);
    const double p99 = Histogram::QuantileMs(period, 0.99);
    const double pmax = sh->period_max_late_ns.exchange(0) / 1e6;
    max_late_ms = std::max(max_late_ms, pmax);
    if (elapsed >= flags.warmup_s) worst_p99_ms = std::max(worst_p99_ms, p99);
    // Ticks the clock says are due minus ticks processed: how far the loop
    // is behind real time.
    const auto expected_ticks = static_cast<std::int64_t>(
        std::chrono::duration<double>(Clock::now() - wheel_start).count() *
        1000 / flags.interval_ms);
    const std::int64_t lag = std::max<std::int64_t>(
        0, expected_ticks - static_cast<std::int64_t>(st.ticks));
    const double cpu_pct = (cpu - prev_cpu) / period_s * 100;
    const double submit_s = (submitted - prev_submitted) / period_s;
    const double applied_s = (st.applied - prev.applied) / period_s;
    const double fired_s = (st.fired - prev.fired) / period_s;
    const std::int64_t early = sh->early.load();
    const std::int64_t stale = sh->stale.load();
    // Commands submitted but not yet applied: the depth of the queue.
    const std::int64_t queued = std::max<std::int64_t>(
        0, submitted - static_cast<std::int64_t>(st.applied));
    std::printf("%8.0f %8.1f %9zu %9.0f %9.0f %8.0f %8.2f %8.2f %9.2f %6" PRId64
                " %6" PRId64 " %4" PRIu64 " %8" PRId64 " %5" PRId64 " %5.0f\n",
                elapsed, rss, st.pending, submit_s, applied_s, fired_s, p50,
                p99, pmax, early, stale, st.callback_exceptions, queued, lag,
                cpu_pct);
    std::fflush(stdout);
    if (csv != nullptr) {
      std::fprintf(csv,
                   "%.1f,%.2f,%zu,%.0f,%.0f,%.0f,%.3f,%.3f,%.3f,%" PRId64
                   ",%" PRId64 ",%" PRIu64 ",%" PRId64 ",%" PRId64 ",%.1f\n",
                   elapsed, rss, st.pending, submit_s, applied_s, fired_s, p50,
                   p99, pmax, early, stale, st.callback_exceptions, queued, lag,
                   cpu_pct);
      std::fflush(csv);
    }
    rows.push_back({elapsed, rss});
    prev = st;
    prev_submitted = submitted;
    prev_cpu = cpu;
    if (elapsed + 0.5 >= run_s) break;
  }

  sh->stop.store(true);
  for (std::thread& t : producers) t.join();
  // Let what is due now fire, then reconcile Stop()'s leftovers with the
  // producers' view of every key: a timer that is neither fired, removed
  // nor returned by Stop was lost (api.md S6).
  std::this_thread::sleep_for(std::chrono::milliseconds(
      2 * flags.interval_ms + static_cast<int>(kGuardNs / kMs)));
  const std::int64_t stop_ns = NowNs();
  const timingwheel::Stats before_stop = wheel.stats();
  auto left = wheel.Stop();
  if (!left.ok()) {
    std::fprintf(stderr, "Stop: %s\n", left.status().ToString().c_str());
    return 2;
  }
  std::vector<char> returned(flags.keys, 0);
  std::int64_t returned_dup = 0, returned_absent = 0, overdue_at_stop = 0;
  for (const auto& [key, value] : *left) {
    if (returned[key]++) ++returned_dup;
    const std::int64_t d = sh->deadline[key].load();
    if (d == 0 || sh->acked[key].load() == d) ++returned_absent;
    if (d != 0 && d < stop_ns - kGuardNs) ++overdue_at_stop;
  }
  std::int64_t lost = 0;
  for (std::int64_t k = 0; k < flags.keys; ++k) {
    const std::int64_t d = sh->deadline[k].load();
    if (d != 0 && sh->acked[k].load() != d && !returned[k]) ++lost;
  }

  // RSS after warm-up (the first report at or past warmup_s) against the
  // end, and a least-squares slope over the post-warm-up reports, which is
  // what "memory stays flat" means in numbers.
  double rss_warm = -1, rss_end = rows.empty() ? -1 : rows.back().rss;
  double rss_max = 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (const Row& r : rows) {
    if (r.t + 0.5 < flags.warmup_s) continue;
    if (rss_warm < 0) rss_warm = r.rss;
    rss_max = std::max(rss_max, r.rss);
    sx += r.t;
    sy += r.rss;
    sxx += r.t * r.t;
    sxy += r.t * r.rss;
    ++n;
  }
  const double slope_per_h =
      n >= 2 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) * 3600 : 0;
  const timingwheel::Stats end = wheel.stats();

  std::printf("\nsummary\n");
  if (rss_warm < 0) {
    std::printf("  RSS: run shorter than the %d s warm-up; end %.1f MiB\n",
                flags.warmup_s, rss_end);
  } else {
    std::printf(
        "  RSS after warm-up (%d s) %.1f MiB, at end %.1f MiB, max %.1f MiB, "
        "slope %+.2f MiB/h\n",
        flags.warmup_s, rss_warm, rss_end, rss_max, slope_per_h);
  }
  std::printf(
      "  lateness: whole run p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max "
      "%.2f ms; worst 5 s p99 after warm-up %.2f ms\n",
      Histogram::QuantileMs(total, 0.5), Histogram::QuantileMs(total, 0.99),
      Histogram::QuantileMs(total, 0.999), max_late_ms, worst_p99_ms);
  std::printf("  early fires %" PRId64 " (worst %.3f ms early)\n",
              sh->early.load(), sh->worst_early_ns.load() / 1e6);
  std::printf(
      "  stale fires %" PRId64
      " (fired at the previous deadline while a newer command for the key, "
      "submitted up to %.1f ms before, was still queued)\n",
      sh->stale.load(), sh->stale_max_age_ns.load() / 1e6);
  std::printf("  ops submitted %" PRId64 " (%.0f/s), applied %" PRIu64
              ", shortfall %" PRId64 ", submit errors %" PRId64 "\n",
              sh->submitted.load(), sh->submitted.load() / rows.back().t,
              end.applied, sh->shortfall.load(), sh->errors.load());
  std::printf("  fired %" PRIu64 " (callbacks seen %" PRId64 "), moved %" PRIu64
              ", removed %" PRIu64 ", superseded %" PRIu64
              ", callback exceptions %" PRIu64 "\n",
              end.fired, sh->fires.load(), end.moved, end.removed,
              end.superseded, end.callback_exceptions);
  std::printf("  at Stop: pending %zu, returned %zu (overdue %" PRId64
              "); lost %" PRId64 ", duplicate fires %" PRId64
              ", fired after remove %" PRId64
              ", fired with a stale value %" PRId64 ", returned twice %" PRId64
              ", returned though absent %" PRId64 "\n",
              before_stop.pending, left->size(), overdue_at_stop, lost,
              sh->duplicate.load(), sh->after_remove.load(),
              sh->wrong_value.load(), returned_dup, returned_absent);
  if (csv != nullptr) std::fclose(csv);

  const bool bad = sh->early.load() != 0 || lost != 0 ||
                   sh->duplicate.load() != 0 || sh->after_remove.load() != 0 ||
                   sh->wrong_value.load() != 0 || returned_dup != 0 ||
                   returned_absent != 0 || sh->errors.load() != 0;
  std::printf("%s\n", bad ? "FAIL" : "OK");
  return bad ? 1 : 0;
}
