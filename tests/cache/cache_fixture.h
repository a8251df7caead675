// What the Cache tests (cache_*_test.cc) share: a Cache<std::string, int>
// on its own ManualTicker (the tick is kInterval) whose listener records
// every call, with the thread it ran on.
#ifndef TIMINGWHEEL_TESTS_CACHE_CACHE_FIXTURE_H_
#define TIMINGWHEEL_TESTS_CACHE_CACHE_FIXTURE_H_

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "timingwheel/cache.h"
#include "timingwheel/ticker.h"

namespace timingwheel {
namespace cache_testing {

inline constexpr absl::Duration kInterval = absl::Seconds(1);

using IntCache = Cache<int, int>;

// Every listener call, with the thread it ran on.
struct Removal {
  std::string key;
  int value;
  RemovalCause cause;
  std::thread::id thread;
  bool operator==(const Removal& o) const {
    return key == o.key && value == o.value && cause == o.cause;
  }
};

class Recorder {
 public:
  Cache<std::string, int>::RemovalListener Listener() {
    return [this](std::string key, int value, RemovalCause cause) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(
          {std::move(key), value, cause, std::this_thread::get_id()});
    };
  }
  std::vector<Removal> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(calls_, {});
  }

 private:
  std::mutex mu_;
  std::vector<Removal> calls_;
};

struct Fixture {
  explicit Fixture(CacheOptions options = {}) {
    options.wheel.interval = kInterval;
    options.wheel.ticker = ticker;
    auto c = Cache<std::string, int>::Create(options, recorder.Listener());
    EXPECT_TRUE(c.ok()) << c.status();
    cache = *std::move(c);
  }
  std::shared_ptr<ManualTicker> ticker = std::make_shared<ManualTicker>();
  Recorder recorder;
  std::unique_ptr<Cache<std::string, int>> cache;
};

inline CacheOptions Ttl(absl::Duration ttl) {
  CacheOptions o;
  o.ttl = ttl;
  return o;
}

}  // namespace cache_testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_CACHE_FIXTURE_H_
