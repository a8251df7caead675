// Uses timingwheel through its installed umbrella header only: one timer,
// driven by a ManualTicker, must fire on the third tick and not before.
#include <timingwheel/timing_wheel.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

int main() {
  auto ticker = std::make_shared<timingwheel::ManualTicker>();
  std::atomic<int> fired{0};
  std::atomic<int> fired_value{0};
  auto wheel = timingwheel::TimingWheel<std::string, int>::Create(
      {.interval = absl::Seconds(1), .num_slots = 8, .ticker = ticker},
      [&](std::string key, int value) {
        if (key == "session-42") fired_value.store(value);
        fired.fetch_add(1);
      });
  if (!wheel.ok()) {
    std::fprintf(stderr, "Create failed: %s\n",
                 std::string(wheel.status().message()).c_str());
    return 1;
  }
  if (absl::Status s = (*wheel)->SetTimer("session-42", 7, absl::Seconds(3));
      !s.ok()) {
    std::fprintf(stderr, "SetTimer failed: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  ticker->Tick(2);
  if (fired.load() != 0) {
    std::fprintf(stderr, "fired early, after 2 of 3 ticks\n");
    return 1;
  }
  ticker->Tick();
  if (fired.load() != 1 || fired_value.load() != 7) {
    std::fprintf(stderr, "expected one firing with value 7, got %d (value %d)\n",
                 fired.load(), fired_value.load());
    return 1;
  }
  auto left = (*wheel)->Stop();
  if (!left.ok() || !left->empty()) {
    std::fprintf(stderr, "Stop: expected no pending timers\n");
    return 1;
  }
  std::printf("timingwheel consumer: timer fired after 3 ticks (value 7)\n");
  return 0;
}
