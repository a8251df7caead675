#include <string>

#include "absl/strings/str_cat.h"
#include "timingwheel/internal/loop/validate.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace internal {

absl::Status ValidateOptions(const Options& options) {
  if (options.interval < absl::Nanoseconds(1) ||
      options.interval == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::interval must be finite and at least 1ns, got ",
                     absl::FormatDuration(options.interval)));
  }
  if (options.num_slots <= 0 || options.num_slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::num_slots must be in [1, ", kMaxSlots, "], got ",
                     options.num_slots));
  }
  if (options.execute_workers < 1 || options.execute_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::execute_workers must be in [1, ", kMaxWorkers,
                     "], got ", options.execute_workers));
  }
  if (options.drain_workers < 1 || options.drain_workers > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::drain_workers must be in [1, ", kMaxWorkers,
                     "], got ", options.drain_workers));
  }
  if (options.max_lag < absl::ZeroDuration() ||
      options.max_lag == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::max_lag must be finite and >= 0, got ",
                     absl::FormatDuration(options.max_lag)));
  }
  if (options.expected_timers > kMaxTimers) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::expected_timers must be at most ", kMaxTimers,
                     ", got ", options.expected_timers));
  }
  if (options.memory_decay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::memory_decay must be >= 0, got ",
                     absl::FormatDuration(options.memory_decay)));
  }
  if (options.ticker != nullptr &&
      dynamic_cast<ManualTicker*>(options.ticker.get()) == nullptr) {
    return absl::InvalidArgumentError(
        "Options::ticker must be a ManualTicker or nullptr (real time)");
  }
  return absl::OkStatus();
}

absl::Status ValidateLocalOptions(const LocalOptions& options) {
  if (options.interval < absl::Nanoseconds(1) ||
      options.interval == absl::InfiniteDuration() ||
      absl::Nanoseconds(absl::ToInt64Nanoseconds(options.interval)) !=
          options.interval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LocalOptions::interval must be a whole number of nanoseconds, at "
        "least 1ns, got ",
        absl::FormatDuration(options.interval)));
  }
  Options as_wheel;
  as_wheel.interval = options.interval;
  as_wheel.num_slots = options.num_slots;
  as_wheel.expected_timers = options.expected_timers;
  as_wheel.memory_decay = options.memory_decay;
  absl::Status s = ValidateOptions(as_wheel);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Local", s.message()));  // "LocalOptions::..."
  }
  return absl::OkStatus();
}

absl::Status ValidateDelay(absl::Duration delay) {
  if (delay <= absl::ZeroDuration() || delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("delay must be positive and finite, got ",
                     absl::FormatDuration(delay)));
  }
  return absl::OkStatus();
}

absl::Status InvalidDelay(absl::Duration delay) {
  absl::Status s = ValidateDelay(delay);
  return s.ok() ? absl::InvalidArgumentError(
                      absl::StrCat("delay must be positive and finite, got ",
                                   absl::FormatDuration(delay)))
                : s;
}

}  // namespace internal
}  // namespace timingwheel
