// A cache shard's entries: a pool of fixed-size nodes addressed by 32-bit
// index, allocated in chunks so that growing never moves a node or doubles
// the memory, and reusing freed nodes before growing.
//
// Writers use it under the shard's lock; Gets read nodes without it
// (SharedAt), so a node removed from the cache is first retired (its key
// and value kept for Gets still reading them) and freed only after the
// cache's epoch has moved on (epoch.h), and the chunk directory that Gets
// walk is replaced, never changed in place, when it grows.
//
// Why a second pool beside the wheel's EntryPool (wheel/entry_pool.h): a
// shard needs less. It owns its nodes (constructs and destroys key and
// value, makes the buckets' sentinels) and gives its memory back only when
// the shard is empty (MaybeRelease in cache_impl.h). EntryPool's shrink in
// bounded steps, with the owner relocating live entries, its slabs and its
// free marks kept in the entries' links are machinery a shard would never
// run.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
#define TIMINGWHEEL_INTERNAL_CACHE_POOL_H_

#include <algorithm>
#include <atomic>
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
// value. Key and value are constructed while the node is an entry
// (deadline >= 0) or retired (kRetired: removed, waiting for the Gets that
// may still read it); a bucket's sentinel node uses only the expiry links.
// Gets read deadline and tag while writers change them (a sliding hit
// moves the deadline; the policy moves the segment), hence atomics; key and
// value never change while a Get can reach the node.
template <typename K, typename V>
struct CacheNode {
  static constexpr std::int64_t kFree =
      std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kSentinel = kFree + 1;
  static constexpr std::int64_t kRetired = kFree + 2;
  static constexpr std::uint64_t kTtlMask = (std::uint64_t{1} << 62) - 1;
  // Largest finite time to live kept (ns, about 146 years); longer is never.
  static constexpr std::int64_t kTtlNever = static_cast<std::int64_t>(kTtlMask);

  // What a Get reads comes first, so that it shares a cache line more
  // often: key, value, deadline, ttl.
  alignas(K) unsigned char key_storage[sizeof(K)];
  alignas(V) unsigned char value_storage[sizeof(V)];
  // ns of wheel time (INT64_MAX = never); kFree, kSentinel, kRetired for
  // non-entries.
  std::atomic<std::int64_t> deadline{kFree};
  // Bits 0..61: the time to live in ns (kTtlNever = never), which sliding
  // restarts from. Bits 62..63: the eviction policy's segment.
  std::atomic<std::uint64_t> tag{0};
  std::uint32_t prev = kCacheNil;   // policy list
  std::uint32_t next = kCacheNil;   // policy list; also the free list
  std::uint32_t eprev = kCacheNil;  // expiry bucket's circular list
  std::uint32_t enext = kCacheNil;

  bool is_entry() const { return deadline_now() >= 0; }
  // Key and value constructed: an entry, or retired.
  bool has_value() const {
    const std::int64_t d = deadline_now();
    return d >= 0 || d == kRetired;
  }
  std::int64_t deadline_now() const {
    return deadline.load(std::memory_order_relaxed);
  }
  void set_deadline(std::int64_t d) {
    deadline.store(d, std::memory_order_relaxed);
  }
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
  // Back to a free node's state (links reset), key and value destroyed.
  void Reset() {
    set_deadline(kFree);
    tag.store(0, std::memory_order_relaxed);
    prev = next = eprev = enext = kCacheNil;
  }
  K& key() { return *std::launder(reinterpret_cast<K*>(key_storage)); }
  const K& key() const {
    return *std::launder(reinterpret_cast<const K*>(key_storage));
  }
  V& value() { return *std::launder(reinterpret_cast<V*>(value_storage)); }
  const V& value() const {
    return *std::launder(reinterpret_cast<const V*>(value_storage));
  }
};

// Nodes in chunks of kChunk. Not thread-safe but for SharedAt: the shard's
// lock guards the rest. Cost: Allocate and Free are O(1) (a new chunk now
// and then, a new directory when the chunks double); the slack is at most
// one chunk per pool.
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

  // Node i, for a Get without the lock, inside a read section, where i came
  // from the index: its chunk is published before any index slot names it.
  Node& SharedAt(std::uint32_t i) const {
    const Directory* d = dir_.load(std::memory_order_acquire);
    Node* chunk = d->chunks[i >> kChunkBits].load(std::memory_order_acquire);
    return chunk[i & (kChunk - 1)];
  }

  // An entry node holding key and value (deadline 0, ttl 0, unlinked).
  // Throws std::bad_alloc when memory runs out (nothing changed then).
  std::uint32_t Allocate(K key, V value) {
    const std::uint32_t i = Take();
    Node& n = at(i);
    ::new (static_cast<void*>(n.key_storage)) K(std::move(key));
    ::new (static_cast<void*>(n.value_storage)) V(std::move(value));
    n.set_deadline(0);
    return i;
  }

  // A sentinel node: no key or value, its expiry links point to itself.
  std::uint32_t AllocateSentinel() {
    const std::uint32_t i = Take();
    Node& n = at(i);
    n.set_deadline(Node::kSentinel);
    n.eprev = n.enext = i;
    return i;
  }

  // Marks entry i removed: Gets that find it treat it as absent, and its
  // key and value stay until Free.
  void Retire(std::uint32_t i) {
    TW_DCHECK(at(i).has_value());
    at(i).deadline.store(Node::kRetired, std::memory_order_release);
  }

  // Destroys node i's key and value (if it has them) and puts it on the
  // free list. No Get may still be reading it.
  void Free(std::uint32_t i) {
    Node& n = at(i);
    TW_DCHECK(n.deadline_now() != Node::kFree);  // not freed twice
    if (n.has_value()) {
      n.key().~K();
      n.value().~V();
    }
    n.Reset();
    n.next = free_;
    free_ = i;
  }

  // Destroys every node's key and value and returns all memory at once: no
  // Get may be reading (the cache is being destroyed).
  void DestroyAll() {
    DestroyValues();
    chunks_.clear();
    chunks_.shrink_to_fit();
    dir_owner_.reset();
    dir_.store(nullptr, std::memory_order_relaxed);
    extent_ = 0;
    free_ = kCacheNil;
  }

  // Empties a pool that holds no entry and no retired node: its chunks and
  // directory go to `retired` (freed once no Get can be reading them).
  void RetireAll(std::vector<std::shared_ptr<void>>& retired) {
    DestroyValues();  // sentinels only: no key or value
    for (auto& c : chunks_) retired.emplace_back(std::move(c));
    chunks_.clear();
    chunks_.shrink_to_fit();
    if (dir_owner_ != nullptr) retired.emplace_back(std::move(dir_owner_));
    dir_.store(nullptr, std::memory_order_release);
    extent_ = 0;
    free_ = kCacheNil;
  }

  // Moves the directories that growth replaced to `retired`.
  void TakeRetired(std::vector<std::shared_ptr<void>>& retired) {
    for (auto& d : retired_dirs_) retired.emplace_back(std::move(d));
    retired_dirs_.clear();
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
      TW_INVARIANT(at(i).deadline_now() == Node::kFree, "CachePool: free list ",
                   "holds node ", i, ", in use");
      TW_INVARIANT(!listed[i], "CachePool: node ", i,
                   " is on the free list twice");
      listed[i] = true;
    }
    for (std::uint32_t i = 0; i < extent_; ++i) {
      TW_INVARIANT(listed[i] || at(i).deadline_now() != Node::kFree,
                   "CachePool: free node ", i, " is not on the free list");
    }
    return absl::OkStatus();
  }

 private:
  std::uint32_t Take() {
    if (free_ != kCacheNil) {
      const std::uint32_t i = free_;
      TW_DCHECK(at(i).deadline_now() == Node::kFree);
      free_ = at(i).next;
      at(i).next = kCacheNil;
      return i;
    }
    if ((extent_ & (kChunk - 1)) == 0) AddChunk();
    return extent_++;
  }

  // Gets find chunks through the directory; a full one is copied into one
  // twice its size, published, and the old kept until no Get can be
  // reading it.
  struct Directory {
    explicit Directory(std::size_t n)
        : capacity(n), chunks(new std::atomic<Node*>[n]()) {}
    const std::size_t capacity;
    const std::unique_ptr<std::atomic<Node*>[]> chunks;
  };
  void AddChunk() {
    auto chunk = std::make_unique<Node[]>(kChunk);
    const std::size_t k = chunks_.size();
    if (dir_owner_ == nullptr || k == dir_owner_->capacity) {
      auto bigger = std::make_shared<Directory>(std::max<std::size_t>(
          16, dir_owner_ == nullptr ? 0 : 2 * dir_owner_->capacity));
      for (std::size_t j = 0; j < k; ++j) {
        bigger->chunks[j].store(chunks_[j].get(), std::memory_order_relaxed);
      }
      dir_.store(bigger.get(), std::memory_order_release);
      if (dir_owner_ != nullptr) retired_dirs_.push_back(std::move(dir_owner_));
      dir_owner_ = std::move(bigger);
    }
    chunks_.reserve(k + 1);
    dir_owner_->chunks[k].store(chunk.get(), std::memory_order_release);
    chunks_.push_back(std::move(chunk));
  }
  void DestroyValues() {
    for (std::uint32_t i = 0; i < extent_; ++i) {
      Node& n = at(i);
      if (n.has_value()) {
        n.key().~K();
        n.value().~V();
        n.set_deadline(Node::kFree);
      }
    }
  }

  std::vector<std::unique_ptr<Node[]>> chunks_;
  std::shared_ptr<Directory> dir_owner_;
  std::atomic<Directory*> dir_{nullptr};
  std::vector<std::shared_ptr<void>> retired_dirs_;
  std::uint32_t extent_ = 0;
  std::uint32_t free_ = kCacheNil;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
