// The wheel's key -> entry map: open addressing over (hash, entry) words.
#ifndef TIMINGWHEEL_INTERNAL_KEY_INDEX_H_
#define TIMINGWHEEL_INTERNAL_KEY_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "timingwheel/internal/large_alloc.h"

namespace timingwheel {
namespace internal {

// Maps a key's 32-bit hash to the pool index of its entry (below 2^31). The
// keys live in the entries, not here, so a lookup passes a predicate that
// compares the entry's key; it is asked only about entries whose stored hash
// is equal.
//
// Why not absl::flat_hash_set: the loop hides the map's cache misses by
// prefetching a few commands ahead, and flat_hash_set's prefetch fetches one
// line of a probe group that spans two or three, so most lookups still
// waited for a miss. Here a key's words start at one known position, so one
// prefetch covers the lookup. (docs/design-notes.md has the measurements.)
//
// Layout: one array of 8-byte words, hash << 32 | entry, empty = all ones;
// linear probing from home(hash); deletion shifts later words back, so there
// are no tombstones and probe runs stay short; capacity a power of two, grown
// at 3/4 load: 8 to 16 bytes a key.
//
// Growth rehashes everything at once, O(keys), and the loop does nothing
// else meanwhile (Options::expected_timers avoids it). An incremental
// rehash was tried and cost more than it saved (docs/design-notes.md).
//
// Shrinking, unlike growth, is never urgent, so it is incremental: once the
// table is large and sparse (WantsShrink), StartShrink allocates a smaller
// one and the caller spends a bounded `budget` per ShrinkStep, between its
// other work, until ShrinkStep returns false and the large table is freed.
// Every operation keeps working exactly in between. A shrink has two phases:
//
//  1. Emptying the new table, `budget` words a step: it is fresh memory, and
//     filling it in one go would fault in all its pages at once. Meanwhile
//     the index lives in the large table alone, as usual.
//  2. Migrating. New words go into the new table; a lookup tries the new
//     table, then the old one. ShrinkStep moves the old table's words into
//     the new one in position order, from a cursor. Old-table words before
//     the cursor have moved: they only pad probe paths and match nothing.
//     The old table never gains a word, and erasing one there leaves a
//     tombstone instead of shifting words back: a shift would carry a word
//     from beyond the cursor to before it, where it would be lost, and would
//     cut the paths of words whose run started before the cursor. So every
//     old-table run, wrapped around the end or not, keeps its length.
//
// Thresholds, chosen so that sizes never oscillate: growth doubles the table
// at load 3/4 (leaving 3/8); a shrink is wanted when the table has more than
// kShrinkMinCapacity words and a load under 1/16, and it moves to the
// smallest table that holds the live words at load at most 3/8 (so above
// 3/16), but no less than 8 words or what Reserve asked for. After a shrink
// the live set must double before the table grows; after a growth it must
// fall to a sixth before the table shrinks. A Clear, a growth, or a Reserve
// beyond the smaller table ends a shrink early.
//
// Positions: Find's result names the table too (old-table positions have the
// top bit set) and stays valid until the index next changes (Insert,
// EraseAt, ShrinkStep, ReserveOneMore, Reserve, Clear, StartShrink).
//
// Cost outside a shrink: as without shrinking, plus one predictable branch
// in EntryAt, SetEntryAt, EraseAt, Prefetch and Find's miss path. During a
// shrink, a miss also probes the old table, and Prefetch fetches both homes.
// A step's work is bounded by its budget, apart from what the memory system
// adds: the first touch of each new page, and in the last step the freeing
// of the large table.
class KeyIndex {
 public:
  // What Find returns when no entry matches.
  static constexpr std::size_t kAbsent = ~std::size_t{0};

  // WantsShrink only for tables with more words than this: below it the
  // saving is not worth a second table.
  static constexpr std::size_t kShrinkMinCapacity = 4096;

  KeyIndex() = default;
  ~KeyIndex() {
    Free(words_, capacity());
    Free(old_, OldCapacity());
    Free(next_, next_capacity_);
  }
  KeyIndex(const KeyIndex&) = delete;
  KeyIndex& operator=(const KeyIndex&) = delete;

  // Live words, in both tables during a shrink.
  std::size_t size() const { return size_; }
  // Words in the table that new words go into; size() <= capacity() * 3/4.
  // Drops when a shrink starts migrating (phase 2).
  std::size_t capacity() const { return words_ == nullptr ? 0 : mask_ + 1; }
  // Every table held, both during a shrink.
  std::size_t MemoryBytes() const {
    return (capacity() + OldCapacity() + next_capacity_) *
           sizeof(std::uint64_t);
  }

  // Fetches the line(s) where a lookup of `hash` starts. No effect on state.
  void Prefetch(std::uint32_t hash) const {
    if (words_ == nullptr) return;
    PrefetchWord(&words_[Home(hash)]);
    if (old_ != nullptr) [[unlikely]]
      PrefetchWord(&old_[HomeIn(hash, old_shift_)]);
  }

  // The position of the word for `hash` whose entry satisfies matches(entry),
  // or kAbsent.
  template <typename Matches>
  std::size_t Find(std::uint32_t hash, Matches&& matches) const {
    if (words_ == nullptr) return kAbsent;
    for (std::size_t i = Home(hash);; i = (i + 1) & mask_) {
      const std::uint64_t w = words_[i];
      if (w == kEmpty) break;
      if (HashOf(w) == hash && matches(EntryOf(w))) return i;
    }
    if (old_ == nullptr) [[likely]]
      return kAbsent;
    return FindOld(hash, matches);
  }

  // The entry of the word at `pos` (a position Find returned).
  std::uint32_t EntryAt(std::size_t pos) const { return EntryOf(WordAt(pos)); }

  // Makes the word at `pos` (a position Find returned) name `entry`, keeping
  // its hash: for when the entry moves in the pool.
  void SetEntryAt(std::size_t pos, std::uint32_t entry) {
    std::uint64_t& w = WordAt(pos);
    w = (w & ~std::uint64_t{0xFFFFFFFF}) | entry;
  }

  // Makes room for one more word, so that the next Insert does not allocate.
  // Throws std::bad_alloc (and changes nothing) when memory runs out. A
  // growth during a shrink takes the words of both tables and ends it.
  void ReserveOneMore() {
    if ((size_ + 1) * 4 > capacity() * 3)
      Rehash(std::max<std::size_t>(8, capacity() * 2));
  }
  // Makes room for n words in all, and keeps later shrinks from going below
  // that room (Reserve(0) lifts the floor). A shrink that would go below it
  // is abandoned or, when migrating, ended by a growth.
  void Reserve(std::size_t n) {
    const std::size_t floor =
        std::bit_ceil(std::max<std::size_t>(8, (n * 4 + 2) / 3));
    if (n * 4 > capacity() * 3) {
      Rehash(floor);
    } else if (next_ != nullptr && floor > next_capacity_) {
      DropNext();
    }
    min_capacity_ = floor;
  }

  // Adds `entry` under `hash`; the caller knows no word for it exists and has
  // called ReserveOneMore.
  void Insert(std::uint32_t hash, std::uint32_t entry) {
    Put(words_, mask_, shift_, std::uint64_t{hash} << 32 | entry);
    ++size_;
  }

  // Removes the word at `pos` (a position Find returned), moving back the
  // words after it that probed past it; in the old table of a shrink it
  // leaves a tombstone instead.
  void EraseAt(std::size_t pos) {
    --size_;
    if (pos & kOldTable) [[unlikely]] {
      old_[pos ^ kOldTable] = kTombstone;
      --old_live_;
      return;
    }
    std::size_t hole = pos;
    for (std::size_t i = (pos + 1) & mask_;; i = (i + 1) & mask_) {
      const std::uint64_t w = words_[i];
      if (w == kEmpty) break;
      // w may fill the hole unless its home lies in (hole, i]: a lookup for
      // it starts at its home and must still reach it.
      if (((i - Home(HashOf(w))) & mask_) >= ((i - hole) & mask_)) {
        words_[hole] = w;
        hole = i;
      }
    }
    words_[hole] = kEmpty;
  }

  // Calls f(entry) for every word, in no set order.
  template <typename F>
  void ForEach(F&& f) const {
    for (std::size_t i = 0; i < capacity(); ++i) {
      if (words_[i] != kEmpty) f(EntryOf(words_[i]));
    }
    for (std::size_t i = cursor_; i < OldCapacity(); ++i) {
      if (IsLive(old_[i])) f(EntryOf(old_[i]));
    }
  }

  // Removes every word. Keeps the capacity, or during a shrink ends it at
  // once with the smaller table (the large one needs no emptying then).
  void Clear() {
    if (next_ != nullptr) {
      Release(words_, capacity());
      Adopt(next_, next_capacity_);
      next_ = nullptr;
      next_capacity_ = 0;
    }
    Release(old_, OldCapacity());
    old_ = nullptr;
    old_live_ = 0;
    cursor_ = 0;
    if (words_ != nullptr)
      std::memset(words_, 0xFF, capacity() * sizeof(std::uint64_t));
    size_ = 0;
  }

  // --- Shrinking (see the class comment). The caller's round:
  //   if (index.Shrinking()) index.ShrinkStep(budget);
  //   else if (index.WantsShrink()) index.StartShrink();

  // True when no shrink is under way and the table is large and sparse
  // enough for one. O(1), reads only this object.
  bool WantsShrink() const {
    return !Shrinking() && capacity() > kShrinkMinCapacity &&
           size_ * 16 < capacity() && min_capacity_ < capacity();
  }
  // True from StartShrink until ShrinkStep returns false (or a Clear, or a
  // growth). O(1).
  bool Shrinking() const { return next_ != nullptr || old_ != nullptr; }

  // Starts a shrink to the table the class comment describes: one
  // allocation, no table memory touched. Does nothing during a shrink, or
  // when that table would not be smaller. Throws std::bad_alloc (and changes
  // nothing) when memory runs out; the index then works on as it was.
  void StartShrink() {
    if (Shrinking()) return;
    const std::size_t target = ShrinkTarget();
    if (target >= capacity()) return;
    next_ = Allocate(target);
    next_capacity_ = target;
    cursor_ = 0;
  }

  // Does at most `budget` words of shrink work: empties that many words of
  // the new table, or scans that many old-table positions and moves the live
  // words among them (one probe of the new table each). Freeing the old
  // table, when the scan is done or nothing live is left in it, ends the
  // shrink. Returns Shrinking(): true while there is more to do (false, and
  // nothing done, outside a shrink).
  bool ShrinkStep(std::size_t budget) {
    if (next_ != nullptr) {
      const std::size_t n = std::min(budget, next_capacity_ - cursor_);
      std::memset(next_ + cursor_, 0xFF, n * sizeof(std::uint64_t));
      cursor_ += n;
      budget -= n;
      if (cursor_ < next_capacity_) return true;
      StartMigrating();
    }
    if (old_ == nullptr) return false;
    const std::size_t end = cursor_ + std::min(budget, OldCapacity() - cursor_);
    // Live old words all lie at or after the cursor, so the scan stops at
    // the last one.
    for (; cursor_ < end && old_live_ > 0; ++cursor_) {
      const std::uint64_t w = old_[cursor_];
      if (IsLive(w)) {
        Put(words_, mask_, shift_, w);
        --old_live_;
      }
    }
    if (old_live_ > 0) return true;
    Release(old_, OldCapacity());
    old_ = nullptr;
    cursor_ = 0;
    return false;
  }

  // The words ShrinkStep still has to empty or scan at most (fewer when the
  // old table runs out of live words early); 0 outside a shrink. A step that
  // returns true lowers it by exactly its budget.
  std::size_t ShrinkWorkLeft() const {
    if (next_ != nullptr) return next_capacity_ - cursor_ + capacity();
    if (old_ != nullptr) return OldCapacity() - cursor_;
    return 0;
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  // No real word takes this value: its entry would be 2^32 - 2.
  static constexpr std::uint64_t kTombstone = kEmpty - 1;
  // Marks a position in the old table of a shrink.
  static constexpr std::size_t kOldTable = ~(~std::size_t{0} >> 1);

  static std::uint32_t HashOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w >> 32);
  }
  static std::uint32_t EntryOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w);
  }
  // Neither empty nor a tombstone.
  static bool IsLive(std::uint64_t w) { return w < kTombstone; }

  // Fibonacci hashing: the top bits of hash * 2^64/phi, so that a weak user
  // hash (std::hash of an integer is the integer) still spreads.
  std::size_t Home(std::uint32_t hash) const { return HomeIn(hash, shift_); }
  static std::size_t HomeIn(std::uint32_t hash, int shift) {
    return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> shift);
  }
  static int ShiftFor(std::size_t capacity) {
    return 64 - std::countr_zero(capacity);
  }

  // gcc counts __builtin_prefetch as no side effect: a function doing
  // nothing else is deemed const, and a call to it that was not inlined
  // early is deleted. The empty volatile asm is a side effect and costs no
  // instruction.
  static void PrefetchWord(const std::uint64_t* p) {
    __builtin_prefetch(p);
    asm volatile("" : : "r"(p));
  }

  std::size_t OldCapacity() const {
    return old_ == nullptr ? 0 : old_mask_ + 1;
  }
  std::uint64_t& WordAt(std::size_t pos) const {
    if (pos & kOldTable) [[unlikely]]
      return old_[pos ^ kOldTable];
    return words_[pos];
  }

  // The old table's part of Find: runs keep their length there, tombstones
  // and moved words included, so the first empty word still ends the search.
  template <typename Matches>
  std::size_t FindOld(std::uint32_t hash, Matches& matches) const {
    for (std::size_t i = HomeIn(hash, old_shift_);; i = (i + 1) & old_mask_) {
      const std::uint64_t w = old_[i];
      if (w == kEmpty) return kAbsent;
      if (HashOf(w) == hash && i >= cursor_ && IsLive(w) &&
          matches(EntryOf(w))) {
        return i | kOldTable;
      }
    }
  }

  static void Put(std::uint64_t* words, std::size_t mask, int shift,
                  std::uint64_t w) {
    std::size_t i = HomeIn(HashOf(w), shift);
    while (words[i] != kEmpty) i = (i + 1) & mask;
    words[i] = w;
  }

  // The smallest power of two that holds size_ words at load 3/8 at most,
  // and no less than 8 words or what Reserve asked for.
  std::size_t ShrinkTarget() const {
    const std::size_t fit = std::bit_ceil((size_ * 8 + 2) / 3);
    return std::max({std::size_t{8}, fit, min_capacity_});
  }

  // Phase 1 -> 2: the emptied table becomes the one new words go into. If
  // the live set has grown past half of it meanwhile, the shrink is dropped
  // instead: migrating would leave too little room.
  void StartMigrating() {
    if (size_ * 2 > next_capacity_) {
      DropNext();
      return;
    }
    old_ = words_;
    old_mask_ = mask_;
    old_shift_ = shift_;
    old_live_ = size_;
    Adopt(next_, next_capacity_);
    next_ = nullptr;
    next_capacity_ = 0;
    cursor_ = 0;
  }

  void DropNext() {
    Free(next_, next_capacity_);
    next_ = nullptr;
    next_capacity_ = 0;
    cursor_ = 0;
  }

  void Adopt(std::uint64_t* words, std::size_t capacity) {
    words_ = words;
    mask_ = capacity - 1;
    shift_ = ShiftFor(capacity);
  }

  // Moves every live word, from both tables during a shrink, into a new
  // table of `new_capacity` words, ending any shrink.
  void Rehash(std::size_t new_capacity) {
    std::uint64_t* words = Allocate(new_capacity);
    std::memset(words, 0xFF, new_capacity * sizeof(std::uint64_t));
    const std::size_t mask = new_capacity - 1;
    const int shift = ShiftFor(new_capacity);
    for (std::size_t i = 0; i < capacity(); ++i) {
      if (words_[i] != kEmpty) Put(words, mask, shift, words_[i]);
    }
    for (std::size_t i = cursor_; i < OldCapacity(); ++i) {
      if (IsLive(old_[i])) Put(words, mask, shift, old_[i]);
    }
    Free(words_, capacity());
    Free(old_, OldCapacity());
    old_ = nullptr;
    old_live_ = 0;
    DropNext();
    Adopt(words, new_capacity);
  }

  static std::uint64_t* Allocate(std::size_t capacity) {
    return static_cast<std::uint64_t*>(LargeAllocate(
        capacity * sizeof(std::uint64_t), alignof(std::uint64_t)));
  }
  // Release is Free for a table a shrink gives back (see LargeRelease).
  static void Release(std::uint64_t* words, std::size_t capacity) {
    LargeRelease(words, capacity * sizeof(std::uint64_t),
                 alignof(std::uint64_t));
  }
  static void Free(std::uint64_t* words, std::size_t capacity) {
    LargeFree(words, capacity * sizeof(std::uint64_t), alignof(std::uint64_t));
  }

  // The table lookups start in and new words go into.
  std::uint64_t* words_ = nullptr;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
  // Phase 2 of a shrink: the large table, live from cursor_ on.
  std::uint64_t* old_ = nullptr;
  std::size_t old_mask_ = 0;
  int old_shift_ = 64;
  std::size_t old_live_ = 0;
  // Phase 1: the next word of next_ to empty; phase 2: the next old position
  // to scan.
  std::size_t cursor_ = 0;
  // Phase 1 of a shrink: the smaller table, emptied below cursor_.
  std::uint64_t* next_ = nullptr;
  std::size_t next_capacity_ = 0;
  // Shrinks stop at this capacity (Reserve's floor).
  std::size_t min_capacity_ = 8;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_KEY_INDEX_H_
