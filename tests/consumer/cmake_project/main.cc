// Uses an installed timingwheel through find_package(timingwheel): a wheel
// whose timer fires on the third manual tick, and a cache whose entry
// expires on its time to live and tells its listener once.
#include <timingwheel/cache.h>
#include <timingwheel/timing_wheel.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "cmake consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  auto ticker = std::make_shared<timingwheel::ManualTicker>();
  std::atomic<int> fired{0};
  auto wheel = timingwheel::TimingWheel<std::string, int>::Create(
      {.interval = absl::Seconds(1), .num_slots = 8, .ticker = ticker},
      [&](std::string key, int value) {
        if (key == "session-42" && value == 7) fired.fetch_add(1);
      });
  if (!wheel.ok()) return Fail("TimingWheel::Create failed");
  if (!(*wheel)->SetTimer("session-42", 7, absl::Seconds(3)).ok()) {
    return Fail("SetTimer failed");
  }
  ticker->Tick(2);
  if (fired.load() != 0) return Fail("the timer fired early");
  ticker->Tick();
  if (fired.load() != 1) return Fail("the timer did not fire on tick 3");
  if (!(*wheel)->Stop().ok()) return Fail("Stop failed");

  auto cache_ticker = std::make_shared<timingwheel::ManualTicker>();
  std::atomic<int> expired{0};
  auto cache = timingwheel::Cache<std::string, int>::Create(
      {.ttl = absl::Seconds(2),
       .wheel = {.interval = absl::Seconds(1), .ticker = cache_ticker}},
      [&](std::string, int, timingwheel::RemovalCause cause) {
        if (cause == timingwheel::RemovalCause::kExpired) expired.fetch_add(1);
      });
  if (!cache.ok()) return Fail("Cache::Create failed");
  if (!(*cache)->Set("user-1", 11).ok()) return Fail("Cache::Set failed");
  if ((*cache)->Get("user-1") != 11) return Fail("Cache::Get missed");
  cache_ticker->Tick(2);
  if ((*cache)->Get("user-1").has_value()) return Fail("an expired hit");
  if (expired.load() != 1) return Fail("the listener did not hear kExpired");

  std::printf(
      "timingwheel cmake consumer: timer fired after 3 ticks, cache entry "
      "expired after 2\n");
  return 0;
}
