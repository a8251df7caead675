// Whether a call's commands may join the queue: Options::max_pending and
// Options::max_lag.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_ADMISSION_H_
#define TIMINGWHEEL_INTERNAL_LOOP_ADMISSION_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace timingwheel {
namespace internal {

// Counts the keyed commands (set, move, remove) queued but not yet taken by
// the loop, and refuses a call when
//  - max_pending is set and the call's n commands would not fit under it
//    (api.md Errors, B2), or
//  - max_lag is set and applying what is already queued would take the loop
//    longer than max_lag (api.md "Overload"): at the loop's measured pace,
//    or because the loop has not come round to the queue for max_lag, or
//    because what its ticks are overdue already and the queued work
//    together exceed max_lag.
// The loop's pace is not known in advance and changes with the wheel's
// size, the mix of commands, the timers firing and the machine's load, so
// the loop measures it in wall time while busy (RecordApplied) and
// publishes how many commands it works off within max_lag (lag_limit); a
// producer compares the queued count with that, and the loop ends a round
// of taking commands there, so that the ticks due meanwhile run.
// The estimate errs slow: a slower sample raises it at once, faster ones
// lower it a quarter of the way each. A queue admitted at a pace the loop
// does not keep holds its excess in full, and every timer in it fires that
// much late; a limit too low for a few samples only refuses callers who
// retry.
// Only what is already queued decides, not the size of the call, so a call
// of any size is admitted into an empty queue and no caller retries for
// ever.
//
// With neither bound set nothing is counted and Admit costs one predictable
// branch; with one set, every call pays one shared atomic add (and the loop
// one subtract per batch); with max_lag, a call that finds commands queued
// while the loop is busy also reads the clock and two published times.
class Admission {
 public:
  Admission(std::size_t max_pending, absl::Duration max_lag)
      : max_pending_(max_pending == 0 ||
                             max_pending >
                                 static_cast<std::size_t>(
                                     std::numeric_limits<std::int64_t>::max())
                         ? std::numeric_limits<std::int64_t>::max()
                         : static_cast<std::int64_t>(max_pending)),
        max_lag_ns_(max_lag > absl::ZeroDuration()
                        ? absl::ToDoubleNanoseconds(max_lag)
                        : 0),
        counting_(max_pending != 0 || max_lag_ns_ > 0) {
    if (max_lag_ns_ > 0) PublishLimit();
  }

  // Producer side: admits n keyed commands (n >= 0) or says why not. When
  // admitted, the caller must enqueue them or call Cancel(n).
  absl::Status Admit(std::size_t n) {
    if (!counting_ || n == 0) return absl::OkStatus();
    const auto count = static_cast<std::int64_t>(n);
    const std::int64_t before =
        queued_.fetch_add(count, std::memory_order_relaxed);
    if (before + count > max_pending_) {
      Cancel(n);
      return absl::ResourceExhaustedError(
          "timing wheel: max_pending commands already queued");
    }
    if (before > 0 && max_lag_ns_ > 0 && LoopIsBehind(before)) {
      Cancel(n);
      return absl::ResourceExhaustedError(
          "timing wheel: the loop is more than max_lag behind; retry later");
    }
    return absl::OkStatus();
  }

  // Producer side: takes back an Admit whose commands were not enqueued.
  void Cancel(std::size_t n) {
    if (counting_ && n != 0) {
      queued_.fetch_sub(static_cast<std::int64_t>(n),
                        std::memory_order_relaxed);
    }
  }

  // True when a bound is set and calls are counted.
  bool counting() const { return counting_; }
  // True when max_lag is set.
  bool bounds_lag() const { return max_lag_ns_ > 0; }

  // Loop side: the loop has taken n keyed commands off the queue.
  void Taken(std::size_t n) {
    if (counting_ && n != 0) {
      queued_.fetch_sub(static_cast<std::int64_t>(n),
                        std::memory_order_relaxed);
    }
  }

  // Loop side, with max_lag set: the loop took `elapsed` of wall time,
  // all its work included, to apply `commands` commands (> 0). A sample
  // slower than the estimate becomes the estimate at once: commands that
  // cost ten times the estimate would otherwise fill the queue with ten
  // max_lags of work for several samples, and that work is done, late,
  // whatever the estimate says afterwards. A faster sample moves it a
  // quarter of the way, so that one quick stretch (a run of removes of
  // absent keys) does not open the gate to a backlog. Each sample also
  // lets the limit double (see kStartLimit).
  void RecordApplied(std::size_t commands, absl::Duration elapsed) {
    if (max_lag_ns_ <= 0 || commands == 0) return;
    const double per_command =
        absl::ToDoubleNanoseconds(elapsed) / static_cast<double>(commands);
    if (per_command >= ns_per_command_) {
      ns_per_command_ = per_command;
    } else {
      ns_per_command_ += (per_command - ns_per_command_) / 4;
    }
    limit_cap_ = std::min(2 * limit_cap_, kMaxLimit);
    PublishLimit();
  }

  // Loop side: the commands the loop works off within max_lag at its
  // measured pace, where a round of taking them ends; INT64_MAX without
  // max_lag.
  std::int64_t lag_limit() const {
    return lag_limit_.load(std::memory_order_relaxed);
  }

  // Loop side, with max_lag set: the loop starts a round of taking
  // commands now (steady-clock nanoseconds), or is about to sleep (Idle).
  // A loop that has not come round to the queue for longer than max_lag
  // (preempted on a crowded machine, or busy with a heavy tick) is behind
  // whatever its pace: its queued commands have waited that long already.
  void RoundStarts(std::int64_t now_ns) {
    round_ns_.store(now_ns, std::memory_order_relaxed);
  }
  // Loop side, with max_lag set: when the first tick the loop still has
  // work on (timers to fire or refile) is due, in steady-clock nanoseconds
  // (INT64_MAX: none, or manual time). What lies in the past is how late
  // timers are firing already, and the queued commands come before the
  // next ticks, so the two share max_lag: firing takes the loop's time as
  // commands do, and a queue kept full by a flood would otherwise leave the
  // ticks ever further behind (each round works off max_lag of commands,
  // then the ticks that came due meanwhile, which take longer the more
  // there are).
  void WorkDueAt(std::int64_t due_ns) {
    work_due_ns_.store(due_ns, std::memory_order_relaxed);
  }
  void Idle() { round_ns_.store(kIdle, std::memory_order_relaxed); }

  // Loop side: the current estimate, for tests and stats.
  double ns_per_command() const { return ns_per_command_; }

 private:
  // round_ns_ of a loop that sleeps: woken by the next command, it comes
  // round at once.
  static constexpr std::int64_t kIdle =
      std::numeric_limits<std::int64_t>::max();
  // Before any sample: a pessimistic guess for a wheel of millions with
  // cheap keys.
  static constexpr double kInitialNsPerCommand = 200;
  // Before any sample the limit is at most this many commands, and each
  // sample lets it double at most. A guess of the pace says nothing about
  // the key type: with keys that cost the loop 2 us to hash or move (or a
  // wheel far larger than the cache), max_lag / 200 ns commands would take
  // the loop ten times max_lag or more, and the first flood fills the queue
  // before the first sample comes (the loop takes them all in one round,
  // and each sample comes at most kPaceCommands commands or a millisecond
  // later). Capped, the first flood queues this many: max_lag's worth for
  // commands of up to max_lag / 1024 each (20 us at 20 ms), after which
  // the measured pace takes over; and the doubling leaves a cheap loop its
  // full limit after ten to twenty samples: a few milliseconds of a flood.
  static constexpr double kStartLimit = 1024;
  static constexpr double kMaxLimit = 1e15;

  // With `before` commands queued: would working them off take the loop
  // longer than max_lag, or is it more than max_lag behind already? Reads
  // the clock only when the loop is busy.
  bool LoopIsBehind(std::int64_t before) const {
    if (before > lag_limit_.load(std::memory_order_relaxed)) return true;
    const std::int64_t round = round_ns_.load(std::memory_order_relaxed);
    if (round == kIdle) return false;
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count();
    if (static_cast<double>(now - round) > max_lag_ns_) return true;
    // The first tick with work waits for the queued commands too: what is
    // overdue already and what is queued must fit in max_lag together.
    const std::int64_t work = work_due_ns_.load(std::memory_order_relaxed);
    if (work >= now) return false;
    const double overdue = static_cast<double>(now - work);
    if (overdue > max_lag_ns_) return true;
    const auto limit =
        static_cast<double>(lag_limit_.load(std::memory_order_relaxed));
    return static_cast<double>(before) > limit * (1 - overdue / max_lag_ns_);
  }

  void PublishLimit() {
    const double limit = max_lag_ns_ / std::max(ns_per_command_, 1.0);
    lag_limit_.store(static_cast<std::int64_t>(std::min(limit, limit_cap_)),
                     std::memory_order_relaxed);
  }

  const std::int64_t max_pending_;
  const double max_lag_ns_;  // 0: no lag bound
  const bool counting_;
  double ns_per_command_ = kInitialNsPerCommand;  // loop thread only
  double limit_cap_ = kStartLimit;                // loop thread only
  // Commands the loop can apply within max_lag; no bound without max_lag.
  alignas(64) std::atomic<std::int64_t> lag_limit_{
      std::numeric_limits<std::int64_t>::max()};
  // When the loop last started a round, or kIdle; see RoundStarts.
  std::atomic<std::int64_t> round_ns_{kIdle};
  // When the loop's first tick with work is due; see WorkDueAt.
  std::atomic<std::int64_t> work_due_ns_{
      std::numeric_limits<std::int64_t>::max()};
  alignas(64) std::atomic<std::int64_t> queued_{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_ADMISSION_H_
