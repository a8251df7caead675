// timingwheel with Asio: a LocalWheel driven by an io_context, and a
// TimingWheel's fired timers run on an executor of the caller's choosing.
//
// Needs standalone Asio (Debian's libasio-dev, `#include <asio.hpp>`); the
// rest of the library does not.
//
// AsioLocalWheel: keyed timers on an io_context's own thread. One
// steady_timer waits for the wheel's next due time, so a million idle
// connections cost the io_context one timer, and pushing one later costs a
// LocalWheel::Move (no wait is cancelled or queued):
//
//   // On the io thread (one thread runs `io`):
//   auto idle = timingwheel::AsioLocalWheel<int, Conn*>::Create(
//       io.get_executor(), {.interval = absl::Milliseconds(10)},
//       [](int fd, Conn* conn) { conn->Close(); });
//   (*idle)->Set(fd, conn, absl::Seconds(30)).IgnoreError();  // accepted
//   (*idle)->Move(fd, absl::Seconds(30)).IgnoreError();       // each request
//   (*idle)->Remove(fd);                                      // closed first
//
// With a deadline the connection keeps (LocalWheel's Advance with `kept`),
// a request pushes its timer later with a store into the connection, and
// the wheel reads it when the timer comes due:
//
//   auto idle = timingwheel::AsioLocalWheel<int, Conn*>::Create(
//       io.get_executor(), {.interval = absl::Milliseconds(10)},
//       [](int fd, Conn* conn) { conn->Close(); },
//       [](Conn* const& conn) { return conn->idle_until; });
//   (*idle)->Set(fd, conn, absl::Seconds(30)).IgnoreError();  // accepted
//   conn->idle_until = Clock::now() + std::chrono::seconds(30);  // a request
//
// PostTo / PostToExecutorOf: an `execute` for TimingWheel::Create that runs
// the callback on an executor (a strand, a connection's io_context) rather
// than on the execute worker, so that a shared wheel's fired timer closes
// its socket on the socket's own thread:
//
//   auto wheel = timingwheel::TimingWheel<int, Conn*>::Create(
//       {.interval = absl::Milliseconds(10)},
//       timingwheel::PostToExecutorOf<int, Conn*>(
//           [](const int&, Conn* const& c) { return c->executor(); },
//           [](int fd, Conn* conn) { conn->CloseIfIdle(); }));
#ifndef TIMINGWHEEL_ASIO_H_
#define TIMINGWHEEL_ASIO_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "asio/any_io_executor.hpp"
#include "asio/error.hpp"
#include "asio/post.hpp"
#include "asio/steady_timer.hpp"
#include "timingwheel/internal/base/duration.h"
#include "timingwheel/internal/local/tick_time.h"
#include "timingwheel/internal/time/cycle_clock.h"
#include "timingwheel/local_wheel.h"
#include "timingwheel/options.h"

namespace timingwheel {

// A LocalWheel whose Advance the io_context runs: fired timers call `fire`
// on the thread running the executor's io_context. Every method is called
// on that thread (which must be the only one running it, or a strand's),
// as the LocalWheel's owner; so are the fire calls, which may Set, Move
// and Remove but must not destroy the AsioLocalWheel. The LocalWheel's
// promises hold, measured on the steady clock: never early, exactly once.
// Lateness is the io_context's: how soon it runs the timer's completion
// after the due time, and the tick.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class AsioLocalWheel {
 public:
  using Wheel = LocalWheel<K, V, Hash, Eq>;
  using Clock = typename Wheel::Clock;
  using TimePoint = typename Wheel::TimePoint;
  using Fire = std::function<void(K key, V value)>;
  // The deadline the caller keeps for a due timer (LocalWheel::Advance's
  // `kept`), or empty for none.
  using Kept = std::function<TimePoint(const V& value)>;

  // Errors: as LocalWheel::Create, and InvalidArgument for an empty fire.
  static absl::StatusOr<std::unique_ptr<AsioLocalWheel>> Create(
      ::asio::any_io_executor executor, LocalOptions options, Fire fire,
      Kept kept = nullptr) {
    if (!fire) return absl::InvalidArgumentError("fire is empty");
    absl::StatusOr<std::unique_ptr<Wheel>> wheel = Wheel::Create(options);
    if (!wheel.ok()) return wheel.status();
    try {
      return std::unique_ptr<AsioLocalWheel>(
          new AsioLocalWheel(std::move(executor), *std::move(wheel),
                             std::move(fire), std::move(kept)));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory creating the wheel");
    }
  }

  // Cancels the wait; the timers that never fired are dropped. A
  // completion already queued in the io_context finds the wheel gone and
  // does nothing.
  ~AsioLocalWheel() {
    state_->wheel.reset();
    state_->timer.cancel();
  }

  AsioLocalWheel(const AsioLocalWheel&) = delete;
  AsioLocalWheel& operator=(const AsioLocalWheel&) = delete;

  // LocalWheel::Set, Move and Remove. One clock read; the steady_timer is
  // touched only when the timer falls due before the wait ends.
  absl::Status Set(K key, V value, absl::Duration delay) {
    return SetIn(std::move(key), std::move(value), delay);
  }
  template <typename Rep, typename Period>
  absl::Status Set(K key, V value, std::chrono::duration<Rep, Period> delay) {
    return SetIn(std::move(key), std::move(value), delay);
  }
  absl::Status Move(const K& key, absl::Duration delay) {
    return MoveIn(key, delay);
  }
  template <typename Rep, typename Period>
  absl::Status Move(const K& key, std::chrono::duration<Rep, Period> delay) {
    return MoveIn(key, delay);
  }
  // A removed timer's wait, if it was the first, ends early and finds
  // nothing due: cheaper than waiting again now.
  bool Remove(const K& key) { return state_->wheel->Remove(key); }

  // The wheel, for what the calls above do not cover (stats(), TakeAll,
  // SetAt). A change made through it that falls due before the current
  // wait ends is seen when that wait ends: call Poke() after one.
  Wheel& wheel() { return *state_->wheel; }
  const Wheel& wheel() const { return *state_->wheel; }
  // Waits again for the wheel's next due time.
  void Poke() { Arm(state_); }

 private:
  // What a queued completion may outlive the AsioLocalWheel with: it holds
  // a weak reference and finds `wheel` gone.
  struct State {
    State(::asio::any_io_executor executor, std::unique_ptr<Wheel> w, Fire f,
          Kept k)
        : timer(std::move(executor)),
          wheel(std::move(w)),
          fire(std::move(f)),
          kept(std::move(k)) {}
    ::asio::steady_timer timer;
    std::unique_ptr<Wheel> wheel;
    Fire fire;
    Kept kept;
    TimePoint armed_at = TimePoint::max();  // when the wait ends; max: none
    bool advancing = false;  // in Advance: fire's Sets wait for its end
  };

  AsioLocalWheel(::asio::any_io_executor executor, std::unique_ptr<Wheel> w,
                 Fire fire, Kept kept)
      : state_(std::make_shared<State>(std::move(executor), std::move(w),
                                       std::move(fire), std::move(kept))) {}

  // Set and Move as LocalWheel's delay forms do them, keeping the
  // deadline to compare with the wait's end.
  template <typename Delay>
  absl::Status SetIn(K key, V value, Delay delay) {
    const std::optional<TimePoint> deadline = DeadlineAfter(delay);
    if (!deadline.has_value()) return internal::InvalidDelay(delay);
    absl::Status s =
        state_->wheel->SetAt(std::move(key), std::move(value), *deadline);
    if (s.ok()) WakeBy(*deadline);
    return s;
  }
  template <typename Delay>
  absl::Status MoveIn(const K& key, Delay delay) {
    const std::optional<TimePoint> deadline = DeadlineAfter(delay);
    if (!deadline.has_value()) return internal::InvalidDelay(delay);
    absl::Status s = state_->wheel->MoveAt(key, *deadline);
    if (s.ok()) WakeBy(*deadline);
    return s;
  }
  template <typename Delay>
  static std::optional<TimePoint> DeadlineAfter(Delay delay) {
    const std::optional<std::int64_t> ns = internal::DelayNanos(delay);
    if (!ns.has_value()) return std::nullopt;
    const std::int64_t now = internal::CycleClock::NanosNotBefore();
    if (*ns > std::numeric_limits<std::int64_t>::max() - now) {
      return TimePoint::max();
    }
    return internal::TickTime::NanosAsTime(now + *ns);
  }

  void WakeBy(TimePoint deadline) {
    if (deadline < state_->armed_at && !state_->advancing) Arm(state_);
  }

  // Waits until the wheel's next due time, replacing the wait under way
  // (whose completion then sees operation_aborted).
  static void Arm(const std::shared_ptr<State>& state) {
    const TimePoint next = state->wheel->NextDue();
    state->armed_at = next;
    if (next == TimePoint::max()) {
      state->timer.cancel();
      return;
    }
    state->timer.expires_at(next);
    state->timer.async_wait(
        [weak = std::weak_ptr<State>(state)](const std::error_code& ec) {
          if (ec == ::asio::error::operation_aborted) return;
          const std::shared_ptr<State> s = weak.lock();
          if (s == nullptr || s->wheel == nullptr) return;
          s->advancing = true;
          if (s->kept) {
            s->wheel->Advance(Clock::now(), s->fire, s->kept);
          } else {
            s->wheel->Advance(Clock::now(), s->fire);
          }
          s->advancing = false;
          Arm(s);
        });
  }

  std::shared_ptr<State> state_;
};

// An `execute` for TimingWheel::Create (or Cache's wheel) that posts
// fire(key, value) to `executor` instead of running it on the execute
// worker. The worker's part is one post; fire runs on the executor's
// thread, in the order the timers fired. An exception from fire leaves
// through the executor (io_context::run), as any handler's.
template <typename K, typename V, typename Executor, typename Fire>
std::function<void(K, V)> PostTo(Executor executor, Fire fire) {
  auto shared = std::make_shared<Fire>(std::move(fire));
  return [executor = std::move(executor), shared](K key, V value) {
    ::asio::post(executor, [shared, key = std::move(key),
                            value = std::move(value)]() mutable {
      (*shared)(std::move(key), std::move(value));
    });
  };
}

// The same with an executor per timer: executor_of(key, value) names it
// (the connection's io_context, or its strand).
template <typename K, typename V, typename ExecutorOf, typename Fire>
std::function<void(K, V)> PostToExecutorOf(ExecutorOf executor_of, Fire fire) {
  auto shared = std::make_shared<Fire>(std::move(fire));
  return [executor_of = std::move(executor_of), shared](K key, V value) {
    auto executor = executor_of(std::as_const(key), std::as_const(value));
    ::asio::post(executor, [shared, key = std::move(key),
                            value = std::move(value)]() mutable {
      (*shared)(std::move(key), std::move(value));
    });
  };
}

}  // namespace timingwheel

#endif  // TIMINGWHEEL_ASIO_H_
