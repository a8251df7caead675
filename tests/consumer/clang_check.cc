// Compiled with clang++ against the installed copy by run_consumer.sh: the
// public headers must build with the other compiler too, for key and value
// types that are not trivially copyable (those take other code paths), and
// for the cache. With -Wthread-safety -Werror=thread-safety: the explicit
// instantiations below make clang analyze every member of the templates
// that take locks, not only those main() calls, against their
// ABSL_GUARDED_BY and ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/hash/hash.h"
#include "timingwheel/cache.h"
#include "timingwheel/timing_wheel.h"

namespace timingwheel::internal {
using StringHash = absl::Hash<std::string>;
using StringEq = std::equal_to<std::string>;
template class CacheImpl<std::string, std::string, StringHash, StringEq>;
// A value a Set stores in place (CacheNode::kValueInPlace).
template class CacheImpl<std::string, std::uint64_t, StringHash, StringEq>;
template class CacheShard<std::string, std::string, StringHash, StringEq>;
template class CacheFlight<std::string>;
template class EventLoop<std::string, std::unique_ptr<int>, StringHash,
                         StringEq>;
template class ExecutePool<std::string, std::unique_ptr<int>>;
template class DrainPool<std::string, std::unique_ptr<int>>;
// And the wheel's, for its CheckInvariants.
template class Wheel<std::string, std::unique_ptr<int>, StringHash, StringEq>;
}  // namespace timingwheel::internal

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
  (*wheel)
      ->SetTimer("d", std::make_unique<int>(1), absl::Seconds(9))
      .IgnoreError();
  int drained = 0;
  (*wheel)
      ->Drain([&](std::string, std::unique_ptr<int> v) { drained += *v; })
      .IgnoreError();

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
  const bool loaded =
      (*cache)->GetOrLoad("l", [] { return absl::StatusOr<std::string>("v"); })
          .value_or("") == "v";
  const bool deleted = (*cache)->Delete("l");
  (*cache)->Clear();
  std::printf(
      "clang check: fired %d, drained %d, hit %d, expired %d, loaded %d, "
      "deleted %d\n",
      fired, drained, hit, expired, loaded, deleted);
  return fired == 7 && drained == 1 && hit && expired && loaded && deleted
             ? 0
             : 1;
}
