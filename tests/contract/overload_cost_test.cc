// docs/api.md "Overload" against the real clock, with commands that cost
// the loop far more than a pessimistic guess: with max_lag set, accepted
// timers fire at most about max_lag plus one interval late, whatever a
// command costs the loop. The key type's hash and copies spin for a couple
// of microseconds on the loop thread (ten times the loop's first guess of
// its pace, a hundred times its pace with cheap keys), so a loop that
// admits by a stale or optimistic pace fills its queue with many max_lags
// of work. Public API only; Overload.FloodWithMaxLagLosesNothing is the
// cheap-key flood.

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../common/hang_guard.h"
#include "../common/steady_now.h"
#include "absl/base/config.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace overload_cost_test {

using ::timingwheel::testing::BecomesTrue;
using ::timingwheel::testing::NowNs;

// What a key's hash, copy or move costs on the loop thread.
constexpr std::int64_t kSlowNs = 2000;

// True on the wheel's event-loop thread, which the library names "tw-loop"
// (internal/loop/thread_name.h) right after starting it, before Create
// returns; no key reaches the loop before then, so the answer is read once
// per thread (a system call) and kept.
bool OnLoopThread() {
  thread_local const bool on_loop = [] {
    char name[16] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) {
      return false;
    }
    return std::strcmp(name, "tw-loop") == 0;
  }();
  return on_loop;
}

// Spins kSlowNs on the loop thread; nearly free elsewhere.
void CostOnLoop() {
  if (!OnLoopThread()) return;
  const std::int64_t until = NowNs() + kSlowNs;
  while (NowNs() < until) {
  }
}

// A key that is slow to hash, copy and move on the loop thread. Both, so
// the loop's cost per command stays high if hashing moves to the calling
// thread.
struct SlowKey {
  std::uint64_t id = 0;

  SlowKey() = default;
  explicit SlowKey(std::uint64_t i) : id(i) {}
  SlowKey(const SlowKey& other) : id(other.id) { CostOnLoop(); }
  SlowKey(SlowKey&& other) noexcept : id(other.id) { CostOnLoop(); }
  SlowKey& operator=(const SlowKey& other) {
    CostOnLoop();
    id = other.id;
    return *this;
  }
  SlowKey& operator=(SlowKey&& other) noexcept {
    CostOnLoop();
    id = other.id;
    return *this;
  }
  friend bool operator==(const SlowKey& a, const SlowKey& b) {
    return a.id == b.id;
  }
};

struct SlowKeyHash {
  std::size_t operator()(const SlowKey& k) const {
    CostOnLoop();
    return absl::Hash<std::uint64_t>()(k.id);
  }
};

using SlowWheel = TimingWheel<SlowKey, int, SlowKeyHash>;

// One accepted SetTimer: when the call started (steady clock) and its delay.
struct Accepted {
  std::int64_t call_ns;
  std::int64_t delay_ns;
};

// Two threads flood SetTimer with fresh keys for kFlood, retrying refused
// calls after a yield. Every accepted timer fires exactly once, none early
// (one interval of tolerance), and none later than its deadline (call +
// delay) + max_lag + 50 intervals + 100 ms: "about max_lag plus one
// interval", with room for a noisy machine but far under the hundreds of
// milliseconds a queue admitted by a stale pace holds.
TEST(OverloadCost, SlowKeysFireWithinMaxLagUnderAFlood) {
  constexpr int kThreads = 2;
  constexpr absl::Duration kInterval = absl::Milliseconds(1);
  constexpr absl::Duration kMaxLag = absl::Milliseconds(20);
#if defined(ABSL_HAVE_THREAD_SANITIZER) || defined(ABSL_HAVE_ADDRESS_SANITIZER)
  // Sanitized builds run the loop's own work 5-20x slower, and checking
  // builds (-Dinvariants=true) walk the wheel between rounds: a shorter
  // flood keeps the run short. The lateness bound stays: the loop measures
  // its own pace, slow or not, and the spin is wall time (the latest fires
  // came 30-40 ms late under ThreadSanitizer and AddressSanitizer).
  constexpr absl::Duration kFlood = absl::Milliseconds(500);
#else
  constexpr absl::Duration kFlood = absl::Seconds(1);
#endif
  const std::int64_t late_bound_ns = absl::ToInt64Nanoseconds(
      kMaxLag + 50 * kInterval + absl::Milliseconds(100));
  // Bounds memory if a thread is accepted far faster than the loop could
  // possibly apply.
  constexpr std::size_t kMaxPerThread = std::size_t{1} << 22;

  Options options;
  options.interval = kInterval;
  options.max_lag = kMaxLag;

  // Fire times by key, from the execute callback. std::mutex: visible to
  // ThreadSanitizer even with an uninstrumented Abseil.
  std::mutex fired_mu;
  std::vector<std::pair<std::uint64_t, std::int64_t>> fired;
  fired.reserve(1 << 20);
  auto wheel = SlowWheel::Create(options, [&](SlowKey key, int) {
    const std::int64_t now = NowNs();
    std::lock_guard<std::mutex> lock(fired_mu);
    fired.emplace_back(key.id, now);
  });
  ASSERT_TRUE(wheel.ok()) << wheel.status();

  std::vector<std::vector<Accepted>> accepted(kThreads);
  std::atomic<std::int64_t> refusals{0};
  std::atomic<int> other_errors{0};
  const std::int64_t flood_end = NowNs() + absl::ToInt64Nanoseconds(kFlood);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Accepted>& mine = accepted[t];
      mine.reserve(1 << 18);
      while (mine.size() < kMaxPerThread) {
        const std::uint64_t i = mine.size();
        // Fresh keys: thread in the high bits, its count of accepted calls
        // in the low ones. Delays of 20-200 ms.
        const std::uint64_t id = (static_cast<std::uint64_t>(t) << 32) | i;
        const absl::Duration delay = absl::Milliseconds(20 + (i * 7919) % 181);
        const std::int64_t call = NowNs();
        if (call >= flood_end) break;
        const absl::Status s = (*wheel)->SetTimer(SlowKey(id), 0, delay);
        if (s.ok()) {
          mine.push_back({call, absl::ToInt64Nanoseconds(delay)});
        } else {
          if (s.code() == absl::StatusCode::kResourceExhausted) {
            refusals.fetch_add(1, std::memory_order_relaxed);
          } else {
            other_errors.fetch_add(1, std::memory_order_relaxed);
          }
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::size_t total = 0;
  for (const auto& mine : accepted) total += mine.size();
  EXPECT_TRUE(BecomesTrue([&] { return (*wheel)->stats().fired >= total; }))
      << (*wheel)->stats().fired << " of " << total << " fired";
  // Stop runs every fired timer's callback first.
  auto left = (*wheel)->Stop();
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty()) << left->size() << " timers never fired";
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_GT(refusals.load(), 0) << "the flood was never pushed back";

  // Match every fire with its call.
  std::vector<std::vector<std::int64_t>> fire_ns(kThreads);
  for (int t = 0; t < kThreads; ++t) fire_ns[t].assign(accepted[t].size(), -1);
  int unknown = 0, twice = 0;
  for (const auto& [id, ns] : fired) {
    const std::uint64_t t = id >> 32, i = id & 0xffffffffu;
    if (t >= kThreads || i >= accepted[t].size()) {
      ++unknown;
    } else if (fire_ns[t][i] >= 0) {
      ++twice;
    } else {
      fire_ns[t][i] = ns;
    }
  }
  EXPECT_EQ(unknown, 0);
  EXPECT_EQ(twice, 0);

  const std::int64_t interval_ns = absl::ToInt64Nanoseconds(kInterval);
  int never = 0, early = 0, late = 0;
  std::int64_t max_late = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (std::size_t i = 0; i < accepted[t].size(); ++i) {
      if (fire_ns[t][i] < 0) {
        ++never;
        continue;
      }
      const std::int64_t deadline =
          accepted[t][i].call_ns + accepted[t][i].delay_ns;
      const std::int64_t lateness = fire_ns[t][i] - deadline;
      if (lateness < -interval_ns) ++early;
      if (lateness > late_bound_ns) ++late;
      max_late = std::max(max_late, lateness);
    }
  }
  std::printf("accepted %zu timers, %lld refusals, max lateness %.1f ms\n",
              total, static_cast<long long>(refusals.load()),
              static_cast<double>(max_late) / 1e6);
  ::testing::Test::RecordProperty("max_lateness_us",
                                  static_cast<int>(max_late / 1000));
  EXPECT_EQ(never, 0) << "accepted timers that never fired";
  EXPECT_EQ(early, 0) << "timers fired early";
  EXPECT_EQ(late, 0) << "timers fired more than "
                     << static_cast<double>(late_bound_ns) / 1e6
                     << " ms late; the latest "
                     << static_cast<double>(max_late) / 1e6 << " ms";
}

}  // namespace overload_cost_test
}  // namespace timingwheel
