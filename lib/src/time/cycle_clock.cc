#include "timingwheel/internal/time/cycle_clock.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace timingwheel {
namespace internal {
namespace {

std::int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#if defined(__x86_64__)

std::uint64_t Cycles() { return __rdtsc(); }

// ns per cycle, in units of 2^-kShift.
constexpr int kShift = 32;
// A calibration sample whose two counter reads are further apart than this
// was interrupted: the steady reading between them says little. (Many
// times what a steady read takes; 2000 is 0.4 us at 5 GHz, 2 us at 1 GHz.)
constexpr std::uint64_t kTightCycles = 2'000;

// The kernel keeps steady_clock on the cycle counter only once it has found
// the counter constant-rate and in step across CPUs.
bool KernelClockIsTsc() {
  std::ifstream in(
      "/sys/devices/system/clocksource/clocksource0/"
      "current_clocksource");
  std::string name;
  return static_cast<bool>(in >> name) && name == "tsc";
}

// A steady_clock reading with the counter read just before and just after.
struct Sample {
  std::uint64_t before = 0;
  std::int64_t ns = 0;
  std::uint64_t after = 0;
};

bool TakeSample(Sample& s) {
  s.before = Cycles();
  s.ns = SteadyNs();
  s.after = Cycles();
  return s.after - s.before < kTightCycles;
}

// The start-up measurement: one sample at the first read, another once
// kCalibrationNs have passed; then the rate bound every thread uses.
class Calibration {
 public:
  static Calibration& Get() {
    static Calibration calibration;
    return calibration;
  }

  // ns per cycle times 5/4, in 2^-kShift units; 0 until measured, and for
  // good where the counter is not used.
  std::uint64_t mult() const { return mult_.load(std::memory_order_acquire); }
  // Cycles an anchor lasts (kAnchorNs at the measured rate), and the most
  // its two counter reads may be apart (kTightNs); read after a non-zero
  // mult().
  std::uint64_t max_cycles() const {
    return max_cycles_.load(std::memory_order_relaxed);
  }
  std::uint64_t tight_cycles() const {
    return tight_cycles_.load(std::memory_order_relaxed);
  }

  // Called with a steady_clock reading while mult() is 0: measures the rate
  // once enough time has passed since the first sample. One thread at a
  // time; a sample that was interrupted is retried on a later call.
  void TryFinish(std::int64_t now_ns) {
    if (!usable_ || now_ns - first_.ns < CycleClock::kCalibrationNs ||
        given_up_.load(std::memory_order_relaxed)) {
      return;
    }
    if (busy_.exchange(true, std::memory_order_acquire)) return;
    Sample second;
    if (mult_.load(std::memory_order_relaxed) == 0 && TakeSample(second) &&
        second.before > first_.after && second.ns > first_.ns) {
      // Between the counter reads first_.after and second.before the
      // steady clock advanced by at most second.ns - first_.ns (those were
      // read outside them): an upper bound of the mean rate.
      const double ns_per_cycle =
          static_cast<double>(second.ns - first_.ns) /
          static_cast<double>(second.before - first_.after);
      // Anything outside 50 MHz .. 50 GHz is not a clock to trust.
      if (ns_per_cycle > 0.02 && ns_per_cycle < 20) {
        max_cycles_.store(
            static_cast<std::uint64_t>(CycleClock::kAnchorNs / ns_per_cycle),
            std::memory_order_relaxed);
        tight_cycles_.store(
            static_cast<std::uint64_t>(CycleClock::kTightNs / ns_per_cycle),
            std::memory_order_relaxed);
        const double margin = CycleClock::kRateMarginQuarters / 4.0;
        mult_.store(static_cast<std::uint64_t>(ns_per_cycle * margin *
                                               (std::uint64_t{1} << kShift)) +
                        1,
                    std::memory_order_release);
      }
    }
    busy_.store(false, std::memory_order_release);
  }

  // The counter was seen running slower than the bound allows: every read
  // from now on is a steady_clock read.
  void GiveUp() {
    given_up_.store(true, std::memory_order_relaxed);
    mult_.store(0, std::memory_order_release);
  }

 private:
  Calibration() {
    if (!KernelClockIsTsc()) return;
    for (int tries = 0; tries < 100 && !usable_; ++tries) {
      usable_ = TakeSample(first_);
    }
  }

  bool usable_ = false;  // set before any reader sees the object
  Sample first_;         // likewise
  std::atomic<bool> busy_{false};
  std::atomic<std::uint64_t> max_cycles_{0};
  std::atomic<std::uint64_t> tight_cycles_{0};
  std::atomic<std::uint64_t> mult_{0};
  std::atomic<bool> given_up_{false};
};

// This thread's anchor: a counter value and a steady reading taken after it,
// and the reads made from it. cycles 0 (no anchor yet) makes the next read
// renew it. Initial-exec: a read must not pay a call into the dynamic
// linker to find its thread's copy.
struct Anchor {
  std::uint64_t cycles = 0;
  std::int64_t ns = 0;
  std::uint32_t reads = 0;
};
// Reads an anchor serves at most, however young: each renewal checks the
// counter against the steady clock (see NanosNotBefore), so a counter gone
// wrong is caught within this many reads of a thread.
constexpr std::uint32_t kReadsPerAnchor = 64;
// Anchors at most this many cycles apart are checked against each other
// (further apart, span * mult could overflow).
constexpr std::uint64_t kMaxCheckedSpan = std::uint64_t{1} << 26;
thread_local Anchor anchor __attribute__((tls_model("initial-exec")));

#endif  // __x86_64__

}  // namespace

std::int64_t CycleClock::NanosNotBefore() {
#if defined(__x86_64__)
  Calibration& calibration = Calibration::Get();
  if (const std::uint64_t mult = calibration.mult(); mult != 0) {
    const std::uint64_t c = Cycles();
    // Wraps to a huge age if the counter went backwards (another CPU's).
    const std::uint64_t age = c - anchor.cycles;
    if (age <= calibration.max_cycles() && ++anchor.reads < kReadsPerAnchor) {
      // age * mult <= about kAnchorNs * 5/4 * 2^kShift < 2^45.
      return anchor.ns + static_cast<std::int64_t>((age * mult) >> kShift);
    }
    const std::int64_t ns = SteadyNs();
    // An anchor whose steady reading came late (the thread was interrupted
    // in between) would put every read from it ahead by as much: keep it
    // only if it is tight, else the next read renews it again.
    const bool tight = Cycles() - c <= calibration.tight_cycles();
    // Two tight anchors: the steady clock cannot have advanced by more than
    // the rate bound allows over the cycles between them, give or take
    // kTightNs (each reading is within that of its counter value). If it
    // did, the counter runs slower than measured (the kernel may have left
    // it for another clock source): reads from it could be early, so they
    // stop.
    if (tight && anchor.cycles != 0 && c > anchor.cycles &&
        c - anchor.cycles < kMaxCheckedSpan &&
        ns - anchor.ns >
            static_cast<std::int64_t>(((c - anchor.cycles) * mult) >> kShift) +
                CycleClock::kTightNs) {
      calibration.GiveUp();
    }
    anchor.cycles = tight ? c : 0;
    anchor.ns = ns;
    anchor.reads = 0;
    return ns;
  }
  const std::int64_t ns = SteadyNs();
  calibration.TryFinish(ns);
  return ns;
#else
  return SteadyNs();
#endif
}

bool CycleClock::UsesCounter() {
#if defined(__x86_64__)
  return Calibration::Get().mult() != 0;
#else
  return false;
#endif
}

}  // namespace internal
}  // namespace timingwheel
