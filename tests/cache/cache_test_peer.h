// internal::CacheTestPeer, which Cache befriends: the tests' way into a
// cache's implementation, to run its CheckInvariants, to reach a shard's
// structures so as to break them on purpose, and to stand in for a Get in
// its read section.
#ifndef TIMINGWHEEL_TESTS_CACHE_CACHE_TEST_PEER_H_
#define TIMINGWHEEL_TESTS_CACHE_CACHE_TEST_PEER_H_

#include <cstddef>

#include "absl/status/status.h"
#include "timingwheel/cache.h"

namespace timingwheel {
namespace internal {

class CacheTestPeer {
 public:
  // Every shard's invariants, each under its lock (CacheImpl).
  template <typename K, typename V, typename H, typename E>
  static absl::Status CheckInvariants(Cache<K, V, H, E>& cache) {
    return Impl(cache).CheckInvariants();
  }

  // Shard k of the cache; the caller takes its mu to touch what it guards.
  template <typename K, typename V, typename H, typename E>
  static CacheShard<K, V, H, E>& Shard(Cache<K, V, H, E>& cache,
                                       std::size_t k) {
    return *Impl(cache).shards_[k];
  }

  // The cache's epochs, to hold a read section open as a Get would.
  template <typename K, typename V, typename H, typename E>
  static CacheEpochs& Epochs(Cache<K, V, H, E>& cache) {
    return Impl(cache).epochs_;
  }

  // The shard `key` lives in.
  template <typename K, typename V, typename H, typename E>
  static std::size_t ShardOf(Cache<K, V, H, E>& cache, const K& key) {
    return Impl(cache).HashOf(key).shard;
  }

  // How many shards the cache has.
  template <typename K, typename V, typename H, typename E>
  static std::size_t Shards(Cache<K, V, H, E>& cache) {
    return Impl(cache).shards_.size();
  }

 private:
  template <typename K, typename V, typename H, typename E>
  static CacheImpl<K, V, H, E>& Impl(Cache<K, V, H, E>& cache) {
    return cache;  // a private base, open to Cache's friends
  }
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_CACHE_TEST_PEER_H_
