// A cache shard's index: key -> node, as an open-addressing table of 8-byte
// slots (32 bits of the key's hash, 32-bit node index). The key itself lives
// once, in its node. Dependency-free, so the public header links with the
// library's own Abseil modules.
//
// Why a second table beside the wheel's KeyIndex (wheel/key_index.h), the
// same kind: a shard needs less. It is used under the shard's lock, where a
// resize may rehash at once (O(capacity), amortized O(1)) instead of moving
// the words in bounded steps between two tables (a Get that misses during
// the resize asks again under the lock); nothing prefetches its lines; and
// the cache's hash is fully mixed (MixHash, base/hash.h), so the tag alone
// places a key. KeyIndex would bring its two-table resize, its big-block
// memory and its prefetching into every shard for no use.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_INDEX_H_
#define TIMINGWHEEL_INTERNAL_CACHE_INDEX_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/node.h"
#include "timingwheel/internal/cache/retired.h"
#include "timingwheel/internal/cache/schedule_point.h"

namespace timingwheel {
namespace internal {

// Linear probing with backward-shift deletion (no tombstones), kept between
// 1/8 and 3/4 full: it grows by half when fuller (so it is at least half
// full after growing: 11 to 16 bytes an entry) and shrinks when a mass
// removal leaves it emptier, so memory follows the live entries. A slot's
// home is its 32 hash bits scaled to the capacity, so a resize never hashes
// a key again. Writers call
// everything but FindShared under the shard's lock; Gets call FindShared
// without it, inside a read section (epoch.h). Slots are atomic words
// written with release, so a Get that reads one sees the node it names
// fully built; a resized table is published whole and the old one kept
// (TakeRetired) until no Get can be reading it. Cost: O(1) expected per
// call (a probe compares keys only when 32 hash bits match); a resize is
// O(capacity), amortized O(1).
class CacheIndex {
 public:
  CacheIndex() = default;
  CacheIndex(const CacheIndex&) = delete;
  CacheIndex& operator=(const CacheIndex&) = delete;

  std::size_t size() const { return size_; }
  std::size_t capacity() const {
    return table_ == nullptr ? 0 : table_->capacity;
  }

  // The node with hash bits `tag` for which is_key(node) holds, or kCacheNil.
  template <typename IsKey>
  std::uint32_t Find(std::uint32_t tag, const IsKey& is_key) const {
    if (table_ == nullptr) return kCacheNil;
    const Table& t = *table_;
    for (std::size_t i = t.Home(tag);; i = t.Next(i)) {
      const std::uint64_t w = t.Load(i, std::memory_order_relaxed);
      if (NodeOf(w) == kCacheNil) return kCacheNil;
      if (TagOf(w) == tag && is_key(NodeOf(w))) return NodeOf(w);
    }
  }

  // Find without the lock, while writers change the table. A node it
  // returns held the key at the moment its slot was read. kCacheNil with
  // `absent` true: the key was in no slot while it looked. kCacheNil with
  // `absent` false: it cannot tell (an Erase was shifting the key's run,
  // which can carry a key past the probe), and the caller asks again under
  // the lock. A resize cannot hide a key: the table it probes is the whole
  // index as it was when published, and changes after that are
  // concurrent with the call.
  template <typename IsKey>
  std::uint32_t FindShared(std::uint32_t tag, const IsKey& is_key,
                           bool& absent) const {
    absent = false;
    TW_CACHE_STEP("index.shifts_begin");
    const std::uint32_t shifts = shifts_.load(std::memory_order_acquire);
    TW_CACHE_STEP("index.published");
    const Table* t = published_.load(std::memory_order_acquire);
    // At most one lap: slots read at different moments may show no empty
    // one.
    for (std::size_t i = t == nullptr ? 0 : t->Home(tag), k = 0;
         t != nullptr && k < t->capacity; i = t->Next(i), ++k) {
      TW_CACHE_STEP("index.slot", t);
      const std::uint64_t w = t->Load(i, std::memory_order_acquire);
      if (NodeOf(w) == kCacheNil) break;
      if (TagOf(w) == tag && is_key(NodeOf(w))) return NodeOf(w);
      if (k + 1 == t->capacity) return kCacheNil;  // a lap: cannot tell
    }
    // A sequence lock's read side: no Erase began or ended meanwhile.
    std::atomic_thread_fence(std::memory_order_acquire);
    TW_CACHE_STEP("index.shifts_end");
    absent =
        (shifts & 1) == 0 && shifts_.load(std::memory_order_relaxed) == shifts;
    return kCacheNil;
  }

  // Makes room for one more node, growing the table if it would be too
  // full: after it, one Insert allocates nothing and cannot throw. May
  // throw std::bad_alloc when growing (nothing changes then).
  void ReserveOne() {
    if ((size_ + 1) * 4 > capacity() * 3) {
      Resize(table_ == nullptr ? kMinCapacity : capacity() * 3 / 2);
    }
  }

  // Adds `node` (whose key is not present) under `tag`. May throw
  // std::bad_alloc when growing (nothing changes then), never after
  // ReserveOne.
  void Insert(std::uint32_t tag, std::uint32_t node) {
    ReserveOne();
    Place(*table_, Word(tag, node));
    ++size_;
  }

  // Replaces `old_node`, stored under `tag`, by `new_node` in one store: a
  // Get sees one or the other, never neither.
  void Replace(std::uint32_t tag, std::uint32_t old_node,
               std::uint32_t new_node) {
    Table& t = *table_;
    std::size_t i = t.Home(tag);
    while (NodeOf(t.Load(i, std::memory_order_relaxed)) != old_node) {
      i = t.Next(i);
    }
    t.Store(i, Word(tag, new_node));
  }

  // Removes `node`, stored under `tag`; a no-op if absent.
  void Erase(std::uint32_t tag, std::uint32_t node) {
    if (table_ == nullptr) return;
    Table& t = *table_;
    std::size_t i = t.Home(tag);
    while (NodeOf(t.Load(i, std::memory_order_relaxed)) != node) {
      if (NodeOf(t.Load(i, std::memory_order_relaxed)) == kCacheNil) return;
      i = t.Next(i);
    }
    // Shift later members of the cluster back into the hole, unless their
    // home lies cyclically in (hole, j]; odd shifts_ meanwhile tells
    // FindShared that a miss may be a key carried past its probe.
    const std::uint32_t shifts = shifts_.load(std::memory_order_relaxed);
    shifts_.store(shifts + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    TW_CACHE_STEP("index.erase_shift");
    for (std::size_t j = t.Next(i);; j = t.Next(j)) {
      const std::uint64_t w = t.Load(j, std::memory_order_relaxed);
      if (NodeOf(w) == kCacheNil) break;
      const std::size_t home = t.Home(TagOf(w));
      const bool stays =
          i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        t.Store(i, w);
        i = j;
      }
    }
    t.Store(i, kEmpty);
    TW_CACHE_STEP("index.erase_end");
    shifts_.store(shifts + 2, std::memory_order_release);
    --size_;
    if (capacity() > kMinCapacity && size_ * 8 < capacity()) {
      // Shrinking is only memory given back: without the memory to build
      // the smaller table, the index stays as it is, and Erase never throws.
      try {
        Resize(std::max(kMinCapacity, size_ * 2));
      } catch (const std::bad_alloc&) {
      }
    }
  }

  // Calls fn(node) for every node.
  template <typename Fn>
  void ForEach(const Fn& fn) const {
    if (table_ == nullptr) return;
    for (std::size_t i = 0; i < table_->capacity; ++i) {
      const std::uint64_t w = table_->Load(i, std::memory_order_relaxed);
      if (NodeOf(w) != kCacheNil) fn(NodeOf(w));
    }
  }

  // Removes everything; the table goes to the retired ones. May throw
  // std::bad_alloc (nothing changes then).
  void Clear() {
    retired_.reserve(retired_.size() + 1);
    Retire();
    size_ = 0;
  }

  // The tables that resizes and Clear replaced: how many, and each handed
  // to take(CacheBlock) (never throwing) and forgotten here.
  std::size_t retired_count() const { return retired_.size(); }
  template <typename Take>
  void TakeRetired(const Take& take) {
    for (auto& t : retired_) take(MakeCacheBlock(std::move(t)));
    retired_.clear();
  }

  // The first broken invariant, or OK: no table, or at least kMinCapacity
  // slots, 1/8 to 3/4 full (emptier only at
  // kMinCapacity); size() counts the nodes, each held once and reached by
  // a lookup from its home (no empty slot between); the published table is
  // the writers'. O(capacity log capacity); for tests and checking builds.
  absl::Status CheckInvariants() const {
    TW_INVARIANT(published_.load(std::memory_order_relaxed) == table_.get(),
                 "CacheIndex: Gets read another table than the writers'");
    const std::size_t cap = capacity();
    if (cap == 0) {
      TW_INVARIANT(size_ == 0, "CacheIndex: size ", size_, " without a table");
      return absl::OkStatus();
    }
    const Table& t = *table_;
    TW_INVARIANT(cap >= kMinCapacity, "CacheIndex: ", cap, " slots");
    TW_INVARIANT(
        size_ * 4 <= cap * 3 && (cap == kMinCapacity || size_ * 8 >= cap),
        "CacheIndex: ", size_, " nodes in ", cap, " slots");
    std::size_t last_empty = cap;
    for (std::size_t i = 0; i < cap; ++i) {
      if (NodeOf(t.Load(i, std::memory_order_relaxed)) == kCacheNil) {
        last_empty = i;
      }
    }
    TW_INVARIANT(last_empty != cap, "CacheIndex: no empty slot");
    // From just after an empty slot, round, so that every run is seen
    // whole.
    const std::size_t start = t.Next(last_empty);
    std::size_t run_start = start;
    std::vector<std::uint32_t> nodes;
    for (std::size_t k = 0; k < cap; ++k) {
      const std::size_t i = (start + k) % cap;
      const std::uint64_t w = t.Load(i, std::memory_order_relaxed);
      if (NodeOf(w) == kCacheNil) {
        run_start = t.Next(i);
        continue;
      }
      nodes.push_back(NodeOf(w));
      const std::size_t home = t.Home(TagOf(w));
      TW_INVARIANT((i + cap - home) % cap <= (i + cap - run_start) % cap,
                   "CacheIndex: node ", NodeOf(w), " at ", i, " (home ", home,
                   ") lies past an empty slot after its home");
    }
    TW_INVARIANT(nodes.size() == size_, "CacheIndex: ", nodes.size(),
                 " nodes, size ", size_);
    std::sort(nodes.begin(), nodes.end());
    const auto twice = std::adjacent_find(nodes.begin(), nodes.end());
    TW_INVARIANT(twice == nodes.end(), "CacheIndex: node ",
                 twice == nodes.end() ? 0 : *twice, " is held twice");
    return absl::OkStatus();
  }

 private:
  // A slot: the node in the high 32 bits (kCacheNil = empty), the key's 32
  // hash bits in the low.
  static constexpr std::uint64_t kEmpty = std::uint64_t{kCacheNil} << 32;
  static constexpr std::uint64_t Word(std::uint32_t tag, std::uint32_t node) {
    return (std::uint64_t{node} << 32) | tag;
  }
  static constexpr std::uint32_t NodeOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w >> 32);
  }
  static constexpr std::uint32_t TagOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w);
  }

  struct Table {
    explicit Table(std::size_t capacity)
        : capacity(capacity), slots(new std::atomic<std::uint64_t>[capacity]) {
      for (std::size_t i = 0; i < capacity; ++i) {
        slots[i].store(kEmpty, std::memory_order_relaxed);
      }
    }
    std::uint64_t Load(std::size_t i, std::memory_order order) const {
      return slots[i].load(order);
    }
    void Store(std::size_t i, std::uint64_t w) {
      TW_CACHE_STEP("index.store");
      slots[i].store(w, std::memory_order_release);
    }
    // A tag's home slot: its 32 bits scaled to the capacity, which need
    // not be a power of two (so the table grows by half, and stays fuller).
    std::size_t Home(std::uint32_t tag) const {
      return static_cast<std::size_t>((std::uint64_t{tag} * capacity) >> 32);
    }
    std::size_t Next(std::size_t i) const {
      return i + 1 == capacity ? 0 : i + 1;
    }
    const std::size_t capacity;
    const std::unique_ptr<std::atomic<std::uint64_t>[]> slots;
  };
  static constexpr std::size_t kMinCapacity = 16;

  static void Place(Table& t, std::uint64_t w) {
    std::size_t i = t.Home(TagOf(w));
    while (NodeOf(t.Load(i, std::memory_order_relaxed)) != kCacheNil) {
      i = t.Next(i);
    }
    t.Store(i, w);
  }
  // Builds the new table whole, then publishes it.
  void Resize(std::size_t capacity) {
    auto bigger = std::make_unique<Table>(capacity);
    if (table_ != nullptr) {
      for (std::size_t i = 0; i < table_->capacity; ++i) {
        const std::uint64_t w = table_->Load(i, std::memory_order_relaxed);
        if (NodeOf(w) != kCacheNil) Place(*bigger, w);
      }
    }
    retired_.reserve(retired_.size() + 1);
    TW_CACHE_STEP("index.publish");
    published_.store(bigger.get(), std::memory_order_release);
    if (table_ != nullptr) retired_.push_back(std::move(table_));
    table_ = std::move(bigger);
  }
  // Unpublishes the table and keeps it for TakeRetired.
  void Retire() {
    published_.store(nullptr, std::memory_order_release);
    if (table_ != nullptr) retired_.push_back(std::move(table_));
  }

  std::unique_ptr<Table> table_;                  // the writers'
  std::atomic<const Table*> published_{nullptr};  // the Gets'
  // Erases begun and ended: odd while one shifts slots (FindShared).
  std::atomic<std::uint32_t> shifts_{0};
  std::vector<std::unique_ptr<Table>> retired_;
  std::size_t size_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_INDEX_H_
