// docs/api.md Errors, through the public header only: Create's refusals
// (with the extensions E1 expected_timers, E3 Create checks and E4 error
// rows), bad delays, max_pending, and Drain, Stop and ManualTicker::Tick
// (E5) called from the wheel's own callbacks. Every test that has a wheel
// goes on using it after the error: nothing throws, aborts or corrupts it.
// The stopped-wheel row is checked in stop_test.cc, the batch calls' errors
// in batch_test.cc.

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <ratio>
#include <utility>
#include <vector>

#include "../common/hang_guard.h"
#include "../common/held_loop.h"
#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace errors_test {

using ::absl::StatusCode;
using ::timingwheel::testing::Entries;
using ::timingwheel::testing::FinishesInTime;
using ::timingwheel::testing::HeldLoop;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::Sorted;
using ::timingwheel::testing::StopSorted;
using ::timingwheel::testing::TestOptions;

// ---------------------------------------------------------------------------
// docs/api.md Errors: Create (and E1, E3, E4).

StatusCode CreateCode(
    Options options, IntWheel::Execute execute = [](int, int) {}) {
  return IntWheel::Create(std::move(options), std::move(execute))
      .status()
      .code();
}

TEST(ErrorsCreate, IntervalMustBePositiveAndFinite) {
  for (absl::Duration bad :
       {absl::ZeroDuration(), -absl::Milliseconds(1), -absl::InfiniteDuration(),
        absl::InfiniteDuration(), absl::Nanoseconds(0.5)}) {
    Options options;
    options.interval = bad;
    EXPECT_EQ(CreateCode(options), StatusCode::kInvalidArgument)
        << absl::FormatDuration(bad);
  }
  Options ok;
  ok.interval = absl::Nanoseconds(1);
  EXPECT_EQ(CreateCode(ok), StatusCode::kOk);
}

TEST(ErrorsCreate, NumSlotsMustBeInRange) {
  for (int bad : {0, -1, std::numeric_limits<int>::min(), kMaxSlots + 1}) {
    Options options;
    options.num_slots = bad;
    EXPECT_EQ(CreateCode(options), StatusCode::kInvalidArgument) << bad;
  }
  Options ok;
  ok.num_slots = 1;
  EXPECT_EQ(CreateCode(ok), StatusCode::kOk);
}

// The largest wheel Options allows is a working wheel (160 MiB of slot
// arrays), not an error.
TEST(ErrorsCreate, LargestNumSlotsWorks) {
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> fired{0};
  auto wheel = IntWheel::Create(ManualOptions(ticker, kMaxSlots),
                                [&](int, int) { fired.fetch_add(1); });
  ASSERT_TRUE(wheel.ok()) << wheel.status();
  ASSERT_TRUE((*wheel)->SetTimer(1, 1, kInterval * (kMaxSlots + 3)).ok());
  ASSERT_TRUE((*wheel)->SetTimer(2, 2, kInterval * 2).ok());
  ticker->Tick(2);
  EXPECT_EQ(fired.load(), 1);
  auto stopped = (*wheel)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(Sorted(std::move(*stopped)), (Entries{{1, 1}}));
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Where memory runs out (here an address-space limit, in a child process),
// Create says so instead of crashing. Sanitizers reserve terabytes of
// shadow address space, so this runs in the plain build only.
// In a child process: under a 1 GiB address-space limit, creating sixteen
// 160 MiB wheels must end in ResourceExhausted. Exits 0 if it does.
[[noreturn]] void CreateUntilOutOfMemory() {
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = rlim_t{1} << 30;
  setrlimit(RLIMIT_AS, &limit);
  Options options;
  options.num_slots = kMaxSlots;
  std::vector<std::unique_ptr<IntWheel>> wheels;
  for (int i = 0; i < 16; ++i) {
    auto wheel = IntWheel::Create(options, [](int, int) {});
    if (!wheel.ok()) {
      std::_Exit(wheel.status().code() == StatusCode::kResourceExhausted ? 0
                                                                         : 2);
    }
    wheels.push_back(std::move(*wheel));
  }
  std::_Exit(3);  // sixteen 160 MiB wheels within 1 GiB: impossible
}

TEST(ErrorsCreate, OutOfMemoryIsResourceExhausted) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CreateUntilOutOfMemory(), ::testing::ExitedWithCode(0), "");
}

// E1/E4: the key index sized for expected_timers is allocated by Create, so
// a hint larger than memory allows is ResourceExhausted there (2^31 - 1
// timers need over 16 GiB of index), not a crash later. In a child process
// under a 1 GiB address-space limit. Exits 0 if it is.
[[noreturn]] void CreateWithHugeExpectedTimers() {
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = rlim_t{1} << 30;
  setrlimit(RLIMIT_AS, &limit);
  Options options;
  options.expected_timers = kMaxTimers;
  auto wheel = IntWheel::Create(options, [](int, int) {});
  if (wheel.ok()) std::_Exit(3);
  std::_Exit(wheel.status().code() == StatusCode::kResourceExhausted ? 0 : 2);
}

TEST(ErrorsCreate, ExpectedTimersBeyondMemoryIsResourceExhausted) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CreateWithHugeExpectedTimers(), ::testing::ExitedWithCode(0), "");
}
#endif

TEST(ErrorsCreate, MemoryDecayMustNotBeNegative) {
  Options negative;
  negative.memory_decay = absl::Nanoseconds(-1);
  EXPECT_EQ(CreateCode(negative), StatusCode::kInvalidArgument);
  for (absl::Duration fine : {absl::ZeroDuration(), absl::Seconds(1),
                              absl::Hours(24 * 365 * 1000),
                              absl::InfiniteDuration()}) {
    Options options;
    options.memory_decay = fine;
    EXPECT_EQ(CreateCode(options), StatusCode::kOk) << fine;
  }
}

TEST(ErrorsCreate, ExpectedTimersMustBeInRange) {
  Options too_many;
  too_many.expected_timers = kMaxTimers + 1;
  EXPECT_EQ(CreateCode(too_many), StatusCode::kInvalidArgument);
  // A hint changes nothing but memory: the wheel behaves as without it.
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.expected_timers = 100'000;
  std::atomic<int> fired{0};
  auto wheel = IntWheel::Create(options, [&](int, int) { fired.fetch_add(1); });
  ASSERT_TRUE(wheel.ok()) << wheel.status();
  for (int k = 0; k < 1000; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, kInterval * (1 + k % 3)).ok());
  }
  ticker->Tick(3);
  EXPECT_EQ(fired.load(), 1000);
}

// E1: expected_timers is a hint, not a limit: a wheel holds more timers than
// it said, and each still ends exactly one way.
TEST(ErrorsCreate, ExpectedTimersIsNotALimit) {
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.expected_timers = 10;
  std::atomic<int> fired{0};
  auto wheel = IntWheel::Create(options, [&](int, int) { fired.fetch_add(1); });
  ASSERT_TRUE(wheel.ok()) << wheel.status();
  constexpr int kTimers = 5000;
  for (int k = 0; k < kTimers; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, kInterval * (1 + k % 2)).ok());
  }
  ticker->Tick();
  EXPECT_EQ(fired.load(), kTimers / 2);
  auto stopped = (*wheel)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->size(), static_cast<std::size_t>(kTimers / 2));
  for (const auto& [key, value] : *stopped) EXPECT_EQ(key % 2, 1);
}

// E1: Create sizes the key index for expected_timers up front: a power of
// two of 8-byte words at most 3/4 full, so for 100,000 timers at least
// 2^18 words (2 MiB) before any timer is set, where a wheel without the
// hint holds far less. (Half the hint would give 2^17 words: 1 MiB.)
TEST(ErrorsCreate, ExpectedTimersSizesTheIndexUpFront) {
  constexpr std::size_t kTimers = 100'000;
  auto memory_of = [](std::size_t expected_timers) {
    Options options = TestOptions();
    options.expected_timers = expected_timers;
    ManualWheel w(8, nullptr, options);
    w.Tick();  // the loop has published its stats
    return w.wheel().stats().memory_bytes;
  };
  const std::size_t hinted = memory_of(kTimers);
  EXPECT_GE(hinted, std::size_t{1} << 21);
  EXPECT_GE(hinted, kTimers * 8 * 4 / 3);
  EXPECT_LT(memory_of(0), std::size_t{1} << 20);
}

TEST(ErrorsCreate, WorkersMustBeInRange) {
  for (int bad : {0, -1, kMaxWorkers + 1}) {
    Options options;
    options.execute_workers = bad;
    EXPECT_EQ(CreateCode(options), StatusCode::kInvalidArgument)
        << "execute_workers " << bad;
    options = Options();
    options.drain_workers = bad;
    EXPECT_EQ(CreateCode(options), StatusCode::kInvalidArgument)
        << "drain_workers " << bad;
  }
}

TEST(ErrorsCreate, ExecuteMustNotBeEmpty) {
  EXPECT_EQ(CreateCode(Options(), IntWheel::Execute()),
            StatusCode::kInvalidArgument);
}

// A Ticker the library does not know how to drive.
class ForeignTicker : public Ticker {};

TEST(ErrorsCreate, OnlyManualTickerIsAccepted) {
  Options options;
  options.ticker = std::make_shared<ForeignTicker>();
  EXPECT_EQ(CreateCode(options), StatusCode::kInvalidArgument);
}

TEST(ErrorsCreate, ManualTickerDrivesOneWheelAtATime) {
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> first_fired{0};
  auto first = IntWheel::Create(ManualOptions(ticker),
                                [&](int, int) { first_fired.fetch_add(1); });
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(CreateCode(ManualOptions(ticker)), StatusCode::kInvalidArgument);

  // The refused Create did not steal the ticker from the first wheel.
  ASSERT_TRUE((*first)->SetTimer(1, 1, kInterval).ok());
  ticker->Tick();
  EXPECT_EQ(first_fired.load(), 1);

  // Once the first wheel is gone the ticker can drive a new one.
  first->reset();
  std::atomic<int> second_fired{0};
  auto second = IntWheel::Create(ManualOptions(ticker),
                                 [&](int, int) { second_fired.fetch_add(1); });
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE((*second)->SetTimer(2, 2, kInterval).ok());
  ticker->Tick();
  EXPECT_EQ(second_fired.load(), 1);
}

// A callback that creates another wheel on the ManualTicker that is ticking
// it gets InvalidArgument (the ticker drives its wheel), not a deadlock on
// the ticker's lock, which the running Tick holds.
TEST(ErrorsCreate, SameManualTickerFromOwnCallbackIsRefused) {
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> code{-1};
  auto wheel = IntWheel::Create(ManualOptions(ticker), [&](int, int) {
    code.store(static_cast<int>(CreateCode(ManualOptions(ticker))));
  });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(1, 1, kInterval).ok());
  EXPECT_TRUE(FinishesInTime([&] { ticker->Tick(); }));
  EXPECT_EQ(code.load(), static_cast<int>(StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------
// docs/api.md Errors: SetTimer / MoveTimer delays.

TEST(ErrorsDelay, NonPositiveOrInfiniteDelaysAreRefusedAndChangeNothing) {
  ManualWheel w;
  ASSERT_TRUE(w.wheel().SetTimer(1, 10, 3 * kInterval).ok());
  for (absl::Duration bad :
       {absl::ZeroDuration(), -absl::Nanoseconds(1), -absl::Hours(5),
        -absl::InfiniteDuration(), absl::InfiniteDuration()}) {
    EXPECT_EQ(w.wheel().SetTimer(2, 20, bad).code(),
              StatusCode::kInvalidArgument)
        << absl::FormatDuration(bad);
    EXPECT_EQ(w.wheel().SetTimer(1, 30, bad).code(),
              StatusCode::kInvalidArgument)
        << absl::FormatDuration(bad);
    EXPECT_EQ(w.wheel().MoveTimer(1, bad).code(), StatusCode::kInvalidArgument)
        << absl::FormatDuration(bad);
  }
  // Chrono forms of the same mistakes.
  using DSec = std::chrono::duration<double>;
  EXPECT_EQ(w.wheel().SetTimer(2, 20, std::chrono::milliseconds(0)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel().SetTimer(2, 20, std::chrono::seconds(-1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel().MoveTimer(1, std::chrono::nanoseconds(-1)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel()
                .SetTimer(2, 20, DSec(std::numeric_limits<double>::quiet_NaN()))
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel()
                .MoveTimer(1, DSec(std::numeric_limits<double>::infinity()))
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel()
                .MoveTimer(1, DSec(-std::numeric_limits<double>::infinity()))
                .code(),
            StatusCode::kInvalidArgument);

  // Key 1 kept its value and deadline; key 2 never appeared.
  w.Tick(5);
  EXPECT_EQ(w.FireTick(1), 3);
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1)[0].value, 10);
  EXPECT_EQ(w.FireTick(2), -1);
  EXPECT_EQ(w.wheel().stats().applied, 1u);
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// Only delay <= 0 is refused: a positive chrono delay too short for
// absl::Duration to hold (a few picoseconds) is a delay below one interval,
// due on the next tick (S1), not a zero one.
TEST(ErrorsDelay, PositiveDelaysBelowANanosecondAreDueOnTheNextTick) {
  ManualWheel w;
  using Picos = std::chrono::duration<long long, std::pico>;
  using FracNanos = std::chrono::duration<double, std::nano>;
  EXPECT_TRUE(w.wheel().SetTimer(1, 1, Picos(5)).ok());
  EXPECT_TRUE(w.wheel().SetTimer(2, 2, FracNanos(0.1)).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, 5 * kInterval).ok());
  EXPECT_TRUE(w.wheel().MoveTimer(3, Picos(1)).ok());
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

// ---------------------------------------------------------------------------
// docs/api.md Errors: max_pending. The loop is held (HeldLoop), so nothing
// queued is applied until the test lets it go.

// max_pending bounds the commands queued: any value above what can ever be
// queued is no bound, not a refusal of every call (a size_t above INT64_MAX
// must not turn negative where it is converted inside).
TEST(ErrorsMaxPending, AHugeMaxPendingBoundsNothing) {
  for (std::size_t max_pending :
       {std::numeric_limits<std::size_t>::max(),
        static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()) + 1,
        static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())}) {
    Options options = TestOptions();
    options.max_pending = max_pending;
    ManualWheel w(8, nullptr, options);
    EXPECT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok()) << max_pending;
    Entries batch = {{2, 2}, {3, 3}};
    EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(batch), kInterval).ok());
    EXPECT_TRUE(w.wheel().RemoveTimers(std::vector<int>{3}).ok());
    w.Tick();
    EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2})) << max_pending;
  }
}

TEST(ErrorsMaxPending, FullQueueRefusesThenRecovers) {
  constexpr int kMaxPending = 5;
  HeldLoop held(kMaxPending);
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  // The loop is held: nothing is dequeued now.
  for (int k = 1; k <= kMaxPending; ++k) {
    EXPECT_TRUE(w.wheel().SetTimer(k, k, kInterval).ok()) << k;
  }
  EXPECT_EQ(w.wheel().SetTimer(100, 100, kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(w.wheel().SetTimer(100, 100, std::chrono::hours(1)).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(w.wheel().MoveTimer(1, kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(w.wheel().RemoveTimer(1).code(), StatusCode::kResourceExhausted);

  held.Release();
  // The accepted commands were all applied (set at tick 0 with one interval:
  // due on tick 1); the refused ones were not.
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2, 3, 4, 5}));
  // Room again.
  EXPECT_TRUE(w.wheel().SetTimer(100, 100, kInterval).ok());
  EXPECT_TRUE(w.wheel().RemoveTimer(100).ok());
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{HeldLoop::kHoldKey, 0}}));
}

// ---------------------------------------------------------------------------
// docs/api.md Errors: Drain and Stop from the wheel's own callbacks (and
// E4: empty Drain fn; E5: Tick from a callback).

TEST(ErrorsCallback, DrainAndStopFromExecuteFailWithoutDeadlock) {
  std::atomic<int> drain_code{-1}, stop_code{-1};
  ManualWheel w(8, [&](IntWheel& wheel, int, int) {
    drain_code.store(static_cast<int>(wheel.Drain([](int, int) {}).code()));
    stop_code.store(static_cast<int>(wheel.Stop().status().code()));
  });
  ASSERT_TRUE(FinishesInTime([&] {
    EXPECT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
    EXPECT_TRUE(w.wheel().SetTimer(2, 2, 3 * kInterval).ok());
    w.Tick();
  }));
  EXPECT_EQ(drain_code.load(),
            static_cast<int>(StatusCode::kFailedPrecondition));
  EXPECT_EQ(stop_code.load(),
            static_cast<int>(StatusCode::kFailedPrecondition));
  // The refused Stop did not stop the wheel.
  EXPECT_TRUE(w.wheel().SetTimer(3, 3, kInterval).ok());
  w.Tick(2);
  EXPECT_EQ(w.FireTick(3), 2);
  EXPECT_EQ(w.FireTick(2), 3);
}

TEST(ErrorsCallback, DrainAndStopFromDrainFnFail) {
  ManualWheel w;
  std::atomic<int> drain_fail{0}, stop_fail{0};
  IntWheel& wheel = w.wheel();
  ASSERT_TRUE(FinishesInTime([&] {
    for (int k = 0; k < 3; ++k)
      EXPECT_TRUE(wheel.SetTimer(k, k, kInterval).ok());
    EXPECT_TRUE(wheel
                    .Drain([&](int, int) {
                      if (wheel.Drain([](int, int) {}).code() ==
                          StatusCode::kFailedPrecondition) {
                        drain_fail.fetch_add(1);
                      }
                      if (wheel.Stop().status().code() ==
                          StatusCode::kFailedPrecondition) {
                        stop_fail.fetch_add(1);
                      }
                    })
                    .ok());
  }));
  EXPECT_EQ(drain_fail.load(), 3);
  EXPECT_EQ(stop_fail.load(), 3);
  EXPECT_TRUE(w.wheel().SetTimer(9, 9, kInterval).ok());
  w.Tick();
  EXPECT_EQ(w.FireTick(9), 1);
}

TEST(ErrorsCallback, TickFromCallbackReturnsAtOnce) {
  std::shared_ptr<ManualTicker> ticker;
  std::atomic<bool> returned{false};
  ManualWheel w(8, [&](IntWheel&, int, int) {
    ticker->Tick();
    returned.store(true);
  });
  ticker = w.ticker_ptr();
  ASSERT_TRUE(FinishesInTime([&] {
    EXPECT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
    w.Tick();
  }));
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(w.wheel().stats().ticks, 1u);
}

TEST(ErrorsDrain, EmptyFnIsRefused) {
  ManualWheel w;
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  EXPECT_EQ(w.wheel().Drain(IntWheel::DrainFn()).code(),
            StatusCode::kInvalidArgument);
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 1);  // nothing was drained
}

}  // namespace errors_test
}  // namespace timingwheel
