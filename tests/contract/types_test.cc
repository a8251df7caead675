// docs/api.md Types, through the public header only: ManualTicker::Tick's
// guarantees (returns after the callbacks its ticks triggered; concurrent
// calls serialized), the Options defaults, key types (strings, structs with
// AbslHashValue, custom Hash and Eq, keys whose hashes all collide),
// move-only values, and the std::chrono overloads.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../common/constant_hash.h"
#include "../common/event.h"
#include "../common/hang_guard.h"
#include "../common/manual_wheel.h"
#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace types_test {

using ::timingwheel::testing::ConstantHash;
using ::timingwheel::testing::Event;
using ::timingwheel::testing::IntWheel;
using ::timingwheel::testing::kHangGuard;
using ::timingwheel::testing::kInterval;
using ::timingwheel::testing::ManualOptions;
using ::timingwheel::testing::ManualWheel;

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

TEST(Types, MoveOnlyValuesReachCallbackDrainAndStop) {
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

// String keys of every length from 0 to 120 characters (the wheel holds
// short ones in place and long ones on the heap), from two threads at once:
// every key ends exactly one way (fired, removed, superseded, drained or
// returned by Stop), with its own value and its characters intact.
TEST(Types, StringKeysOfEveryLengthEndExactlyOnce) {
  using W = TimingWheel<std::string, int>;
  auto ticker = std::make_shared<ManualTicker>();
  std::mutex mu;
  std::map<std::string, std::vector<int>> ended;  // key -> values it ended with
  auto record = [&](std::string key, int value) {
    std::lock_guard<std::mutex> lock(mu);
    ended[std::move(key)].push_back(value);
  };
  auto wheel = W::Create(ManualOptions(ticker), record);
  ASSERT_TRUE(wheel.ok());
  W& w = **wheel;
  constexpr int kLengths = 121;
  // Thread t's key of length n: n characters, the first t's letter.
  auto key = [](int t, int n) {
    std::string k(n, static_cast<char>('a' + n % 26));
    if (n > 0) k[0] = static_cast<char>('0' + t);
    return k;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int n = 0; n < kLengths; ++n) {
        if (n == 0 && t == 1) continue;  // one empty key in all
        // Value 1000 t + n, due on tick 1 + n % 3; every fifth is moved to
        // tick 10, every seventh removed, every eleventh superseded.
        ASSERT_TRUE(
            w.SetTimer(key(t, n), 1000 * t + n, (1 + n % 3) * kInterval).ok());
        if (n % 5 == 0)
          ASSERT_TRUE(w.MoveTimer(key(t, n), 10 * kInterval).ok());
        if (n % 7 == 0) ASSERT_TRUE(w.RemoveTimer(key(t, n)).ok());
        if (n % 11 == 0) {
          ASSERT_TRUE(
              w.SetTimer(key(t, n), -(1000 * t + n), 20 * kInterval).ok());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ticker->Tick(3);  // fires the unmoved ones
  {
    std::lock_guard<std::mutex> lock(mu);
    for (int t = 0; t < 2; ++t) {
      for (int n = 0; n < kLengths; ++n) {
        if (n == 0 && t == 1) continue;
        const bool fires_now = n % 5 != 0 && n % 7 != 0 && n % 11 != 0;
        auto it = ended.find(key(t, n));
        if (fires_now) {
          ASSERT_NE(it, ended.end()) << "length " << n;
          EXPECT_EQ(it->second, std::vector<int>{1000 * t + n});
        } else {
          EXPECT_EQ(it, ended.end()) << "length " << n;
        }
      }
    }
  }
  // Drain takes the moved ones (tick 10) and the superseded ones (tick 20).
  std::map<std::string, int> drained;
  ASSERT_TRUE(w.Drain([&](std::string k, int v) {
                 std::lock_guard<std::mutex> lock(mu);
                 EXPECT_TRUE(drained.emplace(std::move(k), v).second);
               }).ok());
  for (int t = 0; t < 2; ++t) {
    for (int n = 0; n < kLengths; ++n) {
      if (n == 0 && t == 1) continue;
      const std::string k = key(t, n);
      if (n % 11 == 0) {
        EXPECT_EQ(drained.at(k), -(1000 * t + n)) << "length " << n;
      } else if (n % 7 == 0) {
        EXPECT_EQ(drained.count(k), 0u) << "length " << n;  // removed
      } else if (n % 5 == 0) {
        EXPECT_EQ(drained.at(k), 1000 * t + n) << "length " << n;
      }
    }
  }
  // What Stop returns comes back as std::strings too.
  ASSERT_TRUE(w.SetTimer(key(0, 77), 77, 5 * kInterval).ok());
  auto stopped = w.Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped,
            (std::vector<std::pair<std::string, int>>{{key(0, 77), 77}}));
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

TEST(Types, ChronoDelaysFireOnTheirTicks) {
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

}  // namespace types_test
}  // namespace timingwheel
