// A cache entry's node: what every node has (CacheNode), and what a node
// has besides when its cache is bounded or sliding (CacheNodeExtra), laid
// out right after it in the pool's chunk (pool.h).
#ifndef TIMINGWHEEL_INTERNAL_CACHE_NODE_H_
#define TIMINGWHEEL_INTERNAL_CACHE_NODE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <type_traits>

#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/deadline.h"
#include "timingwheel/internal/cache/schedule_point.h"

namespace timingwheel {
namespace internal {

// "No node": the end of a list.
inline constexpr std::uint32_t kCacheNil =
    std::numeric_limits<std::uint32_t>::max();

// Whether a Set that replaces a value stores the new one into the node a
// Get may be reading (CacheShard::ReplaceInPlace, SetWithoutLock) rather
// than swapping in a new node: a value of one word or less, copied by a single
// lock-free atomic load or store, so a Get reads the old or the new value
// whole. CacheValueWord<V>::kInPlace says so, and kAlign is the alignment its
// storage needs (std::atomic_ref's, which only such a V may ask).
template <typename V, bool = std::is_trivially_copyable_v<V> &&
                             (sizeof(V) == 1 || sizeof(V) == 2 ||
                              sizeof(V) == 4 || sizeof(V) == 8)>
struct CacheValueWord {
  static constexpr bool kInPlace = false;
  static constexpr std::size_t kAlign = alignof(V);
};
template <typename V>
struct CacheValueWord<V, true> {
  static constexpr bool kInPlace = std::atomic_ref<V>::is_always_lock_free;
  static constexpr std::size_t kAlign =
      kInPlace ? std::atomic_ref<V>::required_alignment : alignof(V);
};
template <typename V>
inline constexpr bool kCacheValueInPlace = CacheValueWord<V>::kInPlace;

// One cache entry: its key and value, its deadline word and the two links
// of its expiry bucket's list; 32 bytes for 8-byte keys and values. Key and
// value are constructed while the node is an entry (a deadline >= 0, or
// kWriting) or retired (kRetired: removed, waiting for the Gets that may
// still read it); a bucket's sentinel node uses only the expiry links, a
// free node `enext` for the free list. What a Get reads comes first, so
// that it shares a cache line: key, value, deadline. Key and value never
// change while a Get can reach the node, except a value that
// kCacheValueInPlace lets a writer store in place, with atomic stores
// between its Take and Publish of the deadline word (deadline.h).
template <typename K, typename V>
struct CacheNode {
  static constexpr bool kValueInPlace = kCacheValueInPlace<V>;
  static constexpr std::int64_t kFree = CacheDeadline::kFree;
  static constexpr std::int64_t kSentinel = CacheDeadline::kSentinel;
  static constexpr std::int64_t kRetired = CacheDeadline::kRetired;
  static constexpr std::int64_t kWriting = CacheDeadline::kWriting;

  alignas(K) unsigned char key_storage[sizeof(K)];
  alignas(CacheValueWord<V>::kAlign) unsigned char value_storage[sizeof(V)];
  // ns of wheel time (INT64_MAX = never), or a mark (deadline.h).
  CacheDeadline deadline;
  std::uint32_t eprev = kCacheNil;  // expiry bucket's circular list
  std::uint32_t enext = kCacheNil;  // and the free list

#ifdef TIMINGWHEEL_CACHE_EXPLORE
  CacheNode() { deadline.node = this; }
#endif

  bool is_entry() const {
    const std::int64_t d = deadline.Peek();
    return d >= 0 || d == kWriting;
  }
  // Key and value constructed: an entry, or retired.
  bool has_value() const { return is_entry() || deadline.Peek() == kRetired; }
  K& key() { return *std::launder(reinterpret_cast<K*>(key_storage)); }
  const K& key() const {
    return *std::launder(reinterpret_cast<const K*>(key_storage));
  }
  V& value() { return *std::launder(reinterpret_cast<V*>(value_storage)); }
  const V& value() const {
    return *std::launder(reinterpret_cast<const V*>(value_storage));
  }
  // Only when kValueInPlace: the value read by a Get without the lock, and
  // a new one stored by a writer while Gets may read it.
  V LoadValue() const requires kValueInPlace {
    TW_CACHE_STEP("node.load_value", this);
    return std::atomic_ref<V>(const_cast<V&>(value()))
        .load(std::memory_order_relaxed);
  }
  void StoreValue(const V& v) requires kValueInPlace {
    TW_DCHECK(deadline.Peek() == kWriting);  // only the entry's taker stores
    TW_CACHE_STEP("node.store_value", this);
    std::atomic_ref<V>(value()).store(v, std::memory_order_relaxed);
  }
};

// What a node of a bounded or sliding cache has besides: the time to live
// it was set with (sliding restarts from it), its eviction policy segment
// and the two links of the policy's list; 16 bytes. Gets read the time to
// live while the policy changes the segment beside it, hence an atomic.
struct CacheNodeExtra {
  static constexpr std::uint64_t kTtlMask = (std::uint64_t{1} << 62) - 1;
  // Largest finite time to live kept (ns, about 146 years); longer is never.
  static constexpr std::int64_t kTtlNever = static_cast<std::int64_t>(kTtlMask);

  // Bits 0..61: the time to live in ns (kTtlNever = never). Bits 62..63:
  // the eviction policy's segment.
  std::atomic<std::uint64_t> tag{0};
  std::uint32_t prev = kCacheNil;  // policy list
  std::uint32_t next = kCacheNil;

  std::int64_t ttl() const {
    return static_cast<std::int64_t>(tag.load(std::memory_order_relaxed) &
                                     kTtlMask);
  }
  void set_ttl(std::int64_t t) {
    const std::uint64_t old = tag.load(std::memory_order_relaxed);
    tag.store((old & ~kTtlMask) | static_cast<std::uint64_t>(t),
              std::memory_order_relaxed);
  }
  int segment() const {
    return static_cast<int>(tag.load(std::memory_order_relaxed) >> 62);
  }
  void set_segment(int s) {
    const std::uint64_t old = tag.load(std::memory_order_relaxed);
    tag.store((old & kTtlMask) | (static_cast<std::uint64_t>(s) << 62),
              std::memory_order_relaxed);
  }
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_NODE_H_
