// When ticks are due: the real clock, or a ManualTicker's requests.
#ifndef TIMINGWHEEL_INTERNAL_TIME_TIME_SOURCE_H_
#define TIMINGWHEEL_INTERNAL_TIME_TIME_SOURCE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <latch>
#include <limits>

#include "absl/time/time.h"
#include "timingwheel/internal/time/clock.h"
#include "timingwheel/internal/base/ticks.h"

namespace timingwheel {
namespace internal {

// ManualTicker::Tick's request: the loop runs `remaining` ticks, then
// counts `done` down. (Hand-offs use standard primitives, which
// ThreadSanitizer understands even when the system's Abseil was built
// without it.)
struct TickRequest {
  explicit TickRequest(int n) : remaining(n) {}
  int remaining;
  std::latch done{1};
};

// Hides from the loop whether time is real or manual. Callers ask it for
// deadlines and the current time; the loop asks it which tick is due and
// how long it may sleep, and tells it which ticks it has run.
//
// Real time: tick j is due at start + j * interval on the monotonic clock,
// whatever the loop did before (no drift), so a late loop catches up.
// Manual time: a tick is due only while a ManualTicker::Tick request has
// ticks left, and only one at a time: the loop runs tick k's callbacks to
// completion and applies what they submitted before tick k+1 (see
// ManualTicker::Tick).
class TimeSource {
 public:
  TimeSource(absl::Duration interval, bool manual)
      : interval_(interval), manual_(manual), clock_(interval) {}

  bool manual() const { return manual_; }

  // Any thread: the tick at which a timer of `delay` (> 0), submitted now,
  // is due. Real time: one clock read.
  std::uint64_t DeadlineTick(absl::Duration delay) const {
    if (manual_) {
      return std::min(
          done_.load(std::memory_order_acquire) + CeilTicks(delay, interval_),
          kMaxTick);
    }
    return clock_.DeadlineTick(delay);
  }

  // Any thread: time since the start. Manual: ticks done * interval.
  absl::Duration Now() const {
    if (manual_) {
      return interval_ *
             static_cast<std::int64_t>(done_.load(std::memory_order_acquire));
    }
    return clock_.SinceStart();
  }

  // Loop thread: the last tick due now, given that ticks up to `now` are
  // done. Never below `now`.
  std::uint64_t DueTick(std::uint64_t now) const {
    if (manual_) return requests_.empty() ? now : now + 1;
    return std::max(now, clock_.TicksDue());
  }

  // Loop thread: how long until tick `tick` is due, at most `cap`; zero if
  // it is due. Manual time never comes due by itself: `cap`.
  absl::Duration UntilTick(std::uint64_t tick, absl::Duration cap) const {
    if (manual_ || tick == kNever) return cap;
    return std::min(cap, clock_.UntilTick(tick));
  }

  // When tick `tick` is due, in nanoseconds of the steady clock's epoch;
  // INT64_MAX for kNever and under manual time, which the steady clock
  // does not drive.
  std::int64_t SteadyNanosOfTick(std::uint64_t tick) const {
    if (manual_ || tick == kNever) {
      return std::numeric_limits<std::int64_t>::max();
    }
    return clock_.SteadyNanosOfTick(tick);
  }

  // Loop thread: a ManualTicker::Tick request was applied.
  void AddRequest(TickRequest* request) { requests_.push_back(request); }

  // Loop thread: the wheel has advanced to `now`. Publishes it for
  // DeadlineTick and Now before any of the ticks' callbacks runs, so that a
  // callback of tick k counts its delays from tick k.
  void Advanced(std::uint64_t now) {
    done_.store(now, std::memory_order_release);
  }

  // Loop thread, manual time: the due tick has run and its callbacks have
  // returned; counts it off its request, releasing the Tick call at the
  // last one.
  void TickCompleted() {
    TickRequest* request = requests_.front();
    if (--request->remaining == 0) {
      requests_.pop_front();
      request->done.count_down();
    }
  }

  // Loop thread, when stopping: releases every waiting Tick call.
  void ReleaseRequests() {
    for (TickRequest* request : requests_) request->done.count_down();
    requests_.clear();
  }

 private:
  const absl::Duration interval_;
  const bool manual_;
  const RealClock clock_;
  std::atomic<std::uint64_t> done_{0};  // ticks the loop has run
  std::deque<TickRequest*> requests_;   // loop thread only
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_TIME_TIME_SOURCE_H_
