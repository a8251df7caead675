// docs/api.md S8 (Stop) with the stopped-wheel row of Errors, ~TimingWheel
// (Types) and E12 (destroying a wheel from another thread or from its own
// callback), through the public header only: how a wheel ends, and that
// every value it holds then ends exactly once (S6). Most tests use a
// ManualTicker; S8Stop.RunsEveryQueuedCallbackBeforeReturning and
// E12DestroyFromCallback.RealTimeWithTwoWorkersStartsNoCallbackAfter run on
// real time, with bounds that catch wrong behaviour, never speed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../common/counted.h"
#include "../common/event.h"
#include "../common/hang_guard.h"
#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace stop_test {

using ::absl::StatusCode;
using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::Counted;
using ::timingwheel::testing::Entries;
using ::timingwheel::testing::Event;
using ::timingwheel::testing::FinishesInTime;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::Sorted;
using ::timingwheel::testing::StopSorted;

// Calls wheel.Stop() on another thread while something the Stop must wait
// for is held, and checks that it waits: it has not returned 50 ms later,
// and returns once `release` is notified. `on_return` runs on the stopping
// thread as soon as Stop returns, to check what must hold by then. Returns
// Stop's result, sorted.
template <typename Wheel>
Entries StopWaitsUntilReleased(Wheel& wheel, Event& release,
                               const std::function<void()>& on_return) {
  Event stopped;
  Entries result;
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
  Entries none, one = {{3, 3}};
  EXPECT_EQ(w.wheel().SetTimers(absl::MakeSpan(one), kInterval).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(one, (Entries{{3, 3}}));
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
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{1, 10}, {2, 21}, {4, 40}}));
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
  EXPECT_EQ(StopSorted(w.wheel()), (Entries{{4, 40}, {5, 50}, {6, 60}}));
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
  const Entries result = StopWaitsUntilReleased(w.wheel(), release, [&] {
    EXPECT_TRUE(callback_returned.load())
        << "Stop returned while a callback was running";
    stop_returned.store(true);
  });
  ticking.join();
  EXPECT_EQ(calls_after_stop.load(), 0);
  // Key 2 was due on tick 2: whether the Stop cut the Tick(5) short or not,
  // it ended exactly one way.
  if (key2_fired.load() == 1) {
    EXPECT_EQ(result, Entries());
  } else {
    EXPECT_EQ(key2_fired.load(), 0);
    EXPECT_EQ(result, (Entries{{2, 2}}));
  }
}

// Real time: callbacks queued behind a slow one when Stop is called must
// still run before Stop returns (S8: Stop "waits for every execute callback
// in flight"; S6: nothing handed to execute is lost). Each of ticks 1..20
// fires one timer, so 20 separate batches queue up behind the first,
// blocked, callback; Stop is called while they wait. The workers' shutdown
// must not overtake a batch the loop queued before it: every one of the 20
// runs.
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
  BecomesTrue([&] { return (*wheel)->stats().fired >= kTimers; });
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
  Entries results[2];
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
  EXPECT_EQ(results[0], Entries());
  EXPECT_EQ(results[1], (Entries{{2, 2}}));
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
  const Entries result = StopWaitsUntilReleased(**wheel, release, [&] {
    EXPECT_EQ(running.load(), 0) << "Stop returned while a Drain fn ran";
    stop_returned.store(true);
  });
  draining.join();
  EXPECT_TRUE(drain_status.ok()) << drain_status;
  EXPECT_EQ(calls_after_stop.load(), 0);
  EXPECT_EQ(result, Entries());
  for (int k = 0; k < kEntries; ++k) EXPECT_EQ(drained[k].load(), 1) << k;
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

}  // namespace stop_test
}  // namespace timingwheel
