// The checks behind Create's and the timer calls' InvalidArgument errors
// (docs/api.md "Errors"); defined in lib/src/loop/validate.cc.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_VALIDATE_H_
#define TIMINGWHEEL_INTERNAL_LOOP_VALIDATE_H_

#include <chrono>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/duration.h"
#include "timingwheel/internal/wheel/wheel.h"
#include "timingwheel/options.h"

namespace timingwheel {
namespace internal {

// Create's checks of everything but the callback.
absl::Status ValidateOptions(const Options& options);
// LocalWheel::Create's checks.
absl::Status ValidateLocalOptions(const LocalOptions& options);
// SetTimer's and MoveTimer's check: delay > 0 and finite.
absl::Status ValidateDelay(absl::Duration delay);
// The InvalidArgument for a delay that DelayNanos refused (never OK).
absl::Status InvalidDelay(absl::Duration delay);
template <typename Rep, typename Period>
absl::Status InvalidDelay(std::chrono::duration<Rep, Period> delay) {
  return InvalidDelay(ToDuration(delay));
}

// Every num_slots that Create accepts fits the wheel's list ids.
static_assert(static_cast<std::uint32_t>(kMaxSlots) <=
              Wheel<int, int>::kMaxSlots);

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_VALIDATE_H_
