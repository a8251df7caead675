// internal::CacheTestPeer, which Cache befriends: the tests' way into a
// cache's implementation, to run its CheckInvariants, to reach a shard's
// structures so as to break them on purpose, and to stand in for a Get in
// its read section.
#ifndef TIMINGWHEEL_TESTS_CACHE_CACHE_TEST_PEER_H_
#define TIMINGWHEEL_TESTS_CACHE_CACHE_TEST_PEER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
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

  // Shard k's invariants, under its lock.
  template <typename K, typename V, typename H, typename E>
  static absl::Status CheckInvariants(Cache<K, V, H, E>& cache, std::size_t k) {
    return Impl(cache).shards_[k]->CheckInvariants();
  }

  // Shard k of the cache.
  template <typename K, typename V, typename H, typename E>
  static CacheShard<K, V, H, E>& Shard(Cache<K, V, H, E>& cache,
                                       std::size_t k) {
    return *Impl(cache).shards_[k];
  }

  // A shard's private parts, to break on purpose; the caller holds Mu.
  template <typename S>
  static CacheMutex& Mu(S& shard) {
    return shard.mu_;
  }
  template <typename S>
  static auto& Pool(S& shard) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return shard.pool_;
  }
  template <typename S>
  static auto& Index(S& shard) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return shard.index_;
  }
  template <typename S>
  static auto& Buckets(S& shard) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return shard.buckets_;
  }
  template <typename S>
  static auto& LoadsOpen(S& shard) {
    return shard.loads_open_;
  }
  // How many nodes the shard has retired and not yet freed.
  template <typename S>
  static std::size_t RetiredNodes(S& shard) {
    CacheMutexLock lock(shard.mu_);
    return shard.retired_nodes_.size();
  }
  // Overwrites a node's deadline word, as no transition would.
  static void SetWord(CacheDeadline& word, std::int64_t value) {
    word.word_.store(value, std::memory_order_relaxed);
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
