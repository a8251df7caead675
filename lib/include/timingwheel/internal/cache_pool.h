// A cache shard's entries: a pool of fixed-size nodes addressed by 32-bit
// index, allocated in chunks so that growing never moves a node or doubles
// the memory, and reusing freed nodes before growing.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
#define TIMINGWHEEL_INTERNAL_CACHE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace timingwheel {
namespace internal {

// "No node": the end of a list.
inline constexpr std::uint32_t kCacheNil =
    std::numeric_limits<std::uint32_t>::max();

// One cache entry. For 8-byte keys and values it is 48 bytes: the key, the
// value, the generation that names its wheel timer, its deadline and time to
// live on the wheel's clock, and the two links of the eviction policy's list.
// Key and value are constructed only while the node is live (gen != 0).
template <typename K, typename V>
struct CacheNode {
  // Bits 0..61: the generation, unique per stored value and never reused
  // (0 = free node). Bits 62..63: the eviction policy's segment.
  std::uint64_t tag = 0;
  std::int64_t deadline = 0;  // ns of wheel time; INT64_MAX = never
  std::int64_t ttl = 0;       // ns; INT64_MAX = never (sliding restarts it)
  std::uint32_t prev = kCacheNil;
  std::uint32_t next = kCacheNil;  // also the free list's link
  alignas(K) unsigned char key_storage[sizeof(K)];
  alignas(V) unsigned char value_storage[sizeof(V)];

  static constexpr std::uint64_t kGenMask = (std::uint64_t{1} << 62) - 1;

  std::uint64_t gen() const { return tag & kGenMask; }
  void set_gen(std::uint64_t g) { tag = (tag & ~kGenMask) | g; }
  int segment() const { return static_cast<int>(tag >> 62); }
  void set_segment(int s) {
    tag = (tag & kGenMask) | (static_cast<std::uint64_t>(s) << 62);
  }
  K& key() { return *std::launder(reinterpret_cast<K*>(key_storage)); }
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

  // A node holding key and value, with generation `gen` (non-zero), unlinked.
  // Throws std::bad_alloc when memory runs out (nothing changed then).
  std::uint32_t Allocate(K key, V value, std::uint64_t gen) {
    std::uint32_t i;
    if (free_ != kCacheNil) {
      i = free_;
      free_ = at(i).next;
    } else {
      if ((extent_ & (kChunk - 1)) == 0) {
        chunks_.push_back(std::make_unique<Node[]>(kChunk));
      }
      i = extent_++;
    }
    Node& n = at(i);
    ::new (static_cast<void*>(n.key_storage)) K(std::move(key));
    ::new (static_cast<void*>(n.value_storage)) V(std::move(value));
    n.tag = gen;
    n.prev = n.next = kCacheNil;
    return i;
  }

  // Destroys node i's key and value and puts it on the free list.
  void Free(std::uint32_t i) {
    Node& n = at(i);
    n.key().~K();
    n.value().~V();
    n.tag = 0;
    n.prev = kCacheNil;
    n.next = free_;
    free_ = i;
  }

  // Destroys every live node and returns all memory.
  void DestroyAll() {
    for (std::uint32_t i = 0; i < extent_; ++i) {
      Node& n = at(i);
      if (n.gen() != 0) {
        n.key().~K();
        n.value().~V();
        n.tag = 0;
      }
    }
    chunks_.clear();
    chunks_.shrink_to_fit();
    extent_ = 0;
    free_ = kCacheNil;
  }

 private:
  std::vector<std::unique_ptr<Node[]>> chunks_;
  std::uint32_t extent_ = 0;
  std::uint32_t free_ = kCacheNil;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
