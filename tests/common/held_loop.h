// Holds a wheel's loop busy on purpose, so that commands stay queued for as
// long as a test needs: for max_pending, max_lag and batch admission.
//
// The loop applies commands at once unless it is busy, so keep it busy
// deterministically: the loop is the only thread that compares keys (callers
// hash theirs, the loop compares a command's key with the one it finds under
// that hash), and GatedEq blocks it comparing the hold key with itself until
// the test releases it: set the hold key, then move it. Meanwhile nothing is
// dequeued and no tick runs. (A blocked callback would not do: the loop goes
// on applying commands while callbacks run, docs/api.md S10.)
#ifndef TIMINGWHEEL_TESTS_COMMON_HELD_LOOP_H_
#define TIMINGWHEEL_TESTS_COMMON_HELD_LOOP_H_

#include <atomic>
#include <cstddef>
#include <string>

#include "../common/event.h"
#include "../common/hang_guard.h"
#include "../common/manual_wheel.h"
#include "absl/hash/hash.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace testing {

// The hold of the test running now: set by its owner, read by GatedEq.
struct LoopGate {
  Event entered, released;
  std::atomic<bool> armed{true};
};
inline std::atomic<LoopGate*> g_loop_gate{nullptr};

// std::equal_to, except that the first comparison of the hold key (-1, or
// "hold") with another copy of it while a LoopGate is set blocks until the
// gate is released: a command's key against the entry's. Checking builds
// also compare each entry's key with itself (Wheel::CheckInvariants, when
// the loop goes idle); that must not take the hold.
struct GatedEq {
  static void HoldIfGated() {
    LoopGate* gate = g_loop_gate.load();
    if (gate != nullptr && gate->armed.exchange(false)) {
      gate->entered.Notify();
      gate->released.WaitFor(kHangGuard);
    }
  }
  bool operator()(const int& a, const int& b) const {
    if (a == -1 && b == -1 && &a != &b) HoldIfGated();
    return a == b;
  }
  bool operator()(const std::string& a, const std::string& b) const {
    if (a == "hold" && b == "hold" && &a != &b) HoldIfGated();
    return a == b;
  }
};

// Sets `gate` as the one GatedEq blocks on, for its lifetime.
class GateScope {
 public:
  explicit GateScope(LoopGate* gate) { g_loop_gate.store(gate); }
  ~GateScope() { g_loop_gate.store(nullptr); }
};

// A ManualWheel with `max_pending` (or other options) whose loop is held:
// the hold key (-1) is set with a delay of an hour and then moved, and the
// loop blocks looking it up for the move until Release(). It stays pending:
// Stop returns it.
class HeldLoop {
 public:
  static constexpr int kHoldKey = -1;

  explicit HeldLoop(std::size_t max_pending)
      : HeldLoop(WithMaxPending(max_pending)) {}
  explicit HeldLoop(Options options) : w_(8, nullptr, options) {
    EXPECT_TRUE(w_.wheel().SetTimer(kHoldKey, 0, absl::Hours(1)).ok());
    // A bound may refuse the move while the set is queued: retry until the
    // loop has applied it (it is not held yet).
    EXPECT_TRUE(BecomesTrue(
        [&] { return w_.wheel().MoveTimer(kHoldKey, absl::Hours(1)).ok(); }));
  }
  ~HeldLoop() { Release(); }

  // Waits until the loop is held; false after kHangGuard.
  bool Held() { return gate_.entered.WaitFor(kHangGuard); }
  // Lets the loop go.
  void Release() { gate_.released.Notify(); }
  BasicManualWheel<absl::Hash<int>, GatedEq>& w() { return w_; }

 private:
  static Options WithMaxPending(std::size_t max_pending) {
    Options options = TestOptions();
    options.max_pending = max_pending;
    return options;
  }

  // Declared first: outlives the wheel, whose loop may be inside GatedEq.
  LoopGate gate_;
  GateScope scope_{&gate_};
  BasicManualWheel<absl::Hash<int>, GatedEq> w_;
};

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_HELD_LOOP_H_
