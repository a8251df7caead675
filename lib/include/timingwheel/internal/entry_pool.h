// The wheel's entries: a pool addressed by 32-bit index.
#ifndef TIMINGWHEEL_INTERNAL_ENTRY_POOL_H_
#define TIMINGWHEEL_INTERNAL_ENTRY_POOL_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "timingwheel/internal/large_alloc.h"

namespace timingwheel {
namespace internal {

// Holds Entry objects in chunks that never move, so an index stays valid
// for an entry's whole life and a link between entries is 4 bytes, not 8.
// A freed index goes on a free list threaded through Entry::next and is
// handed out again first; the pool never shrinks (until Clear, which keeps
// the chunks for reuse).
//
// Chunks: the first kChunksPerSlab are allocated one by one, so a small
// wheel stays small; later ones are cut from slabs of kChunksPerSlab chunks,
// which LargeAllocate puts on huge pages (with 32-byte entries a slab is
// exactly one 2 MiB page).
//
// The pool stores bytes, not objects: it never constructs or destroys an
// Entry's members. Entry must be trivially destructible apart from what its
// owner destroys by hand, and have a std::uint32_t member `next`.
template <typename Entry>
class EntryPool {
 public:
  // What Allocate never returns: the "no entry" link value.
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  // Indices stay below 2^31, so that links can use the top bit as a tag.
  static constexpr std::uint32_t kMaxEntries = 0x7FFFFFFFu;

  EntryPool() = default;
  ~EntryPool() {
    for (std::size_t c = 0; c < chunks_.size(); ++c) FreeChunk(c);
  }
  EntryPool(const EntryPool&) = delete;
  EntryPool& operator=(const EntryPool&) = delete;

  Entry& At(std::uint32_t i) {
    return chunks_[i >> kChunkBits][i & (kChunkSize - 1)];
  }
  const Entry& At(std::uint32_t i) const {
    return chunks_[i >> kChunkBits][i & (kChunkSize - 1)];
  }

  // True if i was ever handed out (so At(i) is memory of the pool): lets a
  // caller prefetch through a link that may be stale, kNil or tagged.
  bool Holds(std::uint32_t i) const { return i < used_; }

  // Makes sure the next Allocate does not allocate memory. Throws
  // std::bad_alloc, changing nothing, when memory or indices run out.
  // Amortized O(1); a new slab costs one LargeAllocate.
  void ReserveOne() {
    if (free_head_ != kNil || used_ < chunks_.size() * kChunkSize) return;
    if (used_ >= kMaxEntries) throw std::bad_alloc();
    const std::size_t c = chunks_.size();
    chunks_.reserve(c + 1);
    Entry* chunk;
    if (c < kChunksPerSlab) {
      chunk = static_cast<Entry*>(LargeAllocate(kChunkBytes, alignof(Entry)));
    } else if (c % kChunksPerSlab == 0) {
      chunk = static_cast<Entry*>(
          LargeAllocate(kChunkBytes * kChunksPerSlab, alignof(Entry)));
    } else {
      chunk = chunks_[c - 1] + kChunkSize;  // the next one of this slab
    }
    chunks_.push_back(chunk);
  }

  // An unused index; call ReserveOne first. O(1).
  std::uint32_t Allocate() {
    if (free_head_ != kNil) {
      const std::uint32_t i = free_head_;
      free_head_ = At(i).next;
      return i;
    }
    return used_++;
  }

  // Returns i to the pool; the caller has destroyed what it constructed.
  void Free(std::uint32_t i) {
    At(i).next = free_head_;
    free_head_ = i;
  }

  // Forgets every entry (the caller has destroyed them); keeps the memory.
  void Clear() {
    free_head_ = kNil;
    used_ = 0;
  }

  // Bytes held: the chunks and their table.
  std::size_t MemoryBytes() const {
    return chunks_.size() * kChunkBytes +
           chunks_.capacity() * sizeof(chunks_[0]);
  }

 private:
  static constexpr int kChunkBits = 12;
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr std::size_t kChunksPerSlab = 16;
  static constexpr std::size_t kChunkBytes = kChunkSize * sizeof(Entry);
  // At() splits an index by shifting and masking; a slab's chunks are
  // addressed by c % kChunksPerSlab.
  static_assert(std::has_single_bit(kChunkSize));
  static_assert(std::has_single_bit(kChunksPerSlab));
  static_assert(std::uint64_t{kMaxEntries} + 1 <= std::uint64_t{kChunkSize}
                                                      << (32 - kChunkBits),
                "every index below kMaxEntries must name a chunk");

  void FreeChunk(std::size_t c) {
    if (c < kChunksPerSlab) {
      LargeFree(chunks_[c], kChunkBytes, alignof(Entry));
    } else if (c % kChunksPerSlab == 0) {
      LargeFree(chunks_[c], kChunkBytes * kChunksPerSlab, alignof(Entry));
    }
  }

  std::vector<Entry*> chunks_;  // kChunkSize entries each
  std::uint32_t used_ = 0;      // indices ever handed out
  std::uint32_t free_head_ = kNil;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_ENTRY_POOL_H_
