// idle_server: HTTP/1.1 keep-alive on N io threads, each connection closed
// once idle for --timeout_ms, by the timer backend --backend names (see
// server.h). Prints "listening on PORT", then a live line a second on
// stderr (--live), a JSON snapshot line on stdout on SIGUSR1, and one at
// the end (after --seconds, or on SIGINT/SIGTERM).
//
//   idle_server --backend=local --threads=2 --timeout_ms=10000 --live
//   wrk -c64 -t2 -d10s http://127.0.0.1:8080/
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "cycles.h"
#include "server.h"
#include "support/clock.h"
#include "support/flags.h"
#include "support/json.h"
#include "support/memory.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_snapshot{false};

extern "C" void OnStop(int) { g_stop.store(true); }
extern "C" void OnSnapshot(int) { g_snapshot.store(true); }

std::int64_t Percentile(std::vector<std::int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(
      v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

std::string Snapshot(const idle_server::Server& server, const char* what,
                     double cycles_per_ns, std::size_t timer_bytes) {
  const idle_server::ServerCounts c = server.Counts();
  const std::vector<std::int64_t> late = server.Lateness();
  support::Json j;
  j.Add("what", what)
      .Add("backend", idle_server::BackendName(server.options().backend))
      .Add("io_threads", server.options().io_threads)
      .Add("timeout_ms", absl::ToInt64Milliseconds(server.options().idle_timeout))
      .Add("tick_ms", absl::ToDoubleMilliseconds(server.options().tick))
      .Add("accepted", c.accepted)
      .Add("open", c.open)
      .Add("requests", c.requests)
      .Add("idle_closes", c.idle_closes)
      .Add("peer_closes", c.peer_closes)
      .Add("early_closes", c.early_closes)
      .Add("double_closes", c.double_closes)
      .Add("late_us_p50", Percentile(late, 0.5))
      .Add("late_us_p99", Percentile(late, 0.99))
      .Add("late_us_max", late.empty() ? std::int64_t{0}
                                       : *std::max_element(late.begin(),
                                                           late.end()))
      .Add("late_us_min", late.empty() ? std::int64_t{0}
                                       : *std::min_element(late.begin(),
                                                           late.end()))
      .Add("timer_ops", c.timer_ops)
      .Add("timer_op_ns",
           c.timer_ops == 0 ? 0.0
                            : static_cast<double>(c.timer_op_cycles) /
                                  cycles_per_ns /
                                  static_cast<double>(c.timer_ops))
      .Add("timer_ops_preempted", c.timer_ops_preempted)
      .Add("timer_bytes", static_cast<std::uint64_t>(timer_bytes))
      .Add("rss_bytes", support::RssBytes())
      .Add("cpu_s", support::ProcessCpuSeconds());
  return j.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "local";
  std::string address = "127.0.0.1";
  int port = 8080, threads = 2, seconds = 0;
  double timeout_ms = 10000, tick_ms = 10;
  bool live = false;
  support::Flags flags(
      "idle_server: HTTP/1.1 keep-alive, idle connections closed on their own "
      "io thread");
  flags.Add("backend", &backend, "idle timers: local, local-kept, shared, asio, asio-kept or none");
  flags.Add("address", &address, "address to listen on");
  flags.Add("port", &port, "port to listen on (0: any free one)");
  flags.Add("threads", &threads, "io threads (an io_context each)");
  flags.Add("timeout_ms", &timeout_ms, "idle timeout");
  flags.Add("tick_ms", &tick_ms, "the wheels' tick (local, shared)");
  flags.Add("seconds", &seconds, "run this long (0: until SIGINT/SIGTERM)");
  flags.Add("live", &live, "a live line a second on stderr");
  flags.Parse(argc, argv);

  idle_server::ServerOptions options;
  if (!idle_server::ParseBackend(backend, &options.backend)) {
    std::fprintf(stderr, "idle_server: unknown --backend=%s\n", backend.c_str());
    return 2;
  }
  if (threads < 1 || timeout_ms <= 0 || tick_ms <= 0) {
    std::fprintf(stderr, "idle_server: --threads, --timeout_ms and --tick_ms "
                         "must be positive\n");
    return 2;
  }
  options.address = address;
  options.port = port;
  options.io_threads = threads;
  options.idle_timeout = absl::Milliseconds(timeout_ms);
  options.tick = absl::Milliseconds(tick_ms);

  // Each connection is a descriptor: take the hard limit.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::signal(SIGINT, OnStop);
  std::signal(SIGTERM, OnStop);
  std::signal(SIGUSR1, OnSnapshot);
  const double cycles_per_ns = idle_server::CyclesPerSecond() / 1e9;

  idle_server::Server server(options);
  if (absl::Status s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "idle_server: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("listening on %d\n", server.port());
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  auto next_live = start + std::chrono::seconds(1);
  std::uint64_t last_requests = 0;
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto now = std::chrono::steady_clock::now();
    if (seconds > 0 && now - start >= std::chrono::seconds(seconds)) break;
    if (g_snapshot.exchange(false)) {
      std::printf("%s\n", Snapshot(server, "snapshot", cycles_per_ns,
                                   server.TimerBytes())
                              .c_str());
      std::fflush(stdout);
    }
    if (live && now >= next_live) {
      next_live += std::chrono::seconds(1);
      const idle_server::ServerCounts c = server.Counts();
      const std::vector<std::int64_t> late = server.Lateness();
      std::fprintf(stderr,
                   "%s: %llu open, %llu req/s, %llu idle closes (p50 %lld us, "
                   "p99 %lld us late, %llu early), %llu by clients, rss %.1f "
                   "MiB\n",
                   backend.c_str(), (unsigned long long)c.open,
                   (unsigned long long)(c.requests - last_requests),
                   (unsigned long long)c.idle_closes,
                   (long long)Percentile(late, 0.5),
                   (long long)Percentile(late, 0.99),
                   (unsigned long long)c.early_closes,
                   (unsigned long long)c.peer_closes,
                   static_cast<double>(support::RssBytes()) / (1 << 20));
      last_requests = c.requests;
    }
  }
  std::printf("%s\n",
              Snapshot(server, "end", cycles_per_ns, server.TimerBytes()).c_str());
  std::fflush(stdout);
  const idle_server::ServerCounts c = server.Counts();
  server.Stop();
  return c.early_closes == 0 && c.double_closes == 0 ? 0 : 1;
}
