// Session idle timeouts: the main timingwheel demo.
//
// Every simulated session holds one timer, keyed by session id. Client
// threads "serve requests" in batches, touching the sessions of each batch
// with one MoveTimers(ids, idle) call; a session nobody touches for `idle`
// fires, and the callback closes it.
//
// The workload is skewed like real traffic: a hot set of sessions is touched
// all the time and never closes, while the long tail stops being touched at a
// random moment (the user left) and is closed by the wheel `idle` later. New
// sessions open at the rate old ones leave, so the population stays level.
//
// The program shows how many moves per second the wheel absorbs and how late,
// after its deadline, each idle session was closed. It checks that no session
// closed early and that every session is accounted for at the end.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/format.h"
#include "support/progress.h"
#include "timingwheel/prometheus.h"
#include "timingwheel/timing_wheel.h"

namespace {

using support::Human;
using support::MonoNanos;
using support::Ms;
using support::WithCommas;

struct Config {
  std::int64_t sessions = 200000;  // at the start; arrivals replace leavers
  int clients = 2;                 // threads touching sessions
  double seconds = 10;             // how long the clients run
  std::int64_t idle_ms = 2000;     // idle timeout
  std::int64_t interval_ms = 10;   // wheel tick
  int slots = 512;                 // wheel slots
  int hot_percent = 20;            // share of sessions that never go idle
  std::int64_t stay_ms = 4000;     // how long a tail user stays, on average
};

// Lateness of closes, in fixed 100 us buckets up to 1 s plus an overflow
// bucket: recording is an increment, so a mutex around it stays cheap even
// at tens of thousands of closes per second.
class Histogram {
 public:
  void Record(absl::Duration d) {
    const std::int64_t i = d / kBucket;
    ++counts_[std::min<std::int64_t>(i, kBuckets)];
    ++count_;
    max_ = std::max(max_, d);
  }

  // The upper edge of the bucket holding the p-th percentile (p in [0,100]).
  absl::Duration Percentile(double p) const {
    if (count_ == 0) return absl::ZeroDuration();
    const auto rank = static_cast<std::uint64_t>(p / 100.0 * (count_ - 1));
    std::uint64_t seen = 0;
    for (int i = 0; i <= kBuckets; ++i) {
      seen += counts_[i];
      if (seen > rank) return i == kBuckets ? max_ : kBucket * (i + 1);
    }
    return max_;
  }

  std::uint64_t count() const { return count_; }
  absl::Duration max() const { return max_; }
  void Clear() { *this = Histogram(); }

 private:
  static constexpr absl::Duration kBucket = absl::Microseconds(100);
  static constexpr int kBuckets = 10000;

  std::vector<std::uint64_t> counts_ = std::vector<std::uint64_t>(kBuckets + 1);
  std::uint64_t count_ = 0;
  absl::Duration max_ = absl::ZeroDuration();
};

// Session id -> opening time (monotonic ns), the wheel's value; used to
// report how long closed sessions lived.
using Wheel = timingwheel::TimingWheel<std::uint32_t, std::int64_t>;

class Simulation {
 public:
  explicit Simulation(const Config& config)
      : config_(config),
        idle_(absl::Milliseconds(config.idle_ms)),
        idle_ns_(config.idle_ms * 1000000),
        // Tail users leave at a rate of tail / stay; as many arrive. Room for
        // the arrivals of the whole run plus some slack.
        open_rate_(config.sessions * (100 - config.hot_percent) / 100.0 /
                   (config.stay_ms / 1000.0)),
        capacity_(std::min<std::int64_t>(
            config.sessions +
                static_cast<std::int64_t>(open_rate_ * config.seconds * 1.1) +
                1024,
            std::numeric_limits<std::uint32_t>::max())),
        last_touch_(new std::atomic<std::int64_t>[capacity_]),
        leave_at_(new std::int64_t[capacity_]) {}

  absl::Status Run() {
    timingwheel::Options options;
    options.interval = absl::Milliseconds(config_.interval_ms);
    options.num_slots = config_.slots;
    // Backpressure: if clients outrun the loop, MoveTimers says
    // ResourceExhausted instead of letting the queue grow. The bound also
    // keeps commands applied within milliseconds of the call, which the
    // early-close check relies on (see Touch).
    options.max_lag = absl::Milliseconds(5);
    auto wheel = Wheel::Create(
        options,
        [this](std::uint32_t id, std::int64_t opened) { Close(id, opened); });
    if (!wheel.ok()) return wheel.status();
    wheel_ = std::move(*wheel);

    absl::PrintF(
        "%s sessions, %d client threads, idle timeout %s, wheel %d slots x "
        "%s, %d%% hot; running %g s\n",
        WithCommas(config_.sessions), config_.clients,
        absl::FormatDuration(idle_), config_.slots,
        absl::FormatDuration(options.interval), config_.hot_percent,
        config_.seconds);

    start_ns_ = MonoNanos();
    std::vector<std::thread> clients;
    for (int c = 0; c < config_.clients; ++c) {
      clients.emplace_back([this, c] { Client(c); });
    }
    ShowProgressUntilDone();
    stop_.store(true);
    for (std::thread& t : clients) t.join();
    const double run_seconds = (MonoNanos() - start_ns_) / 1e9;

    auto never_fired = wheel_->Stop();
    if (!never_fired.ok()) return never_fired.status();
    // Read after Stop: the loop publishes its final counters as it stops.
    const timingwheel::Stats stats = wheel_->stats();
    return Summarize(run_seconds, never_fired->size(), stats);
  }

 private:
  static constexpr std::int64_t kClosed =
      std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kNever =
      std::numeric_limits<std::int64_t>::max();

  // The execute callback: the session has been idle for `idle_`.
  void Close(std::uint32_t id, std::int64_t opened) {
    const std::int64_t now = MonoNanos();
    // Marking the session closed and reading its last touch in one step
    // means a client either touched it before (and we see that touch) or
    // sees it closed and leaves it alone.
    const std::int64_t touched = last_touch_[id].exchange(kClosed);
    if (touched == kClosed) {  // each timer ends exactly once: never happens
      double_closes_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    closed_.fetch_add(1, std::memory_order_relaxed);
    lifetime_ns_.fetch_add(now - opened, std::memory_order_relaxed);
    // Clients record the touch time before MoveTimers reads the clock,
    // so this deadline is never later than the wheel's: lateness may be
    // overstated by a few ns, an early fire is never hidden.
    const std::int64_t deadline = touched + idle_ns_;
    if (now < deadline) {
      early_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    std::lock_guard lock(mu_);
    window_.Record(absl::Nanoseconds(now - deadline));
    total_.Record(absl::Nanoseconds(now - deadline));
  }

  // One client thread. It owns the ids c, c + clients, c + 2 * clients, ...,
  // so each session is touched by one thread only: the wheel applies one
  // thread's commands in order, which keeps last_touch_ and the wheel's
  // deadline in step.
  void Client(int c) {
    std::mt19937_64 rng{std::random_device{}()};
    std::vector<std::uint32_t> hot, live;  // ids this client still touches
    std::int64_t next_id = c;
    std::int64_t opened = 0;
    const double my_share = 1.0 / config_.clients;
    const auto initial = static_cast<std::int64_t>(config_.sessions * my_share);
    std::uint64_t touches = 0;
    // One batch call per round for the sessions it opened, one for those
    // its requests touched: a server handling a batch of requests submits
    // its timers the same way.
    std::vector<std::pair<std::uint32_t, std::int64_t>> opening;
    std::vector<std::uint32_t> touched;

    while (!stop_.load(std::memory_order_relaxed)) {
      const std::int64_t now = MonoNanos();
      // Open sessions: the initial ones at once, then at the arrival rate.
      const auto due =
          initial + static_cast<std::int64_t>(open_rate_ * my_share *
                                              ((now - start_ns_) / 1e9));
      while (opened < due && next_id < capacity_) {
        const auto id = static_cast<std::uint32_t>(next_id);
        next_id += config_.clients;
        ++opened;
        // Hot users are long-lived: they are all there from the start, and
        // the arrivals replace tail users who left.
        const bool is_hot = opened <= initial &&
                            absl::Uniform(rng, 0, 100) < config_.hot_percent;
        leave_at_[id] =
            is_hot ? kNever
                   : now + static_cast<std::int64_t>(absl::Exponential<double>(
                               rng, 1.0 / (config_.stay_ms * 1e6)));
        last_touch_[id].store(now);
        created_.fetch_add(1, std::memory_order_relaxed);
        opening.emplace_back(id, now);
        (is_hot ? hot : live).push_back(id);
      }
      if (!opening.empty()) {
        Submit(
            [&] { return wheel_->SetTimers(absl::MakeSpan(opening), idle_); });
        opening.clear();
      }

      // A batch of requests: half hit the hot set, half any live session.
      for (int i = 0; i < 256; ++i) {
        std::vector<std::uint32_t>& set =
            (!hot.empty() && (live.empty() || absl::Bernoulli(rng, 0.5)))
                ? hot
                : live;
        if (set.empty()) break;
        const std::size_t k = absl::Uniform<std::size_t>(rng, 0, set.size());
        if (Touch(set[k], MonoNanos())) {
          touched.push_back(set[k]);
          ++touches;
        } else {  // left or closed: stop picking it
          set[k] = set.back();
          set.pop_back();
        }
      }
      if (!touched.empty()) {
        Submit([&] { return wheel_->MoveTimers(touched, idle_); });
        touched.clear();
      }
      touches_.fetch_add(touches, std::memory_order_relaxed);
      touches = 0;
    }
  }

  // A request on session `id`: records the touch, for the caller to move
  // the session's timer; false once the session is gone for good.
  bool Touch(std::uint32_t id, std::int64_t now) {
    if (now >= leave_at_[id]) return false;  // the user left
    std::int64_t last = last_touch_[id].load(std::memory_order_relaxed);
    if (last == kClosed) return false;
    // A touch close to the deadline races the expiry: the wheel may fire the
    // old deadline before it applies this move (commands are asynchronous).
    // A real server sees "request arrived as the session closed"; here it
    // would look like an early close, so such a session is left to expire.
    // The margin, half the timeout, is far more than the loop's lag, which
    // max_lag bounds, plus the time to fill a batch of touches.
    if (now - last > idle_ns_ / 2) return false;
    // Recorded before MoveTimers reads the clock, so the wheel's deadline is
    // never earlier than this touch's.
    return last_touch_[id].compare_exchange_strong(last, now);
  }

  // Retries a wheel call while the loop is backlogged (max_lag).
  template <typename Call>
  void Submit(Call call) {
    for (;;) {
      const absl::Status s = call();
      if (!absl::IsResourceExhausted(s)) return;
      backpressure_.fetch_add(1, std::memory_order_relaxed);
      // Give the loop the CPU instead of spinning against it.
      absl::SleepFor(absl::Microseconds(50));
    }
  }

  void ShowProgressUntilDone() {
    support::ProgressLine progress;
    const std::int64_t end_ns =
        start_ns_ + static_cast<std::int64_t>(config_.seconds * 1e9);
    std::uint64_t last_touches = 0;
    std::int64_t last_ns = start_ns_;
    for (;;) {
      const std::int64_t now = MonoNanos();
      if (now >= end_ns) break;
      absl::SleepFor(
          std::min(progress.period(), absl::Nanoseconds(end_ns - now)));
      const std::int64_t t = MonoNanos();
      const std::uint64_t touches = touches_.load();
      const std::uint64_t closed = closed_.load();
      const double rate = (touches - last_touches) / ((t - last_ns) / 1e9);
      last_touches = touches;
      last_ns = t;
      // Lateness of the closes since the last line ("-" while none closed).
      std::string p50 = "-", p99 = "-";
      {
        std::lock_guard lock(mu_);
        if (window_.count() != 0) {
          p50 = Ms(window_.Percentile(50));
          p99 = Ms(window_.Percentile(99));
        }
        window_.Clear();
      }
      progress.Show(absl::StrFormat(
          "%5.1fs | alive %9s | touches %7s/s | closed %9s | late p50 %6s "
          "p99 %6s",
          (t - start_ns_) / 1e9, WithCommas(created_.load() - closed),
          Human(rate), WithCommas(closed), p50, p99));
    }
    progress.Done();
  }

  absl::Status Summarize(double run_seconds, std::size_t alive,
                         const timingwheel::Stats& stats) {
    const std::uint64_t created = created_.load();
    const std::uint64_t closed = closed_.load();
    const std::uint64_t touches = touches_.load();
    const std::uint64_t early = early_.load();
    const bool balanced = alive + closed == created;
    std::lock_guard lock(mu_);
    absl::PrintF("\nSummary after %.1f s\n", run_seconds);
    absl::PrintF("  sessions created   %12s\n", WithCommas(created));
    absl::PrintF("  touches (moves)    %12s  (%s/s)\n", WithCommas(touches),
                 Human(touches / run_seconds));
    absl::PrintF(
        "  sessions closed    %12s  idle for %s; lived %.2f s on "
        "average\n",
        WithCommas(closed), absl::FormatDuration(idle_),
        closed == 0 ? 0.0 : lifetime_ns_.load() / 1e9 / closed);
    absl::PrintF("  still alive        %12s  (returned by Stop)\n",
                 WithCommas(alive));
    absl::PrintF("  alive + closed == created: %s\n",
                 balanced ? "ok" : "MISMATCH");
    absl::PrintF("  lateness           p50 %s  p99 %s  max %s  (tick %s)\n",
                 Ms(total_.Percentile(50)), Ms(total_.Percentile(99)),
                 Ms(total_.max()),
                 absl::FormatDuration(absl::Milliseconds(config_.interval_ms)));
    absl::PrintF("  early closes       %12s  (must be 0)\n", WithCommas(early));
    if (early != 0) {
      absl::PrintF(
          "    (closed before last touch + idle: a wheel bug, or the loop "
          "lagged more than idle/2 behind the clients; see Touch)\n");
    }
    if (double_closes_.load() != 0) {
      absl::PrintF("  DOUBLE closes      %12s  (must be 0)\n",
                   WithCommas(double_closes_.load()));
    }
    absl::PrintF("  wheel stats        applied %s, moved %s, fired %s\n",
                 WithCommas(stats.applied), WithCommas(stats.moved),
                 WithCommas(stats.fired));
    // The wheel's own view (docs/api.md E14): from the due tick, where the
    // line above counts from the exact idle deadline.
    absl::PrintF("  wheel's lateness   p50 %s  p99 %s  max %s  (from the tick)\n",
                 Ms(stats.fire_lateness.Quantile(0.5)),
                 Ms(stats.fire_lateness.Quantile(0.99)),
                 Ms(stats.fire_lateness.max));
    absl::PrintF("\nThe same as a Prometheus /metrics endpoint would serve it:\n%s",
                 timingwheel::PrometheusText(stats, "timingwheel",
                                             "wheel=\"sessions\""));
    if (backpressure_.load() != 0) {
      absl::PrintF(
          "  backpressure       %12s  retries after ResourceExhausted\n",
          WithCommas(backpressure_.load()));
    }
    if (!balanced || early != 0 || double_closes_.load() != 0) {
      return absl::InternalError("a check failed (see above)");
    }
    return absl::OkStatus();
  }

  const Config config_;
  const absl::Duration idle_;
  const std::int64_t idle_ns_;
  const double open_rate_;  // sessions opened per second, all clients
  const std::int64_t capacity_;
  // Per session id: the last touch (monotonic ns), kClosed once closed.
  // Written by the owning client and by Close.
  const std::unique_ptr<std::atomic<std::int64_t>[]> last_touch_;
  // Per session id: when its user leaves; only the owning client uses it.
  const std::unique_ptr<std::int64_t[]> leave_at_;

  std::unique_ptr<Wheel> wheel_;
  std::int64_t start_ns_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> created_{0}, closed_{0}, touches_{0}, early_{0},
      double_closes_{0}, backpressure_{0};
  std::atomic<std::int64_t> lifetime_ns_{0};

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built with
  // TSan, which then cannot see absl::Mutex and reports false races.
  std::mutex mu_;     // guards the two histograms
  Histogram window_;  // since the last progress line
  Histogram total_;
};

}  // namespace

int main(int argc, char** argv) {
  Config config;
  support::Flags flags(
      "Simulated sessions touched by client threads with MoveTimers; the wheel "
      "closes the idle ones.");
  flags.Add("sessions", &config.sessions,
            "sessions at the start; arrivals replace users who leave");
  flags.Add("clients", &config.clients, "client threads touching sessions");
  flags.Add("seconds", &config.seconds, "how long to run");
  flags.Add("idle_ms", &config.idle_ms, "idle timeout in ms");
  flags.Add("interval_ms", &config.interval_ms, "wheel tick in ms");
  flags.Add("slots", &config.slots, "wheel slots");
  flags.Add("hot_percent", &config.hot_percent,
            "percent of sessions touched until the end");
  flags.Add("stay_ms", &config.stay_ms,
            "mean time a tail user keeps touching a session, in ms");
  flags.Parse(argc, argv);
  if (config.sessions < 1 || config.sessions > (1 << 30) ||
      config.clients < 1 || config.seconds <= 0 || config.idle_ms < 1 ||
      config.interval_ms < 1 || config.hot_percent < 0 ||
      config.hot_percent > 100 || config.stay_ms < 1) {
    absl::FPrintF(stderr, "flag out of range; see --help\n");
    return 2;
  }

  Simulation simulation(config);
  const absl::Status s = simulation.Run();
  std::fflush(stdout);  // the summary first, then the verdict
  if (!s.ok()) {
    absl::FPrintF(stderr, "error: %s\n", s.ToString());
    return 1;
  }
  return 0;
}
