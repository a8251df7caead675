// docs/api.md "Overload" (Options::max_lag), through the public header only:
// max_lag must be finite and not negative; while what is queued would take
// the loop longer than max_lag, calls are refused, batches whole, with no
// effect; what fits is admitted; by default nothing is refused. The loop is
// held busy (HeldLoop) so that what is queued is known exactly. One test
// floods a real-time wheel and checks that nothing is lost, fired twice or
// early. The admission rules alone are tested in tests/loop/admission_test.cc.

#include <atomic>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../common/hang_guard.h"
#include "../common/held_loop.h"
#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace overload_test {

using ::absl::StatusCode;
using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::Entries;
using ::timingwheel::testing::HeldLoop;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::StopSorted;
using ::timingwheel::testing::TestOptions;
using ::timingwheel::testing::TestOptionsWithMaxLag;

// ---------------------------------------------------------------------------
// docs/api.md "Overload": Options::max_lag.

TEST(Overload, MaxLagMustBeFiniteAndNotNegative) {
  EXPECT_EQ(Options().max_lag, absl::ZeroDuration());  // the default: no bound
  for (absl::Duration bad :
       {-absl::Nanoseconds(1), -absl::Seconds(1), absl::InfiniteDuration()}) {
    Options options = TestOptions();
    options.max_lag = bad;
    auto wheel = IntWheel::Create(options, [](int, int) {});
    ASSERT_FALSE(wheel.ok());
    EXPECT_EQ(wheel.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(wheel.status().message().find("max_lag"), std::string::npos);
  }
}

// A call is refused while what is already queued would take the loop longer
// than max_lag: with a bound of 1 ns, one call may wait in the queue, never
// two. Only what is already queued counts, so a batch of any size gets into
// an empty queue. Refused calls have no effect; once the loop catches up,
// calls are accepted again. The loop is held busy (HeldLoop).
TEST(Overload, MaxLagRefusesWhileTheLoopIsBehind) {
  HeldLoop held(TestOptionsWithMaxLag(absl::Nanoseconds(1)));
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Entries big;
  for (int k = 1; k <= 1000; ++k) big.emplace_back(k, k);
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(big), kInterval).ok());
  const absl::Status refused = w.wheel().SetTimer(2000, 0, kInterval);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_lag"), std::string::npos);
  EXPECT_EQ(w.wheel().MoveTimer(1, 3 * kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(w.wheel().RemoveTimer(1).code(), StatusCode::kResourceExhausted);
  const std::vector<int> one = {1};
  EXPECT_EQ(w.wheel().RemoveTimers(one).code(), StatusCode::kResourceExhausted);

  held.Release();
  // The batch, set at tick 0, fires on tick 1. The refused remove and move
  // did nothing.
  w.Tick();
  std::vector<int> all(1000);
  std::iota(all.begin(), all.end(), 1);
  EXPECT_EQ(w.KeysFiredAt(1), all);
  EXPECT_TRUE(w.wheel().SetTimer(2000, 0, kInterval).ok());  // caught up
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(2), (std::vector<int>{2000}));
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// Batch calls under max_lag are refused whole, like single calls: a
// SetTimers or MoveTimers into a queue that already holds more than
// max_lag's worth gets ResourceExhausted, leaves `items` as they were and
// has no effect.
TEST(Overload, MaxLagRefusesBatchesWhole) {
  HeldLoop held(TestOptionsWithMaxLag(absl::Nanoseconds(1)));
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Entries first = {{1, 1}, {2, 2}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(first), kInterval).ok());
  Entries refused = {{3000, 3000}, {3001, 3001}};
  const Entries refused_before = refused;
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(refused), kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(refused, refused_before);
  const std::vector<int> one = {1};
  EXPECT_EQ(w.wheel().MoveTimers(one, 3 * kInterval).code(),
            StatusCode::kResourceExhausted);

  held.Release();
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2}));  // 1 not moved
  w.Tick(2);
  EXPECT_TRUE(w.KeysFiredAt(2).empty());
  EXPECT_TRUE(w.KeysFiredAt(3).empty());  // 3000, 3001 never set
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// What fits in max_lag is admitted: with a bound of an hour, thousands of
// single calls and a batch queued behind a held loop are all accepted
// (no refusal merely because something is queued), and all fire.
TEST(Overload, MaxLagAdmitsWhatFitsInIt) {
  HeldLoop held(TestOptionsWithMaxLag(absl::Hours(1)));
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  constexpr int kSingles = 1000, kBatch = 1000;
  for (int k = 1; k <= kSingles; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval).ok()) << k;
  }
  Entries batch;
  for (int k = kSingles + 1; k <= kSingles + kBatch; ++k) {
    batch.emplace_back(k, k);
  }
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(batch), kInterval).ok());

  held.Release();
  w.Tick();
  std::vector<int> all(kSingles + kBatch);
  std::iota(all.begin(), all.end(), 1);
  EXPECT_EQ(w.KeysFiredAt(1), all);
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// The default (max_lag 0, max_pending 0) bounds nothing: however much is
// queued behind a held loop, every call is accepted, and every timer fires.
TEST(Overload, ByDefaultEveryCallIsAccepted) {
  HeldLoop held(TestOptions());
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  constexpr int kSingles = 20000, kBatches = 80, kBatch = 256;
  for (int k = 1; k <= kSingles; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval).ok()) << k;
  }
  int next = kSingles + 1;
  for (int b = 0; b < kBatches; ++b) {
    Entries batch;
    for (int i = 0; i < kBatch; ++i, ++next) batch.emplace_back(next, next);
    ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(batch), kInterval).ok());
  }

  held.Release();
  w.Tick();
  std::vector<int> all(next - 1);
  std::iota(all.begin(), all.end(), 1);
  EXPECT_EQ(w.KeysFiredAt(1), all);
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// Real time, under a flood: two threads set timers as fast as they can,
// retrying (after a yield) every call max_lag refuses. Every accepted timer
// fires exactly once and none early, counted from its accepted call; and
// the flood is pushed back (some calls are refused). No bound on lateness
// here: speed belongs to bench/ (W5-lag).
TEST(Overload, FloodWithMaxLagLosesNothing) {
  constexpr int kThreads = 2, kPerThread = 200000;
  Options options;
  options.interval = absl::Milliseconds(1);
  options.max_lag = absl::Microseconds(50);
  std::vector<std::atomic<int>> fires(kThreads * kPerThread);
  std::vector<std::atomic<std::int64_t>> due(kThreads * kPerThread);
  std::atomic<int> early{0};
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    if (absl::ToUnixNanos(absl::Now()) < due[key].load()) ++early;
    fires[key].fetch_add(1);
  });
  ASSERT_TRUE(wheel.ok());
  std::atomic<std::int64_t> refusals{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int key = t * kPerThread + i;
        const absl::Duration delay = absl::Milliseconds(5 + i % 20);
        for (;;) {
          // The deadline is at least the accepted call's start + delay.
          const std::int64_t start = absl::ToUnixNanos(absl::Now());
          due[key].store(start + absl::ToInt64Nanoseconds(delay));
          const absl::Status s = (*wheel)->SetTimer(key, key, delay);
          if (s.ok()) break;
          ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
          ++refusals;
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  BecomesTrue([&] { return (*wheel)->stats().fired >= kThreads * kPerThread; });
  ASSERT_TRUE((*wheel)->Stop().ok());
  EXPECT_GT(refusals.load(), 0);
  EXPECT_EQ(early.load(), 0);
  for (int key = 0; key < kThreads * kPerThread; ++key) {
    ASSERT_EQ(fires[key].load(), 1) << key;
  }
}

}  // namespace overload_test
}  // namespace timingwheel
