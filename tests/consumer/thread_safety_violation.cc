// Must not compile under clang's -Werror=thread-safety: run_consumer.sh
// checks that it fails, and for the right reason. It reads a cache shard's
// index without the shard's lock, which the shard's ABSL_GUARDED_BY
// forbids. Were the annotations to reach the analysis no more (a Mutex
// without its capability attributes, macros that expand to nothing), this
// would compile, and clang_check.cc compiling cleanly would prove nothing.
#include <functional>

#include "absl/hash/hash.h"
#include "timingwheel/internal/cache/shard.h"

int main() {
  timingwheel::internal::CacheShard<int, int, absl::Hash<int>,
                                    std::equal_to<int>>
      shard({}, {}, /*shard_id=*/0, /*max_entries=*/0, /*sliding=*/false);
  return static_cast<int>(shard.index.size());  // without shard.mu
}
