// One shard of a Cache: its lock, its entries (pool + index), its expiry
// buckets, its eviction policy, its loads in flight and its counters.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/cache/flight.h"
#include "timingwheel/internal/cache/index.h"
#include "timingwheel/internal/cache/policy.h"
#include "timingwheel/internal/cache/pool.h"
#include "timingwheel/internal/cache/read_buffer.h"
#include "timingwheel/internal/cache/stored_key.h"

namespace timingwheel {
namespace internal {

// Everything here is guarded by mu except id, capacity and reads, set by
// the constructor and only read after; the counters, which are relaxed
// atomics written under mu and read by stats() and size() without it; and
// what Gets read without the lock: the index's FindShared, the pool's
// SharedAt and the read buffer, each safe for it (see their files).
// Aligned to a cache line so shards do not share one.
template <typename K, typename V, typename Hash, typename Eq>
struct alignas(64) CacheShard {
  // What the nodes hold as the key (stored_key.h).
  using StoredKey = CacheStoredKey<K, Hash, Eq>;
  using Pool = CachePool<StoredKey, V>;

  // Shard number `shard_id`, for at most `max_entries` entries (0 =
  // unbounded), with sliding expiry or not: its nodes keep a time to live
  // and policy links (CacheNodeExtra) only if bounded or sliding.
  CacheShard(const Hash& hash, const Eq& eq, std::uint32_t shard_id,
             std::size_t max_entries, bool sliding)
      : pool(max_entries != 0 || sliding),
        id(shard_id),
        capacity(max_entries),
        reads(max_entries != 0 ? std::make_unique<CacheReadBuffer>() : nullptr),
        flights(0, hash, eq) {
    if (max_entries != 0) policy.Reset(max_entries);
  }

  // How long CheckInvariants waits for a node's kWriting mark to clear.
  static constexpr std::uint64_t kWriteWaitYields = 10'000;

  // The first broken invariant, or OK: the pool's, the index's and (when
  // bounded) the policy's own, and across them: the index holds exactly
  // the entry nodes, size of them, each found by a lookup of its key under
  // hash_of(key).tag, in this shard (hash_of(key).shard); each bucket's
  // list is circular through its sentinel (a node of its own, one per
  // bucket), and an entry is in one bucket's list at most, its links reset
  // when in none; unbounded, no entry is in a policy list; last_hit is an
  // entry or none; the retired nodes are exactly those waiting in
  // retired_nodes, each once; loads_open counts the flights (under the
  // lock no GetOrLoad is between its announcement and its flight). `hash_of`
  // hashes a stored key; `same_key` compares two. O(nodes + index slots); for
  // tests and checking builds.
  template <typename HashOf, typename SameKey>
  absl::Status CheckInvariants(const HashOf& hash_of,
                               const SameKey& same_key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    TW_RETURN_IF_ERROR(pool.CheckInvariants());
    TW_RETURN_IF_ERROR(index.CheckInvariants());
    const std::uint32_t extent = pool.extent();
    std::size_t entries = 0, sentinels = 0, retired = 0;
    for (std::uint32_t i = 0; i < extent; ++i) {
      const auto& n = pool.at(i);
      // A node is marked kWriting only for the few instructions of a
      // write: one still marked after a long wait was left behind.
      TW_INVARIANT(n.deadline_settled(kWriteWaitYields) != Pool::Node::kWriting,
                   "CacheShard ", id, ": node ", i,
                   " is marked as being written");
      if (n.deadline_now() == Pool::Node::kSentinel) ++sentinels;
      if (n.deadline_now() == Pool::Node::kRetired) ++retired;
      if (!n.is_entry()) continue;
      ++entries;
      const auto h = hash_of(n.key());
      TW_INVARIANT(h.shard == id, "CacheShard ", id, ": node ", i,
                   " belongs in shard ", h.shard);
      const std::uint32_t found = index.Find(h.tag, [&](std::uint32_t j) {
        mu.AssumeHeld();  // called by Find, under the lock
        return j < extent && pool.at(j).is_entry() &&
               same_key(pool.at(j).key(), n.key());
      });
      TW_INVARIANT(found == i, "CacheShard ", id, ": a lookup of the key of ",
                   "node ", i, " finds ", found);
      TW_INVARIANT(capacity != 0 || !pool.has_extras() ||
                       (pool.extra(i).prev == kCacheNil &&
                        pool.extra(i).next == kCacheNil),
                   "CacheShard ", id, ": unbounded, yet node ", i,
                   " is in a policy list");
      TW_INVARIANT((n.enext == kCacheNil) == (n.eprev == kCacheNil),
                   "CacheShard ", id, ": node ", i, " is half in a bucket");
    }
    TW_INVARIANT(entries == index.size() &&
                     entries == size.load(std::memory_order_relaxed),
                 "CacheShard ", id, ": ", entries, " entries, ", index.size(),
                 " in the index, size ", size.load(std::memory_order_relaxed));
    TW_INVARIANT(sentinels == buckets.size(), "CacheShard ", id, ": ",
                 sentinels, " sentinels for ", buckets.size(), " buckets");
    TW_INVARIANT(loads_open.load(std::memory_order_relaxed) == flights.size(),
                 "CacheShard ", id, ": ",
                 loads_open.load(std::memory_order_relaxed), " loads open for ",
                 flights.size(), " flights");
    std::vector<bool> waiting(extent);
    for (const auto& retired_node : retired_nodes) {
      const std::uint32_t i = retired_node.second;
      TW_INVARIANT(i < extent &&
                       pool.at(i).deadline_now() == Pool::Node::kRetired &&
                       !waiting[i],
                   "CacheShard ", id, ": node ", i,
                   " waits for reclamation but is not retired, or twice");
      waiting[i] = true;
    }
    TW_INVARIANT(retired == retired_nodes.size(), "CacheShard ", id, ": ",
                 retired, " retired nodes, ", retired_nodes.size(),
                 " waiting for reclamation");
    std::vector<bool> filed(extent);
    std::size_t in_buckets = 0;
    for (const auto& bucket : buckets) {
      const std::int64_t tick = bucket.first;
      const std::uint32_t sentinel = bucket.second;
      TW_INVARIANT(sentinel < extent && pool.at(sentinel).deadline_now() ==
                                            Pool::Node::kSentinel,
                   "CacheShard ", id, ": bucket ", tick, "'s sentinel ",
                   sentinel, " is not one");
      std::uint32_t prev = sentinel;
      for (std::uint32_t i = pool.at(sentinel).enext; i != sentinel;
           i = pool.at(i).enext) {
        TW_INVARIANT(i < extent && pool.at(i).is_entry(), "CacheShard ", id,
                     ": bucket ", tick, " links node ", i, ", not an entry");
        TW_INVARIANT(pool.at(i).eprev == prev, "CacheShard ", id, ": node ", i,
                     " of bucket ", tick, " links back to ", pool.at(i).eprev,
                     ", not ", prev);
        TW_INVARIANT(!filed[i], "CacheShard ", id, ": node ", i,
                     " is in two buckets, or twice in bucket ", tick);
        filed[i] = true;
        ++in_buckets;
        prev = i;
      }
      TW_INVARIANT(pool.at(sentinel).eprev == prev, "CacheShard ", id,
                   ": bucket ", tick, "'s sentinel links back to ",
                   pool.at(sentinel).eprev, ", not ", prev);
    }
    std::size_t linked = 0;
    for (std::uint32_t i = 0; i < extent; ++i) {
      linked += pool.at(i).is_entry() && pool.at(i).enext != kCacheNil;
    }
    TW_INVARIANT(linked == in_buckets, "CacheShard ", id, ": ", linked,
                 " entries linked into buckets, ", in_buckets,
                 " reached from them");
    TW_INVARIANT(last_hit == kCacheNil ||
                     (last_hit < extent && pool.at(last_hit).is_entry()),
                 "CacheShard ", id, ": last hit ", last_hit,
                 " is not an entry");
    if (capacity != 0) {
      TW_RETURN_IF_ERROR(policy.CheckInvariants(pool, entries, capacity));
    }
    return absl::OkStatus();
  }

  Mutex mu;
  Pool pool ABSL_GUARDED_BY(mu);
  CacheIndex index ABSL_GUARDED_BY(mu);
  CachePolicy<StoredKey, V> policy ABSL_GUARDED_BY(mu);
  const std::uint32_t id;      // this shard's number
  const std::size_t capacity;  // 0 = unbounded (the policy is not used)
  // The shard's most recently hit node.
  std::uint32_t last_hit ABSL_GUARDED_BY(mu) = kCacheNil;
  // Expiry buckets: tick -> sentinel node of the circular list of entries
  // filed under that tick. A bucket exists exactly while its wheel timer is
  // pending or running.
  std::unordered_map<std::int64_t, std::uint32_t> buckets ABSL_GUARDED_BY(mu);
  // Hits recorded by Gets for the policy (bounded shards only).
  const std::unique_ptr<CacheReadBuffer> reads;
  // Loads in flight (GetOrLoad), by key; empty but for misses being loaded.
  std::unordered_map<K, std::shared_ptr<CacheFlight<V>>, Hash, Eq> flights
      ABSL_GUARDED_BY(mu);
  // Removed nodes (key and value kept) and replaced memory (index tables,
  // chunk directories, chunks), each with the cache epoch it was retired
  // in, oldest first: freed once the epoch is two later (epoch.h).
  std::deque<std::pair<std::uint64_t, std::uint32_t>> retired_nodes
      ABSL_GUARDED_BY(mu);
  std::deque<std::pair<std::uint64_t, std::shared_ptr<void>>> retired_blocks
      ABSL_GUARDED_BY(mu);
  // A wheel timer will come back to free what is retired.
  bool reclaim_armed ABSL_GUARDED_BY(mu) = false;

  std::atomic<std::size_t> size{0};
  std::atomic<std::uint64_t> hits{0}, misses{0}, expired{0}, evicted{0};
  std::atomic<std::uint64_t> deleted{0}, replaced{0};
  // GetOrLoad calls between their locked lookup and the end of their load:
  // while any is open, Sets take the lock (CacheImpl::SetWithoutLock).
  std::atomic<std::uint32_t> loads_open{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
