// One shard of a Cache: its lock, its entries (pool + index), its eviction
// policy, its loads in flight and its counters.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "timingwheel/internal/cache_flight.h"
#include "timingwheel/internal/cache_policy.h"
#include "timingwheel/internal/cache_pool.h"

namespace timingwheel {
namespace internal {

// A lookup key for the index: a pointer to the caller's key, so that the
// index (a set of node indices) can be searched by key without a node.
template <typename K>
struct CacheKeyRef {
  const K* key;
};

// The index stores 4-byte node indices and hashes or compares them through
// the pool, so a key is stored once (in its node) and a slot costs 4 bytes.
template <typename K, typename V, typename Hash>
struct CacheIndexHash {
  using is_transparent = void;
  const CachePool<K, V>* pool;
  Hash hash;
  std::size_t operator()(std::uint32_t i) const {
    return hash(const_cast<CachePool<K, V>*>(pool)->at(i).key());
  }
  std::size_t operator()(CacheKeyRef<K> k) const { return hash(*k.key); }
};

template <typename K, typename V, typename Eq>
struct CacheIndexEq {
  using is_transparent = void;
  const CachePool<K, V>* pool;
  Eq eq;
  const K& Key(std::uint32_t i) const {
    return const_cast<CachePool<K, V>*>(pool)->at(i).key();
  }
  bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b; }
  bool operator()(std::uint32_t a, CacheKeyRef<K> b) const {
    return eq(Key(a), *b.key);
  }
  bool operator()(CacheKeyRef<K> a, std::uint32_t b) const {
    return eq(*a.key, Key(b));
  }
};

// Everything here is guarded by mu except the counters, which are relaxed
// atomics written under mu and read by stats() and size() without it.
// Aligned to a cache line so shards do not share one.
template <typename K, typename V, typename Hash, typename Eq>
struct alignas(64) CacheShard {
  using Pool = CachePool<K, V>;
  using Index = absl::flat_hash_set<std::uint32_t, CacheIndexHash<K, V, Hash>,
                                    CacheIndexEq<K, V, Eq>>;

  CacheShard(const Hash& hash, const Eq& eq)
      : index(0, CacheIndexHash<K, V, Hash>{&pool, hash},
              CacheIndexEq<K, V, Eq>{&pool, eq}),
        flights(0, hash, eq) {}

  std::mutex mu;
  Pool pool;
  Index index;
  CachePolicy<K, V> policy;
  std::uint64_t id = 0;      // this shard's number: a generation's low bits
  std::size_t capacity = 0;  // 0 = unbounded (the policy is not used)
  std::uint32_t last_hit = kCacheNil;  // the shard's most recently hit node
  std::uint64_t generations = 0;       // generations handed out
  absl::flat_hash_map<K, std::shared_ptr<CacheFlight<V>>, Hash, Eq> flights;

  std::atomic<std::size_t> size{0};
  std::atomic<std::uint64_t> hits{0}, misses{0}, expired{0}, evicted{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
