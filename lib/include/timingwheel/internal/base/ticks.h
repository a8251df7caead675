// Tick numbers: the only time the wheel knows.
#ifndef TIMINGWHEEL_INTERNAL_BASE_TICKS_H_
#define TIMINGWHEEL_INTERNAL_BASE_TICKS_H_

#include <cstdint>

namespace timingwheel {
namespace internal {

// A tick number that no timer reaches.
inline constexpr std::uint64_t kNever = ~std::uint64_t{0};

// Deadlines saturate here: 2^62 ticks is 146 years at a 1ns interval, so a
// saturated timer is one that never fires, and tick arithmetic (a deadline
// plus a rotation) never wraps.
inline constexpr std::uint64_t kMaxTick = std::uint64_t{1} << 62;
static_assert(kMaxTick < kNever / 2, "kMaxTick + any slot count must not wrap");

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_TICKS_H_
