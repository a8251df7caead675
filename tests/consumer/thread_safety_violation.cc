// Must not compile under clang's -Werror=thread-safety: run_consumer.sh
// checks that it fails, and for the right reason. It reads a cache shard's
// index without the shard's lock, which the shard's ABSL_GUARDED_BY
// forbids, through the tests' way into a shard (CacheTestPeer, a friend,
// defined here as the tests define it). Were the annotations to reach the
// analysis no more (a Mutex without its capability attributes, macros that
// expand to nothing), this would compile, and clang_check.cc compiling
// cleanly would prove nothing.
#include <cstddef>
#include <functional>

#include "absl/hash/hash.h"
#include "timingwheel/internal/cache/shard.h"

namespace timingwheel {
namespace internal {
class CacheTestPeer {
 public:
  template <typename S>
  static std::size_t IndexSize(const S& shard) {
    return shard.index_.size();  // without shard.mu_
  }
};
}  // namespace internal
}  // namespace timingwheel

int main() {
  using Shard = timingwheel::internal::CacheShard<int, int, absl::Hash<int>,
                                                  std::equal_to<int>>;
  const Shard::Keys keys{};
  const Shard::Context context{&keys, nullptr, {nullptr, nullptr}, 1, 0,
                               false, false};
  const Shard shard(context, /*id=*/0, /*capacity=*/0);
  return static_cast<int>(
      timingwheel::internal::CacheTestPeer::IndexSize(shard));
}
