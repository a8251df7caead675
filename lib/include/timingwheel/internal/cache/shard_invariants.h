// CacheShard::CheckInvariants (shard.h): what must hold of a shard between
// writes, checked under its lock, for tests and checking builds.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SHARD_INVARIANTS_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SHARD_INVARIANTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/shard.h"
#include "timingwheel/internal/cache/shard_mutex.h"

namespace timingwheel {
namespace internal {

// The first broken invariant, or OK: the pool's, the index's and (when
// bounded) the policy's own, and across them: the index holds exactly the
// entry nodes, size of them, each found by a lookup of its key under its
// tag; no node is left marked kWriting (a write in place lasts a few
// instructions); each bucket's list is circular through its sentinel (a
// node of its own, one per bucket), and an entry is in one bucket's list at
// most, its links reset when in none; unbounded, no entry is in a policy
// list; the last hit is an entry or none; the retired nodes are exactly
// those waiting in the retired list, each once; loads_open counts the
// flights (under the lock no GetOrLoad is between its announcement and its
// flight). O(nodes + index slots).
template <typename K, typename V, typename Hash, typename Eq>
absl::Status CacheShard<K, V, Hash, Eq>::CheckInvariants() const {
  CacheMutexLock lock(mu_);
  TW_RETURN_IF_ERROR(pool_.CheckInvariants());
  TW_RETURN_IF_ERROR(index_.CheckInvariants());
  const std::uint32_t extent = pool_.extent();
  std::size_t entries = 0, sentinels = 0, retired = 0;
  for (std::uint32_t i = 0; i < extent; ++i) {
    const Node& n = pool_.at(i);
    TW_INVARIANT(n.deadline.Settled(kWriteWaitYields) != Node::kWriting,
                 "CacheShard ", id_, ": node ", i,
                 " is marked as being written");
    if (n.deadline.Peek() == Node::kSentinel) ++sentinels;
    if (n.deadline.Peek() == Node::kRetired) ++retired;
    if (!n.is_entry()) continue;
    ++entries;
    const std::uint64_t mixed = ctx_.keys->Mix(n.key());
    const std::uint64_t shard =
        ctx_.shard_bits == 0 ? 0 : mixed >> (64 - ctx_.shard_bits);
    TW_INVARIANT(shard == id_, "CacheShard ", id_, ": node ", i,
                 " belongs in shard ", shard);
    const std::uint32_t found = FindLocked(n.key(), ctx_.keys->Tag(n.key()));
    TW_INVARIANT(found == i, "CacheShard ", id_, ": a lookup of the key of ",
                 "node ", i, " finds ", found);
    TW_INVARIANT(capacity_ != 0 || !pool_.has_extras() ||
                     (pool_.extra(i).prev == kCacheNil &&
                      pool_.extra(i).next == kCacheNil),
                 "CacheShard ", id_, ": unbounded, yet node ", i,
                 " is in a policy list");
    TW_INVARIANT((n.enext == kCacheNil) == (n.eprev == kCacheNil),
                 "CacheShard ", id_, ": node ", i, " is half in a bucket");
  }
  const std::size_t size = size_.load(std::memory_order_relaxed);
  TW_INVARIANT(entries == index_.size() && entries == size, "CacheShard ", id_,
               ": ", entries, " entries, ", index_.size(),
               " in the index, size ", size);
  TW_INVARIANT(sentinels == buckets_.size(), "CacheShard ", id_, ": ",
               sentinels, " sentinels for ", buckets_.size(), " buckets");
  const std::uint32_t loads_open = loads_open_.load(std::memory_order_relaxed);
  TW_INVARIANT(loads_open == flights_.size(), "CacheShard ", id_, ": ",
               loads_open, " loads open for ", flights_.size(), " flights");
  std::vector<bool> waiting(extent);
  bool twice = false;
  retired_nodes_.ForEach([&](std::uint32_t i) {
    mu_.AssumeHeld();  // called by ForEach, under the lock
    if (i >= extent || pool_.at(i).deadline.Peek() != Node::kRetired ||
        waiting[i]) {
      twice = true;
    } else {
      waiting[i] = true;
    }
  });
  TW_INVARIANT(!twice, "CacheShard ", id_, ": a node waits for reclamation ",
               "but is not retired, or twice");
  TW_INVARIANT(retired == retired_nodes_.size(), "CacheShard ", id_, ": ",
               retired, " retired nodes, ", retired_nodes_.size(),
               " waiting for reclamation");
  std::vector<bool> filed(extent);
  std::size_t in_buckets = 0;
  for (const auto& bucket : buckets_) {
    const std::int64_t tick = bucket.first;
    const std::uint32_t sentinel = bucket.second;
    TW_INVARIANT(sentinel < extent &&
                     pool_.at(sentinel).deadline.Peek() == Node::kSentinel,
                 "CacheShard ", id_, ": bucket ", tick, "'s sentinel ",
                 sentinel, " is not one");
    std::uint32_t prev = sentinel;
    for (std::uint32_t i = pool_.at(sentinel).enext; i != sentinel;
         i = pool_.at(i).enext) {
      TW_INVARIANT(i < extent && pool_.at(i).is_entry(), "CacheShard ", id_,
                   ": bucket ", tick, " links node ", i, ", not an entry");
      TW_INVARIANT(pool_.at(i).eprev == prev, "CacheShard ", id_, ": node ", i,
                   " of bucket ", tick, " links back to ", pool_.at(i).eprev,
                   ", not ", prev);
      TW_INVARIANT(!filed[i], "CacheShard ", id_, ": node ", i,
                   " is in two buckets, or twice in bucket ", tick);
      filed[i] = true;
      ++in_buckets;
      prev = i;
    }
    TW_INVARIANT(pool_.at(sentinel).eprev == prev, "CacheShard ", id_,
                 ": bucket ", tick, "'s sentinel links back to ",
                 pool_.at(sentinel).eprev, ", not ", prev);
  }
  std::size_t linked = 0;
  for (std::uint32_t i = 0; i < extent; ++i) {
    linked += pool_.at(i).is_entry() && pool_.at(i).enext != kCacheNil;
  }
  TW_INVARIANT(linked == in_buckets, "CacheShard ", id_, ": ", linked,
               " entries linked into buckets, ", in_buckets,
               " reached from them");
  TW_INVARIANT(last_hit_ == kCacheNil ||
                   (last_hit_ < extent && pool_.at(last_hit_).is_entry()),
               "CacheShard ", id_, ": last hit ", last_hit_,
               " is not an entry");
  if (capacity_ != 0) {
    TW_RETURN_IF_ERROR(policy_.CheckInvariants(pool_, entries, capacity_));
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SHARD_INVARIANTS_H_
