// The idle timers of examples/idle_server without the server: what one
// request's "push my idle timeout later" costs an Asio io thread, all of it
// (the call, and the completions it causes that the io_context then runs),
// and what the timers of a connection population hold.
//
// One thread, one io_context, --conns connections each with an idle
// timeout of --timeout_s armed. Then --touches requests, each pushing a
// random connection's timeout later, with io_context::poll() every
// --turn requests as a loop turn would, all under the thread's CPU clock:
//   asio   a steady_timer per connection: expires_after (which cancels the
//          wait under way, whose handler then runs with operation_aborted)
//          and a new async_wait, as Asio's own examples do;
//   local  an AsioLocalWheel: Move, and the one steady_timer it keeps;
//   none   no timer: the loop turns alone, whose cost the others' include.
// Bytes: the RSS the armed population added, over --conns. Each run a
// fresh process (bench/asio_timers_run.sh alternates them).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "support/clock.h"
#include "support/flags.h"
#include "support/json.h"
#include "support/memory.h"
#include "support/rng.h"
#include "timingwheel/asio.h"

int main(int argc, char** argv) {
  std::string backend = "local";
  int conns = 16000, touches = 2'000'000, turn = 32, timeout_s = 30;
  support::Flags flags("asio_timers: an idle timeout pushed later per request");
  flags.Add("backend", &backend, "local, asio or none");
  flags.Add("conns", &conns, "connections, each with an idle timer");
  flags.Add("touches", &touches, "requests, each pushing one timer later");
  flags.Add("turn", &turn, "requests per loop turn (io_context::poll)");
  flags.Add("timeout_s", &timeout_s, "the idle timeout");
  flags.Parse(argc, argv);
  if (backend != "local" && backend != "asio" && backend != "none") {
    std::fprintf(stderr, "asio_timers: --backend is local, asio or none\n");
    return 2;
  }

  support::Rng rng(7);
  std::vector<std::uint32_t> which(static_cast<std::size_t>(touches));
  for (auto& w : which) w = static_cast<std::uint32_t>(rng.Below(conns));
  const auto timeout = std::chrono::seconds(timeout_s);
  asio::io_context io(1);
  std::uint64_t fired = 0;

  // A server's loop turn runs the reactor (epoll_wait) whatever its
  // timers do; one wait pending for an hour makes every backend's turns,
  // none's included, do that.
  asio::steady_timer server_sockets(io, std::chrono::hours(1));
  server_sockets.async_wait([](const asio::error_code&) {});

  const std::int64_t rss0 = support::RssBytes();
  std::vector<std::unique_ptr<asio::steady_timer>> timers;
  std::unique_ptr<timingwheel::AsioLocalWheel<std::uint32_t, std::uint32_t>>
      wheel;
  auto on_timeout = [&fired](const asio::error_code& ec) {
    if (!ec) ++fired;
  };
  if (backend == "asio") {
    timers.reserve(conns);
    for (int c = 0; c < conns; ++c) {
      timers.push_back(std::make_unique<asio::steady_timer>(io));
      timers.back()->expires_after(timeout);
      timers.back()->async_wait(on_timeout);
    }
  } else if (backend == "local") {
    wheel = *timingwheel::AsioLocalWheel<std::uint32_t, std::uint32_t>::Create(
        io.get_executor(), {.interval = absl::Milliseconds(10)},
        [&fired](std::uint32_t, std::uint32_t) { ++fired; });
    for (int c = 0; c < conns; ++c) {
      (void)wheel->Set(static_cast<std::uint32_t>(c), 0, timeout);
    }
  }
  io.poll();
  const std::int64_t rss1 = support::RssBytes();

  const double cpu0 = support::ThreadCpuSeconds();
  for (int i = 0; i < touches; ++i) {
    const std::uint32_t c = which[static_cast<std::size_t>(i)];
    if (backend == "asio") {
      timers[c]->expires_after(timeout);
      timers[c]->async_wait(on_timeout);
    } else if (wheel != nullptr) {
      (void)wheel->Move(c, timeout);
    }
    if (i % turn == turn - 1) io.poll();
  }
  io.poll();
  const double cpu = support::ThreadCpuSeconds() - cpu0;

  support::Json j;
  j.Add("backend", backend)
      .Add("conns", conns)
      .Add("touches", touches)
      .Add("turn", turn)
      .Add("ns_per_touch", cpu * 1e9 / touches)
      .Add("bytes_per_conn",
           static_cast<double>(rss1 - rss0) / static_cast<double>(conns))
      .Add("fired", fired);
  std::printf("%s\n", j.str().c_str());
  return fired == 0 ? 0 : 1;
}
