// RealClock's deadline arithmetic: the integer fast path must agree with the
// exact Duration arithmetic (docs/api.md S1: a timer fires on the first tick
// at or after now + delay, never earlier; S5 and E5: huge delays saturate
// instead of overflowing). Internal: checks the pieces behind those rules, not
// the public API.
#include "timingwheel/internal/time/clock.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/steady_now.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/internal/time/cycle_clock.h"
#include "timingwheel/internal/wheel/wheel.h"

namespace timingwheel::internal {
namespace {

using SteadyClock = std::chrono::steady_clock;
using ::timingwheel::testing::NowNs;  // SteadyClock's now, in nanoseconds

absl::Duration Since(SteadyClock::time_point start) {
  return absl::FromChrono(SteadyClock::now() - start);
}

// DeadlineTick reads the clock once, somewhere between `before` and `after`,
// from the cycle counter (CycleClock: never behind the steady clock, at most
// kMaxAheadNs ahead); its answer must be the exact ceiling for some instant
// in that bracket, widened by that.
void ExpectBracketed(absl::Duration interval, absl::Duration delay) {
  const SteadyClock::time_point start =
      SteadyClock::now() - std::chrono::seconds(3);
  const RealClock clock(interval, start);
  const absl::Duration before = Since(start);
  const std::uint64_t tick = clock.DeadlineTick(delay);
  const absl::Duration after = Since(start);
  EXPECT_GE(tick, CeilTicks(before + delay, interval))
      << "interval " << interval << " delay " << delay;
  EXPECT_LE(tick, CeilTicks(after + absl::Nanoseconds(CycleClock::kMaxAheadNs) +
                                delay,
                            interval))
      << "interval " << interval << " delay " << delay;
  // Never early: the tick's time is at or after the earliest deadline.
  if (tick < kMaxTick) {
    EXPECT_GE(interval * static_cast<std::int64_t>(tick), before + delay);
  }
}

TEST(RealClock, DeadlineTickMatchesExactArithmetic) {
  const absl::Duration intervals[] = {
      absl::Nanoseconds(1),
      absl::Nanoseconds(3),
      absl::Microseconds(7),
      absl::Milliseconds(1),
      absl::Seconds(1),
      absl::Nanoseconds(1) + absl::Nanoseconds(1) / 4,  // not whole ns
  };
  const absl::Duration delays[] = {
      absl::Nanoseconds(1) / 4,
      absl::Nanoseconds(1),
      absl::Nanoseconds(2),
      absl::Microseconds(999) + absl::Nanoseconds(1) / 2,
      absl::Milliseconds(1),
      absl::Milliseconds(1) + absl::Nanoseconds(1) / 4,
      absl::Seconds(1),
      absl::Hours(24 * 365),
      absl::Hours(24 * 365 * 100),
      absl::Hours(24 * 365 * 200),
      absl::Seconds(INT64_MAX / 2)};
  for (absl::Duration interval : intervals) {
    for (absl::Duration delay : delays) ExpectBracketed(interval, delay);
  }
}

TEST(RealClock, HugeDelaysSaturate) {
  const RealClock clock(absl::Nanoseconds(1));
  EXPECT_EQ(clock.DeadlineTick(absl::Hours(24 * 365 * 1000)), kMaxTick);
  EXPECT_EQ(clock.DeadlineTick(absl::Seconds(INT64_MAX)), kMaxTick);
}

// Where tick j falls on the steady clock: start + j * interval, exactly,
// and saturating instead of overflowing for ticks beyond any real time.
TEST(RealClock, SteadyNanosOfTickIsStartPlusWholeIntervals) {
  const SteadyClock::time_point start = SteadyClock::now();
  const std::int64_t start_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          start.time_since_epoch())
          .count();
  const RealClock clock(absl::Milliseconds(10), start);
  EXPECT_EQ(clock.SteadyNanosOfTick(0), start_ns);
  EXPECT_EQ(clock.SteadyNanosOfTick(3), start_ns + 30000000);
  EXPECT_EQ(clock.SteadyNanosOfTick(kMaxTick), INT64_MAX);
  EXPECT_EQ(clock.SteadyNanosOfTick(kNever), INT64_MAX);
  const RealClock fine(absl::Nanoseconds(3), start);
  EXPECT_EQ(fine.SteadyNanosOfTick(1000), start_ns + 3000);
}

TEST(RealClock, TicksDueCountsWholeIntervalsSinceStart) {
  const SteadyClock::time_point start =
      SteadyClock::now() - std::chrono::milliseconds(2500);
  const RealClock clock(absl::Seconds(1), start);
  // Bracketed by clock reads, so a preempted test still knows what to expect.
  auto whole_seconds_since_start = [&] {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() -
                                                         start)
            .count());
  };
  const std::uint64_t low = whole_seconds_since_start();
  const std::uint64_t due = clock.TicksDue();
  const std::uint64_t high = whole_seconds_since_start();
  EXPECT_GE(due, low);
  EXPECT_LE(due, high);
  EXPECT_GE(due, 2u);
  EXPECT_EQ(clock.UntilTick(1), absl::ZeroDuration());
  EXPECT_EQ(clock.UntilTick(2), absl::ZeroDuration());
  const absl::Duration until = clock.UntilTick(high + 1);
  EXPECT_GT(until, absl::ZeroDuration());
  EXPECT_LE(until, absl::Seconds(1));
}

// CycleClock's contract, from several threads at once, through the start-up
// measurement (the first reads of the process may be in it) and across
// anchor renewals (pauses longer than kAnchorNs): every read is at or after
// the steady clock read before it, and at most kMaxAheadNs after the one
// read after it, give or take the thread being descheduled between reads,
// which only the later bound can see: it is checked on reads that came
// quickly (most of them).
TEST(CycleClock, NeverBehindTheSteadyClockAndNeverFarAhead) {
  constexpr int kThreads = 4;
  constexpr int kReads = 200000;
  std::atomic<std::int64_t> behind{0}, far_ahead{0}, quick{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kReads; ++i) {
        if (i % 1000 == t) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        const std::int64_t before = NowNs();
        const std::int64_t read = CycleClock::NanosNotBefore();
        const std::int64_t after = NowNs();
        if (read < before) behind.fetch_add(1);
        if (after - before < 2000) {
          quick.fetch_add(1);
          if (read > after + CycleClock::kMaxAheadNs) far_ahead.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(behind.load(), 0);
  EXPECT_EQ(far_ahead.load(), 0);
  EXPECT_GT(quick.load(), kThreads * kReads / 2);  // the bound was tested
}

// After the start-up measurement, reads come from the counter wherever the
// kernel's clock is the counter (x86-64, clocksource tsc), and the
// contract still holds across a long stretch of reads.
TEST(CycleClock, SwitchesToTheCounterOnceMeasured) {
  const std::int64_t until =
      NowNs() + 3 * CycleClock::kCalibrationNs + 50'000'000;
  while (!CycleClock::UsesCounter() && NowNs() < until) {
    CycleClock::NanosNotBefore();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
#if defined(__x86_64__)
  std::ifstream source(
      "/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  if (!(source >> name) || name != "tsc") {
    GTEST_SKIP() << "the kernel's clock is not the cycle counter here";
  }
  EXPECT_TRUE(CycleClock::UsesCounter());
#else
  EXPECT_FALSE(CycleClock::UsesCounter());
#endif
  for (int i = 0; i < 1000000; ++i) {
    const std::int64_t before = NowNs();
    ASSERT_GE(CycleClock::NanosNotBefore(), before);
  }
}

TEST(CeilTicks, RoundsUpAndSaturates) {
  EXPECT_EQ(CeilTicks(absl::Milliseconds(10), absl::Milliseconds(10)), 1u);
  EXPECT_EQ(CeilTicks(absl::Milliseconds(15), absl::Milliseconds(10)), 2u);
  EXPECT_EQ(CeilTicks(absl::Nanoseconds(1), absl::Seconds(1)), 1u);
  EXPECT_EQ(CeilTicks(absl::ZeroDuration(), absl::Seconds(1)), 0u);
  EXPECT_EQ(CeilTicks(absl::InfiniteDuration(), absl::Nanoseconds(1)),
            kMaxTick);
}

}  // namespace
}  // namespace timingwheel::internal
