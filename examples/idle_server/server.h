// idle_server: an HTTP/1.1 keep-alive server on N io threads (an
// asio::io_context each) that closes a connection once it has been idle
// for the timeout, on the connection's own thread. The idle timers come
// from one of six backends, chosen by flag, so that one server measures
// them side by side:
//   local       a timingwheel::AsioLocalWheel per io thread (no thread
//               hop), each request a Move;
//   local-kept  the same wheel reading a deadline each connection keeps
//               (LocalWheel's Advance with `kept`): each request a store
//               into the connection;
//   shared      one timingwheel::TimingWheel, its fired timers posted back
//               to the connection's io thread (PostToExecutorOf);
//   asio        an asio::steady_timer per connection, pushed later on every
//               request (expires_after + async_wait), as Asio users write it;
//   asio-kept   a steady_timer per connection that, like local-kept, reads
//               the connection's deadline when it expires and waits again
//               if that moved: the same idea written by hand;
//   none        no idle timeout: the baseline.
#ifndef TIMINGWHEEL_EXAMPLES_IDLE_SERVER_SERVER_H_
#define TIMINGWHEEL_EXAMPLES_IDLE_SERVER_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/steady_timer.hpp"

namespace idle_server {

enum class Backend { kLocal, kLocalKept, kShared, kAsio, kAsioKept, kNone };

// Parses "local", "local-kept", "shared", "asio", "asio-kept" or "none".
bool ParseBackend(const std::string& name, Backend* backend);
const char* BackendName(Backend backend);

struct ServerOptions {
  std::string address = "127.0.0.1";
  int port = 8080;  // 0: any free port (see Server::port())
  int io_threads = 2;
  Backend backend = Backend::kLocal;
  absl::Duration idle_timeout = absl::Seconds(10);
  absl::Duration tick = absl::Milliseconds(10);  // the wheels' interval
};

// What the server has done, summed over its io threads (relaxed reads of
// counters each io thread alone writes).
struct ServerCounts {
  std::uint64_t accepted = 0;
  std::uint64_t open = 0;  // connections open now
  std::uint64_t requests = 0;
  std::uint64_t idle_closes = 0;      // closed by the idle timeout
  std::uint64_t peer_closes = 0;      // closed by the client, or an error
  std::uint64_t early_closes = 0;     // idle closes before the timeout: a bug
  std::uint64_t double_closes = 0;    // a close of a closed connection: a bug
  std::uint64_t timer_ops = 0;        // timer calls made on the io threads
  std::uint64_t timer_op_cycles = 0;  // the cycle counter over those calls
  std::uint64_t timer_ops_preempted = 0;  // calls left out: descheduled
};

class IoThread;
struct SharedWheel;

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds, listens and starts the io threads (and the shared wheel).
  absl::Status Start();
  // Stops accepting, closes every connection and joins the threads.
  void Stop();

  int port() const { return port_; }
  const ServerOptions& options() const { return options_; }
  ServerCounts Counts() const;
  // Idle-close lateness samples so far: close time minus last request
  // minus the timeout, in microseconds (negative: early), all io threads.
  std::vector<std::int64_t> Lateness() const;
  // Bytes the timers hold: the wheels' own count (local, shared), or the
  // steady_timers' objects (asio); RSS differences say the rest.
  std::size_t TimerBytes() const;

 private:
  void Accept();

  const ServerOptions options_;
  int port_ = 0;
  std::vector<std::unique_ptr<IoThread>> io_;
  // The accept thread's context, and what lives on it. Destroyed before
  // the io threads': a pending accept holds a socket of an io thread's
  // io_context.
  std::unique_ptr<asio::io_context> accept_io_;
  std::unique_ptr<asio::steady_timer> accept_retry_;
  std::unique_ptr<asio::ip::tcp::acceptor> acceptor_;
  std::thread accept_thread_;
  std::size_t next_io_ = 0;
  std::unique_ptr<SharedWheel> shared_;  // the shared backend's wheel
};

}  // namespace idle_server

#endif  // TIMINGWHEEL_EXAMPLES_IDLE_SERVER_SERVER_H_
