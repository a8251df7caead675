// docs/api.md S7 (Drain), through the public header only: Drain's fn calls
// run on `drain_workers` threads at once, never more, never on the calling
// thread; every entry present is handed over exactly once and Drain returns
// only after every call has returned; entries set afterwards (also by the fn
// itself, or by other threads while Drain runs) are kept; Drain from a Drain
// fn is FailedPrecondition (docs/api.md Errors). Also E2: an exception thrown
// by a Drain fn is counted in stats().callback_exceptions; E7: the drain
// threads are a pool, reused across Drains.
//
// Concurrency is proven deterministically: each fn waits at a barrier until
// the expected number of fns are inside at once (a 10 s deadline is only a
// safety net, so a Drain that runs fns one at a time fails instead of
// hanging). The one real-time test has bounds that only catch serial
// running, never decide speed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "../common/concurrency_barrier.h"
#include "../common/hang_guard.h"
#include "../common/manual_wheel.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace drain_test {

using ::absl::StatusCode;
using ::timingwheel::testing::ConcurrencyBarrier;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualWheel;
using ::timingwheel::testing::TestOptions;
using ::timingwheel::testing::ThreadToken;
using SteadyClock = std::chrono::steady_clock;

// Far beyond any tick these tests run: nothing fires, everything stays
// until a Drain or Stop takes it.
constexpr absl::Duration kFar = absl::Hours(1);

// A wheel on its own ManualTicker, whose execute callback only counts.
struct ManualIntWheel {
  explicit ManualIntWheel(int drain_workers) {
    Options options;
    options.interval = kInterval;
    options.num_slots = 64;
    options.drain_workers = drain_workers;
    options.ticker = ticker;
    auto created =
        IntWheel::Create(options, [this](int, int) { fired.fetch_add(1); });
    EXPECT_TRUE(created.ok()) << created.status();
    if (created.ok()) wheel = std::move(*created);
  }

  std::shared_ptr<ManualTicker> ticker = std::make_shared<ManualTicker>();
  std::atomic<int> fired{0};
  std::unique_ptr<IntWheel> wheel;  // last: destroyed first
};

// Per-key delivery counts for keys 0..n-1; bad() counts deliveries of an
// unknown key or with a wrong value.
class Seen {
 public:
  explicit Seen(int n) : counts_(n) {
    for (auto& c : counts_) c.store(0, std::memory_order_relaxed);
  }
  void Add(int key, int value) {
    if (key < 0 || key >= static_cast<int>(counts_.size()) ||
        value != ValueOf(key)) {
      bad_.fetch_add(1);
      return;
    }
    counts_[key].fetch_add(1, std::memory_order_relaxed);
  }
  static int ValueOf(int key) { return key ^ 0x5a5a; }
  // Keys seen other than exactly once.
  int NotExactlyOnce() const {
    int n = 0;
    for (const auto& c : counts_) n += c.load() != 1;
    return n;
  }
  int Total() const {
    int n = 0;
    for (const auto& c : counts_) n += c.load();
    return n;
  }
  int Count(int key) const { return counts_[key].load(); }
  int bad() const { return bad_.load(); }

 private:
  std::vector<std::atomic<int>> counts_;
  std::atomic<int> bad_{0};
};

// ---------------------------------------------------------------------------
// S7 with a ManualWheel: every entry present once, on drain_workers
// threads, then Drain returns; entries set afterwards are kept.

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
// S7: fns run on drain_workers threads at once.

// 8 entries, 4 drain workers: 4 fns are inside at once (the barrier proves
// it), never more; exactly 4 threads ran them, none the caller's; each entry
// once; Drain returned after every fn had.
TEST(S7DrainWorkers, FourWorkersRunFourFnsAtOnce) {
  constexpr int kEntries = 8, kWorkers = 4;
  ManualIntWheel w(kWorkers);
  for (int k = 0; k < kEntries; ++k) {
    ASSERT_TRUE(w.wheel->SetTimer(k, Seen::ValueOf(k), kFar).ok());
  }
  ConcurrencyBarrier barrier(kWorkers);
  Seen seen(kEntries);
  std::atomic<int> returned{0};
  ASSERT_TRUE(w.wheel
                  ->Drain([&](int key, int value) {
                    seen.Add(key, value);
                    barrier.Enter();
                    // Late enough that a Drain returning early would see it.
                    absl::SleepFor(absl::Milliseconds(20));
                    returned.fetch_add(1);
                  })
                  .ok());
  EXPECT_EQ(returned.load(), kEntries) << "Drain returned before its fns";
  EXPECT_TRUE(barrier.reached())
      << "never " << kWorkers << " fns at once; at most "
      << barrier.max_inside();
  EXPECT_EQ(barrier.max_inside(), kWorkers);
  EXPECT_EQ(barrier.thread_ids().size(), static_cast<std::size_t>(kWorkers));
  EXPECT_FALSE(barrier.thread_ids().contains(std::this_thread::get_id()));
  EXPECT_EQ(seen.NotExactlyOnce(), 0);
  EXPECT_EQ(seen.bad(), 0);
  auto stopped = w.wheel->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->empty());
}

// Fewer entries than workers: both fns of a 2-entry Drain run at once.
TEST(S7DrainWorkers, TwoEntriesRunAtOnceWithEightWorkers) {
  ManualIntWheel w(8);
  ASSERT_TRUE(w.wheel->SetTimer(1, Seen::ValueOf(1), kFar).ok());
  ASSERT_TRUE(w.wheel->SetTimer(0, Seen::ValueOf(0), kFar).ok());
  ConcurrencyBarrier barrier(2);
  Seen seen(2);
  ASSERT_TRUE(w.wheel
                  ->Drain([&](int key, int value) {
                    seen.Add(key, value);
                    barrier.Enter();
                  })
                  .ok());
  EXPECT_TRUE(barrier.reached()) << "the two fns did not run at once";
  EXPECT_EQ(barrier.max_inside(), 2);
  EXPECT_EQ(barrier.thread_ids().size(), 2u);
  EXPECT_FALSE(barrier.thread_ids().contains(std::this_thread::get_id()));
  EXPECT_EQ(seen.NotExactlyOnce(), 0);
  EXPECT_EQ(seen.bad(), 0);
}

// Real time: 8 fns of 200 ms on 4 workers take at least 400 ms (no more than
// 4 at once) and less than the 1600 ms of running them one after another.
// The upper bound catches only serial running.
TEST(S7DrainWorkers, RealTimeFourWorkersBeatSerial) {
  constexpr int kEntries = 8;
  ManualIntWheel w(4);
  for (int k = 0; k < kEntries; ++k) {
    ASSERT_TRUE(w.wheel->SetTimer(k, Seen::ValueOf(k), kFar).ok());
  }
  Seen seen(kEntries);
  const SteadyClock::time_point start = SteadyClock::now();
  ASSERT_TRUE(w.wheel
                  ->Drain([&](int key, int value) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(200));
                    seen.Add(key, value);
                  })
                  .ok());
  const auto elapsed = SteadyClock::now() - start;
  EXPECT_EQ(seen.NotExactlyOnce(), 0);
  EXPECT_GE(elapsed, std::chrono::milliseconds(400))
      << "more than 4 fns ran at once";
  EXPECT_LT(elapsed, std::chrono::milliseconds(1600))
      << "the fns ran one after another";
}

// ---------------------------------------------------------------------------
// S7: exactly once, and entries set afterwards are kept.

// A million entries: each handed to fn exactly once; a second Drain right
// after finds nothing, and so does Stop.
TEST(S7DrainMany, MillionEntriesEachOnce) {
  constexpr int kEntries = 1'000'000;
  ManualIntWheel w(8);
  for (int k = 0; k < kEntries; ++k) {
    ASSERT_TRUE(w.wheel->SetTimer(k, Seen::ValueOf(k), kFar).ok());
  }
  Seen seen(kEntries);
  ASSERT_TRUE(
      w.wheel->Drain([&](int key, int value) { seen.Add(key, value); }).ok());
  EXPECT_EQ(seen.Total(), kEntries);
  EXPECT_EQ(seen.NotExactlyOnce(), 0);
  EXPECT_EQ(seen.bad(), 0);

  std::atomic<int> second{0};
  ASSERT_TRUE(w.wheel->Drain([&](int, int) { second.fetch_add(1); }).ok());
  EXPECT_EQ(second.load(), 0);
  auto stopped = w.wheel->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->empty());
  EXPECT_EQ(w.wheel->stats().drained, static_cast<std::uint64_t>(kEntries));
  EXPECT_EQ(w.fired.load(), 0);
}

// Producers keep setting fresh keys while a Drain runs. Every key ends
// exactly once, drained or returned by Stop; what a producer lost to the
// Drain is a prefix of what it set (its commands apply in its order, S9),
// and what it set after that prefix is kept.
TEST(S7DrainMany, ConcurrentSettersKeepLaterEntries) {
  constexpr int kProducers = 3;
  constexpr int kKeysPerProducer = 500'000;  // a bound, never reached
  constexpr int kAfterDrain = 2'000;         // sets after Drain returned
  ManualIntWheel w(4);
  IntWheel& wheel = *w.wheel;
  std::atomic<bool> drain_returned{false};
  std::vector<int> set_count(kProducers, 0);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      const int base = p * kKeysPerProducer;
      int after = 0;
      int i = 0;
      for (; i < kKeysPerProducer && after < kAfterDrain; ++i) {
        // Read before the call: a set made once Drain has returned is
        // applied after the Drain, so it must be kept.
        const bool after_drain = drain_returned.load();
        EXPECT_TRUE(
            wheel.SetTimer(base + i, Seen::ValueOf(base + i), kFar).ok());
        if (after_drain) ++after;
        // Throttled, so the bound is far away whenever the Drain returns.
        if (i % 64 == 63) absl::SleepFor(absl::Microseconds(50));
      }
      set_count[p] = i;
    });
  }
  // Drain once the loop has applied a good number of sets (not after a fixed
  // sleep, which a slow machine could outlast).
  const absl::Time give_up = absl::Now() + kHangGuard;
  while (wheel.stats().applied < 3000 && absl::Now() < give_up) {
    absl::SleepFor(absl::Microseconds(200));
  }
  Seen drained(kProducers * kKeysPerProducer);
  ASSERT_TRUE(
      wheel.Drain([&](int key, int value) { drained.Add(key, value); }).ok());
  drain_returned.store(true);
  for (std::thread& t : producers) t.join();
  auto stopped = wheel.Stop();
  ASSERT_TRUE(stopped.ok());

  Seen kept(kProducers * kKeysPerProducer);
  for (const auto& [key, value] : *stopped) kept.Add(key, value);
  EXPECT_EQ(drained.bad(), 0);
  EXPECT_EQ(kept.bad(), 0);
  EXPECT_GT(drained.Total(), 0);
  for (int p = 0; p < kProducers; ++p) {
    SCOPED_TRACE(p);
    const int base = p * kKeysPerProducer;
    ASSERT_LT(set_count[p], kKeysPerProducer);
    int not_once = 0, drained_after_kept = 0, kept_count = 0;
    bool seen_kept = false;
    for (int i = 0; i < kKeysPerProducer; ++i) {
      const int d = drained.Count(base + i), k = kept.Count(base + i);
      if (i >= set_count[p]) {
        not_once += d + k != 0;  // never set: must be nowhere
        continue;
      }
      not_once += d + k != 1;
      if (k == 1) {
        seen_kept = true;
        ++kept_count;
      } else if (d == 1 && seen_kept) {
        ++drained_after_kept;
      }
    }
    EXPECT_EQ(not_once, 0) << "keys lost or duplicated";
    EXPECT_EQ(drained_after_kept, 0)
        << "a key was drained though an earlier key of its thread was kept";
    EXPECT_GE(kept_count, kAfterDrain) << "sets after the Drain were lost";
  }
  EXPECT_EQ(drained.Total() + kept.Total(),
            set_count[0] + set_count[1] + set_count[2]);
  EXPECT_EQ(w.fired.load(), 0);
}

// ---------------------------------------------------------------------------
// S7: what a Drain fn may do.

// A Drain fn may call SetTimer on its own wheel; the entries it sets are set
// after the Drain was applied, so they are kept. Drain from a Drain fn is
// refused (docs/api.md Errors), without deadlock, and drains nothing.
TEST(S7DrainReentry, FnMaySetTimerButNotDrain) {
  constexpr int kEntries = 10;
  ManualIntWheel w(4);
  IntWheel& wheel = *w.wheel;
  for (int k = 0; k < kEntries; ++k) {
    ASSERT_TRUE(wheel.SetTimer(k, Seen::ValueOf(k), kFar).ok());
  }
  std::atomic<int> set_ok{0}, inner_refused{0}, inner_fn_calls{0};
  ASSERT_TRUE(wheel
                  .Drain([&](int key, int value) {
                    if (wheel.SetTimer(key + 100, value, kInterval).ok()) {
                      set_ok.fetch_add(1);
                    }
                    const absl::Status inner = wheel.Drain(
                        [&](int, int) { inner_fn_calls.fetch_add(1); });
                    if (inner.code() == StatusCode::kFailedPrecondition) {
                      inner_refused.fetch_add(1);
                    }
                  })
                  .ok());
  EXPECT_EQ(set_ok.load(), kEntries);
  EXPECT_EQ(inner_refused.load(), kEntries);
  EXPECT_EQ(inner_fn_calls.load(), 0);
  // Stop applies every accepted command, the fns' SetTimers included.
  auto stopped = wheel.Stop();
  ASSERT_TRUE(stopped.ok());
  std::vector<std::pair<int, int>> got = std::move(*stopped), want;
  std::sort(got.begin(), got.end());
  for (int k = 0; k < kEntries; ++k)
    want.push_back({k + 100, Seen::ValueOf(k)});
  EXPECT_EQ(got, want);
  EXPECT_EQ(w.fired.load(), 0);
}

// docs/api.md E2: an exception thrown by a Drain fn is caught and counted in
// stats().callback_exceptions; the other entries are still handed over.
TEST(S7DrainReentry, ThrowingFnIsCountedAndLosesNothing) {
  constexpr int kEntries = 100;
  ManualIntWheel w(4);
  for (int k = 0; k < kEntries; ++k) {
    ASSERT_TRUE(w.wheel->SetTimer(k, Seen::ValueOf(k), kFar).ok());
  }
  Seen seen(kEntries);
  ASSERT_TRUE(w.wheel
                  ->Drain([&](int key, int value) {
                    seen.Add(key, value);
                    if (key % 10 == 0) throw std::runtime_error("drain fn");
                  })
                  .ok());
  EXPECT_EQ(seen.NotExactlyOnce(), 0);
  auto stopped = w.wheel->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->empty());
  EXPECT_EQ(w.wheel->stats().callback_exceptions, 10u);
  EXPECT_EQ(w.wheel->stats().drained, static_cast<std::uint64_t>(kEntries));
}

// ---------------------------------------------------------------------------
// Not the shared contract (docs/api.md S7 says only "on drain_workers
// threads"): this checks the implementation's drain pool, docs/api.md E7
// (Drain's fns run on drain_workers threads kept for the wheel's life, not
// threads created per call). Two successive Drains of 2 blocking entries on
// drain_workers = 2 run on the same two threads. Threads are told apart by a
// thread_local token, since a new thread may reuse a joined thread's
// std::thread::id.
TEST(E7DrainPool, ThreadsAreReusedAcrossDrains) {
  ManualIntWheel w(2);
  std::set<int> tokens[2];
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    ASSERT_TRUE(w.wheel->SetTimer(0, Seen::ValueOf(0), kFar).ok());
    ASSERT_TRUE(w.wheel->SetTimer(1, Seen::ValueOf(1), kFar).ok());
    ConcurrencyBarrier barrier(2);
    ASSERT_TRUE(w.wheel->Drain([&](int, int) { barrier.Enter(); }).ok());
    EXPECT_TRUE(barrier.reached()) << "the two fns did not run at once";
    tokens[round] = barrier.tokens();
    EXPECT_EQ(tokens[round].size(), 2u);
    EXPECT_FALSE(tokens[round].contains(ThreadToken()));
  }
  EXPECT_EQ(tokens[0], tokens[1]) << "each Drain ran on new threads";
}

}  // namespace drain_test
}  // namespace timingwheel
