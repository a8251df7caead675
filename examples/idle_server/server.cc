#include "server.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "asio/executor_work_guard.hpp"
#include "asio/post.hpp"
#include "asio/read.hpp"
#include "asio/steady_timer.hpp"
#include "asio/write.hpp"
#include "cycles.h"
#include "timingwheel/asio.h"
#include "timingwheel/timing_wheel.h"

namespace idle_server {

using Clock = std::chrono::steady_clock;
using asio::ip::tcp;

bool ParseBackend(const std::string& name, Backend* backend) {
  for (Backend b : {Backend::kLocal, Backend::kLocalKept, Backend::kShared,
                    Backend::kAsio, Backend::kAsioKept, Backend::kNone}) {
    if (name == BackendName(b)) {
      *backend = b;
      return true;
    }
  }
  return false;
}

const char* BackendName(Backend backend) {
  switch (backend) {
    case Backend::kLocal:
      return "local";
    case Backend::kLocalKept:
      return "local-kept";
    case Backend::kShared:
      return "shared";
    case Backend::kAsio:
      return "asio";
    case Backend::kAsioKept:
      return "asio-kept";
    case Backend::kNone:
      return "none";
  }
  return "?";
}

// The shared backend's one wheel: key a connection id, value the index of
// the io thread it lives on.
struct SharedWheel {
  std::unique_ptr<timingwheel::TimingWheel<std::uint64_t, std::uint32_t>> wheel;
};

namespace {

constexpr std::string_view kResponse =
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: "
    "text/plain\r\n\r\nok";

}  // namespace

class Connection;

// An io thread's idle timers: armed when a connection is accepted, pushed
// later on each request, cancelled when the client closes first.
class TimerBackend {
 public:
  virtual ~TimerBackend() = default;
  virtual void Arm(Connection& c) = 0;
  virtual void Touch(Connection& c) = 0;
  virtual void Cancel(Connection& c) = 0;
  virtual std::size_t Bytes() const = 0;
};

// One io_context and the thread that runs it, its connections and timers.
// Everything but the atomic counters and the lateness samples is touched
// on that thread only.
class IoThread {
 public:
  IoThread(std::uint32_t index, const ServerOptions& options)
      : index_(index), options_(options) {}

  void SetTimers(std::unique_ptr<TimerBackend> timers) {
    timers_ = std::move(timers);
  }
  void Start() {
    thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  // Closes every connection on the thread, then ends it.
  void Stop() {
    asio::post(io, [this] {
      std::vector<std::shared_ptr<Connection>> all;
      for (auto& [id, c] : conns_) all.push_back(c);
      for (auto& c : all) Shutdown(*c);
      io.stop();
    });
    if (thread_.joinable()) thread_.join();
  }

  void Adopt(tcp::socket socket);
  void OnSharedFire(std::uint64_t id);
  // Never inlined: its frame is how a profile (bench/timer_samples.py)
  // tells a close's work from the timers' that called it.
  [[gnu::noinline]] void IdleClose(Connection& c);
  void PeerClose(Connection& c);
  TimerBackend& timers() { return *timers_; }
  std::uint32_t index() const { return index_; }
  absl::Duration idle_timeout() const { return options_.idle_timeout; }

  // Cycles spent in timer calls on this thread. A call that took more than
  // kPreemptedCycles was descheduled on the way (two cores, shared): its
  // time is the machine's, not the timer's, and is left out (and counted).
  static constexpr std::uint64_t kPreemptedCycles = 200'000;
  template <typename F>
  void TimeTimerOp(F&& f) {
    const std::uint64_t start = Cycles();
    f();
    const std::uint64_t spent = Cycles() - start;
    if (spent >= kPreemptedCycles) {
      preempted_ops.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    op_cycles.fetch_add(spent, std::memory_order_relaxed);
    ops.fetch_add(1, std::memory_order_relaxed);
  }

  std::vector<std::int64_t> Lateness() const {
    absl::MutexLock l(&lateness_mu_);
    return lateness_;
  }
  // The timers' bytes, read on the io thread (which owns them).
  std::size_t TimerBytes() {
    std::promise<std::size_t> bytes;
    asio::post(io, [&] { bytes.set_value(timers_->Bytes()); });
    return bytes.get_future().get();
  }

  asio::io_context io{1};
  std::atomic<std::uint64_t> accepted{0}, open{0}, requests{0}, idle_closes{0},
      peer_closes{0}, early_closes{0}, double_closes{0}, ops{0}, op_cycles{0},
      preempted_ops{0};

 private:
  void Shutdown(Connection& c);
  void Forget(Connection& c);

  const std::uint32_t index_;
  const ServerOptions& options_;
  std::thread thread_;
  std::unique_ptr<TimerBackend> timers_;
  std::uint64_t next_id_ = 0;
  absl::flat_hash_map<std::uint64_t, std::shared_ptr<Connection>> conns_;
  mutable absl::Mutex lateness_mu_;
  std::vector<std::int64_t> lateness_ ABSL_GUARDED_BY(lateness_mu_);
};

// A keep-alive connection: reads requests, answers each, and re-arms its
// idle timer on each.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(IoThread& home, tcp::socket socket, std::uint64_t id)
      : id(id), home_(home), socket_(std::move(socket)) {}

  void Start() {
    last_request = Clock::now();
    home_.TimeTimerOp([&] { home_.timers().Arm(*this); });
    Read();
  }
  void Close() {
    asio::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  const std::uint64_t id;
  Clock::time_point last_request;
  // The kept backends' deadline: each request moves it, and the timer
  // reads it when it expires.
  Clock::time_point idle_until;
  bool closed = false;
  // The asio backend's, allocated by it alone, so that the other backends'
  // connections do not carry its storage (8 bytes of pointer in all).
  std::unique_ptr<asio::steady_timer> timer;

 private:
  void Read() {
    socket_.async_read_some(
        asio::buffer(buf_.data() + used_, buf_.size() - used_),
        [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
          self->OnRead(ec, n);
        });
  }

  void OnRead(const asio::error_code& ec, std::size_t n) {
    if (closed) return;
    if (ec || n == 0) {
      home_.PeerClose(*this);
      return;
    }
    used_ += n;
    int complete = 0;
    std::string_view data(buf_.data(), used_);
    std::size_t end;
    while ((end = data.find("\r\n\r\n")) != std::string_view::npos) {
      ++complete;
      data.remove_prefix(end + 4);
    }
    std::memmove(buf_.data(), data.data(), data.size());
    used_ = data.size();
    if (complete == 0) {
      if (used_ == buf_.size()) {  // a request larger than we take
        home_.PeerClose(*this);
        return;
      }
      Read();
      return;
    }
    home_.requests.fetch_add(complete, std::memory_order_relaxed);
    last_request = Clock::now();
    home_.TimeTimerOp([&] { home_.timers().Touch(*this); });
    out_.clear();
    for (int i = 0; i < complete; ++i) out_.append(kResponse);
    asio::async_write(
        socket_, asio::buffer(out_),
        [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
          if (self->closed) return;
          if (ec) {
            self->home_.PeerClose(*self);
            return;
          }
          self->Read();
        });
  }

  IoThread& home_;
  tcp::socket socket_;
  std::array<char, 4096> buf_;
  std::size_t used_ = 0;
  std::string out_;
};

void IoThread::Adopt(tcp::socket socket) {
  socket.set_option(tcp::no_delay(true));
  // Ids carry the io thread's index, so the shared wheel's fired id names
  // its thread without a lookup.
  const std::uint64_t id = (next_id_++ << 8) | index_;
  auto c = std::make_shared<Connection>(*this, std::move(socket), id);
  conns_.emplace(id, c);
  accepted.fetch_add(1, std::memory_order_relaxed);
  open.fetch_add(1, std::memory_order_relaxed);
  c->Start();
}

void IoThread::Forget(Connection& c) {
  c.closed = true;
  c.Close();
  open.fetch_sub(1, std::memory_order_relaxed);
  conns_.erase(c.id);  // may destroy c: last
}

void IoThread::IdleClose(Connection& c) {
  if (c.closed) {
    double_closes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto late =
      Clock::now() -
      (c.last_request + absl::ToChronoNanoseconds(options_.idle_timeout));
  const std::int64_t late_us =
      std::chrono::duration_cast<std::chrono::microseconds>(late).count();
  if (late < Clock::duration::zero()) {
    early_closes.fetch_add(1, std::memory_order_relaxed);
  }
  {
    absl::MutexLock l(&lateness_mu_);
    lateness_.push_back(late_us);
  }
  idle_closes.fetch_add(1, std::memory_order_relaxed);
  Forget(c);
}

void IoThread::PeerClose(Connection& c) {
  if (c.closed) {
    double_closes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  TimeTimerOp([&] { timers_->Cancel(c); });
  peer_closes.fetch_add(1, std::memory_order_relaxed);
  Forget(c);
}

void IoThread::Shutdown(Connection& c) {
  timers_->Cancel(c);
  Forget(c);
}

// The shared wheel fired `id`, and its close was posted here. The client
// may have sent a request after the wheel fired and before this ran (its
// move found no timer): then the connection is not idle, and is armed
// again for the rest of its timeout.
void IoThread::OnSharedFire(std::uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;  // closed by the client meanwhile
  Connection& c = *it->second;
  const Clock::time_point due =
      c.last_request + absl::ToChronoNanoseconds(options_.idle_timeout);
  if (Clock::now() < due) {
    TimeTimerOp([&] { timers_->Arm(c); });
    return;
  }
  IdleClose(c);
}

namespace {

// A LocalWheel per io thread: what both wheel backends share.
class LocalWheelBackend : public TimerBackend {
 public:
  using Wheel = timingwheel::AsioLocalWheel<std::uint64_t, Connection*>;
  LocalWheelBackend(IoThread& home, absl::Duration timeout, absl::Duration tick,
                    Wheel::Kept kept)
      : timeout_(timeout) {
    wheel_ = *Wheel::Create(
        home.io.get_executor(), {.interval = tick},
        [&home](std::uint64_t, Connection* c) { home.IdleClose(*c); },
        std::move(kept));
  }
  void Arm(Connection& c) override {
    wheel_->Set(c.id, &c, timeout_).IgnoreError();
  }
  void Cancel(Connection& c) override { wheel_->Remove(c.id); }
  std::size_t Bytes() const override { return wheel_->wheel().MemoryBytes(); }

 protected:
  const absl::Duration timeout_;
  std::unique_ptr<Wheel> wheel_;
};

class LocalBackend : public LocalWheelBackend {
 public:
  LocalBackend(IoThread& home, absl::Duration timeout, absl::Duration tick)
      : LocalWheelBackend(home, timeout, tick, nullptr) {}
  void Touch(Connection& c) override {
    wheel_->Move(c.id, timeout_).IgnoreError();
  }
};

// The deadline lives in the connection, which the request has just brought
// into cache: a Touch is a clock read and a store, and the wheel reads the
// deadline when the timer comes due (and files it again if it moved).
class LocalKeptBackend : public LocalWheelBackend {
 public:
  LocalKeptBackend(IoThread& home, absl::Duration timeout, absl::Duration tick)
      : LocalWheelBackend(home, timeout, tick,
                          [](Connection* const& c) { return c->idle_until; }),
        timeout_chrono_(absl::ToChronoNanoseconds(timeout)) {}
  void Arm(Connection& c) override {
    c.idle_until = Clock::time_point::min();
    LocalWheelBackend::Arm(c);
  }
  void Touch(Connection& c) override {
    c.idle_until = Clock::now() + timeout_chrono_;
  }

 private:
  const std::chrono::nanoseconds timeout_chrono_;
};

class SharedBackend : public TimerBackend {
 public:
  SharedBackend(SharedWheel& shared, std::uint32_t io, absl::Duration timeout)
      : shared_(shared), io_(io), timeout_(timeout) {}
  void Arm(Connection& c) override {
    // The remaining time after a posted fire that found the connection
    // busy, else the whole timeout.
    const auto due =
        c.last_request + absl::ToChronoNanoseconds(timeout_) - Clock::now();
    const absl::Duration delay =
        std::max(absl::FromChrono(due), absl::Nanoseconds(1));
    shared_.wheel->SetTimer(c.id, io_, delay).IgnoreError();
  }
  void Touch(Connection& c) override {
    shared_.wheel->MoveTimer(c.id, timeout_).IgnoreError();
  }
  void Cancel(Connection& c) override {
    shared_.wheel->RemoveTimer(c.id).IgnoreError();
  }
  // The wheel is shared: io thread 0 reports it.
  std::size_t Bytes() const override {
    return io_ == 0 ? shared_.wheel->stats().memory_bytes : 0;
  }

 private:
  SharedWheel& shared_;
  const std::uint32_t io_;
  const absl::Duration timeout_;
};

// A steady_timer per connection: what both Asio backends share.
class SteadyTimerBackend : public TimerBackend {
 public:
  SteadyTimerBackend(IoThread& home, absl::Duration timeout)
      : home_(home), timeout_(absl::ToChronoNanoseconds(timeout)) {}
  void Cancel(Connection& c) override {
    if (c.timer != nullptr) c.timer->cancel();
  }
  // The timer objects of the open connections; the wait each has queued
  // (an operation Asio allocates, holding the handler) is in the RSS.
  std::size_t Bytes() const override {
    return home_.open.load(std::memory_order_relaxed) *
           sizeof(asio::steady_timer);
  }

 protected:
  void NewTimer(Connection& c) {
    c.timer = std::make_unique<asio::steady_timer>(home_.io);
  }

  IoThread& home_;
  const std::chrono::nanoseconds timeout_;
};

class AsioBackend : public SteadyTimerBackend {
 public:
  using SteadyTimerBackend::SteadyTimerBackend;
  void Arm(Connection& c) override {
    NewTimer(c);
    Touch(c);
  }
  // Moving the expiry cancels the wait under way (its handler runs with
  // operation_aborted) and a new wait is queued: what Asio's own examples
  // do on each read.
  void Touch(Connection& c) override {
    c.timer->expires_after(timeout_);
    c.timer->async_wait(
        [self = c.shared_from_this(), this](const asio::error_code& ec) {
          if (ec || self->closed) return;
          home_.IdleClose(*self);
        });
  }
};

// LocalKeptBackend's idea on a steady_timer, by hand: a request stores the
// deadline; the wait, when it ends, waits again for the rest if the
// deadline moved.
class AsioKeptBackend : public SteadyTimerBackend {
 public:
  using SteadyTimerBackend::SteadyTimerBackend;
  void Arm(Connection& c) override {
    NewTimer(c);
    c.idle_until = Clock::now() + timeout_;
    Wait(c);
  }
  void Touch(Connection& c) override { c.idle_until = Clock::now() + timeout_; }

 private:
  void Wait(Connection& c) {
    c.timer->expires_at(c.idle_until);
    c.timer->async_wait(
        [self = c.shared_from_this(), this](const asio::error_code& ec) {
          if (ec || self->closed) return;
          if (Clock::now() < self->idle_until) {
            Wait(*self);
            return;
          }
          home_.IdleClose(*self);
        });
  }
};

class NoBackend : public TimerBackend {
 public:
  void Arm(Connection&) override {}
  void Touch(Connection&) override {}
  void Cancel(Connection&) override {}
  std::size_t Bytes() const override { return 0; }
};

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {}

Server::~Server() { Stop(); }

absl::Status Server::Start() {
  for (int i = 0; i < options_.io_threads; ++i) {
    io_.push_back(std::make_unique<IoThread>(i, options_));
  }
  if (options_.backend == Backend::kShared) {
    shared_ = std::make_unique<SharedWheel>();
    timingwheel::Options wheel_options;
    wheel_options.interval = options_.tick;
    auto wheel = timingwheel::TimingWheel<std::uint64_t, std::uint32_t>::Create(
        wheel_options,
        timingwheel::PostToExecutorOf<std::uint64_t, std::uint32_t>(
            [this](const std::uint64_t&, const std::uint32_t& io) {
              return io_[io]->io.get_executor();
            },
            [this](std::uint64_t id, std::uint32_t io) {
              io_[io]->OnSharedFire(id);
            }));
    if (!wheel.ok()) return wheel.status();
    shared_->wheel = *std::move(wheel);
  }
  for (auto& io : io_) {
    std::unique_ptr<TimerBackend> timers;
    switch (options_.backend) {
      case Backend::kLocal:
        timers = std::make_unique<LocalBackend>(*io, options_.idle_timeout,
                                                options_.tick);
        break;
      case Backend::kLocalKept:
        timers = std::make_unique<LocalKeptBackend>(*io, options_.idle_timeout,
                                                    options_.tick);
        break;
      case Backend::kAsioKept:
        timers = std::make_unique<AsioKeptBackend>(*io, options_.idle_timeout);
        break;
      case Backend::kShared:
        timers = std::make_unique<SharedBackend>(*shared_, io->index(),
                                                 options_.idle_timeout);
        break;
      case Backend::kAsio:
        timers = std::make_unique<AsioBackend>(*io, options_.idle_timeout);
        break;
      case Backend::kNone:
        timers = std::make_unique<NoBackend>();
        break;
    }
    io->SetTimers(std::move(timers));
  }
  try {
    tcp::endpoint endpoint(asio::ip::make_address(options_.address),
                           static_cast<unsigned short>(options_.port));
    accept_io_ = std::make_unique<asio::io_context>(1);
    accept_retry_ = std::make_unique<asio::steady_timer>(*accept_io_);
    acceptor_ = std::make_unique<tcp::acceptor>(*accept_io_);
    acceptor_->open(endpoint.protocol());
    acceptor_->set_option(tcp::acceptor::reuse_address(true));
    acceptor_->bind(endpoint);
    acceptor_->listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_->local_endpoint().port();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ",
                                               options_.address, ":",
                                               options_.port, ": ", e.what()));
  }
  for (auto& io : io_) io->Start();
  Accept();
  accept_thread_ = std::thread([this] {
    auto guard = asio::make_work_guard(*accept_io_);
    accept_io_->run();
  });
  return absl::OkStatus();
}

// Round robin over the io threads: the accepted socket belongs to the
// chosen io_context, and is adopted on its thread.
void Server::Accept() {
  IoThread& target = *io_[next_io_++ % io_.size()];
  acceptor_->async_accept(
      target.io, [this, &target](const asio::error_code& ec, tcp::socket s) {
        if (ec == asio::error::operation_aborted) return;
        if (!ec) {
          asio::post(target.io, [&target, s = std::move(s)]() mutable {
            target.Adopt(std::move(s));
          });
          Accept();
          return;
        }
        // Out of descriptors, say: try again shortly rather than spin.
        accept_retry_->expires_after(std::chrono::milliseconds(10));
        accept_retry_->async_wait([this](const asio::error_code& e) {
          if (!e) Accept();
        });
      });
}

void Server::Stop() {
  if (acceptor_ != nullptr) {
    asio::post(*accept_io_, [this] {
      asio::error_code ignored;
      acceptor_->close(ignored);
      accept_io_->stop();
    });
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  // The accept side first: its pending accept (destroyed with its context)
  // holds a socket of an io thread's context. Then the io threads (their
  // connections remove their timers from the shared wheel as they close);
  // then the shared wheel, whose callbacks name io threads (what they post
  // then never runs); then the io threads' contexts.
  acceptor_.reset();
  accept_retry_.reset();
  accept_io_.reset();
  for (auto& io : io_) io->Stop();
  if (shared_ != nullptr) shared_->wheel.reset();
  io_.clear();
}

ServerCounts Server::Counts() const {
  ServerCounts s;
  for (const auto& io : io_) {
    auto get = [](const std::atomic<std::uint64_t>& a) {
      return a.load(std::memory_order_relaxed);
    };
    s.accepted += get(io->accepted);
    s.open += get(io->open);
    s.requests += get(io->requests);
    s.idle_closes += get(io->idle_closes);
    s.peer_closes += get(io->peer_closes);
    s.early_closes += get(io->early_closes);
    s.double_closes += get(io->double_closes);
    s.timer_ops += get(io->ops);
    s.timer_op_cycles += get(io->op_cycles);
    s.timer_ops_preempted += get(io->preempted_ops);
  }
  return s;
}

std::vector<std::int64_t> Server::Lateness() const {
  std::vector<std::int64_t> all;
  for (const auto& io : io_) {
    std::vector<std::int64_t> part = io->Lateness();
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::size_t Server::TimerBytes() const {
  std::size_t bytes = 0;
  for (const auto& io : io_) bytes += io->TimerBytes();
  return bytes;
}

}  // namespace idle_server
