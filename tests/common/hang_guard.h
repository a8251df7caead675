// Bounded waits: anything a bug could turn into a hang waits at most
// kHangGuard, so the hang becomes a failure message before the test binary's
// timeout. The bound decides no outcome; it only ends a broken test.
#ifndef TIMINGWHEEL_TESTS_COMMON_HANG_GUARD_H_
#define TIMINGWHEEL_TESTS_COMMON_HANG_GUARD_H_

#include <functional>
#include <thread>

#include "../common/event.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace timingwheel {
namespace testing {

inline constexpr absl::Duration kHangGuard = absl::Seconds(20);

// Runs fn on a new thread and waits for it at most kHangGuard; returns false
// if it did not finish in time. The thread is joined either way (nothing is
// detached), so the test still ends once fn does.
inline bool FinishesInTime(std::function<void()> fn) {
  Event done;
  std::thread t([&] {
    fn();
    done.Notify();
  });
  const bool in_time = done.WaitFor(kHangGuard);
  t.join();
  return in_time;
}

// Polls `done` every millisecond; false if it is still false after
// kHangGuard.
inline bool BecomesTrue(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + kHangGuard;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_HANG_GUARD_H_
