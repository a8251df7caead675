// idle_client: opens a population of keep-alive connections to idle_server
// and records when the server closes each. Every connection sends a request
// and reads the answer; --active of them go on sending one every
// --period_ms for --active_s (the server must keep those open), then all
// go quiet and wait for the server to close them. Connections come from
// --addresses loopback source addresses (127.0.0.2 and up), so that a large
// population does not run out of ephemeral ports.
//
// A close's lateness is measured from the client's side: close seen minus
// the last request sent minus the timeout. The server saw that request
// later than it was sent and the close was sent earlier than seen, so a
// negative lateness here means the server closed early. Prints one JSON
// line; exits 1 if a connection was closed early, closed while active, or
// not closed within the timeout plus --grace_ms.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "asio/connect.hpp"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read.hpp"
#include "asio/steady_timer.hpp"
#include "asio/write.hpp"
#include "support/flags.h"
#include "support/json.h"

namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::tcp;

constexpr char kRequest[] = "GET / HTTP/1.1\r\nHost: idle\r\n\r\n";
// The server's answer ends with its two-byte body.
constexpr std::string_view kAnswerEnd = "\r\n\r\nok";

struct Config {
  std::string address = "127.0.0.1";
  int port = 8080;
  int connections = 1000;
  int active = 0;
  int period_ms = 100;
  int active_s = 2;
  int addresses = 4;
  int timeout_ms = 1000;
  int grace_ms = 5000;
  int connect_window = 256;  // connects in flight at once
};

struct Totals {
  int connected = 0, connect_failures = 0, closed = 0, closed_early = 0,
      closed_while_active = 0;
  std::vector<std::int64_t> late_us;
};

class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(asio::io_context& io, const Config& config, Totals& totals, int index,
       bool active, std::function<void()> on_connected)
      : io_(io), config_(config), totals_(totals), index_(index),
        active_(active), socket_(io), timer_(io),
        on_connected_(std::move(on_connected)) {}

  void Connect() {
    asio::error_code ec;
    const tcp::endpoint server(asio::ip::make_address(config_.address),
                               static_cast<unsigned short>(config_.port));
    socket_.open(tcp::v4(), ec);
    if (!ec && config_.addresses > 1) {
      const auto source = asio::ip::make_address_v4(
          0x7f000002u + static_cast<std::uint32_t>(index_ % config_.addresses));
      socket_.set_option(tcp::socket::reuse_address(true), ec);
      socket_.bind(tcp::endpoint(source, 0), ec);
    }
    if (ec) {
      Failed();
      return;
    }
    socket_.async_connect(server, [self = shared_from_this()](
                                      const asio::error_code& ec) {
      if (ec) {
        self->Failed();
        return;
      }
      ++self->totals_.connected;
      self->started_ = Clock::now();
      self->on_connected_();
      self->Send();
    });
  }

 private:
  void Failed() {
    ++totals_.connect_failures;
    on_connected_();
  }

  void Send() {
    last_sent_ = Clock::now();
    asio::async_write(socket_, asio::buffer(kRequest, sizeof(kRequest) - 1),
                      [self = shared_from_this()](const asio::error_code& ec,
                                                  std::size_t) {
                        if (ec) {
                          self->Closed(/*answered=*/false);
                          return;
                        }
                        self->got_ = 0;
                        self->ReadAnswer();
                      });
  }

  void ReadAnswer() {
    socket_.async_read_some(
        asio::buffer(buf_.data() + got_, buf_.size() - got_),
        [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
          if (ec) {
            self->Closed(/*answered=*/false);
            return;
          }
          self->got_ += n;
          std::string_view seen(self->buf_.data(), self->got_);
          if (seen.size() < kAnswerEnd.size() ||
              seen.substr(seen.size() - kAnswerEnd.size()) != kAnswerEnd) {
            if (self->got_ == self->buf_.size()) self->got_ = 0;
            self->ReadAnswer();
            return;
          }
          self->Answered();
        });
  }

  // An active connection sends again after its period (a close meanwhile
  // shows as the send's or the answer's error: closed while active); a
  // quiet one waits for the server to close it.
  void Answered() {
    if (active_ && Clock::now() - started_ <
                       std::chrono::seconds(config_.active_s)) {
      timer_.expires_after(std::chrono::milliseconds(config_.period_ms));
      timer_.async_wait(
          [self = shared_from_this()](const asio::error_code& ec) {
            if (!ec && !self->done_) self->Send();
          });
      return;
    }
    WaitForClose();
  }

  void WaitForClose() {
    socket_.async_read_some(
        asio::buffer(buf_),
        [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
          if (!ec) {  // unexpected bytes: keep waiting
            self->WaitForClose();
            return;
          }
          self->Closed(/*answered=*/true);
        });
  }

  void Closed(bool answered) {
    if (done_) return;
    done_ = true;
    timer_.cancel();
    ++totals_.closed;
    if (!answered) ++totals_.closed_while_active;
    const auto late = Clock::now() - last_sent_ -
                      std::chrono::milliseconds(config_.timeout_ms);
    const std::int64_t us =
        std::chrono::duration_cast<std::chrono::microseconds>(late).count();
    if (us < 0) ++totals_.closed_early;
    totals_.late_us.push_back(us);
    asio::error_code ignored;
    socket_.close(ignored);
  }

  asio::io_context& io_;
  const Config& config_;
  Totals& totals_;
  const int index_;
  const bool active_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::function<void()> on_connected_;
  std::array<char, 512> buf_;
  std::size_t got_ = 0;
  bool done_ = false;
  Clock::time_point started_, last_sent_;
};

std::int64_t Percentile(std::vector<std::int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  support::Flags flags("idle_client: a keep-alive population idle_server "
                       "closes; reports each close's lateness");
  flags.Add("address", &config.address, "server address");
  flags.Add("port", &config.port, "server port");
  flags.Add("connections", &config.connections, "connections in all");
  flags.Add("active", &config.active, "of them, how many keep sending");
  flags.Add("period_ms", &config.period_ms, "an active one's request period");
  flags.Add("active_s", &config.active_s, "how long active ones keep sending");
  flags.Add("addresses", &config.addresses, "loopback source addresses");
  flags.Add("timeout_ms", &config.timeout_ms, "the server's idle timeout");
  flags.Add("grace_ms", &config.grace_ms,
            "how long past the timeout to wait for the last close");
  flags.Parse(argc, argv);

  // Each connection is a descriptor: take the hard limit.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  asio::io_context io(1);
  Totals totals;
  std::vector<std::shared_ptr<Conn>> conns;
  int next = 0, in_flight = 0;
  std::function<void()> launch = [&] {
    while (in_flight < config.connect_window && next < config.connections) {
      auto c = std::make_shared<Conn>(io, config, totals, next,
                                      next < config.active, [&] {
                                        --in_flight;
                                        launch();
                                      });
      ++next;
      ++in_flight;
      conns.push_back(c);
      c->Connect();
    }
  };
  launch();
  const auto start = Clock::now();
  // Long enough for every connection to be made, stay active, go quiet and
  // be closed; ends sooner once all are closed.
  const auto end = start + std::chrono::seconds(config.active_s) +
                   std::chrono::milliseconds(config.timeout_ms + config.grace_ms) +
                   std::chrono::seconds(30);
  while (Clock::now() < end &&
         totals.closed + totals.connect_failures < config.connections) {
    io.run_for(std::chrono::milliseconds(50));
    if (io.stopped()) io.restart();
    if (next == config.connections && in_flight == 0 &&
        Clock::now() - start > std::chrono::seconds(config.active_s) +
                                   std::chrono::milliseconds(
                                       config.timeout_ms + config.grace_ms) +
                                   std::chrono::seconds(10)) {
      break;
    }
  }
  const int not_closed = totals.connected - totals.closed;
  support::Json j;
  j.Add("connections", config.connections)
      .Add("connected", totals.connected)
      .Add("connect_failures", totals.connect_failures)
      .Add("closed", totals.closed)
      .Add("not_closed", not_closed)
      .Add("closed_early", totals.closed_early)
      .Add("closed_while_active", totals.closed_while_active)
      .Add("late_us_p50", Percentile(totals.late_us, 0.5))
      .Add("late_us_p99", Percentile(totals.late_us, 0.99))
      .Add("late_us_max", totals.late_us.empty()
                              ? std::int64_t{0}
                              : *std::max_element(totals.late_us.begin(),
                                                  totals.late_us.end()));
  std::printf("%s\n", j.str().c_str());
  const bool ok = totals.connect_failures == 0 && not_closed == 0 &&
                  totals.closed_early == 0 && totals.closed_while_active == 0;
  return ok ? 0 : 1;
}
