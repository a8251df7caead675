// Distributed locks on Redis, kept alive by one timer each on a timing wheel.
//
// A service that coordinates its instances through Redis locks must renew
// each lock's lease while it works (as Redisson's watchdog does), so that a
// holder that dies frees its locks within one ttl and a holder that lives
// never loses them. This program holds --locks locks with a lease of
// --ttl_ms through lease::LeaseKeeper (examples/lease/), which renews each
// every ttl / 3 in pipelined batches, and prints a live line: locks held,
// renewals a second, failures, locks lost, how late renewals land, and the
// CPU the keeper, its wheel and Redis use.
//
// By default it starts its own redis-server on a free loopback port (Debian:
// apt-get install redis-server); --redis=HOST:PORT uses a running one. With
// --scenario (the default) it also shows what the keeper is for: halfway, a
// lock is taken over by another holder and the keeper reports it lost
// without touching it; at the end the keeper is abandoned, as if its process
// had crashed, and every lock it held expires within one ttl.
//
// --json prints one result line at the end (bench/lease_run.sh collects them).

#include "lease/lease_keeper.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lease/redis_link.h"
#include "lease/redis_server.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/format.h"
#include "support/json.h"
#include "support/memory.h"
#include "support/results.h"
#include "support/thread_cpu.h"

namespace {

struct Config {
  std::string redis;  // HOST:PORT; empty: start a redis-server here
  std::int64_t locks = 10'000;
  std::int64_t ttl_ms = 3'000;
  double seconds = 10;  // how long the locks are held
  std::int64_t batch = 512;
  std::int64_t tick_ms = 10;
  bool scenario = true;
  bool json = false;
};

// CPU seconds of the keeper process, of its wheel's threads, and of Redis.
struct Cpu {
  double process = 0, wheel = 0, redis = 0;
  static Cpu Now(pid_t redis_pid) {
    Cpu c;
    c.process = support::ProcessCpuSeconds();
    for (const auto& [name, seconds] : support::CpuSecondsByThreadName()) {
      if (name == "tw-loop" || name == "tw-execute") c.wheel += seconds;
    }
    if (redis_pid != 0) c.redis = support::CpuSecondsOfProcess(redis_pid);
    return c;
  }
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// What `now` recorded since `before`: the counts only (the max is kept).
timingwheel::LatencyHistogram Since(
    const timingwheel::LatencyHistogram& now,
    const timingwheel::LatencyHistogram& before) {
  timingwheel::LatencyHistogram d = now;
  for (int b = 0; b < timingwheel::LatencyHistogram::kBuckets; ++b) {
    d.buckets[b] -= before.buckets[b];
  }
  d.count -= before.count;
  d.sum -= before.sum;
  return d;
}

class Demo {
 public:
  explicit Demo(const Config& config) : config_(config) {}

  int Run() {
    std::string host = "127.0.0.1";
    int port = 0;
    if (config_.redis.empty()) {
      auto server = lease::RedisServer::Start();
      if (!server.ok()) return Fail(server.status());
      server_ = std::move(*server);
      port = server_->port();
      Say(absl::StrFormat("started redis-server on 127.0.0.1:%d", port));
    } else {
      std::vector<std::string> parts = absl::StrSplit(config_.redis, ':');
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
        return Fail(absl::InvalidArgumentError("--redis wants HOST:PORT"));
      }
      host = parts[0];
    }

    lease::KeeperOptions options;
    options.host = host;
    options.port = port;
    options.ttl = absl::Milliseconds(config_.ttl_ms);
    options.batch = static_cast<int>(config_.batch);
    options.tick = absl::Milliseconds(config_.tick_ms);
    options.on_lost = [this](const std::string& name) {
      if (lost_shown_.fetch_add(1) < 3) Say("lost lock " + name);
    };
    auto keeper = lease::LeaseKeeper::Create(options);
    if (!keeper.ok()) return Fail(keeper.status());
    keeper_ = std::move(*keeper);

    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(config_.locks));
    for (std::int64_t i = 0; i < config_.locks; ++i) {
      names.push_back(absl::StrFormat("lock:order-%010d", i));
    }
    const std::int64_t t0 = support::MonoNanos();
    auto taken = keeper_->AcquireMany(names);
    if (!taken.ok()) return Fail(taken.status());
    acquire_s_ = (support::MonoNanos() - t0) * 1e-9;
    Say(absl::StrFormat(
        "took %d of %d locks in %.2f s; ttl %s, renewed every %s, %d a batch",
        *taken, names.size(), acquire_s_, absl::FormatDuration(options.ttl),
        absl::FormatDuration(keeper_->options().renew_every), options.batch));

    Hold(names);

    if (config_.scenario) {
      Abandon(names);
    } else {
      auto released = keeper_->ReleaseAll();
      if (!released.ok()) return Fail(released.status());
      Say(absl::StrFormat("released %d locks", *released));
    }
    return 0;
  }

 private:
  // Holds the locks for --seconds, a live line a second; with --scenario,
  // another holder takes one lock over halfway.
  void Hold(const std::vector<std::string>& names) {
    const Cpu start = Cpu::Now(redis_pid());
    const std::int64_t start_ns = support::MonoNanos();
    Cpu last = start;
    std::int64_t last_ns = start_ns;
    lease::KeeperStats last_stats = keeper_->stats();
    bool taken_over = false;
    for (int second = 1; second <= static_cast<int>(config_.seconds);
         ++second) {
      absl::SleepFor(absl::Nanoseconds(start_ns + second * 1'000'000'000LL -
                                       support::MonoNanos()));
      if (config_.scenario && !taken_over && second >= config_.seconds / 2 &&
          !names.empty()) {
        TakeOver(names.front());
        taken_over = true;
      }
      const std::int64_t now_ns = support::MonoNanos();
      const Cpu cpu = Cpu::Now(redis_pid());
      const lease::KeeperStats s = keeper_->stats();
      const double dt = (now_ns - last_ns) * 1e-9;
      peak_renewals_ =
          std::max(peak_renewals_, (s.renewals - last_stats.renewals) / dt);
      const timingwheel::LatencyHistogram late =
          Since(s.renew_lateness, last_stats.renew_lateness);
      if (!config_.json) {
        std::printf(
            "%3ds  held %s  renewals %s/s  failures %llu  lost %llu  "
            "renewals late p99 %.1f ms (max so far %.1f)  keeper CPU %.0f%% "
            "(wheel %.0f%% of it)  redis CPU %.0f%%\n",
            second, support::WithCommas(s.held).c_str(),
            support::Human((s.renewals - last_stats.renewals) / dt).c_str(),
            static_cast<unsigned long long>(s.renew_failures),
            static_cast<unsigned long long>(s.lost), Ms(late.Quantile(0.99)),
            Ms(s.renew_lateness.max), 100 * (cpu.process - last.process) / dt,
            Share(cpu.wheel - last.wheel, cpu.process - last.process),
            100 * (cpu.redis - last.redis) / dt);
        std::fflush(stdout);
      }
      last = cpu;
      last_ns = now_ns;
      last_stats = s;
    }
    const double elapsed = (support::MonoNanos() - start_ns) * 1e-9;
    const Cpu end = Cpu::Now(redis_pid());
    const lease::KeeperStats s = keeper_->stats();
    if (config_.json) {
      support::Json result;
      result.Add("workload", "lease")
          .Add("locks", config_.locks)
          .Add("ttl_ms", config_.ttl_ms)
          .Add("seconds", elapsed)
          .Add("acquire_s", acquire_s_)
          .Add("held", static_cast<std::uint64_t>(s.held))
          .Add("renewals_per_s", s.renewals / elapsed)
          .Add("peak_renewals_per_s", peak_renewals_)
          .Add("keeper_us_per_renewal",
               PerRenewal(end.process - start.process, s.renewals))
          .Add("wheel_us_per_renewal",
               PerRenewal(end.wheel - start.wheel, s.renewals))
          .Add("redis_us_per_renewal",
               PerRenewal(end.redis - start.redis, s.renewals))
          .Add("renew_failures", s.renew_failures)
          .Add("lost", s.lost)
          .Add("renew_late_p99_ms", Ms(s.renew_lateness.Quantile(0.99)))
          .Add("renew_late_max_ms", Ms(s.renew_lateness.max))
          .Add("fire_late_p99_ms", Ms(s.wheel.fire_lateness.Quantile(0.99)))
          .Add("keeper_cpu_pct", 100 * (end.process - start.process) / elapsed)
          .Add("wheel_cpu_pct", 100 * (end.wheel - start.wheel) / elapsed)
          .Add("wheel_share_pct",
               Share(end.wheel - start.wheel, end.process - start.process))
          .Add("redis_cpu_pct", 100 * (end.redis - start.redis) / elapsed)
          .Add("rss_mb", support::RssBytes() / 1048576.0);
      support::ResultLines(true, support::Json()).Print(result, "");
    }
  }

  // Another holder takes `name` over, as if its lease had run out: the
  // keeper must report it lost at its next renewal, and leave it alone.
  void TakeOver(const std::string& name) {
    lease::RedisLink other(keeper_->options().host, keeper_->options().port,
                           absl::Seconds(1));
    auto reply = other.Call({"SET", name, "another-holder", "PX", "600000"});
    if (reply.ok()) Say("another holder takes over " + name);
  }

  // Stops renewing as a crashed holder would, and watches the locks expire.
  void Abandon(const std::vector<std::string>& names) {
    keeper_->Abandon();
    const std::int64_t abandoned_ns = support::MonoNanos();
    Say(absl::StrFormat("keeper abandoned with %d locks held, as if crashed",
                        keeper_->stats().held));
    lease::RedisLink watcher(keeper_->options().host, keeper_->options().port,
                             absl::Seconds(5));
    const double limit_s = absl::ToDoubleSeconds(keeper_->options().ttl) + 5;
    for (;;) {
      std::size_t left = 0;
      if (!watcher.Connect().ok()) break;
      for (const std::string& name : names) watcher.Append({"GET", name});
      for (std::size_t i = 0; i < names.size(); ++i) {
        auto reply = watcher.Read();
        // Still ours: held by the dead keeper (the taken-over one is not).
        if (reply.ok() && (*reply)->type == REDIS_REPLY_STRING &&
            absl::string_view((*reply)->str, (*reply)->len) !=
                "another-holder") {
          ++left;
        }
      }
      const double after_s = (support::MonoNanos() - abandoned_ns) * 1e-9;
      if (left == 0) {
        Say(absl::StrFormat(
            "every lock of the abandoned keeper expired %.2f s after it "
            "stopped (ttl %s)",
            after_s, absl::FormatDuration(keeper_->options().ttl)));
        return;
      }
      if (after_s > limit_s) {
        Say(absl::StrFormat("%d locks still held %.1f s after abandoning", left,
                            after_s));
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  static double PerRenewal(double cpu_s, std::uint64_t renewals) {
    return renewals > 0 ? cpu_s * 1e6 / static_cast<double>(renewals) : 0;
  }
  static double Share(double part, double whole) {
    return whole > 0 ? 100 * part / whole : 0;
  }
  pid_t redis_pid() const { return server_ ? server_->pid() : 0; }
  void Say(const std::string& line) const {
    if (!config_.json) std::printf("%s\n", line.c_str());
  }
  static int Fail(const absl::Status& status) {
    std::fprintf(stderr, "lease_keeper: %s\n", status.ToString().c_str());
    return 1;
  }

  const Config config_;
  std::unique_ptr<lease::RedisServer> server_;
  std::unique_ptr<lease::LeaseKeeper> keeper_;
  std::atomic<int> lost_shown_{0};
  double acquire_s_ = 0;
  double peak_renewals_ = 0;  // renewals in the busiest second, a second
};

}  // namespace

int main(int argc, char** argv) {
  Config config;
  support::Flags flags(
      "Holds Redis locks and renews each on a timing wheel every ttl/3; "
      "prints a live line (examples/lease/lease_keeper.h)");
  flags.Add("redis", &config.redis,
            "HOST:PORT of a running Redis; empty: start a redis-server here");
  flags.Add("locks", &config.locks, "locks to hold");
  flags.Add("ttl_ms", &config.ttl_ms, "each lock's lease in ms");
  flags.Add("seconds", &config.seconds, "how long to hold them");
  flags.Add("batch", &config.batch, "renewals per pipelined round trip");
  flags.Add("tick_ms", &config.tick_ms, "the wheel's tick in ms");
  flags.Add("scenario", &config.scenario,
            "a takeover halfway, and an abandoned keeper at the end");
  flags.Add("json", &config.json, "print one JSON result line only");
  flags.Parse(argc, argv);
  return Demo(config).Run();
}
