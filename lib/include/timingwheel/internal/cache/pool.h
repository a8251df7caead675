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
// the shard is empty (CacheShard::Finish). EntryPool's shrink in
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
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/node.h"
#include "timingwheel/internal/cache/retired.h"
#include "timingwheel/internal/cache/schedule_point.h"

namespace timingwheel {
namespace internal {

// Nodes in chunks of kChunk, each node a CacheNode followed, when the pool
// has extras, by a CacheNodeExtra: a cache that neither bounds its size nor
// slides keeps no policy links and no time to live. Not thread-safe but for
// SharedAt and SharedExtra: the shard's lock guards the rest. Cost:
// Allocate and Free are O(1) (a new chunk now and then, a new directory
// when the chunks double); the slack is at most one chunk per pool.
template <typename K, typename V>
class CachePool {
 public:
  using Node = CacheNode<K, V>;
  using Extra = CacheNodeExtra;
  static constexpr std::uint32_t kChunkBits = 8;
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;

  explicit CachePool(bool extras)
      : extras_(extras),
        stride_(RoundUp(RoundUp(sizeof(Node), alignof(Extra)) +
                            (extras ? sizeof(Extra) : 0),
                        std::max(alignof(Node), alignof(Extra)))) {}
  CachePool(const CachePool&) = delete;
  CachePool& operator=(const CachePool&) = delete;
  ~CachePool() { DestroyAll(); }

  // Nodes ever allocated (live or free): indices below it are valid.
  std::uint32_t extent() const { return extent_; }
  // Whether nodes have a CacheNodeExtra.
  bool has_extras() const { return extras_; }
  // Bytes a node takes in its chunk.
  std::size_t stride() const { return stride_; }

  Node& at(std::uint32_t i) {
    return *NodeIn(chunks_[i >> kChunkBits].get(), i);
  }
  const Node& at(std::uint32_t i) const {
    return *NodeIn(chunks_[i >> kChunkBits].get(), i);
  }
  // Node i's extra part; only when has_extras().
  Extra& extra(std::uint32_t i) { return *ExtraOf(&at(i)); }
  const Extra& extra(std::uint32_t i) const {
    return *ExtraOf(const_cast<Node*>(&at(i)));
  }

  // Node i, for a Get without the lock, inside a read section, where i came
  // from the index: its chunk is published before any index slot names it.
  Node& SharedAt(std::uint32_t i) const {
    TW_CACHE_STEP("pool.shared_at.directory");
    const Directory* d = dir_.load(std::memory_order_acquire);
    TW_CACHE_STEP("pool.shared_at.chunk", d);
    std::byte* chunk =
        d->chunks[i >> kChunkBits].load(std::memory_order_acquire);
    return *NodeIn(chunk, i);
  }
  // The extra part of a node SharedAt returned; only when has_extras().
  static Extra& SharedExtra(Node& n) { return *ExtraOf(&n); }

  // An entry node holding the key (a K made from `key`) and the value
  // (deadline 0, ttl 0, unlinked). Throws what allocating a chunk or
  // constructing K or V throws, with nothing changed then.
  template <typename KeyArg>
  std::uint32_t Allocate(KeyArg&& key, V value) {
    const std::uint32_t i = Take();
    Node& n = at(i);
    try {
      ::new (static_cast<void*>(n.key_storage)) K(std::forward<KeyArg>(key));
      try {
        ::new (static_cast<void*>(n.value_storage)) V(std::move(value));
      } catch (...) {
        n.key().~K();
        throw;
      }
    } catch (...) {
      PutBack(i);
      throw;
    }
    n.deadline.Init(0);
    return i;
  }

  // A sentinel node: no key or value, its expiry links point to itself.
  std::uint32_t AllocateSentinel() {
    const std::uint32_t i = Take();
    Node& n = at(i);
    n.deadline.InitSentinel();
    n.eprev = n.enext = i;
    return i;
  }

  // Marks entry i removed (CacheDeadline::Retire, from its settled
  // deadline): Gets that find it treat it as absent, and its key and value
  // stay until Free. Returns the deadline it had (kRetired if it was
  // retired already). After it no one changes the value.
  std::int64_t Retire(std::uint32_t i) {
    CacheDeadline& word = at(i).deadline;
    for (;;) {
      std::int64_t d = word.Settled();
      if (d == Node::kRetired) return d;
      TW_DCHECK(CacheDeadline::IsDeadline(d));
      if (word.Retire(d)) return d;
    }
  }

  // Destroys node i's key and value (if it has them) and puts it on the
  // free list. No Get may still be reading it.
  void Free(std::uint32_t i) {
    Node& n = at(i);
    if (n.has_value()) {
      n.key().~K();
      n.value().~V();
      TW_CACHE_FREED(n.key_storage, sizeof n.key_storage);
      TW_CACHE_FREED(n.value_storage, sizeof n.value_storage);
    }
    n.deadline.Free();
    n.eprev = kCacheNil;
    if (extras_) {
      Extra& x = extra(i);
      x.tag.store(0, std::memory_order_relaxed);
      x.prev = x.next = kCacheNil;
    }
    n.enext = free_;
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
  // directory are retired (TakeRetired; freed once no Get can be reading
  // them). May throw std::bad_alloc (nothing changes then).
  void RetireAll() {
    retired_.reserve(retired_.size() + chunks_.size() + 1);
    DestroyValues();  // sentinels only: no key or value
    for (auto& c : chunks_) retired_.push_back(BlockOf(std::move(c)));
    chunks_.clear();
    chunks_.shrink_to_fit();
    if (dir_owner_ != nullptr) {
      retired_.push_back(MakeCacheBlock(std::move(dir_owner_)));
    }
    TW_CACHE_STEP("pool.unpublish");
    dir_.store(nullptr, std::memory_order_release);
    extent_ = 0;
    free_ = kCacheNil;
  }

  // The directories that growth replaced and the chunks RetireAll gave
  // back: how many, and each handed to take(CacheBlock) (never throwing)
  // and forgotten here.
  std::size_t retired_count() const { return retired_.size(); }
  template <typename Take>
  void TakeRetired(const Take& take) {
    for (auto& b : retired_) take(std::move(b));
    retired_.clear();
  }

  // The first broken invariant, or OK: the chunks hold the extent; the free
  // list holds exactly the free nodes (deadline kFree), each once, all
  // below the extent. O(extent); for tests and checking builds.
  absl::Status CheckInvariants() const {
    TW_INVARIANT(chunks_.size() == (std::size_t{extent_} + kChunk - 1) / kChunk,
                 "CachePool: ", chunks_.size(), " chunks for ", extent_,
                 " nodes");
    std::vector<bool> listed(extent_);
    for (std::uint32_t i = free_; i != kCacheNil; i = at(i).enext) {
      TW_INVARIANT(i < extent_, "CachePool: free list holds ", i,
                   ", not below the extent ", extent_);
      TW_INVARIANT(at(i).deadline.Peek() == Node::kFree,
                   "CachePool: free list ", "holds node ", i, ", in use");
      TW_INVARIANT(!listed[i], "CachePool: node ", i,
                   " is on the free list twice");
      listed[i] = true;
    }
    for (std::uint32_t i = 0; i < extent_; ++i) {
      TW_INVARIANT(listed[i] || at(i).deadline.Peek() != Node::kFree,
                   "CachePool: free node ", i, " is not on the free list");
    }
    return absl::OkStatus();
  }

 private:
  std::uint32_t Take() {
    if (free_ != kCacheNil) {
      const std::uint32_t i = free_;
      TW_DCHECK(at(i).deadline.Peek() == Node::kFree);
      free_ = at(i).enext;
      at(i).enext = kCacheNil;
      return i;
    }
    if ((extent_ & (kChunk - 1)) == 0) AddChunk();
    return extent_++;
  }
  // Gives back a node Take just handed out, never published.
  void PutBack(std::uint32_t i) {
    at(i).enext = free_;
    free_ = i;
  }

  // Gets find chunks through the directory; a full one is copied into one
  // twice its size, published, and the old kept until no Get can be
  // reading it.
  struct Directory {
    explicit Directory(std::size_t n)
        : capacity(n), chunks(new std::atomic<std::byte*>[n]()) {}
    const std::size_t capacity;
    const std::unique_ptr<std::atomic<std::byte*>[]> chunks;
  };
  // A chunk's memory: kChunk nodes of stride_ bytes, each a Node then (with
  // extras) an Extra, constructed when the chunk is made. Both are trivially
  // destructible (key and value are destroyed by hand), so the chunk is
  // only freed.
  // Chunks start on a cache line: a 32- or 64-byte node never straddles
  // two.
  static constexpr std::size_t kAlign =
      std::max<std::size_t>({64, alignof(Node), alignof(Extra)});
  struct ChunkDelete {
    void operator()(std::byte* p) const {
      ::operator delete (p, std::align_val_t{kAlign});
    }
  };
  using Chunk = std::unique_ptr<std::byte[], ChunkDelete>;
  static CacheBlock BlockOf(Chunk chunk) {
    return CacheBlock(chunk.release(), [](void* p) {
      ::operator delete (p, std::align_val_t{kAlign});
    });
  }
  static_assert(std::is_trivially_destructible_v<Node> &&
                std::is_trivially_destructible_v<Extra>);
  static constexpr std::size_t RoundUp(std::size_t n, std::size_t a) {
    return (n + a - 1) / a * a;
  }
  Node* NodeIn(std::byte* chunk, std::uint32_t i) const {
    return std::launder(reinterpret_cast<Node*>(
        chunk + std::size_t{i & (kChunk - 1)} * stride_));
  }
  static Extra* ExtraOf(Node* n) {
    return std::launder(
        reinterpret_cast<Extra*>(reinterpret_cast<std::byte*>(n) +
                                 RoundUp(sizeof(Node), alignof(Extra))));
  }
  Chunk MakeChunk() {
    Chunk chunk(static_cast<std::byte*>(
        ::operator new (stride_* kChunk, std::align_val_t{kAlign})));
    for (std::uint32_t j = 0; j < kChunk; ++j) {
      std::byte* at = chunk.get() + std::size_t{j} * stride_;
      ::new (static_cast<void*>(at)) Node();
      if (extras_)
        ::new (static_cast<void*>(ExtraOf(reinterpret_cast<Node*>(at))))
            Extra();
    }
    return chunk;
  }
  // Everything that can throw comes before the directory is published.
  void AddChunk() {
    Chunk chunk = MakeChunk();
    const std::size_t k = chunks_.size();
    chunks_.reserve(k + 1);
    if (dir_owner_ == nullptr || k == dir_owner_->capacity) {
      auto bigger = std::make_unique<Directory>(std::max<std::size_t>(
          16, dir_owner_ == nullptr ? 0 : 2 * dir_owner_->capacity));
      for (std::size_t j = 0; j < k; ++j) {
        bigger->chunks[j].store(chunks_[j].get(), std::memory_order_relaxed);
      }
      retired_.reserve(retired_.size() + 1);
      TW_CACHE_STEP("pool.publish_directory");
      dir_.store(bigger.get(), std::memory_order_release);
      if (dir_owner_ != nullptr) {
        retired_.push_back(MakeCacheBlock(std::move(dir_owner_)));
      }
      dir_owner_ = std::move(bigger);
    }
    TW_CACHE_STEP("pool.publish_chunk", dir_owner_.get());
    dir_owner_->chunks[k].store(chunk.get(), std::memory_order_release);
    chunks_.push_back(std::move(chunk));
  }
  void DestroyValues() {
    for (std::uint32_t i = 0; i < extent_; ++i) {
      Node& n = at(i);
      if (n.has_value()) {
        n.key().~K();
        n.value().~V();
        n.deadline.Free();
      }
    }
  }

  const bool extras_;
  const std::size_t stride_;
  std::vector<Chunk> chunks_;
  std::unique_ptr<Directory> dir_owner_;
  std::atomic<Directory*> dir_{nullptr};
  std::vector<CacheBlock> retired_;
  std::uint32_t extent_ = 0;
  std::uint32_t free_ = kCacheNil;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_POOL_H_
