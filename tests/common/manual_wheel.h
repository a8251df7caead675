// A TimingWheel<int, int> driven by its own ManualTicker that records which
// tick ran each execute call, so tests can say "key k fired on tick t" and
// decide outcomes by tick counts, never by sleeps.
#ifndef TIMINGWHEEL_TESTS_COMMON_MANUAL_WHEEL_H_
#define TIMINGWHEEL_TESTS_COMMON_MANUAL_WHEEL_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel {
namespace testing {

// The tick of the tests' manual wheels.
inline constexpr absl::Duration kInterval = absl::Milliseconds(10);

using IntWheel = TimingWheel<int, int>;

// Options for a wheel driven by `ticker`, with the test interval.
inline Options ManualOptions(std::shared_ptr<ManualTicker> ticker,
                             int num_slots = 8) {
  Options options;
  options.interval = kInterval;
  options.num_slots = num_slots;
  options.ticker = std::move(ticker);
  return options;
}

// Options with the test interval, for tests that tweak another field.
inline Options TestOptions() {
  Options options;
  options.interval = kInterval;
  return options;
}

// TestOptions with Options::max_lag = `max_lag`.
inline Options TestOptionsWithMaxLag(absl::Duration max_lag) {
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

// A TimingWheel<int, int, Hash, Eq> on its own ManualTicker that remembers, for
// every execute call, the tick that triggered it. Ticks are run one at a
// time so that each call can be attributed to its tick: ManualTicker::Tick
// returns only after that tick's callbacks have returned.
template <typename Hash, typename Eq = std::equal_to<int>>
class BasicManualWheel {
 public:
  using Wheel = TimingWheel<int, int, Hash, Eq>;
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

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_MANUAL_WHEEL_H_
