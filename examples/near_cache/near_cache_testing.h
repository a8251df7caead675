// The test-only way to create a NearCache with Mutants: a cache broken on
// purpose, so that a test can show its checker catches the break.
#ifndef TIMINGWHEEL_EXAMPLES_NEAR_CACHE_NEAR_CACHE_TESTING_H_
#define TIMINGWHEEL_EXAMPLES_NEAR_CACHE_NEAR_CACHE_TESTING_H_

#include <memory>
#include <utility>

#include "near_cache/near_cache.h"

namespace near_cache {

class NearCacheTesting {
 public:
  static absl::StatusOr<std::unique_ptr<NearCache>> Create(
      NearCacheOptions options, Mutants mutants) {
    return NearCache::CreateWith(std::move(options), std::move(mutants));
  }
};

}  // namespace near_cache

#endif  // TIMINGWHEEL_EXAMPLES_NEAR_CACHE_NEAR_CACHE_TESTING_H_
