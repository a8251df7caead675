// The docs/api.md contract, checked through the public header only: Types
// (ManualTicker::Tick, Options defaults, key and value types, chrono
// overloads), Behaviour S1-S10 (S11 is in realtime_test.cc, S7 in depth in
// drain_test.cc), every row of Errors, and the extensions E1 (expected_timers),
// E2 (stats()), E3 (extra Create checks), E4 (extra error rows), E5 (long
// delays, Tick from a callback) and E6 (Now()). docs/tests.md maps each rule to
// its tests. Every test here drives the wheel with a ManualTicker, so outcomes
// are decided by tick counts, never by sleeps; the few places that need real
// time (S10's slow callback, E6 with real time) use generous bounds.

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <ratio>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace {

using ::absl::StatusCode;

constexpr absl::Duration kInterval = absl::Milliseconds(10);
// Anything that a bug could turn into a hang waits at most this long.
constexpr absl::Duration kHangGuard = absl::Seconds(20);

// A one-shot event. The tests' own hand-offs use std::mutex, which
// ThreadSanitizer sees through pthread; the synchronization inside an
// uninstrumented Abseil build (absl::Mutex, absl::Notification) is invisible
// to it and would be reported as races.
class Event {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  // True if notified within `timeout`.
  bool WaitFor(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [this] { return notified_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

using IntWheel = TimingWheel<int, int>;

Options ManualOptions(std::shared_ptr<ManualTicker> ticker, int num_slots = 8) {
  Options options;
  options.interval = kInterval;
  options.num_slots = num_slots;
  options.ticker = std::move(ticker);
  return options;
}

// Options with the test interval, for tests that tweak another field.
Options TestOptions() {
  Options options;
  options.interval = kInterval;
  return options;
}

// TestOptions with Options::max_lag = `max_lag`.
Options TestOptionsWithMaxLag(absl::Duration max_lag) {
  Options options = TestOptions();
  options.max_lag = max_lag;
  return options;
}

// One execute call as seen by the test: the tick that ran it, what it got and
// on which thread.
struct Fire {
  int tick;
  int key;
  int value;
  std::thread::id thread;
};

// A TimingWheel<int, int, Hash> on its own ManualTicker that remembers, for
// every execute call, the tick that triggered it. Ticks are run one at a
// time so that each call can be attributed to its tick: ManualTicker::Tick
// returns only after that tick's callbacks have returned.
template <typename Hash>
class BasicManualWheel {
 public:
  using Wheel = TimingWheel<int, int, Hash>;
  // Runs after the fire is recorded, on the execute worker.
  using Hook = std::function<void(Wheel& wheel, int key, int value)>;

  explicit BasicManualWheel(int num_slots = 8, Hook hook = nullptr,
                            Options options = TestOptions())
      : ticker_(std::make_shared<ManualTicker>()), hook_(std::move(hook)) {
    options.num_slots = num_slots;
    options.ticker = ticker_;
    auto wheel = Wheel::Create(options, [this](int key, int value) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.push_back({0, key, value, std::this_thread::get_id()});
      }
      if (hook_) hook_(*wheel_, key, value);
    });
    EXPECT_TRUE(wheel.ok()) << wheel.status();
    if (wheel.ok()) wheel_ = std::move(*wheel);
  }

  Wheel& wheel() { return *wheel_; }
  ManualTicker& ticker() { return *ticker_; }
  std::shared_ptr<ManualTicker> ticker_ptr() { return ticker_; }
  int ticks() const { return ticks_; }
  const std::vector<Fire>& fires() const { return fires_; }

  // Runs n ticks, one at a time, recording which tick ran which callback.
  void Tick(int n = 1) {
    for (int i = 0; i < n; ++i) {
      ticker_->Tick();
      ++ticks_;
      std::lock_guard<std::mutex> lock(mu_);
      for (Fire& f : pending_) {
        f.tick = ticks_;
        fires_.push_back(f);
      }
      pending_.clear();
    }
  }

  // The fires of `key` so far.
  std::vector<Fire> FiresOf(int key) const {
    std::vector<Fire> out;
    for (const Fire& f : fires_) {
      if (f.key == key) out.push_back(f);
    }
    return out;
  }

  // The tick `key` fired on, -1 if it has not fired; fails the test if it
  // fired more than once.
  int FireTick(int key) const {
    std::vector<Fire> f = FiresOf(key);
    EXPECT_LE(f.size(), 1u) << "key " << key << " fired more than once";
    return f.empty() ? -1 : f.front().tick;
  }

  // Keys fired by exactly tick `tick`, sorted.
  std::vector<int> KeysFiredAt(int tick) const {
    std::vector<int> out;
    for (const Fire& f : fires_) {
      if (f.tick == tick) out.push_back(f.key);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::shared_ptr<ManualTicker> ticker_;
  Hook hook_;
  int ticks_ = 0;
  std::vector<Fire> fires_;
  std::mutex mu_;
  std::vector<Fire> pending_;
  // Last: destroyed first, while everything its callback touches is alive.
  std::unique_ptr<Wheel> wheel_;
};
using ManualWheel = BasicManualWheel<absl::Hash<int>>;

// Sorted copy of Stop's result, for comparisons.
template <typename K, typename V>
std::vector<std::pair<K, V>> Sorted(std::vector<std::pair<K, V>> v) {
  std::sort(v.begin(), v.end());
  return v;
}

template <typename Wheel>
std::vector<std::pair<int, int>> StopSorted(Wheel& wheel) {
  auto stopped = wheel.Stop();
  EXPECT_TRUE(stopped.ok()) << stopped.status();
  if (!stopped.ok()) return {};
  return Sorted(std::move(*stopped));
}

// Calls wheel.Stop() on another thread while something the Stop must wait
// for is held, and checks that it waits: it has not returned 50 ms later,
// and returns once `release` is notified. `on_return` runs on the stopping
// thread as soon as Stop returns, to check what must hold by then. Returns
// Stop's result, sorted.
template <typename Wheel>
std::vector<std::pair<int, int>> StopWaitsUntilReleased(
    Wheel& wheel, Event& release, const std::function<void()>& on_return) {
  Event stopped;
  std::vector<std::pair<int, int>> result;
  std::thread stopping([&] {
    auto r = wheel.Stop();
    EXPECT_TRUE(r.ok()) << r.status();
    on_return();
    if (r.ok()) result = std::move(*r);
    stopped.Notify();
  });
  EXPECT_FALSE(stopped.WaitFor(absl::Milliseconds(50)))
      << "Stop returned while it should wait";
  release.Notify();
  EXPECT_TRUE(stopped.WaitFor(kHangGuard));
  stopping.join();
  return Sorted(std::move(result));
}

// Runs fn on a new thread and waits for it at most kHangGuard; returns false
// (and detaches nothing: the thread is joined) if it did not finish in time,
// so a hang becomes a failure message before the test binary's timeout.
bool FinishesInTime(std::function<void()> fn) {
  Event done;
  std::thread t([&] {
    fn();
    done.Notify();
  });
  const bool in_time = done.WaitFor(kHangGuard);
  t.join();
  return in_time;
}

using Vec = std::vector<std::pair<int, int>>;

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
  EXPECT_EQ(Sorted(std::move(*stopped)), (Vec{{1, 1}}));
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
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
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
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// ---------------------------------------------------------------------------
// docs/api.md Errors: a stopped wheel, and docs/api.md S8.

TEST(S8Stop, StoppedWheelRefusesEveryCommand) {
  ManualWheel w;
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  ASSERT_TRUE(w.wheel().Stop().ok());
  EXPECT_EQ(w.wheel().SetTimer(2, 2, kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.wheel().SetTimer(1, 2, std::chrono::milliseconds(5)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.wheel().MoveTimer(1, kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.wheel().MoveTimer(1, std::chrono::seconds(1)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.wheel().RemoveTimer(1).code(), StatusCode::kFailedPrecondition);
  // Batch calls too, an empty one included ("any but Create and Stop").
  Vec none, one = {{3, 3}};
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(one), kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(one, (Vec{{3, 3}}));
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(none), kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.wheel().MoveTimers({}, kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(w.wheel().RemoveTimers({}).code(), StatusCode::kFailedPrecondition);
  bool drain_fn_called = false;
  EXPECT_EQ(w.wheel().Drain([&](int, int) { drain_fn_called = true; }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_FALSE(drain_fn_called);
  // Bad arguments on a stopped wheel still fail, with one of the two codes.
  EXPECT_NE(w.wheel().SetTimer(1, 1, absl::ZeroDuration()).code(),
            StatusCode::kOk);
}

TEST(S8Stop, AppliesAcceptedCommandsAndReturnsUnfiredEntries) {
  ManualWheel w;
  // No tick between these and Stop: Stop itself must apply them.
  ASSERT_TRUE(w.wheel().SetTimer(1, 10, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 20, 50 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 30, 2 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 21, 7 * kInterval).ok());  // supersedes
  ASSERT_TRUE(w.wheel().RemoveTimer(3).ok());
  ASSERT_TRUE(w.wheel().MoveTimer(1, 100 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(4, 40, absl::Hours(24 * 365 * 100)).ok());
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{1, 10}, {2, 21}, {4, 40}}));
  // A second Stop returns nothing.
  auto again = w.wheel().Stop();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->empty());
  EXPECT_TRUE(w.fires().empty());
}

TEST(S8Stop, FiredEntriesAreNotReturned) {
  ManualWheel w;
  for (int k = 1; k <= 6; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k * 10, k * kInterval).ok());
  }
  w.Tick(3);
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{4, 40}, {5, 50}, {6, 60}}));
  EXPECT_EQ(w.fires().size(), 3u);
}

TEST(S8Stop, TickOnStoppedWheelReturnsAtOnceAndFiresNothing) {
  ManualWheel w;
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  ASSERT_TRUE(w.wheel().Stop().ok());
  ManualTicker& ticker = w.ticker();
  EXPECT_TRUE(FinishesInTime([&] {
    ticker.Tick();
    ticker.Tick(1000);
  }));
  EXPECT_TRUE(w.fires().empty());
}

TEST(S8Stop, WaitsForCallbacksInFlightAndNoneRunAfter) {
  Event entered, release;
  std::atomic<bool> callback_returned{false};
  std::atomic<int> calls_after_stop{0};
  std::atomic<bool> stop_returned{false};
  std::atomic<int> key2_fired{0};
  ManualWheel w(8, [&](IntWheel&, int key, int) {
    if (stop_returned.load()) calls_after_stop.fetch_add(1);
    if (key == 2) key2_fired.fetch_add(1);
    if (key == 1) {
      entered.Notify();
      release.WaitFor(kHangGuard);
      // Make "Stop returned before this callback finished" observable.
      absl::SleepFor(absl::Milliseconds(20));
      callback_returned.store(true);
    }
  });
  ManualTicker& ticker = w.ticker();
  IntWheel& wheel = w.wheel();
  std::thread ticking([&] {
    EXPECT_TRUE(wheel.SetTimer(1, 1, kInterval).ok());
    EXPECT_TRUE(wheel.SetTimer(2, 2, 2 * kInterval).ok());
    ticker.Tick(5);
  });
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  // Stop cannot finish while the callback blocks.
  const Vec result = StopWaitsUntilReleased(w.wheel(), release, [&] {
    EXPECT_TRUE(callback_returned.load())
        << "Stop returned while a callback was running";
    stop_returned.store(true);
  });
  ticking.join();
  EXPECT_EQ(calls_after_stop.load(), 0);
  // Key 2 was due on tick 2: whether the Stop cut the Tick(5) short or not,
  // it ended exactly one way.
  if (key2_fired.load() == 1) {
    EXPECT_EQ(result, Vec());
  } else {
    EXPECT_EQ(key2_fired.load(), 0);
    EXPECT_EQ(result, (Vec{{2, 2}}));
  }
}

// Real time: callbacks queued behind a slow one when Stop is called must
// still run before Stop returns (S8: Stop "waits for every execute callback
// in flight"; S6: nothing handed to execute is lost). Each of ticks 1..20
// fires one timer, so 20 separate batches queue up behind the first,
// blocked, callback; Stop is called while they wait.
// (Found a bug: WorkerPool::Shutdown ran on Stop's thread, and moodycamel
// orders items per producer only, so exit tasks could overtake the loop's
// queued batches; typically 19 of 20 ran.)
TEST(S8Stop, RunsEveryQueuedCallbackBeforeReturning) {
  constexpr int kTimers = 20;
  Event entered, release;
  std::atomic<int> executed{0};
  Options options;
  options.interval = absl::Milliseconds(1);
  options.num_slots = 8;
  options.execute_workers = 1;
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    if (key == 1) {
      entered.Notify();
      release.WaitFor(kHangGuard);
    }
    executed.fetch_add(1);
  });
  ASSERT_TRUE(wheel.ok());
  for (int k = 1; k <= kTimers; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Milliseconds(k)).ok());
  }
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  // Wait until the loop has handed every timer to the workers.
  const absl::Time give_up = absl::Now() + kHangGuard;
  while ((*wheel)->stats().fired < kTimers && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ((*wheel)->stats().fired, static_cast<uint64_t>(kTimers));
  Event stopped;
  std::thread stopping([&] {
    auto r = (*wheel)->Stop();
    EXPECT_TRUE(r.ok());
    if (r.ok()) {
      EXPECT_TRUE(r->empty());
    }
    // Every callback handed out has run by the time Stop returns.
    EXPECT_EQ(executed.load(), kTimers);
    stopped.Notify();
  });
  // Give Stop time to reach its shutdown of the workers, then unblock.
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  EXPECT_TRUE(stopped.WaitFor(kHangGuard));
  stopping.join();
}

// Counts how many of its instances holding a live value were destroyed.
class Counted {
 public:
  Counted(int id, std::shared_ptr<std::atomic<int>> destroyed)
      : id_(id), destroyed_(std::move(destroyed)) {}
  Counted(Counted&& other) noexcept
      : id_(other.id_), destroyed_(std::move(other.destroyed_)) {}
  Counted& operator=(Counted&& other) noexcept {
    if (this != &other) {
      Release();
      id_ = other.id_;
      destroyed_ = std::move(other.destroyed_);
    }
    return *this;
  }
  ~Counted() { Release(); }
  int id() const { return id_; }

 private:
  void Release() {
    if (destroyed_ != nullptr) destroyed_->fetch_add(1);
    destroyed_.reset();
  }
  int id_;
  std::shared_ptr<std::atomic<int>> destroyed_;
};

TEST(S8Stop, DestructorDropsEntriesExactlyOnce) {
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> fired{0};
  {
    auto wheel = TimingWheel<int, Counted>::Create(
        ManualOptions(ticker), [&](int, Counted) { fired.fetch_add(1); });
    ASSERT_TRUE(wheel.ok());
    for (int k = 0; k < 100; ++k) {
      ASSERT_TRUE((*wheel)
                      ->SetTimer(k, Counted(k, destroyed), (k + 1) * kInterval)
                      .ok());
    }
    // 10 superseded, 10 removed, 5 fired (keys 20..24); 85 left to drop.
    for (int k = 0; k < 10; ++k) {
      ASSERT_TRUE(
          (*wheel)->SetTimer(k, Counted(k, destroyed), 200 * kInterval).ok());
    }
    for (int k = 10; k < 20; ++k) ASSERT_TRUE((*wheel)->RemoveTimer(k).ok());
    ticker->Tick(25);
    EXPECT_EQ(fired.load(), 5);
    EXPECT_EQ(destroyed->load(), 10 + 10 + 5);
  }
  EXPECT_EQ(destroyed->load(), 110);
}

// ---------------------------------------------------------------------------
// docs/api.md Errors: max_pending. The loop applies commands at once unless it
// is busy, so keep it busy deterministically: the loop is the only thread
// that hashes keys, and GatedHash blocks it inside the hash of a hold key
// until the test releases it. Meanwhile nothing is dequeued and no tick
// runs. (A blocked callback would not do: the loop goes on applying
// commands while callbacks run, S10.)

// The hold of the test running now: set by its owner, read by GatedHash.
struct LoopGate {
  Event entered, released;
  std::atomic<bool> armed{true};
};
std::atomic<LoopGate*> g_loop_gate{nullptr};

// absl::Hash, except that the first hash of the hold key (-1, or "hold")
// while a LoopGate is set blocks until the gate is released.
struct GatedHash {
  static void HoldIfGated() {
    LoopGate* gate = g_loop_gate.load();
    if (gate != nullptr && gate->armed.exchange(false)) {
      gate->entered.Notify();
      gate->released.WaitFor(kHangGuard);
    }
  }
  std::size_t operator()(int key) const {
    if (key == -1) HoldIfGated();
    return absl::Hash<int>()(key);
  }
  std::size_t operator()(const std::string& key) const {
    if (key == "hold") HoldIfGated();
    return absl::Hash<std::string>()(key);
  }
};

// Sets `gate` as the one GatedHash blocks on, for its lifetime.
class GateScope {
 public:
  explicit GateScope(LoopGate* gate) { g_loop_gate.store(gate); }
  ~GateScope() { g_loop_gate.store(nullptr); }
};

// A ManualWheel with `max_pending` whose loop is held: the hold key (-1)
// is set with a delay of an hour, and the loop blocks hashing it until
// Release(). It stays pending: Stop returns it.
class HeldLoop {
 public:
  static constexpr int kHoldKey = -1;

  explicit HeldLoop(std::size_t max_pending)
      : HeldLoop(WithMaxPending(max_pending)) {}
  explicit HeldLoop(Options options) : w_(8, nullptr, options) {
    EXPECT_TRUE(w_.wheel().SetTimer(kHoldKey, 0, absl::Hours(1)).ok());
  }
  ~HeldLoop() { Release(); }

  // Waits until the loop is held; false after kHangGuard.
  bool Held() { return gate_.entered.WaitFor(kHangGuard); }
  // Lets the loop go.
  void Release() { gate_.released.Notify(); }
  BasicManualWheel<GatedHash>& w() { return w_; }

 private:
  static Options WithMaxPending(std::size_t max_pending) {
    Options options = TestOptions();
    options.max_pending = max_pending;
    return options;
  }

  // Declared first: outlives the wheel, whose loop may be inside the hash.
  LoopGate gate_;
  GateScope scope_{&gate_};
  BasicManualWheel<GatedHash> w_;
};

// max_pending bounds the commands queued: any value above what can ever be
// queued is no bound, not a refusal of every call (a size_t above INT64_MAX
// once turned negative inside and refused everything).
TEST(ErrorsMaxPending, AHugeMaxPendingBoundsNothing) {
  for (std::size_t max_pending :
       {std::numeric_limits<std::size_t>::max(),
        static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()) + 1,
        static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())}) {
    Options options = TestOptions();
    options.max_pending = max_pending;
    ManualWheel w(8, nullptr, options);
    EXPECT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok()) << max_pending;
    Vec batch = {{2, 2}, {3, 3}};
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
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
}

// ---------------------------------------------------------------------------
// docs/api.md "Batch calls" B1-B3.

// B1: a batch is the single calls in span order with one submission time:
// every item of a SetTimers fires on the same tick, with its own value; a
// key twice in one batch is set twice (the later wins, the earlier is
// superseded); MoveTimers and RemoveTimers act on each key.
TEST(B1Batch, SetTimersIsEachSetInOrderWithOneSubmissionTime) {
  ManualWheel w(8);
  std::vector<std::pair<int, int>> items;
  for (int k = 0; k < 300; ++k) items.emplace_back(k, 1000 + k);
  items.emplace_back(7, 7777);  // set again later in the same batch
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(items), 3 * kInterval).ok());
  w.Tick(2);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  ASSERT_EQ(w.fires().size(), 300u);
  for (const Fire& f : w.fires()) {
    EXPECT_EQ(f.tick, 3);
    EXPECT_EQ(f.value, f.key == 7 ? 7777 : 1000 + f.key) << f.key;
  }
  const Stats s = w.wheel().stats();
  EXPECT_EQ(s.applied, 301u);
  EXPECT_EQ(s.superseded, 1u);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

TEST(B1Batch, MoveTimersAndRemoveTimersActOnEveryKey) {
  ManualWheel w(8);
  std::vector<std::pair<int, int>> items;
  for (int k = 0; k < 100; ++k) items.emplace_back(k, k);
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(items), kInterval).ok());
  std::vector<int> move, remove;
  for (int k = 0; k < 100; ++k) (k % 3 == 0 ? remove : move).push_back(k);
  move.push_back(1000);    // absent: ignored
  remove.push_back(1001);  // absent: ignored
  ASSERT_TRUE(w.wheel().MoveTimers(move, 5 * kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimers(remove).ok());
  w.Tick(4);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  std::vector<int> expected(move.begin(), move.end() - 1);
  EXPECT_EQ(w.KeysFiredAt(5), expected);
  const Stats s = w.wheel().stats();
  EXPECT_EQ(s.moved, expected.size());
  EXPECT_EQ(s.removed, 34u);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// B1: batches and single calls from one thread are applied in the order
// they were made.
TEST(B1Batch, BatchesKeepTheirPlaceAmongSingleCalls) {
  ManualWheel w(8);
  std::vector<std::pair<int, int>> first = {{1, 1}, {2, 2}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(first), kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(1).ok());
  const std::vector<int> both = {1, 2};
  ASSERT_TRUE(w.wheel().RemoveTimers(both).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 20, 2 * kInterval).ok());
  std::vector<std::pair<int, int>> again = {{1, 10}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(again), 2 * kInterval).ok());
  ASSERT_TRUE(w.wheel().MoveTimers(both, std::chrono::milliseconds(30)).ok());
  w.Tick(2);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(3), (std::vector<int>{1, 2}));
  for (const Fire& f : w.fires()) EXPECT_EQ(f.value, f.key * 10);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// B1: SetTimers moves keys and values out of the items it accepted; the
// chrono overloads take any duration.
TEST(B1Batch, SetTimersMovesOutOfItemsAndTakesChrono) {
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<std::string, std::string> fired;
  auto wheel = TimingWheel<std::string, std::string>::Create(
      ManualOptions(ticker), [&](std::string key, std::string value) {
        std::lock_guard<std::mutex> lock(mu);
        fired.emplace(std::move(key), std::move(value));
      });
  ASSERT_TRUE(wheel.ok());
  const std::string long_key(40, 'k'), long_value(40, 'v');
  std::vector<std::pair<std::string, std::string>> items = {
      {long_key + "1", long_value + "1"}, {long_key + "2", long_value + "2"}};
  ASSERT_TRUE(
      (*wheel)
          ->SetTimers(absl::MakeSpan(items), std::chrono::milliseconds(10))
          .ok());
  for (const auto& [key, value] : items) {
    EXPECT_TRUE(key.empty());  // libstdc++ empties a moved-from long string
    EXPECT_TRUE(value.empty());
  }
  const std::vector<std::string> keys = {long_key + "2"};
  ASSERT_TRUE((*wheel)->MoveTimers(keys, std::chrono::milliseconds(20)).ok());
  EXPECT_EQ(keys.front(), long_key + "2");  // copied, not moved
  ticker->Tick();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(fired, (std::map<std::string, std::string>{
                         {long_key + "1", long_value + "1"}}));
  }
  ticker->Tick();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[long_key + "2"], long_value + "2");
}

// B2: a refused batch has no effect and leaves `items` as it was: a bad
// delay, a stopped wheel.
TEST(B2Batch, RefusedBatchChangesNothing) {
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> fired{0};
  auto wheel = TimingWheel<std::string, std::string>::Create(
      ManualOptions(ticker), [&](std::string, std::string) { ++fired; });
  ASSERT_TRUE(wheel.ok());
  const std::string key(40, 'k'), value(40, 'v');
  std::vector<std::pair<std::string, std::string>> items = {{key, value}};
  const std::vector<std::string> keys = {key};
  for (absl::Duration bad :
       {absl::ZeroDuration(), -kInterval, absl::InfiniteDuration()}) {
    EXPECT_EQ((*wheel)->SetTimers(absl::MakeSpan(items), bad).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*wheel)->MoveTimers(keys, bad).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ((*wheel)
                ->SetTimers(absl::MakeSpan(items),
                            std::chrono::duration<double>(-1.0))
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(items.front(), std::make_pair(key, value));
  ticker->Tick(3);
  EXPECT_EQ(fired.load(), 0);
  EXPECT_EQ((*wheel)->stats().applied, 0u);

  ASSERT_TRUE((*wheel)->Stop().ok());
  EXPECT_EQ((*wheel)->SetTimers(absl::MakeSpan(items), kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ((*wheel)->MoveTimers(keys, kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ((*wheel)->RemoveTimers(keys).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(items.front(), std::make_pair(key, value));
}

// B2 with max_pending: a batch that does not fit now is refused whole
// (ResourceExhausted) and one that never can is InvalidArgument; the loop
// is held busy as in ErrorsMaxPending.
TEST(B2Batch, MaxPendingTakesAWholeBatchOrNone) {
  constexpr int kMaxPending = 5;
  HeldLoop held(kMaxPending);
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Vec three = {{1, 1}, {2, 2}, {3, 3}};
  Vec three_more = {{4, 4}, {5, 5}, {6, 6}};
  Vec six = {{11, 1}, {12, 2}, {13, 3}, {14, 4}, {15, 5}, {16, 6}};
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(three), kInterval).ok());
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(three_more), kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(three_more.front(), std::make_pair(4, 4));
  const std::vector<int> keys3 = {1, 2, 3};
  EXPECT_EQ(w.wheel().RemoveTimers(keys3).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(six), kInterval).code(),
            StatusCode::kInvalidArgument);
  // Larger than max_pending: never fits, for every batch call alike.
  const std::vector<int> keys6 = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(w.wheel().MoveTimers(keys6, kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel().RemoveTimers(keys6).code(), StatusCode::kInvalidArgument);
  const std::vector<int> keys2 = {1, 2};
  EXPECT_TRUE(w.wheel().MoveTimers(keys2, 2 * kInterval).ok());  // fills it

  held.Release();
  // Set at tick 0 with one interval, key 3 is due on tick 1; keys 1 and 2
  // were moved one tick further.
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{3}));
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
}

// B2 with values a move would visibly empty: a refused batch leaves every
// key and value in `items` as it was, whether it is refused for room now
// (ResourceExhausted: the loop is held inside the hash, so the queue
// stays full) or as larger than max_pending can ever take
// (InvalidArgument). An accepted batch then takes them.
TEST(B2Batch, ARefusedBatchLeavesStringItemsAsTheyWere) {
  using StringWheel = TimingWheel<std::string, std::string, GatedHash>;
  using Items = std::vector<std::pair<std::string, std::string>>;
  auto ticker = std::make_shared<ManualTicker>();
  Options options = TestOptions();
  options.ticker = ticker;
  options.max_pending = 3;
  LoopGate gate;
  GateScope scope(&gate);
  std::mutex mu;
  std::vector<std::string> fired;
  auto wheel =
      StringWheel::Create(options, [&](std::string key, std::string value) {
        std::lock_guard<std::mutex> lock(mu);
        fired.push_back(key + "=" + value);
      });
  ASSERT_TRUE(wheel.ok()) << wheel.status();
  StringWheel& w = **wheel;
  ASSERT_TRUE(w.SetTimer("hold", "", absl::Hours(1)).ok());
  ASSERT_TRUE(gate.entered.WaitFor(kHangGuard));
  const std::string pad(40, 'x');  // beyond the small-string buffer
  auto item = [&](int i) {
    return std::make_pair("key" + std::to_string(i) + pad,
                          "value" + std::to_string(i) + pad);
  };
  Items fill = {item(0), item(1)};
  ASSERT_TRUE(w.SetTimers(absl::MakeSpan(fill), kInterval).ok());
  Items two = {item(2), item(3)};
  const Items two_before = two;
  EXPECT_EQ(w.SetTimers(absl::MakeSpan(two), kInterval).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(two, two_before);
  Items four = {item(4), item(5), item(6), item(7)};
  const Items four_before = four;
  EXPECT_EQ(w.SetTimers(absl::MakeSpan(four), kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(four, four_before);
  gate.released.Notify();
  // max_pending counts commands queued and not yet applied, and nothing
  // says the loop has applied `fill` by now: this thread's Tick, queued
  // behind it, returns once it has (S9), and fires it.
  ticker->Tick();
  ASSERT_TRUE(w.SetTimers(absl::MakeSpan(two), kInterval).ok());
  ticker->Tick(2);
  std::lock_guard<std::mutex> lock(mu);
  std::sort(fired.begin(), fired.end());
  std::vector<std::string> want;
  for (int i : {0, 1, 2, 3})
    want.push_back(item(i).first + "=" + item(i).second);
  EXPECT_EQ(fired, want);
}

// B2 for MoveTimers on keys that are present: a refused MoveTimers moves
// none of them, whether it is refused for room now (ResourceExhausted),
// as larger than max_pending can ever take (InvalidArgument) or for a bad
// delay (InvalidArgument). The keys fire where they were.
TEST(B2Batch, ARefusedMoveTimersMovesNothing) {
  constexpr int kMaxPending = 3;
  HeldLoop held(kMaxPending);
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Vec two = {{1, 1}, {2, 2}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(two), kInterval).ok());
  const std::vector<int> keys12 = {1, 2};
  EXPECT_EQ(w.wheel().MoveTimers(keys12, 5 * kInterval).code(),
            StatusCode::kResourceExhausted);
  const std::vector<int> keys1234 = {1, 2, 3, 4};
  EXPECT_EQ(w.wheel().MoveTimers(keys1234, 5 * kInterval).code(),
            StatusCode::kInvalidArgument);
  held.Release();
  // Set at tick 0 with one interval: due on tick 1, not moved to 5.
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2}));

  Vec later = {{5, 5}, {6, 6}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(later), 2 * kInterval).ok());
  const std::vector<int> keys56 = {5, 6};
  for (absl::Duration bad :
       {absl::ZeroDuration(), -kInterval, absl::InfiniteDuration()}) {
    EXPECT_EQ(w.wheel().MoveTimers(keys56, bad).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(
      w.wheel().MoveTimers(keys56, std::chrono::duration<double>(-1.0)).code(),
      StatusCode::kInvalidArgument);
  w.Tick();
  EXPECT_TRUE(w.KeysFiredAt(2).empty());
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(3), (std::vector<int>{5, 6}));
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
}

// B2: a batch larger than max_pending is refused even when the queue is
// empty (the loop idle, every earlier command applied): InvalidArgument,
// for each batch call, with no effect on the keys it names.
TEST(B2Batch, ABatchLargerThanMaxPendingIsRefusedIntoAnEmptyQueue) {
  Options options = TestOptions();
  options.max_pending = 2;
  ManualWheel w(8, nullptr, options);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 3 * kInterval).ok());
  w.Tick();  // queued behind the sets: they are applied (S9)
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, 2 * kInterval).ok());
  w.Tick();  // all three due on tick 3; the queue is empty again

  Vec three = {{1, 10}, {2, 20}, {3, 30}};
  const Vec three_before = three;
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(three), kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(three, three_before);
  const std::vector<int> keys = {1, 2, 3};
  EXPECT_EQ(w.wheel().MoveTimers(keys, 10 * kInterval).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(w.wheel().RemoveTimers(keys).code(), StatusCode::kInvalidArgument);
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(3), (std::vector<int>{1, 2, 3}));
  // Key 1's value was not replaced by the refused SetTimers.
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1).front().value, 1);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// B3: an empty span is accepted and does nothing.
TEST(B3Batch, EmptySpanIsAcceptedAndDoesNothing) {
  ManualWheel w(8);
  Vec none;
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(none), kInterval).ok());
  EXPECT_TRUE(w.wheel().MoveTimers({}, kInterval).ok());
  EXPECT_TRUE(w.wheel().RemoveTimers({}).ok());
  w.Tick();
  EXPECT_EQ(w.wheel().stats().applied, 0u);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// B3: an empty span is accepted even when no command would be: the queue
// full under max_pending, or max_lag refusing (the loop held in both).
TEST(B3Batch, EmptySpanIsAcceptedWhenTheQueueIsFull) {
  Options pending = TestOptions();
  pending.max_pending = 1;
  for (const Options& options :
       {pending, TestOptionsWithMaxLag(absl::Nanoseconds(1))}) {
    HeldLoop held(options);
    auto& w = held.w();
    ASSERT_TRUE(held.Held());
    ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
    ASSERT_EQ(w.wheel().SetTimer(2, 2, kInterval).code(),
              StatusCode::kResourceExhausted);
    Vec none;
    EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(none), kInterval).ok());
    EXPECT_TRUE(w.wheel().MoveTimers({}, kInterval).ok());
    EXPECT_TRUE(w.wheel().RemoveTimers({}).ok());
    held.Release();
    w.Tick();
    EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1}));
    EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
  }
}

// Every timer ends exactly one way when several threads submit batches at
// once: each thread sets its own keys in batches, removes every third key
// in a batch, and moves the rest; each key then fires once or is removed
// once, and none is lost.
TEST(B1Batch, ConcurrentBatchesEndEveryTimerExactlyOnce) {
  constexpr int kThreads = 4, kPerThread = 3000, kBatch = 256;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<int, int> fired;  // key -> times fired
  auto wheel = IntWheel::Create(ManualOptions(ticker, 64), [&](int key, int) {
    std::lock_guard<std::mutex> lock(mu);
    ++fired[key];
  });
  ASSERT_TRUE(wheel.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> removed, kept;
      for (int start = 0; start < kPerThread; start += kBatch) {
        Vec items;
        for (int i = start; i < std::min(kPerThread, start + kBatch); ++i) {
          const int key = t * kPerThread + i;
          items.emplace_back(key, key);
          (i % 3 == 0 ? removed : kept).push_back(key);
        }
        EXPECT_TRUE(
            (*wheel)->SetTimers(absl::MakeSpan(items), 5 * kInterval).ok());
      }
      EXPECT_TRUE((*wheel)->RemoveTimers(removed).ok());
      EXPECT_TRUE((*wheel)->MoveTimers(kept, 10 * kInterval).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  ticker->Tick(9);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(fired.empty());
  }
  ticker->Tick();
  const Stats s = (*wheel)->stats();
  EXPECT_EQ(s.removed, static_cast<std::uint64_t>(kThreads * 1000));
  EXPECT_EQ(s.fired, static_cast<std::uint64_t>(kThreads * 2000));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fired.size(), static_cast<std::size_t>(kThreads * 2000));
  for (const auto& [key, times] : fired) {
    EXPECT_EQ(times, 1) << key;
    EXPECT_NE(key % kPerThread % 3, 0) << key;
  }
}

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
// calls are accepted again. The loop is held as in ErrorsMaxPending.
TEST(Overload, MaxLagRefusesWhileTheLoopIsBehind) {
  HeldLoop held(TestOptionsWithMaxLag(absl::Nanoseconds(1)));
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Vec big;
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
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
}

// Batch calls under max_lag are refused whole, like single calls: a
// SetTimers or MoveTimers into a queue that already holds more than
// max_lag's worth gets ResourceExhausted, leaves `items` as they were and
// has no effect.
TEST(Overload, MaxLagRefusesBatchesWhole) {
  HeldLoop held(TestOptionsWithMaxLag(absl::Nanoseconds(1)));
  auto& w = held.w();
  ASSERT_TRUE(held.Held());

  Vec first = {{1, 1}, {2, 2}};
  ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(first), kInterval).ok());
  Vec refused = {{3000, 3000}, {3001, 3001}};
  const Vec refused_before = refused;
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
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
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
  Vec batch;
  for (int k = kSingles + 1; k <= kSingles + kBatch; ++k) {
    batch.emplace_back(k, k);
  }
  EXPECT_TRUE(w.wheel().SetTimers(absl::MakeSpan(batch), kInterval).ok());

  held.Release();
  w.Tick();
  std::vector<int> all(kSingles + kBatch);
  std::iota(all.begin(), all.end(), 1);
  EXPECT_EQ(w.KeysFiredAt(1), all);
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
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
    Vec batch;
    for (int i = 0; i < kBatch; ++i, ++next) batch.emplace_back(next, next);
    ASSERT_TRUE(w.wheel().SetTimers(absl::MakeSpan(batch), kInterval).ok());
  }

  held.Release();
  w.Tick();
  std::vector<int> all(next - 1);
  std::iota(all.begin(), all.end(), 1);
  EXPECT_EQ(w.KeysFiredAt(1), all);
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{HeldLoop::kHoldKey, 0}}));
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
  const absl::Time give_up = absl::Now() + kHangGuard;
  while ((*wheel)->stats().fired < kThreads * kPerThread &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE((*wheel)->Stop().ok());
  EXPECT_GT(refusals.load(), 0);
  EXPECT_EQ(early.load(), 0);
  for (int key = 0; key < kThreads * kPerThread; ++key) {
    ASSERT_EQ(fires[key].load(), 1) << key;
  }
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

// ---------------------------------------------------------------------------
// docs/api.md S1: never early, and with a ManualTicker exactly on the
// documented tick.

TEST(S1Exact, KIntervalsFireOnKthTickAcrossCircles) {
  ManualWheel w(8);
  for (int k = 1; k <= 30; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, -k, k * kInterval).ok());
  }
  w.Tick(35);
  for (int k = 1; k <= 30; ++k) {
    EXPECT_EQ(w.FireTick(k), k) << "delay " << k << " intervals";
  }
  for (const Fire& f : w.fires()) EXPECT_EQ(f.value, -f.key);
}

TEST(S1Exact, CountsFromTheTickWhenSet) {
  ManualWheel w(8);
  w.Tick(5);
  for (int k = 1; k <= 20; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, k * kInterval).ok());
  }
  w.Tick(3);
  ASSERT_TRUE(w.wheel().SetTimer(100, 100, 9 * kInterval).ok());
  w.Tick(30);
  for (int k = 1; k <= 20; ++k) EXPECT_EQ(w.FireTick(k), 5 + k) << k;
  EXPECT_EQ(w.FireTick(100), 5 + 3 + 9);
}

TEST(S1Exact, SubIntervalDelaysFireOnNextTick) {
  ManualWheel w(8);
  const absl::Duration delays[] = {absl::Nanoseconds(0.25),
                                   absl::Nanoseconds(1), kInterval / 2,
                                   kInterval - absl::Nanoseconds(1)};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.wheel().SetTimer(i, i, delays[i]).ok());
  }
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{0, 1, 2, 3}));
  w.Tick(6);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.wheel().SetTimer(10 + i, i, delays[i]).ok());
  }
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(8), (std::vector<int>{10, 11, 12, 13}));
  EXPECT_EQ(w.fires().size(), 8u);
}

TEST(S1Exact, FractionalDelaysRoundUp) {
  ManualWheel w(4);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval * 1.5).ok());
  ASSERT_TRUE(
      w.wheel().SetTimer(2, 2, 2 * kInterval + absl::Nanoseconds(1)).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, kInterval * 4.01).ok());
  ASSERT_TRUE(w.wheel().SetTimer(4, 4, kInterval * 9.99).ok());
  w.Tick(12);
  EXPECT_EQ(w.FireTick(1), 2);
  EXPECT_EQ(w.FireTick(2), 3);
  EXPECT_EQ(w.FireTick(3), 5);
  EXPECT_EQ(w.FireTick(4), 10);
}

TEST(S1Exact, SetFromCallbackCountsFromTheCallbacksTick) {
  ManualWheel w(8, [](IntWheel& wheel, int key, int) {
    if (key != 1) return;
    EXPECT_TRUE(wheel.SetTimer(100, 0, kInterval).ok());
    EXPECT_TRUE(wheel.SetTimer(101, 0, kInterval / 2).ok());
    EXPECT_TRUE(wheel.SetTimer(102, 0, 3 * kInterval).ok());
    EXPECT_TRUE(wheel.SetTimer(103, 0, 9 * kInterval).ok());  // a full circle+
    EXPECT_TRUE(wheel.SetTimer(104, 0, kInterval * 1.5).ok());
    EXPECT_TRUE(wheel.MoveTimer(2, kInterval).ok());  // earlier
    EXPECT_TRUE(wheel.RemoveTimer(3).ok());
  });
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 20 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, 5 * kInterval).ok());
  w.Tick(25);
  EXPECT_EQ(w.FireTick(1), 3);
  EXPECT_EQ(w.FireTick(100), 4);
  EXPECT_EQ(w.FireTick(101), 4);
  EXPECT_EQ(w.FireTick(102), 6);
  EXPECT_EQ(w.FireTick(103), 12);
  EXPECT_EQ(w.FireTick(104), 5);
  EXPECT_EQ(w.FireTick(2), 4);
  EXPECT_EQ(w.FireTick(3), -1);
}

// ---------------------------------------------------------------------------
// docs/api.md S2: SetTimer on a present key.

TEST(S2Replace, LaterDeadlineNewValueFiresOnce) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 10, 5 * kInterval).ok());
  w.Tick(2);
  ASSERT_TRUE(w.wheel().SetTimer(1, 20, 10 * kInterval).ok());
  w.Tick(20);
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1)[0].tick, 12);
  EXPECT_EQ(w.FiresOf(1)[0].value, 20);
  EXPECT_EQ(w.wheel().stats().superseded, 1u);
}

TEST(S2Replace, EarlierDeadlineNewValueFiresOnce) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 10, 30 * kInterval).ok());
  w.Tick(1);
  ASSERT_TRUE(w.wheel().SetTimer(1, 30, 2 * kInterval).ok());
  w.Tick(40);
  ASSERT_EQ(w.FiresOf(1).size(), 1u);
  EXPECT_EQ(w.FiresOf(1)[0].tick, 3);
  EXPECT_EQ(w.FiresOf(1)[0].value, 30);
}

TEST(S2Replace, ManyReplacementsBeforeAnyTick) {
  ManualWheel w(4);
  for (int i = 1; i <= 50; ++i) {
    ASSERT_TRUE(w.wheel().SetTimer(7, i, ((i * 7) % 13 + 1) * kInterval).ok());
  }
  // The last one wins: value 50, delay (350 % 13 + 1) = 13 intervals.
  w.Tick(20);
  ASSERT_EQ(w.FiresOf(7).size(), 1u);
  EXPECT_EQ(w.FiresOf(7)[0].value, 50);
  EXPECT_EQ(w.FiresOf(7)[0].tick, 13);
  EXPECT_EQ(w.wheel().stats().superseded, 49u);
}

TEST(S2Replace, SetAfterFireInsertsAgain) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  w.Tick();
  ASSERT_TRUE(w.wheel().SetTimer(1, 2, kInterval).ok());
  w.Tick();
  ASSERT_EQ(w.FiresOf(1).size(), 2u);
  EXPECT_EQ(w.FiresOf(1)[1].value, 2);
  EXPECT_EQ(w.FiresOf(1)[1].tick, 2);
  EXPECT_EQ(w.wheel().stats().superseded, 0u);
}

// ---------------------------------------------------------------------------
// docs/api.md S3: MoveTimer.

TEST(S3Move, LaterAndEarlierKeepTheValue) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 11, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 22, 30 * kInterval).ok());
  w.Tick(2);
  ASSERT_TRUE(w.wheel().MoveTimer(1, 10 * kInterval).ok());  // later
  ASSERT_TRUE(w.wheel().MoveTimer(2, 4 * kInterval).ok());   // earlier
  w.Tick(40);
  EXPECT_EQ(w.FireTick(1), 12);
  EXPECT_EQ(w.FireTick(2), 6);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 11);
  EXPECT_EQ(w.FiresOf(2).at(0).value, 22);
  EXPECT_EQ(w.wheel().stats().moved, 2u);
}

// The session-idle pattern: touched every tick, it never fires until the
// touches stop, however many rotations that spans.
TEST(S3Move, RepeatedLaterMovesAcrossManyCircles) {
  ManualWheel w(4);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 5 * kInterval).ok());
  for (int i = 0; i < 60; ++i) {
    w.Tick();
    ASSERT_TRUE(w.wheel().MoveTimer(1, 5 * kInterval).ok());
  }
  EXPECT_TRUE(w.fires().empty());
  w.Tick(4);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 65);
}

TEST(S3Move, AlternatingLaterAndEarlierMoves) {
  ManualWheel w(4);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 2 * kInterval).ok());
  // Moves between ticks: 17, 3, 25, 1.5, 9, 6 intervals from the time of
  // each move; the last one counts.
  const double delays[] = {17, 3, 25, 1.5, 9, 6};
  for (double d : delays) {
    ASSERT_TRUE(w.wheel().MoveTimer(1, kInterval * d).ok());
  }
  w.Tick(1);
  // Now from tick 1: far (3 circles), then near, then far again.
  for (double d : {13.0, 2.0, 21.0, 11.0}) {
    ASSERT_TRUE(w.wheel().MoveTimer(1, kInterval * d).ok());
  }
  w.Tick(30);
  EXPECT_EQ(w.FireTick(1), 12);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 1);
}

TEST(S3Move, AbsentKeyIsANoOp) {
  ManualWheel w(8);
  EXPECT_TRUE(w.wheel().MoveTimer(42, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  w.Tick();
  EXPECT_TRUE(w.wheel().MoveTimer(1, kInterval).ok());  // already fired
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(2).ok());
  EXPECT_TRUE(w.wheel().MoveTimer(2, kInterval).ok());  // removed
  w.Tick(10);
  EXPECT_EQ(w.fires().size(), 1u);
  EXPECT_EQ(w.wheel().stats().moved, 0u);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// A deterministic random walk of Set/Move/Remove over a few keys on a tiny
// wheel, compared tick by tick with a model of docs/api.md S1-S4.
TEST(S3Move, RandomOpsMatchModelExactly) {
  for (int num_slots : {1, 3, 4, 8}) {
    SCOPED_TRACE(absl::StrCat("num_slots ", num_slots));
    ManualWheel w(num_slots);
    std::mt19937 rng(1234 + num_slots);
    struct Entry {
      int value;
      int due;
    };
    std::map<int, Entry> model;
    std::vector<Fire> expected;
    int next_value = 1;
    for (int tick = 1; tick <= 300; ++tick) {
      const int ops = static_cast<int>(rng() % 4);
      for (int i = 0; i < ops; ++i) {
        const int key = static_cast<int>(rng() % 12);
        // Delays from a tenth of an interval to 30 intervals (~4 circles of
        // an 8-slot wheel), fractional half the time. Whole tenths keep the
        // durations exact.
        int tenths = 1 + static_cast<int>(rng() % 300);
        if (rng() % 2 == 0) tenths = std::max(10, tenths / 10 * 10);
        const absl::Duration delay = kInterval * tenths / 10;
        const int delay_ticks = (tenths + 9) / 10;
        const int now = tick - 1;
        switch (rng() % 3) {
          case 0: {
            const int v = next_value++;
            ASSERT_TRUE(w.wheel().SetTimer(key, v, delay).ok());
            model[key] = {v, now + delay_ticks};
            break;
          }
          case 1:
            ASSERT_TRUE(w.wheel().MoveTimer(key, delay).ok());
            if (auto it = model.find(key); it != model.end()) {
              it->second.due = now + delay_ticks;
            }
            break;
          default:
            ASSERT_TRUE(w.wheel().RemoveTimer(key).ok());
            model.erase(key);
        }
      }
      w.Tick();
      for (auto it = model.begin(); it != model.end();) {
        if (it->second.due == tick) {
          expected.push_back({tick, it->first, it->second.value, {}});
          it = model.erase(it);
        } else {
          ++it;
        }
      }
    }
    auto key_of = [](const Fire& f) {
      return std::make_tuple(f.tick, f.key, f.value);
    };
    std::vector<std::tuple<int, int, int>> want, got;
    for (const Fire& f : expected) want.push_back(key_of(f));
    for (const Fire& f : w.fires()) got.push_back(key_of(f));
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want);
    Vec rest;
    for (const auto& [k, e] : model) rest.push_back({k, e.value});
    EXPECT_EQ(StopSorted(w.wheel()), rest);
  }
}

// ---------------------------------------------------------------------------
// docs/api.md S4: RemoveTimer.

TEST(S4Remove, PresentKeyNeverFires) {
  ManualWheel w(8);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 20 * kInterval).ok());
  w.Tick(2);
  ASSERT_TRUE(w.wheel().RemoveTimer(1).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(2).ok());
  w.Tick(30);
  EXPECT_TRUE(w.fires().empty());
  EXPECT_EQ(w.wheel().stats().removed, 2u);
  EXPECT_EQ(w.wheel().stats().pending, 0u);
}

TEST(S4Remove, AbsentKeyIsANoOpAndKeyCanBeSetAgain) {
  ManualWheel w(8);
  EXPECT_TRUE(w.wheel().RemoveTimer(5).ok());
  ASSERT_TRUE(w.wheel().SetTimer(5, 1, 2 * kInterval).ok());
  ASSERT_TRUE(w.wheel().RemoveTimer(5).ok());
  EXPECT_TRUE(w.wheel().RemoveTimer(5).ok());
  ASSERT_TRUE(w.wheel().SetTimer(5, 2, 4 * kInterval).ok());
  w.Tick(10);
  ASSERT_EQ(w.FiresOf(5).size(), 1u);
  EXPECT_EQ(w.FiresOf(5)[0].tick, 4);
  EXPECT_EQ(w.FiresOf(5)[0].value, 2);
  EXPECT_EQ(w.wheel().stats().removed, 1u);
}

// ---------------------------------------------------------------------------
// docs/api.md S5 (and E5): long delays.

TEST(S5Long, ManyCirclesOnATinyWheel) {
  ManualWheel w(4, nullptr, [] {
    Options o;
    o.interval = absl::Milliseconds(1);
    return o;
  }());
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, absl::Seconds(1)).ok());  // 250 circles
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, absl::Milliseconds(1001)).ok());
  w.Tick(999);
  EXPECT_TRUE(w.fires().empty());
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 1000);
  w.Tick();
  EXPECT_EQ(w.FireTick(2), 1001);
}

// A day at a 1 s interval is 86,400 ticks: ticked through to the exact tick.
TEST(S5Long, OneDayFiresOnItsTick) {
  ManualWheel w(64, nullptr, [] {
    Options o;
    o.interval = absl::Seconds(1);
    return o;
  }());
  const IntWheel& wheel = w.wheel();
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, absl::Hours(24)).ok());
  ASSERT_TRUE(
      w.wheel()
          .SetTimer(2, 2, std::chrono::hours(24) + std::chrono::milliseconds(1))
          .ok());
  w.ticker().Tick(86399);  // in one call: no per-tick bookkeeping needed here
  EXPECT_EQ(wheel.stats().fired, 0u);
  w.Tick();
  EXPECT_EQ(w.FireTick(1), 1);  // w counts from its own first Tick
  EXPECT_EQ(wheel.stats().ticks, 86400u);
  w.Tick();
  EXPECT_EQ(w.FireTick(2), 2);
}

// Days and years at 1 ms: accepted, pending, not fired early, returned by
// Stop; and they do not disturb short timers on the same wheel.
TEST(S5Long, DaysAndYearsAtOneMillisecondDoNotOverflow) {
  ManualWheel w(8, nullptr, [] {
    Options o;
    o.interval = absl::Milliseconds(1);
    return o;
  }());
  IntWheel& wheel = w.wheel();
  ASSERT_TRUE(wheel.SetTimer(1, 1, absl::Hours(24 * 3)).ok());
  ASSERT_TRUE(wheel.SetTimer(2, 2, std::chrono::days(40)).ok());
  ASSERT_TRUE(wheel.SetTimer(3, 3, absl::Hours(24 * 365 * 100)).ok());
  ASSERT_TRUE(wheel.SetTimer(4, 4, std::chrono::hours::max()).ok());
  ASSERT_TRUE(
      wheel.SetTimer(5, 5, absl::Seconds(std::numeric_limits<int64_t>::max()))
          .ok());
  ASSERT_TRUE(wheel.SetTimer(6, 6, std::chrono::duration<double>(1e12)).ok());
  ASSERT_TRUE(wheel.SetTimer(7, 7, absl::Hours(24 * 365 * 100)).ok());
  ASSERT_TRUE(wheel.SetTimer(8, 8, std::chrono::hours::max()).ok());
  ASSERT_TRUE(wheel
                  .SetTimer(9, 9,
                            std::chrono::duration<std::uint64_t, std::nano>(
                                std::numeric_limits<std::uint64_t>::max()))
                  .ok());
  ASSERT_TRUE(wheel.SetTimer(10, 10, absl::Milliseconds(3)).ok());
  w.ticker().Tick(2);
  w.Tick(1);
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{10}));
  // A far timer moved near fires normally, and so do saturated ones (E5:
  // deadlines saturate at 2^62 ticks; hours::max() and 2^64 - 1 ns both
  // reach it at 1 ms).
  ASSERT_TRUE(wheel.MoveTimer(7, absl::Milliseconds(5)).ok());
  ASSERT_TRUE(wheel.MoveTimer(8, absl::Milliseconds(5)).ok());
  ASSERT_TRUE(wheel.MoveTimer(9, absl::Milliseconds(3)).ok());
  w.Tick(5);
  EXPECT_EQ(w.FireTick(9), 4);
  EXPECT_EQ(w.FireTick(7), 6);
  EXPECT_EQ(w.FireTick(8), 6);
  w.ticker().Tick(10000);
  EXPECT_EQ(wheel.stats().fired, 4u);
  EXPECT_EQ(wheel.stats().pending, 6u);
  EXPECT_EQ(StopSorted(wheel),
            (Vec{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}));
}

// A floating-point chrono delay too long for absl::Duration is still a
// finite positive delay (S5: "any finite positive delay works"), like an
// integer one (std::chrono::hours::max(), accepted above).
// (Found a bug: ToDuration used to map such a double to InfiniteDuration.)
TEST(S5Long, HugeFloatingChronoDelayIsFinite) {
  ManualWheel w(8);
  using DSec = std::chrono::duration<double>;
  EXPECT_TRUE(w.wheel().SetTimer(1, 1, DSec(1e30)).ok());
  EXPECT_TRUE(
      w.wheel().SetTimer(2, 2, DSec(std::numeric_limits<double>::max())).ok());
  EXPECT_TRUE(w.wheel().SetTimer(3, 3, kInterval).ok());
  EXPECT_TRUE(w.wheel().MoveTimer(3, DSec(1e30)).ok());
  w.Tick(3);
  EXPECT_TRUE(w.fires().empty());
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{1, 1}, {2, 2}, {3, 3}}));
}

// An unsigned count past INT64_MAX is a long positive delay, not a negative
// one (a plain cast to int64 would wrap it).
TEST(S5Long, HugeUnsignedChronoDelayIsFinite) {
  ManualWheel w(8);
  using UNanos = std::chrono::duration<std::uint64_t, std::nano>;
  using UHours = std::chrono::duration<std::uint64_t, std::ratio<3600>>;
  EXPECT_TRUE(w.wheel().SetTimer(1, 1, UNanos(~std::uint64_t{0})).ok());
  EXPECT_TRUE(w.wheel().SetTimer(2, 2, UHours(~std::uint64_t{0})).ok());
  EXPECT_TRUE(w.wheel().SetTimer(3, 3, UNanos(std::uint64_t{1} << 63)).ok());
  EXPECT_EQ(w.wheel().SetTimer(4, 4, UNanos(0)).code(),
            StatusCode::kInvalidArgument);
  w.Tick(3);
  EXPECT_TRUE(w.fires().empty());
  EXPECT_EQ(StopSorted(w.wheel()), (Vec{{1, 1}, {2, 2}, {3, 3}}));
}

// ---------------------------------------------------------------------------
// docs/api.md S6: every accepted timer ends exactly one way.

TEST(S6Accounting, MixedScenarioEndsEachTimerOnce) {
  ManualWheel w(4);
  IntWheel& wheel = w.wheel();
  // Values are unique per SetTimer; track how each one ends.
  int next = 1;
  std::map<int, std::string> ended;  // value -> how
  std::set<int> accepted;
  auto set = [&](int key, int delay_ticks) {
    const int v = next++;
    ASSERT_TRUE(wheel.SetTimer(key, v, delay_ticks * kInterval).ok());
    accepted.insert(v);
  };
  for (int k = 0; k < 40; ++k) set(k, 1 + k % 13);
  for (int k = 0; k < 40; k += 4) set(k, 2 + k % 7);  // 10 superseded
  for (int k = 1; k < 40; k += 5) ASSERT_TRUE(wheel.RemoveTimer(k).ok());  // 8
  for (int k = 2; k < 40; k += 6)
    ASSERT_TRUE(wheel.MoveTimer(k, 20 * kInterval).ok());
  w.Tick(6);
  ASSERT_TRUE(wheel.RemoveTimer(1000).ok());  // absent
  for (int k = 40; k < 50; ++k) set(k, 30);
  std::vector<std::pair<int, int>> drained;
  std::mutex mu;
  ASSERT_TRUE(wheel
                  .Drain([&](int key, int value) {
                    std::lock_guard<std::mutex> lock(mu);
                    drained.push_back({key, value});
                  })
                  .ok());
  for (int k = 50; k < 60; ++k) set(k, 1 + k % 5);
  w.Tick(3);
  for (int k = 50; k < 60; k += 3) set(k, 40);  // some fired, some superseded
  auto stopped = wheel.Stop();
  ASSERT_TRUE(stopped.ok());

  auto end = [&](int v, const std::string& how) {
    auto [it, fresh] = ended.emplace(v, how);
    EXPECT_TRUE(fresh) << "value " << v << " ended as " << it->second
                       << " and as " << how;
  };
  for (const Fire& f : w.fires()) end(f.value, "fired");
  for (const auto& [k, v] : drained) end(v, "drained");
  for (const auto& [k, v] : *stopped) end(v, "stopped");
  const Stats s = wheel.stats();
  EXPECT_EQ(s.removed, 8u);
  // Superseded and removed values never reach the test: everything else must.
  EXPECT_EQ(ended.size() + s.superseded + s.removed, accepted.size());
  for (const auto& [v, how] : ended) EXPECT_TRUE(accepted.contains(v)) << v;
  EXPECT_EQ(s.fired, w.fires().size());
  EXPECT_EQ(s.drained, drained.size());
  EXPECT_EQ(s.pending, 0u);
  EXPECT_GT(s.fired, 0u);
  EXPECT_GT(drained.size(), 0u);
  EXPECT_GT(stopped->size(), 0u);
  // 10 before any tick, then keys 53 and 59 (still pending at tick 9; 50 and
  // 56 had fired, so their Sets were fresh inserts).
  EXPECT_EQ(s.superseded, 12u);
}

// ---------------------------------------------------------------------------
// docs/api.md S7: Drain (more in drain_test.cc).

TEST(S7Drain, EveryPresentEntryOnceOnDrainWorkersThenReturns) {
  Options options = TestOptions();
  options.drain_workers = 3;
  ManualWheel w(16, nullptr, options);
  IntWheel& wheel = w.wheel();
  constexpr int kN = 1000;
  for (int k = 0; k < kN; ++k) {
    ASSERT_TRUE(wheel.SetTimer(k, k * 3, (5 + k % 50) * kInterval).ok());
  }
  w.Tick(5);  // keys with k % 50 == 0 fired: 20 of them
  ASSERT_EQ(w.fires().size(), 20u);

  std::mutex mu;
  std::map<int, int> seen;  // key -> value
  int duplicates = 0;
  std::set<std::thread::id> threads;
  std::atomic<int> calls{0};
  const std::thread::id caller = std::this_thread::get_id();
  ASSERT_TRUE(wheel
                  .Drain([&](int key, int value) {
                    // Slow enough that returning early would be visible.
                    if (key % 100 == 7) absl::SleepFor(absl::Milliseconds(2));
                    std::lock_guard<std::mutex> lock(mu);
                    if (!seen.emplace(key, value).second) ++duplicates;
                    threads.insert(std::this_thread::get_id());
                    calls.fetch_add(1);
                  })
                  .ok());
  // Drain has returned: every call is done.
  EXPECT_EQ(calls.load(), kN - 20);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(duplicates, 0);
    EXPECT_EQ(seen.size(), static_cast<size_t>(kN - 20));
    for (const auto& [k, v] : seen) {
      EXPECT_NE(k % 50, 0);
      EXPECT_EQ(v, k * 3);
    }
    EXPECT_FALSE(threads.contains(caller));
    EXPECT_GE(threads.size(), 1u);
    EXPECT_LE(threads.size(), 3u);
  }
  // Nothing drained fires later. (Stats are read after a tick: they are
  // published per tick and may lag a Drain.)
  w.Tick(60);
  EXPECT_EQ(w.fires().size(), 20u);
  EXPECT_EQ(wheel.stats().drained, static_cast<uint64_t>(kN - 20));
}

TEST(S7Drain, EntriesSetAfterwardsAreKept) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  ASSERT_TRUE(wheel.SetTimer(1, 1, 3 * kInterval).ok());
  std::atomic<int> drained{0};
  ASSERT_TRUE(wheel.Drain([&](int, int) { drained.fetch_add(1); }).ok());
  EXPECT_EQ(drained.load(), 1);
  ASSERT_TRUE(wheel.SetTimer(1, 2, 3 * kInterval).ok());
  ASSERT_TRUE(wheel.SetTimer(2, 3, 2 * kInterval).ok());
  w.Tick(5);
  EXPECT_EQ(w.FireTick(1), 3);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 2);
  EXPECT_EQ(w.FireTick(2), 2);
  // An empty wheel drains to nothing, successfully.
  ASSERT_TRUE(wheel.Drain([&](int, int) { drained.fetch_add(1); }).ok());
  EXPECT_EQ(drained.load(), 1);
}

TEST(S7Drain, SingleDrainWorkerUsesOneThread) {
  Options options = TestOptions();
  options.drain_workers = 1;
  ManualWheel w(8, nullptr, options);
  for (int k = 0; k < 500; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, absl::Hours(1)).ok());
  }
  std::mutex mu;
  std::set<std::thread::id> threads;
  int calls = 0;
  ASSERT_TRUE(w.wheel()
                  .Drain([&](int, int) {
                    std::lock_guard<std::mutex> lock(mu);
                    threads.insert(std::this_thread::get_id());
                    ++calls;
                  })
                  .ok());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(calls, 500);
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_FALSE(threads.contains(std::this_thread::get_id()));
}

// ---------------------------------------------------------------------------
// docs/api.md S9: per-thread order.

TEST(S9Order, OneThreadsCommandsApplyInOrder) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  // Set, Move, Remove, Set: only the last Set survives.
  ASSERT_TRUE(wheel.SetTimer(1, 1, 5 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(1, 2 * kInterval).ok());
  ASSERT_TRUE(wheel.RemoveTimer(1).ok());
  ASSERT_TRUE(wheel.SetTimer(1, 2, 3 * kInterval).ok());
  // Remove before Set: the Set wins. Set before Remove: nothing.
  ASSERT_TRUE(wheel.RemoveTimer(2).ok());
  ASSERT_TRUE(wheel.SetTimer(2, 20, 4 * kInterval).ok());
  ASSERT_TRUE(wheel.SetTimer(3, 30, 4 * kInterval).ok());
  ASSERT_TRUE(wheel.RemoveTimer(3).ok());
  // Move before Set: no-op on an absent key, then the Set's own deadline.
  ASSERT_TRUE(wheel.MoveTimer(4, kInterval).ok());
  ASSERT_TRUE(wheel.SetTimer(4, 40, 6 * kInterval).ok());
  // Set then Move: the Move's deadline.
  ASSERT_TRUE(wheel.SetTimer(5, 50, 6 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(5, kInterval).ok());
  w.Tick(10);
  EXPECT_EQ(w.FireTick(1), 3);
  EXPECT_EQ(w.FiresOf(1).at(0).value, 2);
  EXPECT_EQ(w.FireTick(2), 4);
  EXPECT_EQ(w.FireTick(3), -1);
  EXPECT_EQ(w.FireTick(4), 6);
  EXPECT_EQ(w.FireTick(5), 1);
}

// Several threads, each with its own keys and a long op sequence whose final
// state is known only if that thread's order was kept. No thread but the
// producers' own orders the commands, so the final state is read with Stop
// (which applies every accepted command), not with a Tick.
TEST(S9Order, ConcurrentThreadsEachKeepTheirOrder) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  constexpr int kThreads = 4, kKeys = 50, kRounds = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&wheel, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kKeys; ++i) {
          const int key = t * 1000 + i;
          EXPECT_TRUE(wheel.SetTimer(key, 2 * r, 100 * kInterval).ok());
          EXPECT_TRUE(wheel.MoveTimer(key, (1 + i % 9) * kInterval).ok());
          switch ((i + r) % 3) {
            case 0:
              EXPECT_TRUE(wheel.RemoveTimer(key).ok());
              break;
            case 1:
              EXPECT_TRUE(wheel.RemoveTimer(key).ok());
              EXPECT_TRUE(wheel.SetTimer(key, 2 * r + 1, kInterval).ok());
              break;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Vec want;
  constexpr int r = kRounds - 1;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kKeys; ++i) {
      switch ((i + r) % 3) {
        case 1:
          want.push_back({t * 1000 + i, 2 * r + 1});
          break;
        case 2:
          want.push_back({t * 1000 + i, 2 * r});
          break;
      }
    }
  }
  EXPECT_EQ(StopSorted(wheel), want);
  EXPECT_TRUE(w.fires().empty());
}

// ---------------------------------------------------------------------------
// docs/api.md S10: callbacks.

// Records the threads that hash keys: only the loop thread touches the map.
std::atomic<bool> g_note_hash_threads{false};
std::mutex g_hash_mu;
std::set<std::thread::id>& HashThreads() {
  static auto* threads = new std::set<std::thread::id>();
  return *threads;
}
struct NotingHash {
  size_t operator()(int key) const {
    if (g_note_hash_threads.load()) {
      std::lock_guard<std::mutex> lock(g_hash_mu);
      HashThreads().insert(std::this_thread::get_id());
    }
    return absl::Hash<int>()(key);
  }
};

TEST(S10Callbacks, RunOffTheLoopAndCallerThreads) {
  g_note_hash_threads.store(true);
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::set<std::thread::id> callback_threads;
  Options options = ManualOptions(ticker);
  options.execute_workers = 3;
  auto wheel =
      TimingWheel<int, int, NotingHash>::Create(options, [&](int, int) {
        std::lock_guard<std::mutex> lock(mu);
        callback_threads.insert(std::this_thread::get_id());
      });
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 600; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, (1 + k % 3) * kInterval).ok());
  }
  ticker->Tick(3);
  ASSERT_TRUE((*wheel)->Stop().ok());
  g_note_hash_threads.store(false);
  std::lock_guard<std::mutex> lock(mu);
  std::lock_guard<std::mutex> hash_lock(g_hash_mu);
  ASSERT_FALSE(HashThreads().empty());
  ASSERT_FALSE(callback_threads.empty());
  EXPECT_LE(callback_threads.size(), 3u);
  EXPECT_FALSE(callback_threads.contains(std::this_thread::get_id()));
  for (std::thread::id id : callback_threads) {
    EXPECT_FALSE(HashThreads().contains(id))
        << "a callback ran on a thread that hashes keys (the loop)";
  }
}

// Real time: with one execute worker blocked in a callback, the loop still
// applies commands and keeps ticking.
TEST(S10Callbacks, SlowCallbackDoesNotBlockCommandsOrTicks) {
  Event entered, release;
  Options options;
  options.interval = absl::Milliseconds(1);
  options.num_slots = 16;
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    if (key == 0) {
      entered.Notify();
      release.WaitFor(kHangGuard);
    }
  });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(0, 0, absl::Milliseconds(1)).ok());
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  const uint64_t ticks_before = (*wheel)->stats().ticks;
  for (int k = 1; k <= 100; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Hours(1)).ok());
  }
  // A short timer keeps the loop waking up so ticks get published.
  ASSERT_TRUE((*wheel)->SetTimer(1000, 0, absl::Milliseconds(50)).ok());
  const absl::Time give_up = absl::Now() + kHangGuard;
  while (((*wheel)->stats().pending < 100 ||
          (*wheel)->stats().ticks < ticks_before + 20) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const Stats s = (*wheel)->stats();
  release.Notify();
  EXPECT_GE(s.pending, 100u) << "commands not applied while a callback blocks";
  EXPECT_GE(s.ticks, ticks_before + 20) << "ticks stalled behind a callback";
}

// A ManualTicker too: while a tick's callback blocks, the loop applies
// commands (S10); the Tick call returns only after the callback (its (c)).
// The loop once waited for the tick's callbacks itself.
TEST(S10Callbacks, UnderAManualTickerASlowCallbackDoesNotBlockCommands) {
  Event entered, release, tick_returned;
  ManualWheel w(8, [&](IntWheel&, int key, int) {
    if (key == 0) {
      entered.Notify();
      release.WaitFor(kHangGuard);
    }
  });
  std::thread ticking([&] {
    EXPECT_TRUE(w.wheel().SetTimer(0, 0, kInterval).ok());
    w.ticker().Tick();
    tick_returned.Notify();
  });
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  for (int k = 1; k <= 100; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, absl::Hours(1)).ok());
  }
  const absl::Time give_up = absl::Now() + kHangGuard;
  while (w.wheel().stats().pending < 100 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const Stats s = w.wheel().stats();
  const bool returned_early = tick_returned.WaitFor(absl::ZeroDuration());
  release.Notify();
  ticking.join();
  EXPECT_EQ(s.pending, 100u) << "commands not applied while a callback blocks";
  EXPECT_FALSE(returned_early) << "Tick returned before its callback did";
  EXPECT_EQ(s.fired, 1u);
}

// The case that deadlocked while the loop waited for a manual tick's
// callbacks: a callback that waits for another thread's Drain.
TEST(S10Callbacks, UnderAManualTickerACallbackCanWaitForAnotherThreadsDrain) {
  std::mutex mu;
  std::vector<int> drained;
  bool drain_finished_in_callback = false;
  Event done;
  // Joined after the tick: joined in the callback, a Drain stuck behind
  // the callback would hang the test instead of failing it.
  std::thread drainer;
  ManualWheel w(8, [&](IntWheel& wheel, int key, int) {
    if (key != 0) return;
    drainer = std::thread([&] {
      EXPECT_TRUE(wheel
                      .Drain([&](int k, int) {
                        std::lock_guard<std::mutex> lock(mu);
                        drained.push_back(k);
                      })
                      .ok());
      done.Notify();
    });
    drain_finished_in_callback = done.WaitFor(kHangGuard);
  });
  ASSERT_TRUE(w.wheel().SetTimer(0, 0, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, 5 * kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, 5 * kInterval).ok());
  w.Tick();
  ASSERT_TRUE(drainer.joinable());
  drainer.join();
  EXPECT_TRUE(drain_finished_in_callback);
  std::sort(drained.begin(), drained.end());
  EXPECT_EQ(drained, (std::vector<int>{1, 2}));
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{0}));
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// Real time: with two execute workers, one blocked callback does not hold up
// a timer that fires meanwhile.
TEST(S10Callbacks, SlowCallbackOccupiesOnlyItsWorker) {
  Event entered, release, fast_ran;
  Options options;
  options.interval = absl::Milliseconds(1);
  options.num_slots = 16;
  options.execute_workers = 2;
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    if (key == 0) {
      entered.Notify();
      release.WaitFor(kHangGuard);
    } else {
      fast_ran.Notify();
    }
  });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(0, 0, absl::Milliseconds(1)).ok());
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  ASSERT_TRUE((*wheel)->SetTimer(1, 1, absl::Milliseconds(5)).ok());
  const bool ran = fast_ran.WaitFor(kHangGuard);
  release.Notify();
  EXPECT_TRUE(ran);
}

// Two workers, ten timers due on the same tick: while the first callback to
// run blocks, the other worker runs the other nine. Timers are handed out
// one at a time; in batches, some of the nine would wait behind the blocked
// one in its worker's batch.
TEST(S10Callbacks, SlowCallbackHoldsUpNoOtherTimerOfItsTick) {
  constexpr int kTimers = 10;
  std::atomic<bool> first{true};
  std::atomic<int> others{0};
  Event all_others_ran;
  std::atomic<bool> saw_others{false};
  Options options = TestOptions();
  options.execute_workers = 2;
  ManualWheel w(
      8,
      [&](IntWheel&, int, int) {
        if (first.exchange(false)) {
          saw_others.store(all_others_ran.WaitFor(absl::Seconds(5)));
        } else if (others.fetch_add(1) + 1 == kTimers - 1) {
          all_others_ran.Notify();
        }
      },
      options);
  for (int k = 0; k < kTimers; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval).ok());
  }
  EXPECT_TRUE(FinishesInTime([&] { w.Tick(); }));
  EXPECT_TRUE(saw_others.load())
      << "timers of the slow callback's tick waited behind it";
  EXPECT_EQ(w.KeysFiredAt(1).size(), static_cast<std::size_t>(kTimers));
}

TEST(S10Callbacks, ReputPatternRunsNPeriods) {
  constexpr int kPeriods = 25;
  std::atomic<int> runs{0};
  ManualWheel w(4, [&](IntWheel& wheel, int key, int value) {
    runs.fetch_add(1);
    if (value < kPeriods) {
      EXPECT_TRUE(wheel.SetTimer(key, value + 1, 3 * kInterval).ok());
    }
  });
  ASSERT_TRUE(w.wheel().SetTimer(7, 1, 3 * kInterval).ok());
  w.Tick(3 * kPeriods + 10);
  ASSERT_EQ(w.FiresOf(7).size(), static_cast<size_t>(kPeriods));
  for (int i = 0; i < kPeriods; ++i) {
    EXPECT_EQ(w.FiresOf(7)[i].tick, 3 * (i + 1));
    EXPECT_EQ(w.FiresOf(7)[i].value, i + 1);
  }
  EXPECT_EQ(runs.load(), kPeriods);
}

TEST(S10Callbacks, ThrowingCallbackIsCaughtAndCounted) {
  ManualWheel w(8, [](IntWheel&, int key, int) {
    if (key == 1) throw std::runtime_error("boom");
    if (key == 2) throw 42;
  });
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(2, 2, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(3, 3, kInterval).ok());
  ASSERT_TRUE(w.wheel().SetTimer(4, 4, 2 * kInterval).ok());
  w.Tick();
  EXPECT_EQ(w.KeysFiredAt(1), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(w.wheel().stats().callback_exceptions, 2u);
  // Still working, same worker pool.
  w.Tick();
  EXPECT_EQ(w.FireTick(4), 2);
  ASSERT_TRUE(w.wheel().SetTimer(1, 1, kInterval).ok());
  w.Tick();
  EXPECT_EQ(w.FiresOf(1).size(), 2u);
  EXPECT_EQ(w.wheel().stats().callback_exceptions, 3u);
}

TEST(S10Callbacks, ThrowingDrainFnDoesNotLoseOtherEntries) {
  ManualWheel w(8);
  for (int k = 0; k < 200; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, absl::Hours(1)).ok());
  }
  std::atomic<int> calls{0};
  ASSERT_TRUE(w.wheel()
                  .Drain([&](int key, int) {
                    calls.fetch_add(1);
                    if (key % 10 == 0) throw std::runtime_error("drain");
                  })
                  .ok());
  EXPECT_EQ(calls.load(), 200);
  EXPECT_EQ(StopSorted(w.wheel()), Vec());
}

// ---------------------------------------------------------------------------
// docs/api.md Types: move-only values, string keys, user struct keys, custom
// Hash/Eq.

// docs/api.md Types: the Options defaults are part of the contract.
TEST(Types, OptionsDefaults) {
  const Options options;
  EXPECT_EQ(options.interval, absl::Seconds(1));
  EXPECT_EQ(options.num_slots, 512);
  EXPECT_EQ(options.execute_workers, 1);
  EXPECT_EQ(options.drain_workers, 8);
  EXPECT_EQ(options.max_pending, 0u);
  EXPECT_EQ(options.ticker, nullptr);
  EXPECT_EQ(options.expected_timers, 0u);  // E1
  EXPECT_EQ(options.max_lag, absl::ZeroDuration());
}

// docs/api.md Types, ManualTicker::Tick (c): Tick returns only after every
// execute callback its ticks triggered has returned, however slow.
TEST(Types, ManualTickWaitsForItsCallbacks) {
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.execute_workers = 2;
  std::atomic<int> returned{0};
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    absl::SleepFor(absl::Milliseconds(key == 0 ? 100 : 10));
    returned.fetch_add(1);
  });
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < 6; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, kInterval * (1 + k % 2)).ok());
  }
  ticker->Tick();
  EXPECT_EQ(returned.load(), 3);
  ticker->Tick(2);
  EXPECT_EQ(returned.load(), 6);
}

// docs/api.md Types, ManualTicker::Tick: concurrent calls are serialized.
// Two threads ticking 50 ticks each (one by one, two by two) run exactly 100
// ticks, and each timer due on one of them fires once, none due later.
TEST(Types, ConcurrentManualTicksAreSerialized) {
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<int, int> fires;  // key -> times fired
  auto wheel = IntWheel::Create(ManualOptions(ticker), [&](int key, int) {
    std::lock_guard<std::mutex> lock(mu);
    ++fires[key];
  });
  ASSERT_TRUE(wheel.ok());
  for (int k = 1; k <= 120; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, k * kInterval).ok());
  }
  // A Tick applies only its own thread's commands first: make sure the loop
  // has applied the Sets before the other threads tick.
  ticker->Tick();
  std::thread ones([&] {
    for (int i = 0; i < 50; ++i) ticker->Tick();
  });
  std::thread twos([&] {
    for (int i = 0; i < 25; ++i) ticker->Tick(2);
  });
  ones.join();
  twos.join();
  EXPECT_EQ((*wheel)->stats().ticks, 101u);
  std::lock_guard<std::mutex> lock(mu);
  for (int k = 1; k <= 120; ++k) {
    EXPECT_EQ(fires[k], k <= 101 ? 1 : 0) << "key " << k;
  }
}

// Serialized means a whole call, callbacks included (Tick's (c)), goes
// before the next one starts: with two execute workers, the tick a second
// thread asks for while the first Tick's callback still runs must not fire
// its timer on the idle worker. Ticks merely counted one by one, or
// serialized up to their processing only, would start key 2 at once.
TEST(Types, ConcurrentManualTickStartsAfterTheOtherCallsCallbacks) {
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.execute_workers = 2;
  Event first_started, second_started;
  std::atomic<bool> overlapped{true};  // set by key 1's callback as it ends
  auto wheel = IntWheel::Create(options, [&](int key, int) {
    if (key == 2) {
      second_started.Notify();
      return;
    }
    first_started.Notify();
    // Long enough for the second Tick to be called and, were it not held
    // back, for its callback to start on the other worker.
    overlapped.store(second_started.WaitFor(absl::Milliseconds(300)));
  });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer(1, 1, 2 * kInterval).ok());
  ASSERT_TRUE((*wheel)->SetTimer(2, 2, 3 * kInterval).ok());
  // A Tick waits only for its own thread's commands: this one makes sure
  // the Sets are applied before the other threads tick.
  ticker->Tick();
  std::thread first([&] { ticker->Tick(); });
  const bool first_ran = first_started.WaitFor(kHangGuard);
  std::thread second([&] { ticker->Tick(); });
  first.join();
  second.join();
  ASSERT_TRUE(first_ran);
  EXPECT_FALSE(overlapped.load());
  EXPECT_TRUE(second_started.WaitFor(absl::ZeroDuration()));
  EXPECT_EQ((*wheel)->stats().ticks, 3u);
}

TEST(Types, MoveOnlyValues) {
  using W = TimingWheel<int, std::unique_ptr<std::string>>;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<int, std::string> fired;
  auto wheel = W::Create(ManualOptions(ticker),
                         [&](int key, std::unique_ptr<std::string> v) {
                           std::lock_guard<std::mutex> lock(mu);
                           fired[key] = v ? *v : "<null>";
                         });
  ASSERT_TRUE(wheel.ok());
  W& w = **wheel;
  ASSERT_TRUE(
      w.SetTimer(1, std::make_unique<std::string>("a"), kInterval).ok());
  ASSERT_TRUE(
      w.SetTimer(1, std::make_unique<std::string>("b"), kInterval).ok());
  ASSERT_TRUE(
      w.SetTimer(2, std::make_unique<std::string>("c"), 2 * kInterval).ok());
  ASSERT_TRUE(
      w.SetTimer(3, std::make_unique<std::string>("d"), 9 * kInterval).ok());
  ASSERT_TRUE(
      w.SetTimer(4, std::make_unique<std::string>("e"), 9 * kInterval).ok());
  ASSERT_TRUE(w.SetTimer(5, nullptr, kInterval).ok());
  ticker->Tick();
  std::vector<std::string> drained;
  ASSERT_TRUE(w.Drain([&](int key, std::unique_ptr<std::string> v) {
                 if (key == 2) {
                   std::lock_guard<std::mutex> lock(mu);
                   drained.push_back(*v);
                 }
               }).ok());
  ASSERT_TRUE(
      w.SetTimer(3, std::make_unique<std::string>("f"), 9 * kInterval).ok());
  auto stopped = w.Stop();
  ASSERT_TRUE(stopped.ok());
  ASSERT_EQ(stopped->size(), 1u);
  EXPECT_EQ((*stopped)[0].first, 3);
  EXPECT_EQ(*(*stopped)[0].second, "f");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fired, (std::map<int, std::string>{{1, "b"}, {5, "<null>"}}));
  EXPECT_EQ(drained, (std::vector<std::string>{"c"}));
}

TEST(Types, StringKeys) {
  using W = TimingWheel<std::string, int>;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::vector<std::string> fired;
  auto wheel = W::Create(ManualOptions(ticker), [&](std::string key, int) {
    std::lock_guard<std::mutex> lock(mu);
    fired.push_back(key);
  });
  ASSERT_TRUE(wheel.ok());
  W& w = **wheel;
  const std::string long_key(300, 'x');
  ASSERT_TRUE(w.SetTimer("session-1", 1, 2 * kInterval).ok());
  ASSERT_TRUE(w.SetTimer(std::string("session-2"), 2, 2 * kInterval).ok());
  ASSERT_TRUE(w.SetTimer(long_key, 3, kInterval).ok());
  ASSERT_TRUE(w.SetTimer("", 4, kInterval).ok());
  ASSERT_TRUE(w.MoveTimer("session-1", 20 * kInterval).ok());
  ASSERT_TRUE(w.RemoveTimer("session-2").ok());
  ticker->Tick(3);
  auto stopped = w.Stop();
  ASSERT_TRUE(stopped.ok());
  std::lock_guard<std::mutex> lock(mu);
  std::sort(fired.begin(), fired.end());
  EXPECT_EQ(fired, (std::vector<std::string>{"", long_key}));
  EXPECT_EQ(*stopped,
            (std::vector<std::pair<std::string, int>>{{"session-1", 1}}));
}

struct Endpoint {
  std::string host;
  int port;
  bool operator==(const Endpoint& o) const {
    return host == o.host && port == o.port;
  }
  bool operator<(const Endpoint& o) const {
    return std::tie(host, port) < std::tie(o.host, o.port);
  }
  template <typename H>
  friend H AbslHashValue(H h, const Endpoint& e) {
    return H::combine(std::move(h), e.host, e.port);
  }
};

TEST(Types, UserStructKeyWithAbslHashValue) {
  using W = TimingWheel<Endpoint, int>;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::vector<std::pair<Endpoint, int>> fired;
  auto wheel = W::Create(ManualOptions(ticker), [&](Endpoint key, int v) {
    std::lock_guard<std::mutex> lock(mu);
    fired.push_back({key, v});
  });
  ASSERT_TRUE(wheel.ok());
  W& w = **wheel;
  ASSERT_TRUE(w.SetTimer({"a", 1}, 1, kInterval).ok());
  ASSERT_TRUE(w.SetTimer({"a", 2}, 2, kInterval).ok());
  ASSERT_TRUE(w.SetTimer({"b", 1}, 3, kInterval).ok());
  ASSERT_TRUE(w.SetTimer({"a", 1}, 4, kInterval).ok());  // same key: replace
  ASSERT_TRUE(w.RemoveTimer({"a", 2}).ok());
  ticker->Tick();
  std::lock_guard<std::mutex> lock(mu);
  std::sort(fired.begin(), fired.end());
  EXPECT_EQ(fired, (std::vector<std::pair<Endpoint, int>>{{{"a", 1}, 4},
                                                          {{"b", 1}, 3}}));
}

// Hash and Eq given as template arguments, here case-insensitive.
struct CaseInsensitiveHash {
  size_t operator()(const std::string& s) const {
    return absl::Hash<std::string>()(absl::AsciiStrToLower(s));
  }
};
struct CaseInsensitiveEq {
  bool operator()(const std::string& a, const std::string& b) const {
    return absl::AsciiStrToLower(a) == absl::AsciiStrToLower(b);
  }
};

TEST(Types, CustomHashAndEq) {
  using W =
      TimingWheel<std::string, int, CaseInsensitiveHash, CaseInsensitiveEq>;
  auto ticker = std::make_shared<ManualTicker>();
  std::atomic<int> fires{0}, last{0};
  auto wheel = W::Create(ManualOptions(ticker), [&](std::string, int v) {
    fires.fetch_add(1);
    last.store(v);
  });
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE((*wheel)->SetTimer("Key", 1, kInterval).ok());
  ASSERT_TRUE((*wheel)->SetTimer("KEY", 2, 2 * kInterval).ok());
  ASSERT_TRUE((*wheel)->MoveTimer("key", 3 * kInterval).ok());
  ticker->Tick(2);
  EXPECT_EQ(fires.load(), 0);
  ticker->Tick();
  EXPECT_EQ(fires.load(), 1);
  EXPECT_EQ(last.load(), 2);
}

// Every key hashes alike: lookups degrade to a scan, answers stay right.
struct ConstantHash {
  std::size_t operator()(int) const { return 42; }
};

TEST(Types, KeysWhoseHashesAllCollide) {
  using W = TimingWheel<int, int, ConstantHash>;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::vector<std::pair<int, int>> fired;  // (tick, key)
  std::atomic<int> ticks{0};
  auto wheel = W::Create(ManualOptions(ticker), [&](int key, int value) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(value, key * 10);
    fired.emplace_back(ticks.load() + 1, key);
  });
  ASSERT_TRUE(wheel.ok());
  constexpr int kKeys = 300;
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k * 10, kInterval * (1 + k % 20)).ok());
  }
  for (int k = 0; k < kKeys; k += 3) {
    ASSERT_TRUE((*wheel)->RemoveTimer(k).ok());
  }
  for (int k = 1; k < kKeys; k += 3) {
    ASSERT_TRUE((*wheel)->MoveTimer(k, kInterval * 25).ok());
  }
  for (int t = 0; t < 30; ++t) {
    ticker->Tick();
    ticks.fetch_add(1);
  }
  std::lock_guard<std::mutex> lock(mu);
  std::vector<int> tick_of(kKeys, 0);
  for (auto [tick, key] : fired) {
    EXPECT_EQ(tick_of[key], 0) << "key " << key << " fired twice";
    tick_of[key] = tick;
  }
  for (int k = 0; k < kKeys; ++k) {
    const int want = k % 3 == 0 ? 0 : k % 3 == 1 ? 25 : 1 + k % 20;
    EXPECT_EQ(tick_of[k], want) << "key " << k;
  }
}

TEST(Types, ChronoOverloads) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();  // interval 10 ms
  ASSERT_TRUE(wheel.SetTimer(1, 1, std::chrono::milliseconds(30)).ok());
  ASSERT_TRUE(wheel.SetTimer(2, 2, std::chrono::seconds(1)).ok());
  ASSERT_TRUE(
      wheel.SetTimer(3, 3, std::chrono::duration<double, std::milli>(15)).ok());
  ASSERT_TRUE(wheel.SetTimer(4, 4, std::chrono::duration<double>(0.0001)).ok());
  ASSERT_TRUE(wheel.SetTimer(5, 5, std::chrono::microseconds(40001)).ok());
  ASSERT_TRUE(wheel.SetTimer(6, 6, std::chrono::nanoseconds(1)).ok());
  ASSERT_TRUE(wheel.SetTimer(7, 7, std::chrono::minutes(1)).ok());
  ASSERT_TRUE(wheel.MoveTimer(7, std::chrono::duration<float>(0.07f)).ok());
  ASSERT_TRUE(wheel.SetTimer(8, 8, std::chrono::hours(1)).ok());
  ASSERT_TRUE(wheel.MoveTimer(8, std::chrono::milliseconds(90)).ok());
  w.Tick(101);
  EXPECT_EQ(w.FireTick(1), 3);
  EXPECT_EQ(w.FireTick(2), 100);
  EXPECT_EQ(w.FireTick(3), 2);
  EXPECT_EQ(w.FireTick(4), 1);
  EXPECT_EQ(w.FireTick(5), 5);
  EXPECT_EQ(w.FireTick(6), 1);
  // 0.07f is 70.0000003 ms: never early means tick 8, not 7.
  EXPECT_EQ(w.FireTick(7), 8);
  EXPECT_EQ(w.FireTick(8), 9);
}

// ---------------------------------------------------------------------------
// docs/api.md E6: Now(), the wheel's own time.

// Under a ManualTicker: ticks done x interval, also as a callback sees it
// (tick k: k * interval); a timer set with delay d is due at Now() + d.
TEST(E6Now, ManualTickerTimeIsTicksTimesInterval) {
  std::atomic<int64_t> seen_in_callback_ns{-1};
  ManualWheel w(8, [&](IntWheel& wheel, int key, int) {
    if (key == 1) {
      seen_in_callback_ns.store(absl::ToInt64Nanoseconds(wheel.Now()));
    }
  });
  IntWheel& wheel = w.wheel();
  EXPECT_EQ(wheel.Now(), absl::ZeroDuration());
  w.Tick(3);
  EXPECT_EQ(wheel.Now(), 3 * kInterval);
  ASSERT_TRUE(wheel.SetTimer(1, 1, 2.5 * kInterval).ok());
  w.Tick(3);
  // Due at Now() + 2.5 intervals = tick 5.5: fires on tick 6, w's 3rd.
  EXPECT_EQ(w.FireTick(1), 6);
  EXPECT_EQ(seen_in_callback_ns.load(),
            absl::ToInt64Nanoseconds(6 * kInterval));
  EXPECT_EQ(wheel.Now(), 6 * kInterval);
}

// A tick that fires thousands of timers hands them to the workers in
// pieces while it collects the rest; every callback still sees the tick
// that fired it done, and itself counted in stats().fired.
TEST(E6Now, EveryCallbackOfABigTickSeesItsTickAndItsCount) {
  constexpr int kTimers = 5000;
  std::atomic<int> started{0}, wrong_time{0}, uncounted{0};
  Options options = TestOptions();
  options.execute_workers = 2;
  ManualWheel w(
      8,
      [&](IntWheel& wheel, int, int) {
        const int mine = started.fetch_add(1) + 1;
        if (wheel.Now() != 2 * kInterval) wrong_time.fetch_add(1);
        if (wheel.stats().fired < static_cast<std::uint64_t>(mine)) {
          uncounted.fetch_add(1);
        }
      },
      options);
  IntWheel& wheel = w.wheel();
  w.Tick();
  for (int k = 0; k < kTimers; ++k) {
    ASSERT_TRUE(wheel.SetTimer(k, k, kInterval).ok());
  }
  w.Tick();
  EXPECT_EQ(started.load(), kTimers);
  EXPECT_EQ(wrong_time.load(), 0);
  EXPECT_EQ(uncounted.load(), 0);
  EXPECT_EQ(w.KeysFiredAt(2).size(), static_cast<std::size_t>(kTimers));
}

// With real time: time since Create on the monotonic clock. Bounds only
// from the steady clock read around the calls; nothing about speed.
TEST(E6Now, RealTimeFollowsTheClock) {
  const auto before_create = std::chrono::steady_clock::now();
  auto wheel = IntWheel::Create(TestOptions(), [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  const absl::Duration first = (*wheel)->Now();
  EXPECT_GE(first, absl::ZeroDuration());
  EXPECT_LE(first,
            absl::FromChrono(std::chrono::steady_clock::now() - before_create));
  absl::SleepFor(absl::Milliseconds(30));
  const absl::Duration second = (*wheel)->Now();
  EXPECT_GE(second - first, absl::Milliseconds(30));
  EXPECT_LE(second,
            absl::FromChrono(std::chrono::steady_clock::now() - before_create));
}

// ---------------------------------------------------------------------------
// E8 Levels: any delay fires on its own tick, whatever num_slots is, and the
// timers beyond level 0 are refiled on the way (stats().refiled).

TEST(E8Levels, EveryDelayFiresOnItsTickWhateverNumSlots) {
  for (int num_slots : {1, 4, 512}) {
    ManualWheel w(num_slots);
    constexpr int kTimers = 300;
    // Delays from 1 to ~2,100 ticks: levels 0 to 3 on a 4-slot wheel.
    for (int k = 0; k < kTimers; ++k) {
      ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval * (1 + 7 * k)).ok());
    }
    w.Tick(7 * kTimers + 1);
    for (int k = 0; k < kTimers; ++k) {
      EXPECT_EQ(w.FireTick(k), 1 + 7 * k) << "num_slots " << num_slots;
    }
    if (num_slots < 512) {
      EXPECT_GT(w.wheel().stats().refiled, 0u);
    }
    EXPECT_EQ(w.wheel().stats().pending, 0u);
  }
}

// ---------------------------------------------------------------------------
// E12 A wheel destroyed from its own execute callback: the destructor cannot
// wait for the callback it runs in, so it returns at once; no callback
// starts afterwards (beyond one another worker has already taken), and every
// value is still destroyed exactly once, the pending and the dropped ones
// once the callback returns.

// A value that counts its destructions (a moved-from one counts nothing).
class Life {
 public:
  explicit Life(std::atomic<int>* deaths) : deaths_(deaths) {}
  Life(Life&& other) noexcept
      : deaths_(std::exchange(other.deaths_, nullptr)) {}
  Life& operator=(Life&&) = delete;
  ~Life() {
    if (deaths_ != nullptr) deaths_->fetch_add(1);
  }

 private:
  std::atomic<int>* deaths_;
};

// Waits up to kHangGuard for `done`.
bool BecomesTrue(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + kHangGuard;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(E12DestroyFromCallback, ManualTickReturnsAndEveryValueDiesOnce) {
  using LifeWheel = TimingWheel<int, Life>;
  auto ticker = std::make_shared<ManualTicker>();
  Options options;
  options.interval = kInterval;
  options.ticker = ticker;
  options.execute_workers = 1;
  std::atomic<int> deaths{0}, calls{0};
  std::unique_ptr<LifeWheel> wheel;
  auto created = LifeWheel::Create(options, [&](int, Life) {
    calls.fetch_add(1);
    wheel.reset();  // from its own callback
  });
  ASSERT_TRUE(created.ok()) << created.status();
  wheel = std::move(*created);
  // 100 timers due on the first tick, in one batch for the one worker; one
  // pending far out.
  for (int k = 0; k < 100; ++k) {
    ASSERT_TRUE(wheel->SetTimer(k, Life(&deaths), kInterval).ok());
  }
  ASSERT_TRUE(wheel->SetTimer(500, Life(&deaths), 50 * kInterval).ok());
  // The Tick waits for the tick's callbacks: the first destroys the wheel,
  // the other 99 are dropped, and the Tick returns.
  ASSERT_TRUE(FinishesInTime([&] { ticker->Tick(); }));
  EXPECT_EQ(wheel, nullptr);
  EXPECT_EQ(calls.load(), 1);
  // The rest of the teardown runs on the worker; then every value has died
  // once, and the ticker is free to drive another wheel.
  EXPECT_TRUE(BecomesTrue([&] { return deaths.load() == 101; }))
      << deaths.load();
  EXPECT_TRUE(BecomesTrue([&] {
    return TimingWheel<int, int>::Create(options, [](int, int) {}).ok();
  }));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(deaths.load(), 101);
  EXPECT_EQ(calls.load(), 1);
}

TEST(E12DestroyFromCallback, RealTimeWithTwoWorkersStartsNoCallbackAfter) {
  using LifeWheel = TimingWheel<int, Life>;
  Options options;
  options.interval = absl::Milliseconds(1);
  options.execute_workers = 2;
  constexpr int kTimers = 2000;
  std::atomic<int> deaths{0}, calls{0}, started_after{0};
  std::atomic<bool> destroyed{false}, first{true};
  std::unique_ptr<LifeWheel> wheel;
  std::mutex mu;  // orders the reset against the callbacks' reads of wheel
  auto created = LifeWheel::Create(options, [&](int, Life) {
    if (destroyed.load()) started_after.fetch_add(1);
    calls.fetch_add(1);
    if (first.exchange(false)) {
      std::unique_ptr<LifeWheel> doomed;
      {
        std::lock_guard<std::mutex> lock(mu);
        doomed = std::move(wheel);
      }
      doomed.reset();
      destroyed.store(true);
    }
  });
  ASSERT_TRUE(created.ok()) << created.status();
  {
    std::lock_guard<std::mutex> lock(mu);
    wheel = std::move(*created);
    for (int k = 0; k < kTimers; ++k) {
      ASSERT_TRUE(
          wheel->SetTimer(k, Life(&deaths), absl::Milliseconds(1 + k % 50))
              .ok());
    }
    // Pending long after the wheel is gone.
    ASSERT_TRUE(wheel->SetTimer(-1, Life(&deaths), absl::Hours(1)).ok());
  }
  EXPECT_TRUE(BecomesTrue([&] { return deaths.load() == kTimers + 1; }))
      << deaths.load() << " of " << kTimers + 1;
  // The worker that was not destroying may have taken one timer already.
  EXPECT_LE(started_after.load(), 1);
  EXPECT_LT(calls.load(), kTimers);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(deaths.load(), kTimers + 1);
}

// From a Drain function: the destructor returns at once, and so does the
// Drain call, which frees the wheel on its way out. No function starts
// afterwards (one another drain worker was already starting may run), and
// every value dies once, drained or dropped undrained, by the time Drain
// returns; the ticker is free again by then.
TEST(E12DestroyFromCallback, FromADrainFunctionTheDrainCallReturns) {
  using LifeWheel = TimingWheel<int, Life>;
  constexpr int kTimers = 10'000;
  for (const int drain_workers : {1, 4}) {
    auto ticker = std::make_shared<ManualTicker>();
    Options options;
    options.interval = kInterval;
    options.ticker = ticker;
    options.drain_workers = drain_workers;
    std::atomic<int> deaths{0}, calls{0}, started_after{0};
    std::atomic<bool> destroyed{false};
    std::mutex mu;
    std::unique_ptr<LifeWheel> wheel;  // guarded by mu once draining
    auto created = LifeWheel::Create(options, [](int, Life) {});
    ASSERT_TRUE(created.ok()) << created.status();
    wheel = std::move(*created);
    for (int k = 0; k < kTimers; ++k) {
      ASSERT_TRUE(wheel->SetTimer(k, Life(&deaths), 50 * kInterval).ok());
    }
    // The Drain below comes from another thread, and S9 orders only one
    // thread's commands: a round trip from this one applies the sets first.
    ticker->Tick();
    LifeWheel* const raw = wheel.get();
    absl::Status drained;
    ASSERT_TRUE(FinishesInTime([&] {
      drained = raw->Drain([&](int, Life) {
        if (destroyed.load()) started_after.fetch_add(1);
        calls.fetch_add(1);
        std::unique_ptr<LifeWheel> victim;
        {
          std::lock_guard<std::mutex> lock(mu);
          victim = std::move(wheel);
        }
        if (victim == nullptr) return;
        victim.reset();  // from its own Drain function
        destroyed.store(true);
      });
    }));
    EXPECT_TRUE(drained.ok()) << drained;
    EXPECT_TRUE(destroyed.load());
    EXPECT_EQ(deaths.load(), kTimers) << drain_workers << " drain workers";
    EXPECT_LE(started_after.load(), drain_workers - 1);
    EXPECT_LT(calls.load(), kTimers);
    auto again = TimingWheel<int, int>::Create(options, [](int, int) {});
    EXPECT_TRUE(again.ok()) << again.status();
  }
}

// ---------------------------------------------------------------------------
// E2: stats().applied counts every set, move and remove the loop applied,
// whether or not its key was present; moved and removed count those that
// found their key.
TEST(E2Stats, AppliedCountsMovesAndRemovesToo) {
  ManualWheel w(8);
  IntWheel& wheel = w.wheel();
  ASSERT_TRUE(wheel.SetTimer(1, 1, 3 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(1, 5 * kInterval).ok());
  ASSERT_TRUE(wheel.MoveTimer(2, 5 * kInterval).ok());  // absent
  ASSERT_TRUE(wheel.RemoveTimer(1).ok());
  ASSERT_TRUE(wheel.RemoveTimer(3).ok());  // absent
  w.Tick();  // queued behind them: all applied (S9)
  const Stats stats = wheel.stats();
  EXPECT_EQ(stats.applied, 5u);
  EXPECT_EQ(stats.moved, 1u);
  EXPECT_EQ(stats.removed, 1u);
  EXPECT_EQ(stats.pending, 0u);
}

// E9: a timer removed while filed on the finest level releases its key and
// value at once, not when its slot comes round.
TEST(E9Memory, ARemovedTimersValueIsDestroyedAtOnce) {
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.num_slots = 64;
  auto wheel = TimingWheel<int, Counted>::Create(options, [](int, Counted) {});
  ASSERT_TRUE(wheel.ok());
  ASSERT_TRUE(
      (*wheel)->SetTimer(1, Counted(1, destroyed), 10 * kInterval).ok());
  ASSERT_TRUE((*wheel)->RemoveTimer(1).ok());
  ticker->Tick();  // the remove is applied; the slot is 9 ticks away
  EXPECT_EQ(destroyed->load(), 1);
  ticker->Tick(12);
  EXPECT_EQ(destroyed->load(), 1);  // and not again
}

// S8 with two callers at once, while a callback is running: neither
// returns before the callback does; one gets the pending entries, the
// other an empty vector.
TEST(S8Stop, TwoStopsAtOnceWaitAndOneGetsTheEntries) {
  Event entered, release;
  std::atomic<bool> callback_returned{false};
  ManualWheel w(8, [&](IntWheel&, int key, int) {
    if (key != 1) return;
    entered.Notify();
    release.WaitFor(kHangGuard);
    absl::SleepFor(absl::Milliseconds(20));  // a Stop returning early shows
    callback_returned.store(true);
  });
  IntWheel& wheel = w.wheel();
  // The sets from the ticking thread: order holds per thread only (S9).
  std::thread ticking([&] {
    EXPECT_TRUE(wheel.SetTimer(1, 1, kInterval).ok());
    EXPECT_TRUE(wheel.SetTimer(2, 2, 100 * kInterval).ok());
    w.ticker().Tick();
  });
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  std::atomic<int> returned{0};
  Vec results[2];
  std::vector<std::thread> stopping;
  for (int i = 0; i < 2; ++i) {
    stopping.emplace_back([&, i] {
      auto r = wheel.Stop();
      EXPECT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(callback_returned.load())
          << "Stop returned while a callback was running";
      if (r.ok()) results[i] = Sorted(std::move(*r));
      returned.fetch_add(1);
    });
  }
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(returned.load(), 0);
  release.Notify();
  for (std::thread& t : stopping) t.join();
  ticking.join();
  EXPECT_EQ(returned.load(), 2);
  std::sort(std::begin(results), std::end(results));
  EXPECT_EQ(results[0], Vec());
  EXPECT_EQ(results[1], (Vec{{2, 2}}));
}

// S8 and S6 with a Drain under way on another thread: Stop returns only
// after every Drain fn has returned, none starts after it, and every entry
// ends once (each was present when the Drain was applied, before the Stop:
// all drained, none returned by Stop).
TEST(S8Stop, WaitsForADrainInProgress) {
  constexpr int kEntries = 10;
  Event entered, release;
  std::atomic<bool> stop_returned{false};
  std::atomic<int> calls_after_stop{0}, running{0};
  std::vector<std::atomic<int>> drained(kEntries);
  auto ticker = std::make_shared<ManualTicker>();
  Options options = ManualOptions(ticker);
  options.drain_workers = 2;
  auto wheel = IntWheel::Create(options, [](int, int) {});
  ASSERT_TRUE(wheel.ok());
  for (int k = 0; k < kEntries; ++k) {
    ASSERT_TRUE((*wheel)->SetTimer(k, k, absl::Hours(1)).ok());
  }
  // Order holds per thread only (S9): this thread's Tick returns once its
  // sets are applied, so the other thread's Drain finds them.
  ticker->Tick();
  absl::Status drain_status;
  std::thread draining([&] {
    drain_status = (*wheel)->Drain([&](int key, int) {
      if (stop_returned.load()) calls_after_stop.fetch_add(1);
      running.fetch_add(1);
      entered.Notify();
      release.WaitFor(kHangGuard);
      drained[key].fetch_add(1);
      running.fetch_sub(1);
    });
  });
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  const Vec result = StopWaitsUntilReleased(**wheel, release, [&] {
    EXPECT_EQ(running.load(), 0) << "Stop returned while a Drain fn ran";
    stop_returned.store(true);
  });
  draining.join();
  EXPECT_TRUE(drain_status.ok()) << drain_status;
  EXPECT_EQ(calls_after_stop.load(), 0);
  EXPECT_EQ(result, Vec());
  for (int k = 0; k < kEntries; ++k) EXPECT_EQ(drained[k].load(), 1) << k;
}

// E12: the destructor, called from another thread while a callback runs,
// returns only once that callback has returned.
TEST(E12DestroyFromAnotherThread, WaitsForTheCallbackInFlight) {
  Event entered, release;
  std::atomic<bool> callback_returned{false};
  auto ticker = std::make_shared<ManualTicker>();
  auto wheel = IntWheel::Create(ManualOptions(ticker), [&](int, int) {
    entered.Notify();
    release.WaitFor(kHangGuard);
    absl::SleepFor(absl::Milliseconds(20));
    callback_returned.store(true);
  });
  ASSERT_TRUE(wheel.ok());
  // The set from the ticking thread: order holds per thread only (S9).
  std::thread ticking([&] {
    EXPECT_TRUE((*wheel)->SetTimer(1, 1, kInterval).ok());
    ticker->Tick();
  });
  ASSERT_TRUE(entered.WaitFor(kHangGuard));
  Event destroyed;
  std::thread destroying([&] {
    wheel->reset();
    EXPECT_TRUE(callback_returned.load())
        << "the destructor returned while a callback was running";
    destroyed.Notify();
  });
  EXPECT_FALSE(destroyed.WaitFor(absl::Milliseconds(50)));
  release.Notify();
  EXPECT_TRUE(destroyed.WaitFor(kHangGuard));
  destroying.join();
  ticking.join();
}

// ---------------------------------------------------------------------------
// E9 Memory follows the live set: after 200,000 timers are removed the loop
// gives their memory back on its own, between ticks.

TEST(E9Memory, FallsBackAfterMostTimersAreRemoved) {
  ManualWheel w(512);
  constexpr int kTimers = 200'000;
  for (int k = 0; k < kTimers; ++k) {
    ASSERT_TRUE(w.wheel().SetTimer(k, k, kInterval * (10 + k / 100)).ok());
  }
  w.Tick();  // a round trip: everything above is applied
  const std::size_t peak = w.wheel().stats().memory_bytes;
  EXPECT_GT(peak, std::size_t{kTimers} * 32);
  for (int k = 0; k < kTimers; ++k) {
    if (k % 1000 != 0) {
      ASSERT_TRUE(w.wheel().RemoveTimer(k).ok());
    }
  }
  const absl::Time give_up = absl::Now() + kHangGuard;
  // No ticks meanwhile: the loop does it on its own, idle or not.
  while (w.wheel().stats().memory_bytes > peak / 10 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_LE(w.wheel().stats().memory_bytes, peak / 10);
  EXPECT_EQ(w.wheel().stats().pending, std::size_t{kTimers / 1000});
  // The survivors, relocated, still fire on their own ticks.
  const int ticked = w.ticks();
  w.Tick(10 + kTimers / 100 - ticked);
  for (int k = 0; k < kTimers; k += 1000) {
    EXPECT_EQ(w.FireTick(k), 10 + k / 100);
  }
}

}  // namespace
}  // namespace timingwheel
