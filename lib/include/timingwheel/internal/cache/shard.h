// One shard of a Cache: its lock, its entries (pool + index), its expiry
// buckets, its eviction policy, its loads in flight and its counters.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "timingwheel/internal/cache/flight.h"
#include "timingwheel/internal/cache/index.h"
#include "timingwheel/internal/cache/policy.h"
#include "timingwheel/internal/cache/pool.h"

namespace timingwheel {
namespace internal {

// Everything here is guarded by mu except the counters, which are relaxed
// atomics written under mu and read by stats() and size() without it.
// Aligned to a cache line so shards do not share one.
template <typename K, typename V, typename Hash, typename Eq>
struct alignas(64) CacheShard {
  using Pool = CachePool<K, V>;

  CacheShard(const Hash& hash, const Eq& eq) : flights(0, hash, eq) {}

  std::mutex mu;
  Pool pool;
  CacheIndex index;
  CachePolicy<K, V> policy;
  std::uint32_t id = 0;                // this shard's number
  std::size_t capacity = 0;            // 0 = unbounded (the policy is not used)
  std::uint32_t last_hit = kCacheNil;  // the shard's most recently hit node
  // Expiry buckets: tick -> sentinel node of the circular list of entries
  // filed under that tick. A bucket exists exactly while its wheel timer is
  // pending or running.
  std::unordered_map<std::int64_t, std::uint32_t> buckets;
  // Loads in flight (GetOrLoad), by key; empty but for misses being loaded.
  std::unordered_map<K, std::shared_ptr<CacheFlight<V>>, Hash, Eq> flights;

  std::atomic<std::size_t> size{0};
  std::atomic<std::uint64_t> hits{0}, misses{0}, expired{0}, evicted{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
