// The wheel's entries: a pool addressed by 32-bit index, whose memory
// follows the live set.
//
// Why a second pool beside CachePool (cache/pool.h), also chunks addressed
// by 32-bit index: this one gives memory back while the wheel runs. A
// shrink relocates live entries with the owner's help, a bounded step a
// round on the loop thread, and frees whole slabs from LargeAllocate; it
// stores bytes for an Entry whose members the owner constructs, and keeps
// its free marks and free list in the entries' own prev and next. A cache
// shard's pool owns its nodes' keys and values and gives memory back only
// when the shard is empty, under the shard's lock: none of that machinery.
//
// Why over 450 lines: the free list, the lazy scan, the shrink and the
// resident block all move the same three marks (used_, scan_, limit_);
// split, a reader must hold both files to check any one of them.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_ENTRY_POOL_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_ENTRY_POOL_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/large_alloc.h"
#include "timingwheel/internal/base/resident_block.h"

namespace timingwheel {
namespace internal {

// Holds Entry objects in chunks that never move, so an index stays valid
// for an entry's whole life and a link between entries is 4 bytes, not 8.
//
// Contract. Entry has std::uint32_t members `prev` and `next`. While an
// entry is live (from Allocate to Free) both are the owner's, except that
// the owner never stores kFreeMark in prev; while it is free the pool owns
// both: prev = kFreeMark marks it free and next links the free list. The
// pool stores bytes, not objects: it never constructs or destroys an
// Entry's members, so Entry must be trivially destructible apart from what
// its owner destroys by hand.
//
// Allocating: ReserveOne (the only call that allocates memory or throws),
// then Allocate; Free gives an index back. A freed index is handed out
// again before a never-used one: last freed first while few are free, and
// otherwise from low indices up (below, Reuse in address order).
//
// Reuse in address order. Timers fire in deadline order, not in the order
// their entries were allocated, so a LIFO free list that a burst's firing
// has filled names entries scattered over the whole pool: the next burst's
// sets would each land on a random line and page, a cache and TLB miss
// apiece, where a fresh pool hands them out in order. So once the list has
// taken in half as many entries as were ever handed out, the pool drops it
// and looks for free entries from index 0 up instead (the lazy region
// below), which gives the next burst dense, ascending entries. The scan
// reads each index once per reordering, and a reordering needs used_ / 2
// frees first: at most two reads a free, in address order.
//
// Shrinking. The pool cannot move an entry (the owner's lists and key index
// name it), so it gives memory back with the owner's help, a bounded step
// at a time, between the owner's other calls:
//
//   if (pool.WantsShrink()) pool.StartShrink();
//   std::size_t budget = ...;  // indices the pool may look at this round
//   while (pool.Shrinking()) {
//     const std::uint32_t i = pool.NextToRelocate(budget);
//     if (i == kNil) break;  // budget spent, or the shrink ended
//     const std::uint32_t j = pool.Allocate();  // no ReserveOne needed
//     // Move entry i's contents to j; point its neighbours and its key
//     // index word at j.
//     pool.Free(i);
//   }
//
// StartShrink picks a kept index range [0, KeptEnd()) with room for about
// twice the live entries; NextToRelocate hands out the live entries above
// it, highest first; once none is left, it frees the chunks above the range.
// Allocate returns only kept indices meanwhile. If the live set grows back
// so that the kept range is full, the shrink ends (Allocate never fails
// because of a shrink), and the entries above simply stay.
//
// Chunks: the first kChunksPerSlab are allocated one by one, so a small
// wheel stays small; later ones are cut from slabs of kChunksPerSlab chunks
// (with 32-byte entries a slab is 2 MiB, one LargeAllocate). A shrink keeps
// whole slabs. With a ResidentBlock (UseResidentBlock), the pool asks it
// for its next chunk or slab ahead, and takes that block when it grows, so
// that another thread has faulted the memory in (base/resident_block.h).
template <typename Entry>
class EntryPool {
 public:
  // What Allocate never returns: the "no entry" link value.
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  // Indices stay below 2^31 - 1, so that links can use the top bit as a
  // tag and kFreeMark is never an index.
  static constexpr std::uint32_t kMaxEntries = 0x7FFFFFFFu;
  // A free entry's prev: neither an index nor a tagged list head (top bit).
  static constexpr std::uint32_t kFreeMark = 0x7FFFFFFFu;

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

  // True if At(i) is memory of the pool: i is below the high-water mark of
  // indices handed out, which only a shrink or Clear lowers. Lets a caller
  // prefetch through a link that may be stale, kNil or tagged.
  bool Holds(std::uint32_t i) const { return i < used_; }

  // Entries allocated and not freed.
  std::uint32_t Live() const { return live_; }

  // From now on the pool's next block comes from `block` when it is ready
  // there, and the pool says what it will need next; nullptr: never.
  // `block` outlives the pool's use of it. O(1).
  void UseResidentBlock(ResidentBlock* block) {
    resident_ = block;
    if (used_ >= want_at_) WantNextBlock();
  }

  // Makes sure the next Allocate does not allocate memory. Throws
  // std::bad_alloc, changing no entry, when memory or indices run out.
  // Amortized O(1); a new slab costs one LargeAllocate.
  void ReserveOne() {
    if (free_head_ != kNil || (scan_ == used_ && used_ < capacity_)) return;
    ReserveSlow();
  }

  // An unused index, with prev set to 0 (so it counts as live); call
  // ReserveOne first. O(1), except after StartShrink: see FindRoom.
  std::uint32_t Allocate() {
    std::uint32_t i = free_head_;
    if (i != kNil) {
      TW_DCHECK(At(i).prev == kFreeMark);
      free_head_ = At(i).next;
    } else if (scan_ == used_) {
      i = used_;
      TW_DCHECK(i < capacity_);  // ReserveOne came first
      scan_ = used_ = i + 1;
      if (i == want_at_) [[unlikely]]
        WantNextBlock();
    } else {
      i = AllocateLazy();
    }
    At(i).prev = 0;
    ++live_;
    return i;
  }

  // Returns i to the pool; the caller has destroyed what it constructed.
  void Free(std::uint32_t i) { Free(i, At(i)); }
  // The same, for a caller that holds the entry: e is At(i).
  void Free(std::uint32_t i, Entry& e) {
    static_assert(std::is_same_v<decltype(Entry::prev), std::uint32_t> &&
                  std::is_same_v<decltype(Entry::next), std::uint32_t>);
    TW_DCHECK(i < used_ && e.prev != kFreeMark);  // not freed twice
    e.prev = kFreeMark;
    // Above scan_ the mark is enough: the scan will find it.
    if (i < scan_) {
      e.next = free_head_;
      free_head_ = i;
      if (++listed_ >= ReorderAfter()) Reorder();
    }
    --live_;
  }

  // Forgets every entry (the caller has destroyed them) and ends a shrink.
  // Keeps the memory, since an owner that empties itself often refills;
  // WantsShrink then asks to give it back, and StartShrink does so at once
  // (there is nothing to relocate).
  void Clear() {
    free_head_ = kNil;
    used_ = 0;
    scan_ = 0;
    live_ = 0;
    limit_ = kNoLimit;
    listed_ = 0;
  }

  // Bytes held: the chunks and their table.
  std::size_t MemoryBytes() const {
    return chunks_.size() * kChunkBytes +
           chunks_.capacity() * sizeof(chunks_[0]);
  }

  // True if a shrink would give back most of the memory: the pool holds at
  // least kMinChunksToShrink chunks and fewer than a quarter of their
  // entries are live. A shrink keeps room for twice the live entries, so
  // the live set must halve before the next shrink and double before the
  // pool grows: it does not oscillate. False during a shrink. O(1).
  bool WantsShrink() const { return WouldShrinkWith(live_); }
  // WantsShrink's answer were only `live` entries live: for an owner that
  // could free some of its live entries first. O(1).
  bool WouldShrinkWith(std::size_t live) const {
    return limit_ == kNoLimit && chunks_.size() >= kMinChunksToShrink &&
           live * 4 < chunks_.size() * kChunkSize;
  }

  // True if i, below the high-water mark (Holds(i)), is allocated. O(1).
  bool InUse(std::uint32_t i) const { return At(i).prev != kFreeMark; }

  // Starts a shrink to room for about twice the live entries (at least one
  // chunk; the first kChunksPerSlab chunks one by one, beyond that whole
  // slabs). If nothing above that range is in use, frees the chunks at once
  // and does not start one. Does nothing during a shrink or when nothing
  // would be freed. O(chunks freed).
  void StartShrink() {
    if (limit_ != kNoLimit) return;
    const std::size_t keep = KeptChunks(live_);
    if (keep >= chunks_.size()) return;
    const auto end = static_cast<std::uint32_t>(keep * kChunkSize);
    if (used_ <= end) {
      ReleaseChunksFrom(keep);
      return;
    }
    // Entries above `end` must find free ones below it, which the free list
    // holds in no useful order: drop it and look for them from index 0 up.
    // Every free entry is marked, so none is lost.
    limit_ = end;
    free_head_ = kNil;
    scan_ = 0;
    listed_ = 0;
    top_ = used_;
  }

  // True from StartShrink until the shrink ends: done, or given up because
  // the live set grew back.
  bool Shrinking() const { return limit_ != kNoLimit; }

  // During a shrink, the end of the kept range: Allocate returns only
  // indices below it. kNil otherwise.
  std::uint32_t KeptEnd() const { return limit_; }

  // One move of a shrink. Returns a live index above the kept range, which
  // the caller moves to Allocate() and then frees (before any other call to
  // the pool but At); that Allocate needs no ReserveOne and returns a kept
  // index. Returns kNil when `budget` ran out (Shrinking() stays true: call
  // again in a later round), or when the shrink ended (Shrinking() is false):
  // either every entry above the kept range was free, and their chunks are
  // freed, or the kept range is full. Takes one from `budget` for each index
  // looked at, so a round costs O(budget) however the free entries lie,
  // plus O(chunks freed) at the end. Returns kNil when not shrinking.
  std::uint32_t NextToRelocate(std::size_t& budget) {
    while (limit_ != kNoLimit && top_ > limit_) {
      // First a destination, so that a budget of 1 still makes progress.
      if (free_head_ == kNil && !ScanForFree(limit_, budget)) {
        if (scan_ == limit_) limit_ = kNoLimit;  // nothing kept is free
        return kNil;
      }
      if (budget == 0) return kNil;
      --budget;
      const std::uint32_t i = top_ - 1;
      // A live i stays top_ - 1: the next call looks at it again and finds
      // it moved (free).
      if (At(i).prev != kFreeMark) return i;
      top_ = i;
    }
    if (limit_ != kNoLimit) FinishShrink();
    return kNil;
  }

  // The first of the invariants stated at the members below that does not
  // hold, or OK: chunks and capacity agree; scan_ <= used_ <= capacity_;
  // during a shrink scan_ <= limit_ <= top_ <= used_ and [top_, used_) is
  // free; the free list holds exactly the free indices below scan_, each
  // once; live + free = handed out. O(indices handed out); for tests and
  // checking builds.
  absl::Status CheckInvariants() const {
    TW_INVARIANT(capacity_ == std::min<std::size_t>(
                                  chunks_.size() * kChunkSize, kMaxEntries),
                 "EntryPool: capacity ", capacity_, " for ", chunks_.size(),
                 " chunks");
    TW_INVARIANT(scan_ <= used_ && used_ <= capacity_, "EntryPool: scan ",
                 scan_, ", used ", used_, ", capacity ", capacity_);
    if (limit_ != kNoLimit) {
      TW_INVARIANT(scan_ <= limit_ && limit_ < used_ && limit_ <= top_ &&
                       top_ <= used_ && limit_ % kChunkSize == 0,
                   "EntryPool: shrinking with scan ", scan_, ", limit ",
                   limit_, ", top ", top_, ", used ", used_);
      for (std::uint32_t i = top_; i < used_; ++i) {
        TW_INVARIANT(At(i).prev == kFreeMark, "EntryPool: index ", i,
                     " at or above top ", top_, " is live");
      }
    }
    std::vector<bool> listed(used_);
    for (std::uint32_t i = free_head_; i != kNil; i = At(i).next) {
      TW_INVARIANT(i < scan_, "EntryPool: free list holds index ", i,
                   ", not below scan ", scan_);
      TW_INVARIANT(At(i).prev == kFreeMark, "EntryPool: free list holds ",
                   "live index ", i);
      TW_INVARIANT(!listed[i], "EntryPool: index ", i,
                   " is on the free list twice");
      listed[i] = true;
    }
    std::uint32_t free = 0;
    for (std::uint32_t i = 0; i < used_; ++i) {
      if (At(i).prev != kFreeMark) continue;
      ++free;
      TW_INVARIANT(i >= scan_ || listed[i], "EntryPool: free index ", i,
                   " below scan ", scan_, " is not on the free list");
    }
    TW_INVARIANT(std::uint64_t{live_} + free == used_, "EntryPool: ", live_,
                 " live + ", free, " free indices, ", used_, " handed out");
    return absl::OkStatus();
  }

 private:
  static constexpr int kChunkBits = 12;
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr std::size_t kChunksPerSlab = 16;
  static constexpr std::size_t kChunkBytes = kChunkSize * sizeof(Entry);
  // A pool this small is not worth shrinking: a wheel that empties and
  // refills would free and reallocate its chunks each time.
  static constexpr std::size_t kMinChunksToShrink = 4;
  // limit_ outside a shrink: above every index.
  static constexpr std::uint32_t kNoLimit = kNil;
  // At() splits an index by shifting and masking; a slab's chunks are
  // addressed by c % kChunksPerSlab.
  static_assert(std::has_single_bit(kChunkSize));
  static_assert(std::has_single_bit(kChunksPerSlab));
  static_assert(std::uint64_t{kMaxEntries} + 1 <= std::uint64_t{kChunkSize}
                                                      << (32 - kChunkBits),
                "every index below kMaxEntries must name a chunk");

  // Chunks a shrink keeps for `live` entries: room for twice as many, at
  // least one chunk, ending where an allocation ends.
  static std::size_t KeptChunks(std::uint32_t live) {
    std::size_t c = (2 * std::size_t{live} + kChunkSize - 1) / kChunkSize;
    c = std::max<std::size_t>(c, 1);
    if (c > kChunksPerSlab) {
      c = (c + kChunksPerSlab - 1) & ~(kChunksPerSlab - 1);
    }
    return c;
  }

  // Frees listed since the last reordering that make the list worth
  // dropping: half the indices handed out, and at least a chunk's worth, so
  // that a small pool keeps its LIFO order (it fits in the cache anyway).
  std::uint32_t ReorderAfter() const {
    return std::max<std::uint32_t>(used_ / 2, kChunkSize);
  }

  // Drops the free list: every free index is marked, and the scan from 0
  // finds them in address order. Not during a shrink, whose scan looks for
  // kept indices already (in the same order).
  [[gnu::noinline]] void Reorder() {
    listed_ = 0;
    if (limit_ != kNoLimit) return;
    free_head_ = kNil;
    scan_ = 0;
  }

  // Looks at the lazy region [scan_, end) upward, one index per unit of
  // `budget`, and lists the first free entry it finds. Returns false if the
  // budget ran out or scan_ reached `end` first.
  bool ScanForFree(std::uint32_t end, std::size_t& budget) {
    std::uint32_t i = scan_;
    for (; i < end && budget != 0; ++i) {
      --budget;
      if (At(i).prev == kFreeMark) {
        scan_ = i + 1;
        At(i).next = free_head_;
        free_head_ = i;
        return true;
      }
    }
    scan_ = i;
    return false;
  }

  // Lists a free entry of the lazy region; during a shrink, a kept one if
  // there is one, else the shrink ends (the live set grew back) and the
  // scan goes on above. Returns false, with scan_ == used_, if the lazy
  // region holds no free entry. The scan looks at each index once after a
  // StartShrink (scan_ only moves up), so it adds O(1) per index handed
  // out plus O(live entries) per shrink, which NextToRelocate mostly pays
  // under its budget; but one call may pass a long run of live entries.
  bool FindRoom() {
    std::size_t unbounded = std::numeric_limits<std::size_t>::max();
    if (ScanForFree(std::min(used_, limit_), unbounded)) return true;
    if (limit_ == kNoLimit) return false;
    limit_ = kNoLimit;
    return ScanForFree(used_, unbounded);
  }

  [[gnu::noinline]] std::uint32_t AllocateLazy() {
    std::uint32_t i;
    if (FindRoom()) {
      i = free_head_;
      free_head_ = At(i).next;
    } else {
      i = used_;  // scan_ == used_: both move up
      scan_ = used_ = i + 1;
    }
    return i;
  }

  [[gnu::noinline]] void ReserveSlow() {
    if (scan_ != used_ && FindRoom()) return;
    if (used_ < capacity_) return;
    if (used_ >= kMaxEntries) throw std::bad_alloc();
    const std::size_t c = chunks_.size();
    chunks_.reserve(c + 1);
    Entry* chunk;
    if (c < kChunksPerSlab) {
      chunk = static_cast<Entry*>(AllocateBlock(kChunkBytes));
    } else if (c % kChunksPerSlab == 0) {
      chunk = static_cast<Entry*>(AllocateBlock(kChunkBytes * kChunksPerSlab));
    } else {
      chunk = chunks_[c - 1] + kChunkSize;  // the next one of this slab
    }
    chunks_.push_back(chunk);
    SetCapacity();
    if (used_ >= want_at_) WantNextBlock();
  }

  // A block for chunks: the resident one if it is ready, else a new one.
  void* AllocateBlock(std::size_t bytes) {
    if (resident_ != nullptr) {
      if (void* p = resident_->Take(bytes, alignof(Entry))) return p;
    }
    return LargeAllocate(bytes, alignof(Entry));
  }

  // Tells the resident block what the pool allocates next: a chunk while
  // it has fewer than kChunksPerSlab, else a slab. Asked once the last
  // block is being used (want_at_), so that a pool whose live set stays
  // below its top holds nothing ready.
  [[gnu::noinline]] void WantNextBlock() {
    if (resident_ == nullptr) return;
    resident_->Want(chunks_.size() < kChunksPerSlab
                        ? kChunkBytes
                        : kChunkBytes * kChunksPerSlab,
                    alignof(Entry));
  }

  // Every entry above the kept range is free: drop them and their chunks.
  // Free entries below are listed or in the lazy region, which stays.
  void FinishShrink() {
    used_ = limit_;
    limit_ = kNoLimit;
    ReleaseChunksFrom(used_ / kChunkSize);
  }

  // Frees chunks [keep, end); keep is 0 modulo kChunksPerSlab beyond the
  // first slab's worth, so whole slabs go.
  void ReleaseChunksFrom(std::size_t keep) {
    for (std::size_t c = keep; c < chunks_.size(); ++c) FreeChunk(c, true);
    chunks_.resize(keep);
    // Gives the table's memory back too. libstdc++ swallows a bad_alloc
    // here, keeping the old capacity.
    chunks_.shrink_to_fit();
    SetCapacity();
    // Memory goes back: the block held ahead too, until growth nears again.
    if (resident_ != nullptr) resident_->Drop();
  }

  // Frees chunk c's memory (a whole slab at a slab's first chunk); `release`
  // when a shrink gives it back (see LargeRelease).
  void FreeChunk(std::size_t c, bool release = false) {
    auto free = release ? LargeRelease : LargeFree;
    if (c < kChunksPerSlab) {
      free(chunks_[c], kChunkBytes, alignof(Entry));
    } else if (c % kChunksPerSlab == 0) {
      free(chunks_[c], kChunkBytes * kChunksPerSlab, alignof(Entry));
    }
  }

  void SetCapacity() {
    capacity_ = static_cast<std::uint32_t>(
        std::min<std::size_t>(chunks_.size() * kChunkSize, kMaxEntries));
    // The next block starts at the end of the current one; want it once
    // the current one (a chunk, or a slab) is entered.
    const std::size_t c = chunks_.size();
    std::size_t block = kChunkSize;
    std::size_t end = c * kChunkSize;
    if (c >= kChunksPerSlab) {
      block = kChunksPerSlab * kChunkSize;
      end = (c + kChunksPerSlab - 1) / kChunksPerSlab * block;
    }
    want_at_ = static_cast<std::uint32_t>(
        std::min<std::size_t>(end - std::min(end, block), kMaxEntries));
  }

  // Invariants (CheckInvariants checks them):
  // Indices [0, used_) have been handed out; each is live or free (marked).
  // The free list holds exactly the free indices below scan_; those in the
  // lazy region [scan_, used_) are only marked, and Allocate looks for
  // them there once the list is empty. Normally scan_ == used_ and both
  // grow together; StartShrink and Reorder set scan_ to 0, and the lazy
  // region that opens lasts until the scan reaches used_, which may be after
  // the shrink.
  //
  // During a shrink limit_ is the kept range's end and used_ > limit_ >=
  // scan_; relocation looks at indices below top_ (those in [top_, used_)
  // are free) down to limit_. Outside one limit_ == kNoLimit.
  std::vector<Entry*> chunks_;  // kChunkSize entries each
  std::uint32_t capacity_ = 0;  // entries the chunks hold, <= kMaxEntries
  std::uint32_t used_ = 0;
  std::uint32_t scan_ = 0;
  std::uint32_t free_head_ = kNil;
  std::uint32_t live_ = 0;
  std::uint32_t limit_ = kNoLimit;
  std::uint32_t top_ = 0;
  std::uint32_t listed_ = 0;  // pushed on the free list since Reorder
  ResidentBlock* resident_ = nullptr;
  // The index whose handing out asks resident_ for the next block.
  std::uint32_t want_at_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_ENTRY_POOL_H_
