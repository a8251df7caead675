// One shard of a Cache, and the protocol its entries live by: its lock,
// its entries (pool + index), its expiry buckets, its eviction policy, its
// loads in flight, what it retired and its counters, all private. The
// cache (cache_impl.h) routes a key to its shard, opens read sections,
// reads the clock and calls the listener; everything that reads or
// changes an entry is here.
//
// Three rules make the protocol (docs/cache_concurrency.md):
// - Writes under the lock prepare first. Everything that can throw
//   (copies of keys and values for the listener, allocation, room in the
//   lists) is done before an entry is taken, published, unlinked or
//   retired; a write that throws leaves the shard as it was.
// - Reads without the lock (FindShared, ReadEntry) happen inside a read
//   section (epoch.h), which keeps what they reach from being freed; a
//   one-word value is read between two reads of its deadline word.
// - Whoever changes a reachable entry, under the lock or not, does it by a
//   transition of its deadline word (deadline.h) from the value it read.
//
// Why over 450 lines: the writes that share these rules (insert, replace
// in place or by a new node, the Set without the lock, remove, clear,
// expire, the load's store) are checked against each other, so they stay
// side by side; CheckInvariants lives apart (shard_invariants.h).
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/cache/deadline.h"
#include "timingwheel/internal/cache/epoch.h"
#include "timingwheel/internal/cache/flight.h"
#include "timingwheel/internal/cache/index.h"
#include "timingwheel/internal/cache/keys.h"
#include "timingwheel/internal/cache/policy.h"
#include "timingwheel/internal/cache/pool.h"
#include "timingwheel/internal/cache/read_buffer.h"
#include "timingwheel/internal/cache/retired.h"
#include "timingwheel/internal/cache/schedule_point.h"
#include "timingwheel/internal/cache/shard_mutex.h"
#include "timingwheel/options.h"
#include "timingwheel/stats.h"

namespace timingwheel {
namespace internal {

class CacheTestPeer;

// The wheel timers a shard asks its cache for: one per expiry bucket (tick
// >= 0) and one to come back for what it retired (kReclaimTick), armed
// `delay_ns` from now by the cache's `arm(owner, ...)`.
struct CacheShardTimers {
  static constexpr std::int64_t kReclaimTick = -1;
  absl::Status (*arm)(void* owner, std::int64_t tick, std::uint32_t shard,
                      std::int64_t delay_ns);
  void* owner;

  absl::Status Arm(std::int64_t tick, std::uint32_t shard,
                   std::int64_t delay_ns) const {
    return arm(owner, tick, shard, delay_ns);
  }
};

// What every shard of a cache shares, set once by the cache.
template <typename Keys>
struct CacheShardContext {
  const Keys* keys;
  CacheEpochs* epochs;
  CacheShardTimers timers;
  std::int64_t interval_ns;  // a bucket's width
  int shard_bits;            // a key's shard: the top bits of Keys::Mix
  bool sliding;
  bool listener;  // removals are collected for a listener
};

template <typename K, typename V, typename Hash, typename Eq>
class alignas(64) CacheShard {
 public:
  using Keys = CacheKeys<K, Hash, Eq>;
  using StoredKey = typename Keys::StoredKey;
  using Pool = CachePool<StoredKey, V>;
  using Node = typename Pool::Node;
  using Context = CacheShardContext<Keys>;
  using Removals = std::vector<std::tuple<K, V, RemovalCause>>;
  static constexpr bool kValueInPlace = Node::kValueInPlace;
  static constexpr std::int64_t kNever =
      std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kTtlNever = CacheNodeExtra::kTtlNever;

  // Shard number `id`, for at most `capacity` entries (0 = unbounded): its
  // nodes keep a time to live and policy links only if bounded or sliding.
  CacheShard(const Context& ctx, std::uint32_t id, std::size_t capacity)
      : ctx_(ctx),
        id_(id),
        capacity_(capacity),
        extras_(capacity != 0 || ctx.sliding),
        reads_(capacity != 0 ? std::make_unique<CacheReadBuffer>() : nullptr),
        pool_(extras_) {
    if (capacity != 0) policy_.Reset(capacity);
  }

  // now + ttl; kNever for never, and for deadlines beyond about 73 years
  // (so tick arithmetic cannot overflow).
  static std::int64_t Deadline(std::int64_t now, std::int64_t ttl) {
    if (ttl == kTtlNever || ttl >= kNever / 4 - now) return kNever;
    return now + ttl;
  }

  // ---- Reads without the lock, inside the caller's read section. ----

  // What a read of an entry found.
  enum class Read {
    kHit,      // unexpired (and slid, if sliding): its value
    kExpired,  // past its deadline, not yet removed
    kAbsent,   // no such key (to be trusted)
    kGone,     // removed, being written, or the probe could not tell:
               // look again under the lock
  };

  // A Get of `key` (hash bits `tag`) at `now`: on a hit the value goes to
  // `value` and the node to `node`.
  template <typename Q>
  Read GetShared(const Q& key, std::uint32_t tag, std::int64_t now,
                 std::optional<V>& value, std::uint32_t& node) {
    bool absent;
    node = FindShared(key, tag, absent);
    if (node == kCacheNil) return absent ? Read::kAbsent : Read::kGone;
    return ReadEntry(SharedNode(node), now, /*locked=*/false, value);
  }

  // Records a Get's hit for the policy (bounded shards), applying the
  // buffer if it is full and the lock is free.
  void RecordHit(int reader, std::uint32_t node, std::uint32_t tag) {
    if (reads_ != nullptr && reads_->Record(reader, node, tag) &&
        mu_.TryLock()) {
      DrainReadsLocked();
      mu_.Unlock();
    }
  }

  // Whether a Set may go without the lock at all: one-word values, no
  // size bound.
  bool MaySetWithoutLock() const { return kValueInPlace && capacity_ == 0; }

  // The commonest Set without the lock: `key` present and unexpired, given
  // a later deadline, in a shard without a size bound (no policy to tell)
  // whose values are stored in place. It writes only the node's line and
  // the caller's reader slot. false, with nothing changed, when the Set
  // must take the lock: absent, expired, being written, a deadline that
  // would not move later, or a load open on the shard (it may be loading
  // this key: the locked Set supersedes it). `now()` reads the clock.
  template <typename Q, typename Now>
  bool SetWithoutLock(const Q& key, std::uint32_t tag, const V& value,
                      std::int64_t ttl_ns, const Now& now,
                      CacheReaderSlot& slot, Removals& removals) {
    if constexpr (!kValueInPlace) {
      return false;
    } else {
      if (capacity_ != 0) return false;
      bool absent;
      const std::uint32_t i = FindShared(key, tag, absent);
      if (i == kCacheNil) return false;
      Node& n = SharedNode(i);
      // The clock before the entry is taken: a write in place holds it
      // (Gets of a hot key meeting kWriting retry, then take the lock) for
      // as few instructions as can be, and the cycle clock's read waits
      // for the loads before it. The Set takes effect as of this reading.
      const std::int64_t t = now();
      const std::int64_t deadline = Deadline(t, ttl_ns);
      TW_CACHE_STEP("set_without_lock.deadline", &n);
      std::int64_t d = n.deadline.ReadBegin();
      if (!CacheDeadline::IsDeadline(d) || t >= d || deadline <= d) {
        return false;
      }
      // The listener's record next: copying the key may throw, and
      // nothing is taken yet.
      const std::size_t record = PrepareRecord(n, removals);
      if (!n.deadline.Take(d)) {
        DropRecord(record, removals);
        return false;
      }
      TW_CACHE_STEP("set_without_lock.loads_open");
      if (!TW_CACHE_MUTANT(kSkipLoadsOpenCheck) &&
          loads_open_.load(std::memory_order_seq_cst) != 0) {
        n.deadline.Publish(d);  // value untouched
        DropRecord(record, removals);
        return false;
      }
      if (record != kNoRecord) {
        std::get<1>(removals[record]) = n.LoadValue();
        std::get<2>(removals[record]) = RemovalCause::kReplaced;
      }
      n.StoreValue(value);
      if (extras_) Pool::SharedExtra(n).set_ttl(ttl_ns);
      n.deadline.Publish(deadline);
      slot.Count(slot.replaced);
      return true;
    }
  }

  // ---- Writes under the lock (each takes it). ----

  // A Get that must look under the lock: the value of `key` if present
  // and unexpired at now() (counted, slid, told to the policy).
  template <typename Q, typename Now>
  std::optional<V> GetLocked(const Q& key, std::uint32_t tag, const Now& now) {
    CacheMutexLock lock(mu_);
    std::optional<V> value;
    HitLocked(key, tag, now(), value);
    return value;
  }

  // Cache::Set: `key` holds `value` for `ttl_ns` from now(). Errors: the
  // wheel's, for a new bucket.
  template <typename Now>
  absl::Status Set(K key, V value, std::uint32_t tag, std::int64_t ttl_ns,
                   const Now& now, Removals& removals) {
    CacheMutexLock lock(mu_);
    FinishAtEnd finish{*this};
    SupersedeLoadLocked(key);
    return SetLocked(std::move(key), std::move(value), tag, ttl_ns, now(),
                     removals);
  }

  // Cache::Delete: true if `key` was present and unexpired.
  template <typename Now>
  bool Delete(const K& key, std::uint32_t tag, const Now& now,
              Removals& removals) {
    CacheMutexLock lock(mu_);
    FinishAtEnd finish{*this};
    SupersedeLoadLocked(key);
    const std::uint32_t i = FindLocked(key, tag);
    if (i == kCacheNil) return false;
    const std::size_t record = PrepareRemove(i, removals);
    return Remove(i, tag, RemovalCause::kExplicit, now(), removals, record) ==
           RemovalCause::kExplicit;
  }

  // Cache::Clear for this shard: every entry removed (kExplicit, or
  // kExpired if past its deadline), every load in flight superseded.
  template <typename Now>
  void Clear(const Now& now, Removals& removals) {
    CacheMutexLock lock(mu_);
    FinishAtEnd finish{*this};
    std::vector<std::uint32_t> nodes;
    nodes.reserve(index_.size());
    index_.ForEach([&](std::uint32_t i) { nodes.push_back(i); });
    retired_nodes_.Reserve(nodes.size());
    const std::size_t first = removals.size();
    try {
      if (ctx_.listener) {
        removals.reserve(first + nodes.size());
        for (const std::uint32_t i : nodes)
          PrepareRecord(pool_.at(i), removals);
      }
      index_.Clear();  // before retiring: no Get reaches them after
    } catch (...) {
      while (removals.size() > first) removals.pop_back();
      throw;
    }
    const std::int64_t t = now();
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      Unfile(nodes[k]);
      RetireEntry(nodes[k], RemovalCause::kExplicit, t, removals,
                  ctx_.listener ? first + k : kNoRecord);
    }
    for (auto& [key, flight] : flights_) flight->superseded = true;
    if (capacity_ != 0) policy_.Clear();
    last_hit_ = kCacheNil;
    size_.store(0, std::memory_order_relaxed);
  }

  // What GetOrLoad's locked lookup found: a hit's value, or the flight to
  // lead (leader) or wait for, or an error.
  struct LoadTicket {
    std::optional<V> hit;
    std::shared_ptr<CacheFlight<V>> flight;
    bool leader = false;
    absl::Status error;
  };

  // GetOrLoad's locked lookup. Announces itself (loads_open_) before it,
  // until the load ends if it leads one, so that a Set without the lock
  // that could change the key meanwhile sees it and takes the lock, where
  // it supersedes the load.
  template <typename Now>
  LoadTicket OpenLoad(const K& key, std::uint32_t tag, const Now& now) {
    CacheMutexLock lock(mu_);
    TW_CACHE_STEP("get_or_load.announce");
    loads_open_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    struct Close {
      std::atomic<std::uint32_t>& loads_open;
      bool keep = false;
      ~Close() {
        if (!keep) loads_open.fetch_sub(1, std::memory_order_relaxed);
      }
    } close{loads_open_};
    LoadTicket ticket;
    if (HitLocked(key, tag, now(), ticket.hit) != kCacheNil) return ticket;
    const auto it = flights_.find(key);
    if (it == flights_.end()) {
      auto flight = std::make_shared<CacheFlight<V>>();
      flight->leader = std::this_thread::get_id();
      flights_.emplace(key, flight);
      ticket.flight = std::move(flight);
      ticket.leader = true;
      close.keep = true;  // until CloseLoad
    } else if (it->second->leader == std::this_thread::get_id()) {
      // Called from this key's own load(), directly or through other
      // keys' loads: waiting would wait for itself.
      ticket.error = absl::FailedPreconditionError(
          "GetOrLoad: the load() of this key asked for the same key");
    } else {
      ticket.flight = it->second;
    }
    return ticket;
  }

  // Ends the load this thread leads: an OK result is stored with `ttl_ns`,
  // or, if a write superseded the load, goes to the listener as replaced
  // (as if stored and at once replaced). The flight ends however this
  // returns: a throw (a copy of the key or value) leaves nothing stored.
  template <typename Now>
  void CloseLoad(const K& key, std::uint32_t tag, std::int64_t ttl_ns,
                 absl::StatusOr<V>& result, const Now& now,
                 Removals& removals) {
    CacheMutexLock lock(mu_);
    FinishAtEnd finish{*this};
    const auto it = flights_.find(key);
    TW_DCHECK(it != flights_.end());
    struct End {
      CacheShard& s;
      decltype(it) flight;
      ~End() {
        s.mu_.AssumeHeld();  // the destructor runs under the same lock
        s.flights_.erase(flight);
        s.loads_open_.fetch_sub(1, std::memory_order_relaxed);
      }
    } end{*this, it};
    if (result.ok() && it->second->superseded) {
      if (ctx_.listener) {
        removals.emplace_back(key, *result, RemovalCause::kReplaced);
      }
      CountRemoval(RemovalCause::kReplaced);
    } else if (result.ok()) {
      absl::Status st = SetLocked(key, *result, tag, ttl_ns, now(), removals);
      if (!st.ok()) result = st;
    }
  }

  // The wheel's callback for this shard: bucket `tick` is due at now(), or
  // the reclaim timer came (kReclaimTick). Removes, in one batch of at
  // most kExpireBatch, the bucket's entries past their deadline
  // (kExpired) and moves the others (slid, or written in place) to the
  // bucket of their deadline. true when the bucket is done; false when
  // the caller should tell the listener and call again. If a copy for the
  // listener throws, what is left is tried again an interval later.
  static constexpr int kExpireBatch = 256;
  template <typename Now>
  bool Expire(std::int64_t tick, const Now& now, Removals& removals) {
    CacheMutexLock lock(mu_);
    if (tick == CacheShardTimers::kReclaimTick) {
      reclaim_armed_ = false;
      Finish();
      return true;
    }
    bool done = false;
    try {
      done = ExpireBatchLocked(tick, now(), removals);
    } catch (...) {
      ctx_.timers.Arm(tick, id_, ctx_.interval_ns).IgnoreError();
      done = true;
    }
    Finish();
    return done;
  }

  // ---- Counters, read without the lock. ----

  std::size_t size() const { return size_.load(std::memory_order_relaxed); }
  void AddStats(CacheStats& st) const {
    st.hits += hits_.load(std::memory_order_relaxed);
    st.misses += misses_.load(std::memory_order_relaxed);
    st.expired += expired_.load(std::memory_order_relaxed);
    st.evicted += evicted_.load(std::memory_order_relaxed);
    st.deleted += deleted_.load(std::memory_order_relaxed);
    st.replaced += replaced_.load(std::memory_order_relaxed);
    st.size += size_.load(std::memory_order_relaxed);
  }
  // A miss found without the lock.
  void CountMiss() { misses_.fetch_add(1, std::memory_order_relaxed); }

  // The first broken invariant, or OK (shard_invariants.h). Takes the lock.
  absl::Status CheckInvariants() const;

 private:
  friend class CacheTestPeer;
  // "No record": no listener.
  static constexpr std::size_t kNoRecord = static_cast<std::size_t>(-1);
  // How many times a Get without the lock reads an entry that keeps being
  // written before it looks again under the lock.
  static constexpr int kReadTries = 4;
  // How long CheckInvariants waits for a kWriting mark to clear.
  static constexpr std::uint64_t kWriteWaitYields = 10'000;

  // Node i, for a reader in its read section that found i in the index
  // (CachePool::SharedAt: safe without the lock).
  Node& SharedNode(std::uint32_t i) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return pool_.SharedAt(i);
  }

  template <typename Q>
  std::uint32_t FindShared(const Q& key, std::uint32_t tag,
                           bool& absent) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return index_.FindShared(
        tag,
        [&](std::uint32_t j) {
          return ctx_.keys->Is(SharedNode(j).key(), key);
        },
        absent);
  }

  template <typename Q>
  std::uint32_t FindLocked(const Q& key, std::uint32_t tag) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return index_.Find(tag, [&](std::uint32_t i) {
      mu_.AssumeHeld();  // called by Find, under the lock
      return ctx_.keys->Is(pool_.at(i).key(), key);
    });
  }

  // Reads entry n at `now`: unexpired, its value goes to `value` and,
  // sliding, its deadline moves later. A one-word value is read between
  // two reads of the deadline word, as a sequence lock's reader reads: a
  // write takes the word (kWriting) before it stores the value and
  // publishes a strictly later deadline after, and a slide only moves it
  // later, so two equal reads mean the value belongs with that deadline.
  // Other values never change while reachable. Under the lock (`locked`)
  // it waits writes in place out; without it, it gives up (kGone) after
  // kReadTries.
  Read ReadEntry(Node& n, std::int64_t now, bool locked,
                 std::optional<V>& value) const {
    for (int t = 0; locked || t < kReadTries; ++t) {
      if (!locked) TW_CACHE_STEP("read_shared.deadline", &n);
      std::int64_t d = locked ? n.deadline.Settled() : n.deadline.ReadBegin();
      if (d == CacheDeadline::kWriting) {  // a write of a few steps
        TW_CACHE_SPIN("read_shared.writing");
        continue;
      }
      if (!CacheDeadline::IsDeadline(d)) return Read::kGone;
      if (now >= d) return Read::kExpired;
      if constexpr (kValueInPlace) {
        const V v = n.LoadValue();
        if (!TW_CACHE_MUTANT(kSkipSeqlockRecheck) &&
            n.deadline.ReadEnd() != d) {
          continue;
        }
        if (!SlideFrom(n, d, now)) continue;
        value.emplace(v);
      } else {
        value.emplace(n.value());  // may throw: nothing slid yet
        if (!SlideFrom(n, d, now)) {
          value.reset();
          continue;
        }
      }
      return Read::kHit;
    }
    return Read::kGone;
  }

  // A hit's slide from deadline d, read at `now` from an unexpired entry:
  // false if the word changed meanwhile (read it again).
  bool SlideFrom(Node& n, std::int64_t d, std::int64_t now) const {
    if (!ctx_.sliding || d == kNever) return true;
    const std::int64_t later = Deadline(now, Pool::SharedExtra(n).ttl());
    return later <= d || n.deadline.Slide(d, later);
  }

  // Looks `key` up under the lock; on a hit counts it, slides it, tells
  // the policy, copies the value to `value` and returns the node; on a
  // miss (absent or expired) counts it and returns kCacheNil.
  template <typename Q>
  std::uint32_t HitLocked(const Q& key, std::uint32_t tag, std::int64_t now,
                          std::optional<V>& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::uint32_t i = FindLocked(key, tag);
    if (i == kCacheNil ||
        ReadEntry(pool_.at(i), now, /*locked=*/true, value) != Read::kHit) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return kCacheNil;
    }
    if (capacity_ != 0) policy_.OnAccess(pool_, i, tag);
    last_hit_ = i;
    hits_.fetch_add(1, std::memory_order_relaxed);
    return i;
  }

  // Applies the hits Gets recorded to the policy. A record may name a node
  // removed (or reused) since: only entries are moved.
  void DrainReadsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    reads_->Drain([&](std::uint32_t i, std::uint32_t tag) {
      mu_.AssumeHeld();  // called by Drain, under the lock
      if (i >= pool_.extent() || !pool_.at(i).is_entry()) return;
      policy_.OnAccess(pool_, i, tag);
      last_hit_ = i;
    });
  }

  // A Set, Delete or Clear of `key` is under way: a load of it in flight
  // must not store its (older) value afterwards.
  void SupersedeLoadLocked(const K& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (flights_.empty()) return;
    const auto it = flights_.find(key);
    if (it != flights_.end()) it->second->superseded = true;
  }

  // ---- The locked writes' parts. ----

  // Ends a locked write however it leaves (Finish never throws), so that
  // what an undone insert retired is stamped and reclaimed too.
  struct FinishAtEnd {
    CacheShard& shard;
    ~FinishAtEnd() {
      shard.mu_.AssumeHeld();  // declared after the write's MutexLock
      shard.Finish();
    }
  };

  // A removal's record for the listener, made before anything changes:
  // copies of entry n's key and value (a value stored in place is read
  // again once the entry is retired, RetireEntry). Its position in
  // `removals`, or kNoRecord without a listener. May throw what the copies
  // or the vector's growth throw (nothing changes then).
  std::size_t PrepareRecord(const Node& n, Removals& removals) const {
    if (!ctx_.listener) return kNoRecord;
    if constexpr (kValueInPlace) {
      removals.emplace_back(Keys::Copy(n.key()), n.LoadValue(),
                            RemovalCause::kExplicit);
    } else {
      removals.emplace_back(Keys::Copy(n.key()), n.value(),
                            RemovalCause::kExplicit);
    }
    return removals.size() - 1;
  }
  // Takes back the record just prepared, when the write does not happen.
  static void DropRecord(std::size_t record, Removals& removals) {
    if (record == kNoRecord) return;
    TW_DCHECK(record + 1 == removals.size());
    removals.pop_back();
  }
  // Everything that can throw for removing entry i: its record, and room
  // to retire it.
  std::size_t PrepareRemove(std::uint32_t i, Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    retired_nodes_.Reserve(1);
    return PrepareRecord(pool_.at(i), removals);
  }

  absl::Status SetLocked(K key, V value, std::uint32_t tag, std::int64_t ttl_ns,
                         std::int64_t now, Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::int64_t deadline = Deadline(now, ttl_ns);
    if (reads_ != nullptr) DrainReadsLocked();
    const std::uint32_t old = FindLocked(key, tag);
    if (old != kCacheNil && ReplaceInPlaceLocked(old, value, ttl_ns, deadline,
                                                 now, tag, removals)) {
      return absl::OkStatus();
    }
    // What can throw or fail, first: the bucket (its timer is the only
    // wheel command; an empty bucket left behind by a throw below is
    // erased when it fires), room in the index and the retired list, the
    // old value's record, the new node.
    std::uint32_t bucket = kCacheNil;
    if (deadline != kNever) {
      absl::StatusOr<std::uint32_t> b = BucketFor(TickOf(deadline), now);
      if (!b.ok()) return b.status();
      bucket = *b;
    }
    if (old == kCacheNil) index_.ReserveOne();
    retired_nodes_.Reserve(1);  // the old node, a victim or the new one
    const std::size_t record =
        old == kCacheNil ? kNoRecord : PrepareRecord(pool_.at(old), removals);
    std::uint32_t i;
    try {
      // A new node, complete before the index names it. A replaced value
      // gets one too: Gets may be copying the old value now, so it stays
      // until they are done.
      i = pool_.Allocate(std::move(key), std::move(value));
    } catch (...) {
      DropRecord(record, removals);
      throw;
    }
    if (pool_.has_extras()) pool_.extra(i).set_ttl(ttl_ns);
    pool_.at(i).deadline.Init(deadline);
    if (bucket != kCacheNil) File(i, bucket);
    if (old != kCacheNil) {
      index_.Replace(tag, old, i);
      Unfile(old);
      if (capacity_ != 0) {
        policy_.Replace(pool_, old, i);
        policy_.OnAccess(pool_, i, tag);
      }
      if (last_hit_ == old) last_hit_ = i;
      RetireEntry(old, RemovalCause::kReplaced, now, removals, record);
      return absl::OkStatus();
    }
    index_.Insert(tag, i);
    size_.store(index_.size(), std::memory_order_relaxed);
    if (capacity_ != 0) {
      policy_.OnInsert(pool_, i, tag);
      if (index_.size() > capacity_) EvictFor(i, tag, now, removals);
    }
    return absl::OkStatus();
  }

  // Makes room for new entry i, just inserted into a full shard: one
  // victim, never i nor the last hit (C5). If the victim's record throws,
  // the insert is undone (i retired unheard: the Set that made it throws)
  // and the exception goes on.
  void EvictFor(std::uint32_t i, std::uint32_t tag, std::int64_t now,
                Removals& removals) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::uint32_t v =
        policy_.Victim(pool_, i, last_hit_, [this](std::uint32_t j) {
          mu_.AssumeHeld();  // called by Victim, under the lock
          return ctx_.keys->Tag(pool_.at(j).key());
        });
    if (v == kCacheNil) return;
    std::size_t record;
    try {
      record = PrepareRecord(pool_.at(v), removals);
    } catch (...) {
      Unfile(i);
      index_.Erase(tag, i);
      policy_.OnRemove(pool_, i);
      pool_.Retire(i);
      retired_nodes_.Push(i);
      size_.store(index_.size(), std::memory_order_relaxed);
      throw;
    }
    Remove(v, ctx_.keys->Tag(pool_.at(v).key()), RemovalCause::kSize, now,
           removals, record);
    TW_DCHECK(index_.size() <= capacity_);
  }

  // A Set's new value for entry i, stored into its node (kValueInPlace)
  // when its new deadline is later than the one it has: no new node, no
  // index store, nothing retired, no relink (the entry's bucket re-files
  // it when it comes due, as it does a slid entry). false, with nothing
  // changed, when the deadline would not move later: the caller then
  // swaps in a new node.
  bool ReplaceInPlaceLocked(std::uint32_t i, const V& value,
                            std::int64_t ttl_ns, std::int64_t deadline,
                            std::int64_t now, std::uint32_t tag,
                            Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if constexpr (!kValueInPlace) {
      return false;
    } else {
      Node& n = pool_.at(i);
      const std::size_t record = PrepareRecord(n, removals);
      // Taken from the settled deadline: a slide or a Set without the lock
      // landing now lands first, or finds the node taken.
      std::int64_t was;
      do {
        was = n.deadline.Settled();
        if (deadline <= was) {  // slides only go later
          DropRecord(record, removals);
          return false;
        }
      } while (!n.deadline.Take(was));
      const RemovalCause cause =
          now >= was ? RemovalCause::kExpired : RemovalCause::kReplaced;
      if (record != kNoRecord) {
        std::get<1>(removals[record]) = n.LoadValue();
        std::get<2>(removals[record]) = cause;
      }
      n.StoreValue(value);
      if (pool_.has_extras()) pool_.extra(i).set_ttl(ttl_ns);
      if (capacity_ != 0) policy_.OnAccess(pool_, i, tag);
      CountRemoval(cause);
      n.deadline.Publish(deadline);
      return true;
    }
  }

  // Takes prepared entry i (hash bits `tag`) out: bucket, index, policy,
  // then retires it. Returns the cause: `unexpired` unless its deadline
  // had passed at `now` (kExpired). Never throws.
  RemovalCause Remove(std::uint32_t i, std::uint32_t tag,
                      RemovalCause unexpired, std::int64_t now,
                      Removals& removals, std::size_t record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Unfile(i);
    index_.Erase(tag, i);
    if (capacity_ != 0) policy_.OnRemove(pool_, i);
    if (last_hit_ == i) last_hit_ = kCacheNil;
    const RemovalCause cause = RetireEntry(i, unexpired, now, removals, record);
    size_.store(index_.size(), std::memory_order_relaxed);
    return cause;
  }

  // Retires entry i, which the index no longer names, to be freed once no
  // Get can be reading it (Reclaim); counts it and completes its record:
  // the cause from the deadline the retiring swap replaced, and a value
  // stored in place as it was then (after the swap nobody changes it).
  RemovalCause RetireEntry(std::uint32_t i, RemovalCause unexpired,
                           std::int64_t now, Removals& removals,
                           std::size_t record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::int64_t d = pool_.Retire(i);
    const RemovalCause cause = d == CacheDeadline::kRetired || now >= d
                                   ? RemovalCause::kExpired
                                   : unexpired;
    CountRemoval(cause);
    if (record != kNoRecord) {
      if constexpr (kValueInPlace) {
        std::get<1>(removals[record]) = pool_.at(i).LoadValue();
      }
      std::get<2>(removals[record]) = cause;
    }
    retired_nodes_.Push(i);
    return cause;
  }

  // Counts a value leaving, by cause (CacheStats).
  void CountRemoval(RemovalCause cause) {
    std::atomic<std::uint64_t>* counter = nullptr;
    switch (cause) {
      case RemovalCause::kExpired:
        counter = &expired_;
        break;
      case RemovalCause::kExplicit:
        counter = &deleted_;
        break;
      case RemovalCause::kReplaced:
        counter = &replaced_;
        break;
      case RemovalCause::kSize:
        counter = &evicted_;
        break;
    }
    if (counter != nullptr) counter->fetch_add(1, std::memory_order_relaxed);
  }

  // Expire's batch: true when bucket `tick` is done (empty and erased, or
  // gone). An entry past its deadline is claimed by retiring its deadline
  // word, so that a slide or a write in place landing meanwhile lands
  // first (the entry then moves on) or finds it removed.
  bool ExpireBatchLocked(std::int64_t tick, std::int64_t now,
                         Removals& removals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto it = buckets_.find(tick);
    if (it == buckets_.end()) return true;
    const std::uint32_t sentinel = it->second;
    for (int k = 0; k < kExpireBatch; ++k) {
      const std::uint32_t i = pool_.at(sentinel).enext;
      if (i == sentinel) {
        buckets_.erase(it);
        pool_.Free(sentinel);
        return true;
      }
      Node& n = pool_.at(i);
      std::int64_t d = n.deadline.Settled();
      if (now >= d) {
        const std::size_t record = PrepareRemove(i, removals);
        while (now >= d && !n.deadline.Retire(d)) d = n.deadline.Settled();
        if (now >= d) {
          Remove(i, ctx_.keys->Tag(n.key()), RemovalCause::kExpired, now,
                 removals, record);
          continue;
        }
        DropRecord(record, removals);
      }
      if (d == kNever) {  // slid beyond ~73 years
        Unfile(i);
        continue;
      }
      // Never back into this bucket, whatever the clocks say. Refused
      // only once the wheel is stopping (the cache is being destroyed):
      // the entry then stays unfiled and dies with the cache, without a
      // listener call (C7), never expired early.
      absl::StatusOr<std::uint32_t> b =
          BucketFor(std::max(TickOf(d), tick + 1), now);
      Unfile(i);
      if (b.ok()) File(i, *b);
    }
    return false;
  }

  // The tick whose bucket holds deadline d: the first tick at or after it.
  std::int64_t TickOf(std::int64_t d) const {
    return d / ctx_.interval_ns + (d % ctx_.interval_ns != 0);
  }

  // The sentinel of the bucket for `tick`, created with its wheel timer
  // (due at tick * interval) if absent. Errors: the wheel's. May throw
  // std::bad_alloc (a timer armed for no bucket then does nothing).
  absl::StatusOr<std::uint32_t> BucketFor(std::int64_t tick, std::int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto it = buckets_.find(tick);
    if (it != buckets_.end()) return it->second;
    // The wheel fires a timer on the first tick at or after its deadline,
    // which it computes from its own clock a moment after `now`: aimed half
    // an interval early, the timer still fires on tick `tick`, never on the
    // one after nor before.
    const std::int64_t due = tick * ctx_.interval_ns;
    absl::Status st = ctx_.timers.Arm(
        tick, id_, std::max<std::int64_t>(due - now - ctx_.interval_ns / 2, 1));
    if (!st.ok()) return st;
    const std::uint32_t sentinel = pool_.AllocateSentinel();
    try {
      buckets_.emplace(tick, sentinel);
    } catch (...) {
      pool_.Free(sentinel);
      throw;
    }
    return sentinel;
  }

  // Links entry i into the bucket whose sentinel is `bucket`.
  void File(std::uint32_t i, std::uint32_t bucket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& n = pool_.at(i);
    auto& head = pool_.at(bucket);
    n.eprev = bucket;
    n.enext = head.enext;
    pool_.at(head.enext).eprev = i;
    head.enext = i;
  }

  // Unlinks entry i from its bucket, if it is in one. O(1): the lists are
  // circular through their sentinel.
  void Unfile(std::uint32_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto& n = pool_.at(i);
    if (n.enext == kCacheNil) return;
    pool_.at(n.eprev).enext = n.enext;
    pool_.at(n.enext).eprev = n.eprev;
    n.eprev = n.enext = kCacheNil;
  }

  // The end of every write: frees what no Get can still be reading; an
  // empty shard with no bucket left gives its node chunks back (one kept,
  // so a shard going 0 <-> 1 entries does not churn); and if something
  // retired must wait for a Get still reading, a wheel timer comes back
  // for it one interval later in case no write does (one at a time).
  // Never throws: bookkeeping that finds no memory waits for a later write.
  void Finish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Reclaim();
    if (index_.size() == 0 && buckets_.empty() && retired_nodes_.empty() &&
        pool_.extent() > Pool::kChunk) {
      try {
        pool_.RetireAll();
      } catch (const std::bad_alloc&) {
      }
      Reclaim();
    }
    if ((!retired_nodes_.empty() || !retired_blocks_.empty()) &&
        !reclaim_armed_) {
      reclaim_armed_ =
          ctx_.timers.Arm(CacheShardTimers::kReclaimTick, id_, ctx_.interval_ns)
              .ok();
    }
  }

  // Stamps what this write retired with the epoch read after its unlinks
  // (RetireEpoch), moves the epoch on (at most kCacheEpochGrace times) if
  // the oldest waits for it, and frees what is old enough.
  void Reclaim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    try {
      retired_blocks_.Reserve(index_.retired_count() + pool_.retired_count());
      const auto take = [this](CacheBlock b) {
        mu_.AssumeHeld();  // called by TakeRetired, under the lock
        retired_blocks_.Push(std::move(b));
      };
      index_.TakeRetired(take);
      pool_.TakeRetired(take);
    } catch (const std::bad_alloc&) {
      // Left with the index and the pool until a later write.
    }
    if (retired_nodes_.HasUnstamped() || retired_blocks_.HasUnstamped()) {
      const std::uint64_t e = ctx_.epochs->RetireEpoch();
      retired_nodes_.Stamp(e);
      retired_blocks_.Stamp(e);
    }
    if (retired_nodes_.empty() && retired_blocks_.empty()) return;
    std::uint64_t oldest = std::numeric_limits<std::uint64_t>::max();
    if (!retired_nodes_.empty()) oldest = retired_nodes_.oldest();
    if (!retired_blocks_.empty()) {
      oldest = std::min(oldest, retired_blocks_.oldest());
    }
    std::uint64_t e = ctx_.epochs->current();
    for (std::uint64_t k = 0;
         k < kCacheEpochGrace && !CacheEpochs::Reclaimable(oldest, e); ++k) {
      e = ctx_.epochs->TryAdvance();
    }
    retired_nodes_.FreeReclaimable(
        e,
        [this](std::uint32_t i) {
          mu_.AssumeHeld();  // called by FreeReclaimable, under the lock
          pool_.Free(i);
        },
        TW_CACHE_MUTANT(kFreeNodesOneEpochEarly) ? kCacheEpochGrace - 1
                                                 : kCacheEpochGrace);
    retired_blocks_.FreeReclaimable(
        e,
        [](CacheBlock& b) {
          TW_CACHE_RELEASED(b);
          b.reset();
        },
        TW_CACHE_MUTANT(kReleaseBlocksOneEpochEarly) ? kCacheEpochGrace - 1
                                                     : kCacheEpochGrace);
  }

  const Context& ctx_;
  const std::uint32_t id_;
  const std::size_t capacity_;  // 0 = unbounded (the policy is not used)
  const bool extras_;           // nodes have a CacheNodeExtra (pool.h)
  // Hits recorded by Gets for the policy (bounded shards only).
  const std::unique_ptr<CacheReadBuffer> reads_;
  mutable CacheMutex mu_;
  Pool pool_ ABSL_GUARDED_BY(mu_);
  CacheIndex index_ ABSL_GUARDED_BY(mu_);
  CachePolicy<StoredKey, V> policy_ ABSL_GUARDED_BY(mu_);
  // The shard's most recently hit node.
  std::uint32_t last_hit_ ABSL_GUARDED_BY(mu_) = kCacheNil;
  // Expiry buckets: tick -> sentinel node of the circular list of entries
  // filed under that tick. A bucket exists while its wheel timer is
  // pending or running.
  std::unordered_map<std::int64_t, std::uint32_t> buckets_ ABSL_GUARDED_BY(mu_);
  // Loads in flight (GetOrLoad), by key.
  std::unordered_map<K, std::shared_ptr<CacheFlight<V>>, Hash, Eq> flights_
      ABSL_GUARDED_BY(mu_);
  CacheRetiredQueue<std::uint32_t> retired_nodes_ ABSL_GUARDED_BY(mu_);
  CacheRetiredQueue<CacheBlock> retired_blocks_ ABSL_GUARDED_BY(mu_);
  // A wheel timer will come back to free what is retired.
  bool reclaim_armed_ ABSL_GUARDED_BY(mu_) = false;

  // Relaxed counters, written under the lock, read without it.
  std::atomic<std::size_t> size_{0};
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, expired_{0}, evicted_{0};
  std::atomic<std::uint64_t> deleted_{0}, replaced_{0};
  // GetOrLoad calls between their locked lookup and the end of their load.
  std::atomic<std::uint32_t> loads_open_{0};
};

}  // namespace internal
}  // namespace timingwheel

#include "timingwheel/internal/cache/shard_invariants.h"

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SHARD_H_
