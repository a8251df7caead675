// A cache shard's index: key -> node, as an open-addressing table of 8-byte
// slots (32 bits of the key's hash, 32-bit node index). The key itself lives
// once, in its node. Dependency-free, so the public header links with the
// library's own Abseil modules.
//
// Why a second table beside the wheel's KeyIndex (wheel/key_index.h), the
// same kind: a shard needs less. It is used under the shard's lock, where a
// resize may rehash at once (O(capacity), amortized O(1)) instead of moving
// the words in bounded steps between two tables; nothing prefetches its
// lines; and the cache's hash is fully mixed (MixHash, base/hash.h), so a
// home is the tag's low bits, with no multiply. KeyIndex would bring its
// two-table resize, its big-block memory and its prefetching into every
// shard for no use.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_INDEX_H_
#define TIMINGWHEEL_INTERNAL_CACHE_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/pool.h"

namespace timingwheel {
namespace internal {

// Linear probing with backward-shift deletion (no tombstones), kept between
// 1/8 and 3/4 full: it doubles when fuller and shrinks when a mass removal
// leaves it emptier, so memory follows the live entries. A slot's home is
// its hash bits, so growing and shrinking never rehash a key. Not
// thread-safe: the shard's lock guards it. Cost: O(1) expected per call
// (a probe compares keys only when 32 hash bits match); a resize is
// O(capacity), amortized O(1).
class CacheIndex {
 public:
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }

  // The node with hash bits `tag` for which is_key(node) holds, or kCacheNil.
  template <typename IsKey>
  std::uint32_t Find(std::uint32_t tag, const IsKey& is_key) const {
    if (slots_.empty()) return kCacheNil;
    for (std::size_t i = tag & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.node == kCacheNil) return kCacheNil;
      if (s.tag == tag && is_key(s.node)) return s.node;
    }
  }

  // Adds `node` (whose key is not present) under `tag`. May throw
  // std::bad_alloc when growing (nothing changes then).
  void Insert(std::uint32_t tag, std::uint32_t node) {
    if ((size_ + 1) * 4 > slots_.size() * 3) {
      Resize(slots_.empty() ? kMinCapacity : slots_.size() * 2);
    }
    Place(Slot{tag, node});
    ++size_;
  }

  // Removes `node`, stored under `tag`; a no-op if absent.
  void Erase(std::uint32_t tag, std::uint32_t node) {
    if (slots_.empty()) return;
    std::size_t i = tag & mask_;
    while (slots_[i].node != node) {
      if (slots_[i].node == kCacheNil) return;
      i = (i + 1) & mask_;
    }
    // Shift later members of the cluster back into the hole, unless their
    // home lies cyclically in (hole, j].
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      const Slot& s = slots_[j];
      if (s.node == kCacheNil) break;
      const std::size_t home = s.tag & mask_;
      const bool stays =
          i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (!stays) {
        slots_[i] = s;
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    if (slots_.size() > kMinCapacity && size_ * 8 < slots_.size()) {
      std::size_t cap = kMinCapacity;
      while (size_ * 2 > cap) cap *= 2;
      Resize(cap);
    }
  }

  // Calls fn(node) for every node.
  template <typename Fn>
  void ForEach(const Fn& fn) const {
    for (const Slot& s : slots_) {
      if (s.node != kCacheNil) fn(s.node);
    }
  }

  // Removes everything and returns the memory.
  void Clear() {
    std::vector<Slot>().swap(slots_);
    mask_ = 0;
    size_ = 0;
  }

  // The first broken invariant, or OK: no table, or a power of two of at
  // least kMinCapacity slots, 1/8 to 3/4 full (emptier only at
  // kMinCapacity); size() counts the nodes, each held once and reached by
  // a lookup from its home (no empty slot between). O(capacity log
  // capacity); for tests and checking builds.
  absl::Status CheckInvariants() const {
    const std::size_t cap = slots_.size();
    if (cap == 0) {
      TW_INVARIANT(size_ == 0 && mask_ == 0, "CacheIndex: size ", size_,
                   " without a table");
      return absl::OkStatus();
    }
    TW_INVARIANT(std::has_single_bit(cap) && cap >= kMinCapacity &&
                     mask_ == cap - 1,
                 "CacheIndex: ", cap, " slots, mask ", mask_);
    TW_INVARIANT(size_ * 4 <= cap * 3 &&
                     (cap == kMinCapacity || size_ * 8 >= cap),
                 "CacheIndex: ", size_, " nodes in ", cap, " slots");
    std::size_t last_empty = cap;
    for (std::size_t i = 0; i < cap; ++i) {
      if (slots_[i].node == kCacheNil) last_empty = i;
    }
    TW_INVARIANT(last_empty != cap, "CacheIndex: no empty slot");
    // From just after an empty slot, round, so that every run is seen
    // whole.
    const std::size_t start = (last_empty + 1) & mask_;
    std::size_t run_start = start;
    std::vector<std::uint32_t> nodes;
    for (std::size_t k = 0; k < cap; ++k) {
      const std::size_t i = (start + k) & mask_;
      const Slot& s = slots_[i];
      if (s.node == kCacheNil) {
        run_start = (i + 1) & mask_;
        continue;
      }
      nodes.push_back(s.node);
      const std::size_t home = s.tag & mask_;
      TW_INVARIANT(((i - home) & mask_) <= ((i - run_start) & mask_),
                   "CacheIndex: node ", s.node, " at ", i, " (home ", home,
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
  struct Slot {
    std::uint32_t tag = 0;
    std::uint32_t node = kCacheNil;
  };
  static constexpr std::size_t kMinCapacity = 16;

  void Place(Slot slot) {
    std::size_t i = slot.tag & mask_;
    while (slots_[i].node != kCacheNil) i = (i + 1) & mask_;
    slots_[i] = slot;
  }
  void Resize(std::size_t capacity) {
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    mask_ = capacity - 1;
    for (const Slot& s : old) {
      if (s.node != kCacheNil) Place(s);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_INDEX_H_
