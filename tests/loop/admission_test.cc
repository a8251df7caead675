// internal::Admission: Options::max_pending and max_lag as counts, on one
// thread. What a refusal means to callers (no effect, all or nothing) is
// checked through the public API in tests/contract/ (ErrorsMaxPending,
// B2Batch, Overload).
#include "timingwheel/internal/loop/admission.h"

#include <cstdint>
#include <limits>

#include "../common/steady_now.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace timingwheel {
namespace internal {
namespace {

using ::absl::StatusCode;
// The steady clock's now: the loop publishes its times on that clock.
using ::timingwheel::testing::NowNs;

// Teaches `a` a pace of `ns` nanoseconds a command, as a loop that has run
// for a while would have.
void TeachPace(Admission& a, int ns) {
  for (int i = 0; i < 100; ++i) {
    a.RecordApplied(1000, absl::Nanoseconds(1000 * ns));
  }
}

TEST(Admission, WithoutBoundsEverythingIsAdmittedUncounted) {
  Admission a(0, absl::ZeroDuration());
  EXPECT_FALSE(a.counting());
  EXPECT_FALSE(a.bounds_lag());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(a.Admit(1000000).ok());
}

// max_pending: a call's n commands must fit beside those queued.
TEST(Admission, MaxPendingCountsWholeCalls) {
  Admission a(10, absl::ZeroDuration());
  EXPECT_TRUE(a.counting());
  EXPECT_TRUE(a.Admit(6).ok());
  EXPECT_EQ(a.Admit(5).code(), StatusCode::kResourceExhausted);  // 11 > 10
  EXPECT_TRUE(a.Admit(4).ok());                                  // exactly 10
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.Taken(3);
  EXPECT_TRUE(a.Admit(3).ok());
  a.Cancel(3);  // not enqueued after all
  EXPECT_TRUE(a.Admit(3).ok());
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(a.Admit(0).ok());  // an empty call takes no room
}

// max_lag: refused while what is already queued would take the loop longer
// than max_lag at its measured pace; the size of the call itself does not
// matter, so any call gets into an empty queue.
TEST(Admission, MaxLagComparesTheQueuedWorkWithTheMeasuredPace) {
  Admission a(0, absl::Microseconds(100));
  EXPECT_TRUE(a.counting());
  EXPECT_TRUE(a.bounds_lag());
  // Teach it a pace of 100 ns a command: 1,000 commands fit in 100 us.
  TeachPace(a, 100);
  EXPECT_NEAR(a.ns_per_command(), 100, 1);
  EXPECT_TRUE(a.Admit(5000).ok());  // into an empty queue: any size
  const absl::Status refused = a.Admit(1);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_lag"), std::string::npos);
  a.Taken(4100);  // 900 left: under 1,000
  EXPECT_TRUE(a.Admit(50).ok());
  EXPECT_TRUE(a.Admit(60).ok());  // 950 queued before it: still under
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);  // 1,010

  // A slower loop (1 us a command) admits less: 100 commands.
  TeachPace(a, 1000);
  a.Taken(1010 - 150);  // 150 queued
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.Taken(60);  // 90 queued
  EXPECT_TRUE(a.Admit(1).ok());
}

// The estimate errs slow: a sample slower than it becomes the estimate at
// once, and the limit falls with it, so that commands dearer than measured
// do not fill the queue with many max_lags of work; faster samples bring
// it down a quarter of the way each.
TEST(Admission, ASlowSampleRaisesTheEstimateAtOnce) {
  Admission a(0, absl::Milliseconds(1));
  TeachPace(a, 50);
  EXPECT_NEAR(a.ns_per_command(), 50, 1);
  EXPECT_NEAR(static_cast<double>(a.lag_limit()), 20000, 1);  // 1 ms / 50 ns
  a.RecordApplied(1000, absl::Milliseconds(1));               // 1 us a command
  EXPECT_DOUBLE_EQ(a.ns_per_command(), 1000);
  EXPECT_EQ(a.lag_limit(), 1000);
  a.RecordApplied(10, absl::Milliseconds(10));  // 1 ms a command
  EXPECT_DOUBLE_EQ(a.ns_per_command(), 1e6);
  EXPECT_EQ(a.lag_limit(), 1);
  a.RecordApplied(2, absl::Milliseconds(1));  // 500 us: slower than nothing
  EXPECT_GT(a.ns_per_command(), 500000);
}

TEST(Admission, FastSamplesLowerTheEstimateGradually) {
  Admission a(0, absl::Milliseconds(1));
  TeachPace(a, 1000);
  EXPECT_NEAR(a.ns_per_command(), 1000, 1);
  a.RecordApplied(1000, absl::Microseconds(200));  // 200 ns a command
  EXPECT_NEAR(a.ns_per_command(), 800, 1);         // a quarter of the way
  a.RecordApplied(1000, absl::Microseconds(200));
  EXPECT_NEAR(a.ns_per_command(), 650, 1);
  // The limit follows the estimate, not the last sample.
  EXPECT_EQ(a.lag_limit(), static_cast<std::int64_t>(1e6 / a.ns_per_command()));
  for (int i = 0; i < 60; ++i) a.RecordApplied(1000, absl::Microseconds(200));
  EXPECT_NEAR(a.ns_per_command(), 200, 1);
  EXPECT_NEAR(static_cast<double>(a.lag_limit()), 5000, 1);
  // One slow stretch then fast ones again: up at once, down in a few
  // dozen samples.
  a.RecordApplied(10, absl::Milliseconds(10));
  EXPECT_DOUBLE_EQ(a.ns_per_command(), 1e6);
  for (int i = 0; i < 60; ++i) a.RecordApplied(1000, absl::Microseconds(200));
  EXPECT_LT(a.ns_per_command(), 210);
}

// Before any sample the limit is at most 1,024 commands (or max_lag at the
// first guess of 200 ns a command, when that is fewer), however cheap the
// commands turn out to be; each sample lets it double, until the measured
// pace decides.
TEST(Admission, TheLimitStartsSmallAndGrowsWithSamples) {
  Admission a(0, absl::Milliseconds(20));  // 100,000 at 200 ns
  EXPECT_EQ(a.lag_limit(), 1024);
  EXPECT_TRUE(a.Admit(1024).ok());
  EXPECT_TRUE(a.Admit(1).ok());  // 1,024 queued before it: not over
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.RecordApplied(1000, absl::Microseconds(10));  // 10 ns a command
  EXPECT_EQ(a.lag_limit(), 2048);
  EXPECT_TRUE(a.Admit(1).ok());
  a.RecordApplied(1000, absl::Microseconds(10));
  EXPECT_EQ(a.lag_limit(), 4096);
  for (int i = 0; i < 100; ++i) a.RecordApplied(1000, absl::Microseconds(10));
  EXPECT_NEAR(static_cast<double>(a.lag_limit()), 2000000, 1);  // 20 ms / 10 ns
  // A slow sample lowers it at once, whatever the cap.
  a.RecordApplied(1000, absl::Milliseconds(2));  // 2 us a command
  EXPECT_EQ(a.lag_limit(), 10000);

  // A small max_lag starts at max_lag over the guess.
  Admission b(0, absl::Microseconds(100));
  EXPECT_EQ(b.lag_limit(), 500);
  // Commands of 2 us: the first sample leaves 1,024 * 2 us = 2 ms of them
  // queued at most, and then max_lag's worth.
  Admission c(0, absl::Milliseconds(20));
  c.RecordApplied(256, absl::Microseconds(512));
  EXPECT_EQ(c.lag_limit(), 2048);  // capped: 2,048 * 2 us = 4 ms < 20 ms
  c.RecordApplied(256, absl::Microseconds(5120));  // 20 us a command
  EXPECT_EQ(c.lag_limit(), 1000);
}

TEST(Admission, WithoutMaxLagNoLimit) {
  Admission a(10, absl::ZeroDuration());
  EXPECT_EQ(a.lag_limit(), std::numeric_limits<std::int64_t>::max());
  a.RecordApplied(1000, absl::Seconds(1));  // ignored
  EXPECT_EQ(a.lag_limit(), std::numeric_limits<std::int64_t>::max());
}

// A busy loop that has not come round to the queue for longer than max_lag
// is behind whatever its pace; an idle one (asleep until the next command)
// is not, and an empty queue admits anything.
TEST(Admission, MaxLagRefusesWhileABusyLoopHasNotComeRound) {
  Admission a(0, absl::Milliseconds(5));
  TeachPace(a, 10);
  a.RoundStarts(NowNs());  // busy, came round just now
  EXPECT_TRUE(a.Admit(1).ok());
  EXPECT_TRUE(a.Admit(1).ok());       // 1 queued: far under the pace limit
  a.RoundStarts(NowNs() - 10000000);  // last came round 10 ms ago
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.Taken(2);
  EXPECT_TRUE(a.Admit(1).ok());  // an empty queue admits anything
  a.Idle();                      // asleep: woken by the next command
  EXPECT_TRUE(a.Admit(1).ok());
  a.RoundStarts(NowNs());
  EXPECT_TRUE(a.Admit(1).ok());
}

// A busy loop whose first tick with work came due more than max_lag ago is
// behind too, however short its queue: its timers fire that late already.
// Work due in the future, or within max_lag, or no work at all, refuses
// nothing; nor does an idle loop, or an empty queue.
TEST(Admission, MaxLagRefusesWhileTheLoopsTicksAreBehind) {
  Admission a(0, absl::Milliseconds(5));
  TeachPace(a, 10);
  a.RoundStarts(NowNs());
  a.WorkDueAt(NowNs() + 1000000000);  // in a second
  EXPECT_TRUE(a.Admit(1).ok());
  EXPECT_TRUE(a.Admit(1).ok());    // 1 queued, the round just started
  a.WorkDueAt(NowNs() - 1000000);  // 1 ms overdue: within max_lag
  EXPECT_TRUE(a.Admit(1).ok());
  a.WorkDueAt(NowNs() - 10000000);  // 10 ms overdue
  const absl::Status refused = a.Admit(1);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_lag"), std::string::npos);
  a.Taken(3);
  EXPECT_TRUE(a.Admit(1).ok());  // an empty queue admits anything
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.WorkDueAt(std::numeric_limits<std::int64_t>::max());  // no work
  EXPECT_TRUE(a.Admit(1).ok());
  a.WorkDueAt(NowNs() - 10000000);
  a.Idle();  // asleep: woken by the next command
  EXPECT_TRUE(a.Admit(1).ok());
}

// What is overdue and what is queued share max_lag: at 10 ns a command,
// 500,000 commands fit in 5 ms, but only a fifth of them once the first
// tick with work is 4 ms overdue.
TEST(Admission, OverdueTicksLeaveLessRoomForQueuedWork) {
  Admission a(0, absl::Milliseconds(5));
  TeachPace(a, 10);
  a.RoundStarts(NowNs());
  EXPECT_TRUE(a.Admit(200000).ok());  // into an empty queue
  a.WorkDueAt(NowNs() - 1000000);     // 1 ms overdue: room for 400,000
  EXPECT_TRUE(a.Admit(1).ok());
  a.WorkDueAt(NowNs() - 4000000);  // 4 ms overdue: room for 100,000
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.Taken(150000);  // 50,001 queued
  EXPECT_TRUE(a.Admit(1).ok());
}

// Both bounds at once: each refuses on its own terms.
TEST(Admission, MaxPendingAndMaxLagTogether) {
  Admission a(100, absl::Microseconds(10));
  TeachPace(a, 10);
  // Pace 10 ns: 1,000 commands within max_lag, but max_pending is 100.
  EXPECT_TRUE(a.Admit(100).ok());
  EXPECT_EQ(a.Admit(1).code(), StatusCode::kResourceExhausted);
  a.Taken(100);
  EXPECT_EQ(a.Admit(101).code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace internal
}  // namespace timingwheel
