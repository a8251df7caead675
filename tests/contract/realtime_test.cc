// docs/api.md against the real clock: S1 (never early), the Time paragraph
// (a deadline counts from the call, ticks are drift-free and missed ticks
// are caught up) and S11 (an idle wheel does not spin). Every bound here is
// generous: these tests catch early firing, skipped or drifting ticks, a
// deadline read late and a spinning loop, and never decide how fast the
// library is.

#include <dirent.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/hang_guard.h"
#include "../common/steady_now.h"
#include "absl/hash/hash.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace realtime_test {

using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::NowNs;

// Process CPU time (all threads), in seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Fire times (steady clock, ns) per key, for keys 0..n-1.
class FireTimes {
 public:
  explicit FireTimes(int n) : times_(n) {}
  void Record(int key) {
    const std::int64_t now = NowNs();
    std::lock_guard<std::mutex> lock(mu_);
    times_.at(key).push_back(now);
    ++count_;
    cv_.notify_all();
  }
  // Waits until `n` fires are recorded or kHangGuard passes.
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(kHangGuard),
                        [this, n] { return count_ >= n; });
  }
  std::vector<std::vector<std::int64_t>> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
  }

 private:
  // std::mutex, not absl::Mutex: visible to ThreadSanitizer even with an
  // uninstrumented Abseil.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<std::int64_t>> times_;
  int count_ = 0;
};

Options RealOptions(int num_slots, int execute_workers = 1) {
  Options options;
  options.interval = absl::Milliseconds(1);
  options.num_slots = num_slots;
  options.execute_workers = execute_workers;
  return options;
}

// docs/api.md S1 with real time: a timer never fires before (time of the call)
// + delay. The earliest legal fire time is bounded below by the steady clock
// read just before the call, because the wheel reads "now" inside the call.
TEST(RealTime, NeverEarlyAgainstTheClock) {
  constexpr int kKeys = 300;
  FireTimes fires(kKeys);
  auto wheel = TimingWheel<int, int>::Create(
      RealOptions(16, 2), [&](int key, int) { fires.Record(key); });
  ASSERT_TRUE(wheel.ok());
  std::mt19937 rng(7);
  // Per key, the lower bound of its deadline: the smaller of the Set's and
  // the Move's, since the Move may be applied after the Set already fired...
  // except that a Move to later cannot make an already-applied Set fire
  // earlier, so min() is a sound (if loose) bound either way.
  std::vector<std::int64_t> earliest(kKeys);
  for (int k = 0; k < kKeys; ++k) {
    // 50 us .. 80 ms: sub-interval, fractional, and up to 5 rotations.
    const absl::Duration delay = absl::Microseconds(50 + rng() % 80000);
    const std::int64_t start = NowNs();
    ASSERT_TRUE((*wheel)->SetTimer(k, k, delay).ok());
    earliest[k] = start + absl::ToInt64Nanoseconds(delay);
    if (k % 37 == 0) absl::SleepFor(absl::Microseconds(1300));  // vary phase
  }
  for (int k = 0; k < kKeys; k += 3) {
    const absl::Duration delay = absl::Microseconds(100 + rng() % 40000);
    const std::int64_t start = NowNs();
    ASSERT_TRUE((*wheel)->MoveTimer(k, delay).ok());
    earliest[k] =
        std::min(earliest[k], start + absl::ToInt64Nanoseconds(delay));
  }
  ASSERT_TRUE(fires.WaitFor(kKeys));
  const auto times = fires.Get();
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_EQ(times[k].size(), 1u) << "key " << k;
    EXPECT_GE(times[k][0], earliest[k])
        << "key " << k << " fired " << (earliest[k] - times[k][0]) / 1000.0
        << " us early";
  }
  EXPECT_EQ((*wheel)->stats().fired, static_cast<std::uint64_t>(kKeys));
}

// Many 1 ms ticks: a timer on every one of the first 1000 ticks fires, none
// early, and the wheel's tick count follows the clock (not fewer ticks than
// elapsed time allows would mean drift; more would mean running ahead).
TEST(RealTime, EveryTickAtOneMillisecondFires) {
  constexpr int kKeys = 1000;
  FireTimes fires(kKeys);
  const std::int64_t before_create = NowNs();
  auto wheel = TimingWheel<int, int>::Create(
      RealOptions(64), [&](int key, int) { fires.Record(key); });
  ASSERT_TRUE(wheel.ok());
  const std::int64_t t0 = NowNs();
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Milliseconds(k + 1)).ok());
  }
  ASSERT_TRUE(fires.WaitFor(kKeys));
  const std::int64_t all_fired = NowNs();
  const auto times = fires.Get();
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_EQ(times[k].size(), 1u) << "key " << k;
    EXPECT_GE(times[k][0], t0 + (k + 1) * 1000000LL) << "key " << k;
  }
  const Stats s = (*wheel)->stats();
  EXPECT_GE(s.ticks, static_cast<std::uint64_t>(kKeys));
  EXPECT_LE(s.ticks, static_cast<std::uint64_t>(
                         (NowNs() - before_create) / 1000000 + 1));
  // Generous: 1 s of timers done within 1 s + 5 s.
  EXPECT_LT(all_fired - t0, 6'000'000'000LL);
}

// A hash that stalls the loop thread once, for kStall, when it first hashes
// kStallKey: the loop falls behind the clock and must catch up.
constexpr int kStallKey = -1;
constexpr absl::Duration kStall = absl::Seconds(2);
std::atomic<bool> g_stall_armed{false};
struct StallingHash {
  std::size_t operator()(int key) const {
    if (key == kStallKey && g_stall_armed.exchange(false)) {
      absl::SleepFor(kStall);
    }
    return absl::Hash<int>()(key);
  }
};

// Drift-free catch-up: ticks missed while the loop was stalled are run back
// to back (every timer due then fires, none early), and later ticks stay on
// the absolute schedule start + j * interval rather than shifting by the
// stall. A wheel that counted ticks from its last wake-up would fire the 4 s
// timer about 6 s after the start; the bound leaves 1.6 s for a slow machine.
TEST(RealTime, CatchesUpAfterAStallWithoutDrift) {
  constexpr int kEarly = 50;  // due during the stall: 20, 40, ... 1000 ms
  FireTimes fires(kEarly + 1);
  auto wheel = TimingWheel<int, int, StallingHash>::Create(
      RealOptions(32), [&](int key, int) {
        if (key != kStallKey) fires.Record(key);
      });
  ASSERT_TRUE(wheel.ok());
  const std::int64_t t0 = NowNs();
  for (int k = 0; k < kEarly; ++k) {
    ASSERT_TRUE(
        (*wheel)->SetTimer(k, k, absl::Milliseconds(20 * (k + 1))).ok());
  }
  ASSERT_TRUE((*wheel)->SetTimer(kEarly, 0, absl::Milliseconds(4000)).ok());
  g_stall_armed.store(true);
  ASSERT_TRUE((*wheel)->SetTimer(kStallKey, 0, absl::Hours(1)).ok());
  ASSERT_TRUE(fires.WaitFor(kEarly + 1));
  const auto times = fires.Get();
  for (int k = 0; k < kEarly; ++k) {
    ASSERT_EQ(times[k].size(), 1u) << "key " << k;
    EXPECT_GE(times[k][0], t0 + 20'000'000LL * (k + 1)) << "key " << k;
  }
  ASSERT_EQ(times[kEarly].size(), 1u);
  EXPECT_GE(times[kEarly][0], t0 + 4'000'000'000LL);
  EXPECT_LT(times[kEarly][0], t0 + 5'600'000'000LL)
      << "ticks after the stall drifted by about the stall";
}

// A hash that, the first time it hashes kHoldKey after being armed, tells
// the test and then stalls the loop thread (the only thread that hashes keys)
// for kHold.
constexpr int kHoldKey = -2;
constexpr absl::Duration kHold = absl::Seconds(2);
std::atomic<bool> g_hold_armed{false};
std::mutex g_hold_mu;
std::condition_variable g_hold_cv;
bool g_holding = false;  // guarded by g_hold_mu
struct HoldingHash {
  std::size_t operator()(int key) const {
    if (key == kHoldKey && g_hold_armed.exchange(false)) {
      {
        std::lock_guard<std::mutex> lock(g_hold_mu);
        g_holding = true;
      }
      g_hold_cv.notify_all();
      absl::SleepFor(kHold);
    }
    return absl::Hash<int>()(key);
  }
};

// docs/api.md Time: with real time, a command's start `s` is read when the
// call is made, not when the loop gets to the command. A SetTimer and a
// MoveTimer made while the loop is stalled for 2 s, with a 3 s delay, are
// due 3 s after their calls (about 1 s after the loop resumes); counted from
// when the loop applied them, they would fire about 5 s after the calls.
// The bound leaves 1.6 s for a slow machine.
TEST(RealTime, DeadlineCountsFromTheCallNotTheLoop) {
  FireTimes fires(2);
  auto wheel = TimingWheel<int, int, HoldingHash>::Create(
      RealOptions(32), [&](int key, int) {
        if (key == 0 || key == 1) fires.Record(key);
      });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(1, 1, absl::Hours(1)).ok());
  g_hold_armed.store(true);
  ASSERT_TRUE((*wheel)->SetTimer(kHoldKey, 0, absl::Hours(1)).ok());
  {
    std::unique_lock<std::mutex> lock(g_hold_mu);
    ASSERT_TRUE(g_hold_cv.wait_for(lock, absl::ToChronoNanoseconds(kHangGuard),
                                   [] { return g_holding; }));
  }
  // The loop is stalled now; key 1's set is applied before its move (S9).
  std::int64_t called[2];
  called[0] = NowNs();
  ASSERT_TRUE((*wheel)->SetTimer(0, 0, absl::Seconds(3)).ok());
  called[1] = NowNs();
  ASSERT_TRUE((*wheel)->MoveTimer(1, absl::Seconds(3)).ok());
  ASSERT_TRUE(fires.WaitFor(2));
  const auto times = fires.Get();
  for (int key : {0, 1}) {
    SCOPED_TRACE(key == 0 ? "SetTimer" : "MoveTimer");
    ASSERT_EQ(times[key].size(), 1u);
    EXPECT_GE(times[key][0], called[key] + 3'000'000'000LL) << "fired early";
    EXPECT_LT(times[key][0], called[key] + 4'600'000'000LL)
        << "the deadline was counted from when the loop applied the call";
  }
}

// docs/api.md B1: a batch's items all have "the same submission time s,
// read once". One value in the middle of the batch takes 1 s to move into
// the queue; with the clock read per item, the items after it would be due
// 1 s later than the others. Bounds: none early, and all within 0.8 s of
// their common deadline.
class SlowToMoveOnce {
 public:
  SlowToMoveOnce(int v, bool slow) : v_(v), slow_(slow) {}
  SlowToMoveOnce(SlowToMoveOnce&& o) noexcept : v_(o.v_), slow_(false) {
    if (std::exchange(o.slow_, false)) absl::SleepFor(absl::Seconds(1));
  }
  SlowToMoveOnce& operator=(SlowToMoveOnce&& o) noexcept {
    v_ = o.v_;
    slow_ = std::exchange(o.slow_, false);
    return *this;
  }
  int value() const { return v_; }

 private:
  int v_;
  bool slow_;
};

TEST(RealTime, ABatchsItemsShareOneSubmissionTime) {
  constexpr int kItems = 100;
  FireTimes fires(kItems);
  auto wheel = TimingWheel<int, SlowToMoveOnce>::Create(
      RealOptions(32), [&](int key, SlowToMoveOnce v) {
        EXPECT_EQ(v.value(), key);
        fires.Record(key);
      });
  ASSERT_TRUE(wheel.ok());
  std::vector<std::pair<int, SlowToMoveOnce>> items;
  items.reserve(kItems);  // built in place: the first move is the batch's
  for (int k = 0; k < kItems; ++k) {
    items.emplace_back(std::piecewise_construct, std::forward_as_tuple(k),
                       std::forward_as_tuple(k, k == kItems / 2));
  }
  const std::int64_t t0 = NowNs();
  ASSERT_TRUE(
      (*wheel)->SetTimers(absl::MakeSpan(items), absl::Seconds(1)).ok());
  const std::int64_t t1 = NowNs();
  ASSERT_GE(t1 - t0, 1'000'000'000LL) << "the slow move did not happen";
  ASSERT_TRUE(fires.WaitFor(kItems));
  const auto times = fires.Get();
  for (int k = 0; k < kItems; ++k) {
    ASSERT_EQ(times[k].size(), 1u) << k;
    EXPECT_GE(times[k][0], t0 + 1'000'000'000LL) << "item " << k << " early";
    EXPECT_LT(times[k][0], t0 + 1'800'000'000LL)
        << "item " << k << " was due later than the batch's submission time";
  }
}

// docs/api.md S11: a sleeping loop wakes for the next command, not only for
// its next occupied tick. With one timer an hour out, the loop sleeps (at
// most a second at a time, a safety net); a timer set then with a 2 ms
// delay fires a few milliseconds later. A loop that noticed commands only
// when its sleep ran out would fire them about 500 ms late on average; the
// bound on the median of 10 rounds, 250 ms, only tells those apart.
TEST(RealTime, ASleepingLoopWakesForTheNextCommand) {
  constexpr int kRounds = 10;
  FireTimes fires(kRounds + 1);
  auto wheel = TimingWheel<int, int>::Create(
      RealOptions(512), [&](int key, int) { fires.Record(key); });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(kRounds, 0, absl::Hours(1)).ok());
  std::vector<std::int64_t> late(kRounds);
  for (int k = 0; k < kRounds; ++k) {
    absl::SleepFor(absl::Milliseconds(300));  // the loop is asleep by now
    const std::int64_t due = NowNs() + 2'000'000;
    ASSERT_TRUE((*wheel)->SetTimer(k, 0, absl::Milliseconds(2)).ok());
    ASSERT_TRUE(fires.WaitFor(k + 1));
    const auto times = fires.Get();
    ASSERT_EQ(times[k].size(), 1u);
    late[k] = times[k][0] - due;
    EXPECT_GE(late[k], 0) << "fired early";
  }
  std::sort(late.begin(), late.end());
  EXPECT_LT(late[kRounds / 2], 250'000'000)
      << "median lateness " << late[kRounds / 2] / 1e6 << " ms";
}

// docs/api.md S11: measures the process's CPU time over ~1 s of idling.
double IdleCpuSeconds() {
  absl::SleepFor(absl::Milliseconds(200));  // let start-up work settle
  const double before = ProcessCpuSeconds();
  absl::SleepFor(absl::Seconds(1));
  return ProcessCpuSeconds() - before;
}

// A 1 ms wheel with nothing to do must sleep, not tick 1000 times a second.
constexpr double kIdleCpuBound = 0.05;

TEST(RealTime, IdleEmptyWheelUsesNoCpu) {
  auto wheel =
      TimingWheel<int, int>::Create(RealOptions(512, 4), [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  EXPECT_LT(IdleCpuSeconds(), kIdleCpuBound);
}

// Create accepts any interval from 1 ns: even then an empty wheel sleeps. (A
// round of the loop takes longer than such a tick, so a loop that goes
// round again whenever a tick is due would never sleep.)
TEST(RealTime, IdleEmptyWheelWithANanosecondIntervalUsesNoCpu) {
  for (absl::Duration interval :
       {absl::Nanoseconds(1), absl::Nanoseconds(30)}) {
    Options options = RealOptions(512);
    options.interval = interval;
    auto wheel = TimingWheel<int, int>::Create(options, [](int, int) {});
    ASSERT_TRUE(wheel.ok());
    EXPECT_LT(IdleCpuSeconds(), kIdleCpuBound) << interval;
  }
}

// Timers far in the future on a small wheel (every slot is occupied, and
// each is many rotations away): still asleep, not waking every rotation.
TEST(RealTime, IdleWheelWithFarTimersUsesNoCpu) {
  std::atomic<int> fired{0};
  auto wheel = TimingWheel<int, int>::Create(
      RealOptions(8), [&](int, int) { fired.fetch_add(1); });
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 1000; ++k) {
    ASSERT_TRUE((*wheel)
                    ->SetTimer(k, k, absl::Minutes(10) + absl::Milliseconds(k))
                    .ok());
  }
  EXPECT_LT(IdleCpuSeconds(), kIdleCpuBound);
  EXPECT_EQ(fired.load(), 0);
  auto stopped = (*wheel)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->size(), 1000u);
}

// After a burst of work the wheel goes back to sleep.
TEST(RealTime, IdleAfterActivityUsesNoCpu) {
  FireTimes fires(200);
  auto wheel = TimingWheel<int, int>::Create(
      RealOptions(16), [&](int key, int) { fires.Record(key); });
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 200; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Milliseconds(1 + k % 50)).ok());
  }
  ASSERT_TRUE(fires.WaitFor(200));
  ASSERT_TRUE((*wheel)->SetTimer(1000, 0, absl::Hours(2)).ok());
  EXPECT_LT(IdleCpuSeconds(), kIdleCpuBound);
}

// The library names its threads (README, "Threads"), so that top -H, perf
// and debuggers tell the loop from the workers: callbacks run on threads
// named tw-execute, Drain's fns on tw-drain, and the process has a tw-loop.
std::string ThisThreadName() {
  char name[16] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return "";
  return name;
}

int ThreadsNamed(const std::string& wanted) {
  int count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + d->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == wanted) ++count;
  }
  closedir(dir);
  return count;
}

// Whether the process's threads named `wanted` come to number `n`. A
// joined thread can stay listed in /proc/self/task for a moment after
// pthread_join returns (the kernel wakes the joiner before it releases the
// task), so a count taken right after a wheel's threads end, by this test
// or an earlier one in the process, is waited for rather than read once.
bool ThreadsNamedBecome(const std::string& wanted, int n) {
  return BecomesTrue([&] { return ThreadsNamed(wanted) == n; });
}

TEST(RealTime, ThreadsAreNamedForTools) {
  // No wheel is alive between tests: only threads of ended ones may show.
  ASSERT_TRUE(ThreadsNamedBecome("tw-loop", 0));
  std::mutex mu;
  std::vector<std::string> execute_names, drain_names;
  FireTimes fires(1);
  auto wheel =
      TimingWheel<int, int>::Create(RealOptions(16, 2), [&](int key, int) {
        {
          std::lock_guard<std::mutex> lock(mu);
          execute_names.push_back(ThisThreadName());
        }
        fires.Record(key);
      });
  ASSERT_TRUE(wheel.ok());
  EXPECT_EQ(ThreadsNamed("tw-loop"), 1);
  ASSERT_TRUE((*wheel)->SetTimer(0, 0, absl::Milliseconds(1)).ok());
  ASSERT_TRUE(fires.WaitFor(1));
  for (int k = 1; k <= 3; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Hours(1)).ok());
  }
  ASSERT_TRUE((*wheel)
                  ->Drain([&](int, int) {
                    std::lock_guard<std::mutex> lock(mu);
                    drain_names.push_back(ThisThreadName());
                  })
                  .ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(execute_names, std::vector<std::string>{"tw-execute"});
  EXPECT_EQ(drain_names, std::vector<std::string>(3, "tw-drain"));
}

// E7: a wheel that never drains costs no drain threads; the first Drain
// starts drain_workers of them, a later one reuses them, and Stop ends
// them.
TEST(RealTime, DrainThreadsStartAtTheFirstDrainAndEndWithTheWheel) {
  ASSERT_TRUE(ThreadsNamedBecome("tw-drain", 0));
  Options options = RealOptions(16);
  options.drain_workers = 3;
  auto wheel = TimingWheel<int, int>::Create(options, [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  std::atomic<int> drained{0};
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 10; ++k) {
      ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Hours(1)).ok());
    }
    EXPECT_EQ(ThreadsNamed("tw-drain"), round == 0 ? 0 : 3);
    ASSERT_TRUE((*wheel)->Drain([&](int, int) { ++drained; }).ok());
    EXPECT_EQ(drained.load(), 10 * (round + 1));
    EXPECT_EQ(ThreadsNamed("tw-drain"), 3);
  }
  ASSERT_TRUE((*wheel)->Stop().ok());
  EXPECT_TRUE(ThreadsNamedBecome("tw-drain", 0));
}

}  // namespace realtime_test
}  // namespace timingwheel
