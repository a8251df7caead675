// The steady clock read for a deadline, from the processor's cycle counter:
// never behind std::chrono::steady_clock, at most a few microseconds ahead.
#ifndef TIMINGWHEEL_INTERNAL_TIME_CYCLE_CLOCK_H_
#define TIMINGWHEEL_INTERNAL_TIME_CYCLE_CLOCK_H_

#include <cstdint>

namespace timingwheel {
namespace internal {

// A deadline is the submission time plus the delay, and a timer must never
// fire before it (api.md S1). Reading steady_clock (the vDSO's sequence
// lock, scaling and a serialising counter read) costs a few times what the
// counter alone does, a good part of a producer's whole call
// (docs/design.md), so producers read a bound instead.
//
// Contract: NanosNotBefore() returns a time on steady_clock's epoch, in ns,
// that is at least what steady_clock::now() would have returned at the
// start of the call, and at most kMaxAheadNs more than what it returns
// after the call (plus any time the thread was descheduled in between).
// Any thread; no locks; one counter read when this thread read it within
// the last kAnchorNs and 64 reads, else one steady_clock read more.
//
// How the bound holds. Each thread keeps an anchor: a counter value c0 and
// a steady_clock reading t0 taken after it, so t0 is no earlier than the
// steady time at c0. A later read at counter c returns
//   t0 + (c - c0) * r_max,
// where r_max bounds how many steady nanoseconds a cycle can take: the rate
// measured at start-up times kRateMargin (5/4). The kernel's clock is the same
// counter scaled, and adjtimex may change that scale by at most 10% (the
// tick) plus 500 ppm (the frequency) either way, so a margin of 1.25 covers
// a measurement made at one extreme and a read at the other. The anchor is
// renewed (one steady_clock read, returned as it is) when it is older than
// kAnchorNs (counted in cycles at the measured rate) or the counter went
// backwards, and kept only if its steady reading came within kTightNs of
// its counter read; so a read is ahead of the truth by about a quarter of
// its anchor's age, and by kMaxAheadNs at the very most.
//
// Used only where the kernel itself derives steady_clock from this counter
// (x86-64, clocksource "tsc": then the kernel has found it constant-rate
// and in step across CPUs, which steady_clock's own monotonicity rests on
// too); elsewhere, and until the start-up measurement is done, it returns
// steady_clock::now(). And checked as it goes: a thread renews its anchor
// at least every 64 reads, and if the steady clock has advanced more
// between two anchors than the rate bound allows (the counter slowed, say
// because the kernel left it for another clock source), every thread goes
// back to steady_clock::now() for good.
class CycleClock {
 public:
  // How old an anchor may get before a read renews it.
  static constexpr std::int64_t kAnchorNs = 4'000;
  // r_max over the measured rate, in quarters: 5/4.
  static constexpr std::int64_t kRateMarginQuarters = 5;
  // An anchor is kept only if its steady reading came within this of its
  // counter read.
  static constexpr std::int64_t kTightNs = 1'000;
  // The most a read can be ahead of steady_clock (see above): its anchor's
  // reading late by kTightNs, and kAnchorNs of cycles at the rate bound.
  static constexpr std::int64_t kMaxAheadNs =
      kTightNs + kAnchorNs * kRateMarginQuarters / 4;

  static std::int64_t NanosNotBefore();

  // Whether reads come from the counter (false: from steady_clock). False
  // until the start-up measurement is done, about kCalibrationNs after the
  // first read, and after the counter failed a check.
  static bool UsesCounter();
  static constexpr std::int64_t kCalibrationNs = 10'000'000;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_TIME_CYCLE_CLOCK_H_
