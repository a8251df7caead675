// The loop's counters, and the copy of them other threads may read.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_LOOP_STATS_H_
#define TIMINGWHEEL_INTERNAL_LOOP_LOOP_STATS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "timingwheel/stats.h"

namespace timingwheel {
namespace internal {

// The loop counts into a plain Stats that only it touches (no atomic
// operation per command), and copies it out once per batch and per tick.
// Readers see each field as of some copy: a snapshot may lag, never tear a
// field. The workers count callback exceptions themselves, apart.
class LoopStats {
 public:
  // Loop thread only.
  Stats& counts() { return counts_; }

  // Loop thread: makes counts() visible to Read. A relaxed store per field.
  void Publish() {
    ForEachLoopField([this](auto field) {
      std::atomic_ref(published_.*field)
          .store(counts_.*field, std::memory_order_relaxed);
    });
  }

  // Any thread: the last published counts, with callback_exceptions from
  // the workers. A relaxed load per field.
  Stats Read() const {
    Stats s;
    ForEachLoopField([&](auto field) {
      s.*field =
          std::atomic_ref(published_.*field).load(std::memory_order_relaxed);
    });
    s.callback_exceptions = exceptions_.load(std::memory_order_relaxed);
    return s;
  }

  // Any thread: a callback threw.
  void CountException() { exceptions_.fetch_add(1, std::memory_order_relaxed); }

 private:
  // The one list of the Stats fields the loop counts.
  template <typename F>
  static void ForEachLoopField(F&& f) {
    f(&Stats::pending);
    f(&Stats::ticks);
    f(&Stats::applied);
    f(&Stats::fired);
    f(&Stats::moved);
    f(&Stats::removed);
    f(&Stats::superseded);
    f(&Stats::drained);
    f(&Stats::refiled);
    f(&Stats::memory_bytes);
  }
  // The fields from fire_lateness on are read from their own sources
  // (EventLoop::stats).
  static_assert(offsetof(Stats, fire_lateness) == 11 * sizeof(std::uint64_t),
                "a new Stats field: list it in ForEachLoopField or count it "
                "apart, as callback_exceptions is");
  static_assert(sizeof(Stats) == offsetof(Stats, callbacks_pending) +
                                     sizeof(std::size_t),
                "a new Stats field after callbacks_pending: fill it in "
                "EventLoop::stats");

  Stats counts_;
  // Written by the loop, read by any thread, only through std::atomic_ref.
  alignas(64) mutable Stats published_;
  alignas(64) std::atomic<std::uint64_t> exceptions_{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_LOOP_STATS_H_
