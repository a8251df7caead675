// Compiled with clang++ against the installed copy by run_consumer.sh: the
// public headers must build with the other compiler too, for key and value
// types that are not trivially copyable (those take other code paths), and
// for the cache.
#include <cstdio>
#include <memory>
#include <string>

#include "timingwheel/cache.h"
#include "timingwheel/timing_wheel.h"

int main() {
  auto ticker = std::make_shared<timingwheel::ManualTicker>();
  int fired = 0;
  auto wheel =
      timingwheel::TimingWheel<std::string, std::unique_ptr<int>>::Create(
          {.interval = absl::Seconds(1), .ticker = ticker},
          [&](std::string, std::unique_ptr<int> v) { fired += *v; });
  if (!wheel.ok()) return 1;
  (*wheel)
      ->SetTimer("k", std::make_unique<int>(7), absl::Seconds(2))
      .IgnoreError();
  ticker->Tick(2);

  auto cache_ticker = std::make_shared<timingwheel::ManualTicker>();
  timingwheel::CacheOptions options;
  options.ttl = absl::Seconds(1);
  options.wheel.ticker = cache_ticker;
  auto cache = timingwheel::Cache<std::string, std::string>::Create(options);
  if (!cache.ok()) return 1;
  (*cache)->Set("a", "b").IgnoreError();
  const bool hit = (*cache)->Get("a") == std::optional<std::string>("b");
  cache_ticker->Tick();
  const bool expired = !(*cache)->Get("a").has_value();
  std::printf("clang check: fired %d, hit %d, expired %d\n", fired, hit,
              expired);
  return fired == 7 && hit && expired ? 0 : 1;
}
