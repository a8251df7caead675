// A cache shard's eviction policy: W-TinyLFU (window LRU, segmented LRU main
// space, TinyLFU frequency filter between them; Einziger, Friedman and
// Manes, "TinyLFU: A Highly Efficient Cache Admission Policy").
#ifndef TIMINGWHEEL_INTERNAL_CACHE_POLICY_H_
#define TIMINGWHEEL_INTERNAL_CACHE_POLICY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/pool.h"
#include "timingwheel/internal/cache/sketch.h"

namespace timingwheel {
namespace internal {

// Orders a bounded shard's nodes for eviction. New entries enter a small
// LRU window (1% of the capacity); an entry leaving the window competes with
// the main space's LRU victim, and the one the frequency sketch has seen
// less often is evicted. The main space is a segmented LRU: probation (new
// to main) and protected (hit again while in main, 80% of main). The links
// live in the nodes (prev/next and the segment bits). Not thread-safe: the
// shard's lock guards it. Cost: O(1) per insert, hit and removal, plus 4
// sketch words per insert and hit; choosing a victim hashes two keys.
template <typename K, typename V>
class CachePolicy {
 public:
  using Pool = CachePool<K, V>;
  enum Segment { kWindow = 0, kProbation = 1, kProtected = 2 };

  // Sizes the policy for `capacity` (>= 1) entries and forgets everything.
  void Reset(std::size_t capacity) {
    capacity_ = capacity;
    window_max_ = std::max<std::size_t>(1, capacity / 100);
    const std::size_t main =
        capacity > window_max_ ? capacity - window_max_ : 0;
    protected_max_ = main * 8 / 10;
    for (List& l : lists_) l = List{};
    sketch_.Reset(capacity);
  }

  // A new entry: counted, and put at the window's MRU end.
  void OnInsert(Pool& pool, std::uint32_t i, std::uint64_t hash) {
    sketch_.Increment(hash);
    PushBack(pool, kWindow, i);
    // Entries leaving the window go to probation; once the shard is over
    // capacity Victim() makes the last of them compete.
    while (lists_[kWindow].size > window_max_ && lists_[kWindow].head != i) {
      Move(pool, lists_[kWindow].head, kProbation);
    }
  }

  // A hit (or a replaced value): counted, and moved to its MRU end; a
  // probation entry is promoted to protected.
  void OnAccess(Pool& pool, std::uint32_t i, std::uint64_t hash) {
    sketch_.Increment(hash);
    switch (pool.extra(i).segment()) {
      case kWindow:
        Move(pool, i, kWindow);
        break;
      case kProbation:
        Move(pool, i, kProtected);
        while (lists_[kProtected].size > protected_max_ &&
               lists_[kProtected].head != i) {
          Move(pool, lists_[kProtected].head, kProbation);
        }
        break;
      default:
        Move(pool, i, kProtected);
        break;
    }
  }

  // Node i leaves the cache.
  void OnRemove(Pool& pool, std::uint32_t i) { Unlink(pool, i); }

  // Node `to` (a new node for the same key) takes node `from`'s place in
  // its segment's list; `from` leaves it.
  void Replace(Pool& pool, std::uint32_t from, std::uint32_t to) {
    auto& f = pool.extra(from);
    auto& t = pool.extra(to);
    List& l = lists_[f.segment()];
    t.set_segment(f.segment());
    t.prev = f.prev;
    t.next = f.next;
    if (f.prev != kCacheNil) {
      pool.extra(f.prev).next = to;
    } else {
      l.head = to;
    }
    if (f.next != kCacheNil) {
      pool.extra(f.next).prev = to;
    } else {
      l.tail = to;
    }
    f.prev = f.next = kCacheNil;
  }

  // Which node to evict from a shard over capacity: never `keep1` or
  // `keep2` (the entry just set and the most recently hit) unless nothing
  // else is there, and then never keep1. `hash_of(i)` hashes node i's key.
  template <typename HashOf>
  std::uint32_t Victim(Pool& pool, std::uint32_t keep1, std::uint32_t keep2,
                       const HashOf& hash_of) {
    auto allowed = [&](std::uint32_t i) {
      return i != kCacheNil && i != keep1 && i != keep2;
    };
    // The newest arrival in probation (the last to leave the window) against
    // probation's LRU end.
    const std::uint32_t candidate = lists_[kProbation].tail;
    std::uint32_t victim = lists_[kProbation].head;
    if (victim == candidate) victim = lists_[kProtected].head;
    if (candidate != kCacheNil && victim != kCacheNil &&
        pool.extra(candidate).segment() == kProbation) {
      const bool candidate_wins = sketch_.Frequency(hash_of(candidate)) >
                                  sketch_.Frequency(hash_of(victim));
      const std::uint32_t loser = candidate_wins ? victim : candidate;
      const std::uint32_t winner = candidate_wins ? candidate : victim;
      if (allowed(loser)) return loser;
      if (allowed(winner)) return winner;
    }
    for (Segment s : {kProbation, kProtected, kWindow}) {
      for (std::uint32_t i = lists_[s].head; i != kCacheNil;
           i = pool.extra(i).next) {
        if (allowed(i)) return i;
      }
    }
    for (Segment s : {kProbation, kProtected, kWindow}) {
      for (std::uint32_t i = lists_[s].head; i != kCacheNil;
           i = pool.extra(i).next) {
        if (i != keep1) return i;
      }
    }
    return kCacheNil;
  }

  // Forgets every node (the pool is being emptied); keeps the sketch.
  void Clear() {
    for (List& l : lists_) l = List{};
  }

  // The first broken invariant, or OK, for a shard of `capacity` (what
  // Reset was given) holding `entries`: each segment's list runs from head
  // (LRU) to tail (MRU) through next and back through prev, its nodes
  // entries marked with the segment, `size` of them; together they are the
  // shard's entries, no more than the capacity; the window holds at most
  // its share, protected at most its share or the one entry just promoted.
  // O(entries); for tests and checking builds.
  absl::Status CheckInvariants(const Pool& pool, std::size_t entries,
                               std::size_t capacity) const {
    TW_INVARIANT(capacity == capacity_, "CachePolicy: sized for ", capacity_,
                 ", shard capacity ", capacity);
    std::size_t total = 0;
    for (int s : {kWindow, kProbation, kProtected}) {
      const List& l = lists_[s];
      std::uint32_t prev = kCacheNil;
      std::size_t n = 0;
      for (std::uint32_t i = l.head; i != kCacheNil; i = pool.extra(i).next) {
        TW_INVARIANT(i < pool.extent() && pool.at(i).is_entry(),
                     "CachePolicy: segment ", s, " links node ", i,
                     ", not an entry");
        TW_INVARIANT(pool.extra(i).segment() == s, "CachePolicy: node ", i,
                     " of segment ", s, " is marked ", pool.extra(i).segment());
        TW_INVARIANT(pool.extra(i).prev == prev, "CachePolicy: node ", i,
                     " links back to ", pool.extra(i).prev, ", not ", prev);
        TW_INVARIANT(++n <= l.size, "CachePolicy: segment ", s,
                     " holds more than its size ", l.size);
        prev = i;
      }
      TW_INVARIANT(prev == l.tail && n == l.size, "CachePolicy: segment ", s,
                   " ends at ", prev, " after ", n, " nodes; tail ", l.tail,
                   ", size ", l.size);
      total += n;
    }
    TW_INVARIANT(total == entries && entries <= capacity_,
                 "CachePolicy: ", total, " nodes in lists, ", entries,
                 " entries, capacity ", capacity_);
    TW_INVARIANT(lists_[kWindow].size <= window_max_, "CachePolicy: window ",
                 lists_[kWindow].size, " over ", window_max_);
    TW_INVARIANT(
        lists_[kProtected].size <= std::max<std::size_t>(protected_max_, 1),
        "CachePolicy: protected ", lists_[kProtected].size, " over ",
        protected_max_);
    return absl::OkStatus();
  }

 private:
  struct List {
    std::uint32_t head = kCacheNil;  // LRU end
    std::uint32_t tail = kCacheNil;  // MRU end
    std::size_t size = 0;
  };

  void PushBack(Pool& pool, Segment s, std::uint32_t i) {
    auto& n = pool.extra(i);
    List& l = lists_[s];
    n.set_segment(s);
    n.prev = l.tail;
    n.next = kCacheNil;
    if (l.tail != kCacheNil) {
      pool.extra(l.tail).next = i;
    } else {
      l.head = i;
    }
    l.tail = i;
    ++l.size;
  }
  void Unlink(Pool& pool, std::uint32_t i) {
    auto& n = pool.extra(i);
    List& l = lists_[n.segment()];
    TW_DCHECK(l.size != 0);
    if (n.prev != kCacheNil) {
      pool.extra(n.prev).next = n.next;
    } else {
      l.head = n.next;
    }
    if (n.next != kCacheNil) {
      pool.extra(n.next).prev = n.prev;
    } else {
      l.tail = n.prev;
    }
    n.prev = n.next = kCacheNil;
    --l.size;
  }
  void Move(Pool& pool, std::uint32_t i, Segment to) {
    Unlink(pool, i);
    PushBack(pool, to, i);
  }

  List lists_[3];
  std::size_t capacity_ = 0;
  std::size_t window_max_ = 1;
  std::size_t protected_max_ = 0;
  CacheFrequencySketch sketch_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_POLICY_H_
