// docs/api.md S10, through the public header only: callbacks run off the
// loop and the callers' threads; a slow callback delays nothing beyond the
// worker it occupies, under real time and under a ManualTicker; a callback
// may set, move and remove timers on its own wheel; an exception from a
// callback or a Drain fn is caught and the wheel keeps working. Two tests run
// on real time (SlowCallbackDoesNotBlockCommandsOrTicks,
// SlowCallbackOccupiesOnlyItsWorker), with bounds that never decide speed.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../common/event.h"
#include "../common/hang_guard.h"
#include "../common/manual_wheel.h"
#include "../common/stop_result.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace callbacks_test {

using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::Entries;
using ::timingwheel::testing::Event;
using ::timingwheel::testing::FinishesInTime;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::StopSorted;
using ::timingwheel::testing::TestOptions;

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
  BecomesTrue([&] {
    return (*wheel)->stats().pending >= 100 &&
           (*wheel)->stats().ticks >= ticks_before + 20;
  });
  const Stats s = (*wheel)->stats();
  release.Notify();
  EXPECT_GE(s.pending, 100u) << "commands not applied while a callback blocks";
  EXPECT_GE(s.ticks, ticks_before + 20) << "ticks stalled behind a callback";
}

// A ManualTicker too: while a tick's callback blocks, the loop applies
// commands (S10); the Tick call returns only after the callback (its (c)).
// Only the Tick call waits for the tick's callbacks, never the loop.
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
  BecomesTrue([&] { return w.wheel().stats().pending >= 100; });
  const Stats s = w.wheel().stats();
  const bool returned_early = tick_returned.WaitFor(absl::ZeroDuration());
  release.Notify();
  ticking.join();
  EXPECT_EQ(s.pending, 100u) << "commands not applied while a callback blocks";
  EXPECT_FALSE(returned_early) << "Tick returned before its callback did";
  EXPECT_EQ(s.fired, 1u);
}

// A manual tick's callback may wait for another thread's Drain: the loop
// applies the Drain meanwhile instead of waiting for the callback, so the
// two do not wait for each other.
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
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
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

TEST(S10Callbacks, RearmingFromTheCallbackRunsEveryPeriod) {
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
  EXPECT_EQ(StopSorted(w.wheel()), Entries());
}

}  // namespace callbacks_test
}  // namespace timingwheel
