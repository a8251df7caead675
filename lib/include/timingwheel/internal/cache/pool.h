// A cache shard's entries: a pool of fixed-size nodes addressed by 32-bit
// index, allocated in chunks so that growing never moves a node or doubles
// the memory, and reusing freed nodes before growing.
//
// Why a second pool beside the wheel's EntryPool (wheel/entry_pool.h): a
// shard needs less. It works under the shard's lock, owns its nodes
// (constructs and destroys key and value, makes the buckets' sentinels)
// and gives its memory back only when the shard is empty (MaybeRelease in
// cache_impl.h). EntryPool's shrink in bounded steps, with the owner
// relocating live entries, its slabs and its free marks kept in the
// entries' links are machinery a shard would never run.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
#define TIMINGWHEEL_INTERNAL_CACHE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"

namespace timingwheel {
namespace internal {

// "No node": the end of a list.
inline constexpr std::uint32_t kCacheNil =
    std::numeric_limits<std::uint32_t>::max();

// One cache entry. For 8-byte keys and values it is 48 bytes: its deadline,
// its time to live and policy segment, the two links of the eviction
// policy's list, the two links of its expiry bucket's list, the key and the
// value. Key and value are constructed only while the node is an entry
// (deadline >= 0); a bucket's sentinel node uses only the expiry links.
template <typename K, typename V>
struct CacheNode {
  static constexpr std::int64_t kFree =
      std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kSentinel = kFree + 1;
  static constexpr std::uint64_t kTtlMask = (std::uint64_t{1} << 62) - 1;
  // Largest finite time to live kept (ns, about 146 years); longer is never.
  static constexpr std::int64_t kTtlNever = static_cast<std::int64_t>(kTtlMask);

  // ns of wheel time (INT64_MAX = never); kFree, kSentinel for non-entries.
  std::int64_t deadline = kFree;
  // Bits 0..61: the time to live in ns (kTtlNever = never), which sliding
  // restarts from. Bits 62..63: the eviction policy's segment.
  std::uint64_t tag = 0;
  std::uint32_t prev = kCacheNil;   // policy list
  std::uint32_t next = kCacheNil;   // policy list; also the free list
  std::uint32_t eprev = kCacheNil;  // expiry bucket's circular list
  std::uint32_t enext = kCacheNil;
  alignas(K) unsigned char key_storage[sizeof(K)];
  alignas(V) unsigned char value_storage[sizeof(V)];

  bool is_entry() const { return deadline >= 0; }
  std::int64_t ttl() const { return static_cast<std::int64_t>(tag & kTtlMask); }
  void set_ttl(std::int64_t t) {
    tag = (tag & ~kTtlMask) | static_cast<std::uint64_t>(t);
  }
  int segment() const { return static_cast<int>(tag >> 62); }
  void set_segment(int s) {
    tag = (tag & kTtlMask) | (static_cast<std::uint64_t>(s) << 62);
  }
  K& key() { return *std::launder(reinterpret_cast<K*>(key_storage)); }
  const K& key() const {
    return *std::launder(reinterpret_cast<const K*>(key_storage));
  }
  V& value() { return *std::launder(reinterpret_cast<V*>(value_storage)); }
};

// Nodes in chunks of kChunk. Not thread-safe: the shard's lock guards it.
// Cost: Allocate and Free are O(1) (a new chunk now and then); the slack is
// at most one chunk per pool.
template <typename K, typename V>
class CachePool {
 public:
  using Node = CacheNode<K, V>;
  static constexpr std::uint32_t kChunkBits = 10;
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;

  CachePool() = default;
  CachePool(const CachePool&) = delete;
  CachePool& operator=(const CachePool&) = delete;
  ~CachePool() { DestroyAll(); }

  // Nodes ever allocated (live or free): indices below it are valid.
  std::uint32_t extent() const { return extent_; }

  Node& at(std::uint32_t i) {
    return chunks_[i >> kChunkBits][i & (kChunk - 1)];
  }
  const Node& at(std::uint32_t i) const {
    return chunks_[i >> kChunkBits][i & (kChunk - 1)];
  }

  // An entry node holding key and value (deadline 0, ttl 0, unlinked).
  // Throws std::bad_alloc when memory runs out (nothing changed then).
  std::uint32_t Allocate(K key, V value) {
    const std::uint32_t i = Take();
    Node& n = at(i);
    ::new (static_cast<void*>(n.key_storage)) K(std::move(key));
    ::new (static_cast<void*>(n.value_storage)) V(std::move(value));
    n.deadline = 0;
    return i;
  }

  // A sentinel node: no key or value, its expiry links point to itself.
  std::uint32_t AllocateSentinel() {
    const std::uint32_t i = Take();
    Node& n = at(i);
    n.deadline = Node::kSentinel;
    n.eprev = n.enext = i;
    return i;
  }

  // Destroys node i's key and value (if an entry) and puts it on the free
  // list.
  void Free(std::uint32_t i) {
    Node& n = at(i);
    TW_DCHECK(n.deadline != Node::kFree);  // not freed twice
    if (n.is_entry()) {
      n.key().~K();
      n.value().~V();
    }
    n = Node{};
    n.next = free_;
    free_ = i;
  }

  // Destroys every live node and returns all memory.
  void DestroyAll() {
    for (std::uint32_t i = 0; i < extent_; ++i) {
      Node& n = at(i);
      if (n.is_entry()) {
        n.key().~K();
        n.value().~V();
        n.deadline = Node::kFree;
      }
    }
    chunks_.clear();
    chunks_.shrink_to_fit();
    extent_ = 0;
    free_ = kCacheNil;
  }

  // The first broken invariant, or OK: the chunks hold the extent; the free
  // list holds exactly the free nodes (deadline kFree), each once, all
  // below the extent. O(extent); for tests and checking builds.
  absl::Status CheckInvariants() const {
    TW_INVARIANT(chunks_.size() == (std::size_t{extent_} + kChunk - 1) / kChunk,
                 "CachePool: ", chunks_.size(), " chunks for ", extent_,
                 " nodes");
    std::vector<bool> listed(extent_);
    for (std::uint32_t i = free_; i != kCacheNil; i = at(i).next) {
      TW_INVARIANT(i < extent_, "CachePool: free list holds ", i,
                   ", not below the extent ", extent_);
      TW_INVARIANT(at(i).deadline == Node::kFree, "CachePool: free list ",
                   "holds node ", i, ", in use");
      TW_INVARIANT(!listed[i], "CachePool: node ", i,
                   " is on the free list twice");
      listed[i] = true;
    }
    for (std::uint32_t i = 0; i < extent_; ++i) {
      TW_INVARIANT(listed[i] || at(i).deadline != Node::kFree,
                   "CachePool: free node ", i, " is not on the free list");
    }
    return absl::OkStatus();
  }

 private:
  std::uint32_t Take() {
    if (free_ != kCacheNil) {
      const std::uint32_t i = free_;
      TW_DCHECK(at(i).deadline == Node::kFree);
      free_ = at(i).next;
      at(i).next = kCacheNil;
      return i;
    }
    if ((extent_ & (kChunk - 1)) == 0) {
      chunks_.push_back(std::make_unique<Node[]>(kChunk));
    }
    return extent_++;
  }

  std::vector<std::unique_ptr<Node[]>> chunks_;
  std::uint32_t extent_ = 0;
  std::uint32_t free_ = kCacheNil;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
