// Heartbeats and retries with Dubbo's "reput" pattern on one timing wheel.
//
// Dubbo runs heartbeats, reconnects and failed-call retries on a timer where
// each task does its work and then submits itself again ("reput") instead of
// being a fixed-rate periodic job: slow work never piles up repeated runs, and
// a task stops simply by not re-arming. Here every task is a timer on the same
// wheel, keyed by what it is for ("heartbeat/conn-2", "retry/register"), and
// the callback re-arms it with SetTimer:
//
//  - a heartbeat per connection, every --heartbeat_ms. One peer goes away for
//    a second: its heartbeat gets no reply, the connection closes, and a
//    reconnect task retries with exponential backoff until the peer is back,
//    then the heartbeat resumes;
//  - retries of flaky calls with an attempt limit and exponential backoff:
//    one succeeds after a few attempts (or not, depending on --seed), one
//    against a registry that is down gives up at the limit.
//
// At the end Stop() returns the timers that never fired: the next heartbeats.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "support/clock.h"
#include "support/flags.h"
#include "timingwheel/timing_wheel.h"

namespace {

using support::MonoNanos;

struct Config {
  int connections = 5;
  std::int64_t heartbeat_ms = 200;
  double seconds = 3;
  int max_attempts = 5;           // per retry or reconnect task
  std::int64_t backoff_ms = 100;  // first backoff; doubles per attempt
  double failure_rate = 0.5;      // of the flaky "register" call
  std::int64_t seed = 1;          // makes the flaky call's luck repeatable
  std::int64_t interval_ms = 10;  // wheel tick
};

// What a timer does when it fires: the wheel's value.
struct Task {
  enum class Kind { kHeartbeat, kReconnect, kRetry };
  Kind kind = Kind::kHeartbeat;
  int conn = 0;             // heartbeat, reconnect
  std::string call;         // retry: what is being retried
  double failure_rate = 0;  // retry: how flaky the call is
  int count = 1;            // heartbeat number, or attempt number
  std::int64_t due_ns = 0;  // when this run was scheduled for
};

Task HeartbeatTask(int conn) {
  Task t;
  t.kind = Task::Kind::kHeartbeat;
  t.conn = conn;
  return t;
}

Task ReconnectTask(int conn) {
  Task t;
  t.kind = Task::Kind::kReconnect;
  t.conn = conn;
  return t;
}

Task RetryTask(std::string call, double failure_rate) {
  Task t;
  t.kind = Task::Kind::kRetry;
  t.call = std::move(call);
  t.failure_rate = failure_rate;
  return t;
}

using Wheel = timingwheel::TimingWheel<std::string, Task>;

class Demo {
 public:
  explicit Demo(const Config& config)
      : config_(config),
        period_(absl::Milliseconds(config.heartbeat_ms)),
        // The outage: one connection's peer is gone from 1/3 to 2/3 of the
        // run, long enough for a few reconnect attempts.
        outage_conn_((config.connections + 1) / 2),
        outage_from_ns_(static_cast<std::int64_t>(config.seconds * 1e9 / 3)),
        outage_to_ns_(static_cast<std::int64_t>(config.seconds * 2e9 / 3)),
        rng_(static_cast<std::uint64_t>(config.seed)) {}

  absl::Status Run() {
    timingwheel::Options options;
    options.interval = absl::Milliseconds(config_.interval_ms);
    auto wheel = Wheel::Create(options, [this](std::string key, Task task) {
      Fire(key, std::move(task));
    });
    if (!wheel.ok()) return wheel.status();
    wheel_ = std::move(*wheel);

    absl::PrintF(
        "%d connections, heartbeat every %s; conn-%d's peer is down from "
        "%.1fs to %.1fs; retries: up to %d attempts, backoff from %s "
        "doubling\n\n",
        config_.connections, absl::FormatDuration(period_), outage_conn_,
        outage_from_ns_ / 1e9, outage_to_ns_ / 1e9, config_.max_attempts,
        absl::FormatDuration(absl::Milliseconds(config_.backoff_ms)));

    start_ns_ = MonoNanos();
    {
      std::lock_guard lock(mu_);  // Schedule's counters; callbacks wait
      // Stagger the first heartbeats so the connections do not all beat on the
      // same tick (and the timeline reads in order).
      for (int c = 1; c <= config_.connections; ++c) {
        Schedule(HeartbeatKey(c), HeartbeatTask(c),
                 period_ * c / config_.connections);
      }
      Schedule("retry/register",
               RetryTask("register with registry-a", config_.failure_rate),
               absl::Milliseconds(50));
      Schedule("retry/subscribe",
               RetryTask("subscribe to registry-b (down)", 1.0),
               absl::Milliseconds(60));
    }

    absl::SleepFor(absl::Seconds(config_.seconds));

    // Stop applies what was accepted, waits for callbacks in flight, and
    // hands back what never fired. A callback racing with it finds its
    // SetTimer refused (FailedPrecondition) and says so.
    Log("Stop()");
    auto never_fired = wheel_->Stop();
    if (!never_fired.ok()) return never_fired.status();
    std::sort(never_fired->begin(), never_fired->end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    absl::PrintF("\n%d timers never fired:\n", never_fired->size());
    for (const auto& [key, task] : *never_fired) {
      absl::PrintF(
          "  %-20s %s #%d, was due at %.3fs\n", key,
          task.kind == Task::Kind::kHeartbeat ? "heartbeat" : "attempt",
          task.count, (task.due_ns - start_ns_) / 1e9);
    }

    const timingwheel::Stats stats = wheel_->stats();
    std::lock_guard lock(mu_);
    absl::PrintF("\nSummary\n");
    absl::PrintF("  heartbeats       %d sent, %d missed\n", heartbeats_,
                 missed_);
    absl::PrintF("  reconnects       %d succeeded, %d gave up\n", reconnects_,
                 reconnect_gave_up_);
    absl::PrintF("  retried calls    %d succeeded, %d gave up\n", succeeded_,
                 gave_up_);
    absl::PrintF("  refused re-arms  %d (callbacks that raced Stop)\n",
                 refused_);
    absl::PrintF("  lateness         max %.1fms (tick %s)\n",
                 max_late_ns_ / 1e6,
                 absl::FormatDuration(absl::Milliseconds(config_.interval_ms)));
    absl::PrintF("  wheel            %d timers fired, %d returned by Stop\n",
                 stats.fired, never_fired->size());
    return absl::OkStatus();
  }

 private:
  static std::string HeartbeatKey(int conn) {
    return absl::StrCat("heartbeat/conn-", conn);
  }

  // The wheel's callback, on its execute worker.
  void Fire(const std::string& key, Task task) {
    const std::int64_t now = MonoNanos();
    std::lock_guard lock(mu_);
    max_late_ns_ = std::max(max_late_ns_, now - task.due_ns);
    switch (task.kind) {
      case Task::Kind::kHeartbeat:
        if (PeerUp(task.conn, now)) {
          ++heartbeats_;
          Log(key, "#%d ok", task.count);
          ++task.count;
          // The reput. Fixed delay, as in Dubbo: the next beat is a period
          // after this one ran, so a late run shifts the ones after it.
          Schedule(key, std::move(task), period_);
        } else {
          ++missed_;
          Log(key, "#%d no reply: closing conn-%d, will reconnect", task.count,
              task.conn);
          // Not re-armed: a closed connection has no heartbeat. The
          // reconnect task takes over and restarts it.
          Schedule(absl::StrCat("reconnect/conn-", task.conn),
                   ReconnectTask(task.conn), Backoff(1));
        }
        break;
      case Task::Kind::kReconnect:
        if (PeerUp(task.conn, now)) {
          ++reconnects_;
          Log(key, "attempt %d ok: heartbeats resume", task.count);
          Schedule(HeartbeatKey(task.conn), HeartbeatTask(task.conn), period_);
        } else {
          Retry(key, std::move(task), "connection refused");
        }
        break;
      case Task::Kind::kRetry:
        if (!absl::Bernoulli(rng_, task.failure_rate)) {
          ++succeeded_;
          Log(key, "attempt %d: %s succeeded", task.count, task.call);
        } else {
          Retry(key, std::move(task), absl::StrCat(task.call, " failed"));
        }
        break;
    }
  }

  // Re-arms a failed attempt with exponential backoff, up to the limit.
  // Caller holds mu_.
  void Retry(const std::string& key, Task task, const std::string& why) {
    if (task.count >= config_.max_attempts) {
      ++(task.kind == Task::Kind::kReconnect ? reconnect_gave_up_ : gave_up_);
      Log(key, "attempt %d: %s; giving up after %d attempts", task.count, why,
          task.count);
      return;
    }
    const absl::Duration backoff = Backoff(task.count);
    Log(key, "attempt %d: %s; next try in %s", task.count, why,
        absl::FormatDuration(backoff));
    ++task.count;
    Schedule(key, std::move(task), backoff);
  }

  // The wait after `failed` failed attempts: backoff_ms, then doubling.
  absl::Duration Backoff(int failed) const {
    return absl::Milliseconds(config_.backoff_ms) * (1 << (failed - 1));
  }

  bool PeerUp(int conn, std::int64_t now) const {
    const std::int64_t t = now - start_ns_;
    return conn != outage_conn_ || t < outage_from_ns_ || t >= outage_to_ns_;
  }

  // Caller holds mu_.
  void Schedule(const std::string& key, Task task, absl::Duration delay) {
    // Recorded before SetTimer reads the clock, so "late" is never negative.
    task.due_ns = MonoNanos() + absl::ToInt64Nanoseconds(delay);
    const absl::Status s = wheel_->SetTimer(key, std::move(task), delay);
    if (absl::IsFailedPrecondition(s)) {
      ++refused_;
      Log(key, "not re-armed: the wheel is stopped");
    } else if (!s.ok()) {
      Log(key, "SetTimer: %s", s.ToString());
    }
  }

  // One timeline line: seconds since start, the timer's key, what happened.
  template <typename... Args>
  void Log(const std::string& key,
           const std::type_identity_t<absl::FormatSpec<Args...>>& format,
           const Args&... args) {
    absl::PrintF("[%6.3fs] %-20s %s\n", (MonoNanos() - start_ns_) / 1e9, key,
                 absl::StrFormat(format, args...));
  }
  void Log(const std::string& what) {
    absl::PrintF("[%6.3fs] %s\n", (MonoNanos() - start_ns_) / 1e9, what);
  }

  const Config config_;
  const absl::Duration period_;
  const int outage_conn_;
  const std::int64_t outage_from_ns_, outage_to_ns_;  // since start
  std::int64_t start_ns_ = 0;
  std::unique_ptr<Wheel> wheel_;

  // Guards everything below. Callbacks run on one execute worker by default;
  // the lock keeps this correct with more, and orders timeline lines with
  // the counters. (std::mutex rather than absl::Mutex: Debian's Abseil is not
  // built with TSan, so TSan cannot see absl::Mutex and reports false races.)
  std::mutex mu_;
  std::mt19937_64 rng_;
  int heartbeats_ = 0;
  int missed_ = 0;
  int reconnects_ = 0;
  int succeeded_ = 0;
  int gave_up_ = 0;
  int reconnect_gave_up_ = 0;
  int refused_ = 0;
  std::int64_t max_late_ns_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Config config;
  support::Flags flags(
      "Heartbeats and retries with backoff, each re-arming itself from its "
      "own callback (Dubbo's reput pattern).");
  flags.Add("connections", &config.connections, "connections to heartbeat");
  flags.Add("heartbeat_ms", &config.heartbeat_ms, "heartbeat period in ms");
  flags.Add("seconds", &config.seconds, "how long to run");
  flags.Add("max_attempts", &config.max_attempts,
            "attempt limit of a retry or reconnect");
  flags.Add("backoff_ms", &config.backoff_ms,
            "backoff before the second attempt; doubles after");
  flags.Add("failure_rate", &config.failure_rate,
            "chance that one attempt of the flaky call fails");
  flags.Add("seed", &config.seed, "random seed of the flaky call");
  flags.Add("interval_ms", &config.interval_ms, "wheel tick in ms");
  flags.Parse(argc, argv);
  if (config.connections < 1 || config.heartbeat_ms < 1 ||
      config.seconds <= 0 || config.max_attempts < 1 ||
      config.max_attempts > 20 || config.backoff_ms < 1 ||
      config.failure_rate < 0 || config.failure_rate > 1 ||
      config.interval_ms < 1) {
    absl::FPrintF(stderr, "flag out of range; see --help\n");
    return 2;
  }
  Demo demo(config);
  if (absl::Status s = demo.Run(); !s.ok()) {
    absl::FPrintF(stderr, "error: %s\n", s.ToString());
    return 1;
  }
  return 0;
}
