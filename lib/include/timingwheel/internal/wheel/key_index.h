// The wheel's key -> entry map: open addressing over (hash, entry) words.
//
// Why a second table beside CacheIndex (cache/index.h), the same kind: the
// wheel needs what a cache shard does not. Every call does bounded work on
// the loop thread, so a resize moves the words to a new table in steps,
// with two tables live and tombstones in the old one; Prefetch fetches the
// lines a lookup will read, for the apply pipeline; homes are the top bits
// of a product, so a migration runs in position order; big tables come from
// LargeAllocate and go back in pieces. A cache shard's index works under the
// shard's lock and may rehash at once, so it does without all of that.
//
// Why over 450 lines: one class whose every method follows the resize
// protocol (which table, which phase, where the cursor is); split, a reader
// must hold both files to check any one method.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_KEY_INDEX_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_KEY_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/base/large_alloc.h"
#include "timingwheel/internal/base/prefetch.h"
#include "timingwheel/internal/base/resident_block.h"

namespace timingwheel {
namespace internal {

// Maps a key's 32-bit hash to the pool index of its entry (below 2^31). The
// keys live in the entries, not here, so a lookup passes a predicate that
// compares the entry's key; it is asked only about entries whose stored hash
// is equal.
//
// Contract: every operation keeps working exactly while the index resizes,
// and none but Reserve, Clear and ForEach (which may touch whole tables, as
// their callers expect) does more than a bounded amount of work, apart from
// what the memory system adds (first touches of fresh pages, freeing a
// block). Inserts alone drive a growth to its end, in time; ResizeStep lets
// a caller finish one that inserts left under way, and drives shrinks,
// which only StartShrink starts.
//
// Why not absl::flat_hash_set: the loop hides the map's cache misses by
// prefetching a few commands ahead, and flat_hash_set's prefetch fetches one
// line of a probe group that spans two or three, so most lookups still
// waited for a miss. Here a key's words start at one known position, so
// Prefetch can fetch the lines that a lookup, and an erase's shift after
// it, mostly read. (docs/wheel.md has the measurements.)
//
// Layout: one array of 8-byte words, hash << 32 | entry, empty = all ones;
// linear probing from home(hash); deletion shifts later words back, so there
// are no tombstones and probe runs stay short; capacity a power of two, at
// most 3/4 full (a growth doubles it: 11 to 21 bytes a key as keys come).
//
// Resizing moves the words to a new table in two phases, the same for a
// growth and a shrink:
//
//  1. Emptying the new table, a bounded number of words a step: it may be
//     fresh memory, and filling it in one go would fault in all its pages
//     at once; in order, a step faults in one page at most. (Filling it as
//     the words arrive would not do: new words land at random, so the first
//     steps of phase 2 would fault in many pages each.) Meanwhile the index
//     lives in the current table alone, as usual.
//  2. Migrating. New words go into the new table; a lookup tries the new
//     table, then the old one. Steps move the old table's words over in
//     position order, from a cursor. Homes are the top bits of a product, so
//     position order in the old table is home order in the new one too (up
//     to a probe run): the migration reads one table and writes the other in
//     order, with no random miss. Old-table words before the cursor have
//     moved: lookups start at the cursor instead of a home before it and
//     wrap around to it instead of 0, so they never read that part, which a
//     big table gives back in pieces as the cursor passes. The old table
//     never gains a word, and erasing one there leaves a tombstone instead
//     of shifting words back (a shift could carry a word across the cursor
//     and lose it), so every probe run that is left keeps its words in order
//     and its end.
//
// Growth, at load 3/4 (ReserveOneMore finds the table full): to twice the
// capacity, or at once (one O(keys) rehash) below grow_in_steps_from words,
// where that takes microseconds. Each ReserveOneMore during a growth does
// kGrowStep words of its work (erases none: a growth they leave under way
// waits for inserts or ResizeStep). Why it always ends in time: phase 1
// empties the 2C words of the new table (C the old capacity) in C/32
// inserts, during which the old table fills to less than 25/32 of C; phase
// 2 scans C positions in C/64 inserts, and the new table is full only at
// 3/2 C words. A caller's ResizeSteps only make it end sooner.
//
// Early growth: a caller with time to spare may start the growth sooner,
// from load 1/2 (WantsEarlyGrowth, StartGrowth), and drive it with
// ResizeSteps of its own. Each insert then does the growth's 3C words of
// work spread over the inserts left until load 3/4 (12 words at load 1/2),
// so the growth ends by the time the table would have been full, and an
// insert pays far less for it than one of the last C/32 before a full
// table does. From load 45/64 that share would exceed kGrowStep: there it
// is kGrowStep, and the growth ends as one started at 3/4 would. Why the caller
// chooses: the doubled table costs memory from then on, worth it only while
// keys are arriving fast (EventLoop decides from their rate).
//
// Shrinking, never urgent, starts only when asked (WantsShrink, then
// StartShrink): once the table is large and sparse, to the smallest table
// that holds the live words at load at most 3/8, but no less than 8 words,
// what Reserve asked for, or 1/kMaxShrinkFactor of the table. Phase 1 runs
// on the caller's ResizeSteps only; in phase 2 each ReserveOneMore also
// scans enough old positions (at most 4 * kMaxShrinkFactor) that the
// migration ends before the smaller table would have to grow: phase 2
// starts only below load 1/2 (else the shrink is dropped), leaving a
// quarter of the table's words in inserts to scan the old table in. Hence
// the factor: a shrink from a huge table to a tiny one would otherwise need
// a huge step per insert; a further shrink follows while the table stays
// sparse.
//
// Thresholds, chosen so that sizes never oscillate: after a shrink the live
// set must double before the table grows (gain a third before it may grow
// early); after a growth it must fall to a sixth (a quarter after an early
// one) before the table shrinks. A growth never waits for a shrink: in
// phase 1 the shrink is dropped, and phase 2 ends first (above). A Clear,
// or a Reserve beyond the table being moved to, ends a resize at once.
//
// Positions: Find's result names the table too (old-table positions have the
// top bit set) and stays valid until the index next changes (Insert,
// EraseAt, ReserveOneMore, ResizeStep, Reserve, Clear, StartShrink).
//
// Cost outside a resize: one predictable branch in ReserveOneMore, EntryAt,
// SetEntryAt, EraseAt, Prefetch and Find's miss path. During phase 2, a miss
// also probes the old table (from the cursor's line when its home there has
// moved), and Prefetch fetches both homes.
class KeyIndex {
 public:
  // What Find returns when no entry matches.
  static constexpr std::size_t kAbsent = ~std::size_t{0};

  // Tables of at least this many words grow in steps (smaller ones at once,
  // a rehash of a few microseconds), and WantsShrink only for larger ones:
  // below it the saving is not worth a second table.
  static constexpr std::size_t kResizeMinCapacity = 4096;
  // Words of growth work each ReserveOneMore does during a growth: memset
  // words in phase 1, old positions scanned in phase 2. The arithmetic in
  // the class comment needs at least 64; more ends growths sooner.
  static constexpr std::size_t kGrowStep = 64;
  static_assert(kGrowStep >= 64);
  // A shrink divides the capacity by at most this (see the class comment).
  static constexpr std::size_t kMaxShrinkFactor = 64;

  // Tables below grow_in_steps_from words grow at once; tests lower it to
  // watch growths in small tables.
  explicit KeyIndex(std::size_t grow_in_steps_from = kResizeMinCapacity)
      : grow_in_steps_from_(grow_in_steps_from) {}
  ~KeyIndex() {
    Free(words_, capacity());
    Free(old_, OldCapacity());
    Free(next_, next_capacity_);
  }
  KeyIndex(const KeyIndex&) = delete;
  KeyIndex& operator=(const KeyIndex&) = delete;

  // Live words, in both tables during a resize.
  std::size_t size() const { return size_; }
  // Words in the table that new words go into. size() <= capacity() * 3/4,
  // except during a growth's phase 1: size() < capacity() * 25/32. Changes
  // when a resize starts migrating (phase 2).
  std::size_t capacity() const { return words_ == nullptr ? 0 : mask_ + 1; }
  // Every table held, two during a resize (parts of the old one may have
  // been given back already).
  std::size_t MemoryBytes() const {
    return (capacity() + OldCapacity() + next_capacity_) *
           sizeof(std::uint64_t);
  }

  // Fetches the lines where a lookup of `hash` starts: its home's line and
  // the next. No effect on state. The second line is for the probe runs of
  // a table up to 3/4 full: a lookup that misses walks to the run's end, and
  // EraseAt walks on from the word it erases to the run's end, and either
  // often crosses into the next line.
  void Prefetch(std::uint32_t hash) const {
    if (words_ == nullptr) return;
    const std::size_t home = Home(hash);
    internal::Prefetch(&words_[home]);
    internal::Prefetch(&words_[(home + 8) & mask_]);
    if (old_ != nullptr) [[unlikely]]
      internal::Prefetch(&old_[OldStart(hash)]);
  }

  // The position of the word for `hash` whose entry satisfies matches(entry),
  // or kAbsent.
  template <typename Matches>
  std::size_t Find(std::uint32_t hash, Matches&& matches) const {
    std::size_t run_end;
    return FindFrom(hash, matches, run_end);
  }

  // Find, for a caller that inserts a word under `hash` next if none
  // matches: a miss also remembers where its walk of the table new words go
  // into ended, the first empty word after the home, which is where Insert
  // puts the word. Insert then writes it there instead of walking the run
  // again (8.5 words on average at load 3/4), unless the index has gained an
  // empty word or a table since (EraseAt, Clear, a resize's switch of
  // tables) or that word was filled.
  template <typename Matches>
  std::size_t FindBeforeInsert(std::uint32_t hash, Matches&& matches) {
    std::size_t run_end;
    const std::size_t pos = FindFrom(hash, matches, run_end);
    insert_at_ = run_end;
    insert_hash_ = hash;
    return pos;
  }

  // The entry of the word at `pos` (a position Find returned).
  std::uint32_t EntryAt(std::size_t pos) const { return EntryOf(WordAt(pos)); }

  // Makes the word at `pos` (a position Find returned) name `entry`, keeping
  // its hash: for when the entry moves in the pool.
  void SetEntryAt(std::size_t pos, std::uint32_t entry) {
    TW_DCHECK(pos != kAbsent && IsLive(WordAt(pos)));
    std::uint64_t& w = WordAt(pos);
    w = (w & ~std::uint64_t{0xFFFFFFFF}) | entry;
  }

  // Makes room for one more word, so that the next Insert does not allocate;
  // call it before every Insert. Starts a growth when the table is full, and
  // does a bounded step of a growth or of a shrink's migration under way.
  // Throws std::bad_alloc (and changes no word) when memory runs out.
  void ReserveOneMore() {
    if (size_ >= step_at_) [[unlikely]]
      ReserveSlow();
  }
  // Makes room for n words in all, and keeps later shrinks from going below
  // that room (Reserve(0) lifts the floor). More room than the table being
  // resized to ends the resize with one rehash; a shrink's phase 1 that
  // would go below the floor is dropped.
  void Reserve(std::size_t n) {
    const std::size_t floor =
        std::bit_ceil(std::max<std::size_t>(8, (n * 4 + 2) / 3));
    const std::size_t room =
        growing_ && next_ != nullptr ? next_capacity_ : capacity();
    if (n * 4 > room * 3) {
      Rehash(floor);
    } else if (!growing_ && next_ != nullptr && floor > next_capacity_) {
      DropNext();
    }
    min_capacity_ = floor;
  }

  // Adds `entry` under `hash`; the caller knows no word for it exists and has
  // called ReserveOneMore.
  // O(1) after a FindBeforeInsert that missed, else a walk of the run.
  void Insert(std::uint32_t hash, std::uint32_t entry) {
    TW_DCHECK(size_ < capacity());  // ReserveOneMore came first
    const std::uint64_t w = std::uint64_t{hash} << 32 | entry;
    if (insert_at_ != kAbsent && insert_hash_ == hash &&
        words_[insert_at_] == kEmpty) [[likely]] {
      words_[insert_at_] = w;
    } else {
      Put(words_, mask_, shift_, w);
    }
    insert_at_ = kAbsent;
    ++size_;
  }

  // Removes the word at `pos` (a position Find returned), moving back the
  // words after it that probed past it; in the old table of a resize it
  // leaves a tombstone instead.
  void EraseAt(std::size_t pos) {
    TW_DCHECK(pos != kAbsent && IsLive(WordAt(pos)));
    --size_;
    if (pos & kOldTable) [[unlikely]] {
      old_[pos ^ kOldTable] = kTombstone;
      --old_live_;
      return;
    }
    insert_at_ = kAbsent;  // the shift below empties a word
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

  // Removes every word. Ends a resize at once with the table that needs no
  // emptying: the one migrated to in phase 2, the current one in a growth's
  // phase 1, the smaller one in a shrink's phase 1 (the large one is given
  // back). O(capacity).
  void Clear() {
    if (next_ != nullptr && !growing_) {
      Release(words_, capacity());
      Adopt(next_, next_capacity_);
      next_ = nullptr;
      next_capacity_ = 0;
    }
    DropNext();
    FreeOld();
    if (words_ != nullptr)
      std::memset(words_, 0xFF, capacity() * sizeof(std::uint64_t));
    insert_at_ = kAbsent;
    size_ = 0;
    EndResize();
  }

  // --- Resizing (see the class comment). A caller that wants memory back
  // spends a bounded budget a round:
  //   if (index.Resizing()) index.ResizeStep(budget);
  //   else if (index.WantsShrink()) index.StartShrink();

  // True when no resize is under way and the table is large and sparse
  // enough for a shrink. O(1), reads only this object.
  bool WantsShrink() const {
    return !Resizing() && capacity() > kResizeMinCapacity &&
           size_ * 16 < capacity() && min_capacity_ < capacity();
  }
  // True from the start of a growth or shrink until its last step (or a
  // Clear, or a Reserve that ends it). O(1).
  bool Resizing() const { return next_ != nullptr || old_ != nullptr; }
  bool Growing() const { return Resizing() && growing_; }
  bool Shrinking() const { return Resizing() && !growing_; }

  // A growth that allocates its new table posts it to `range`, so that
  // another thread can fault it in ahead of phase 1's steps
  // (base/resident_block.h). nullptr: never. `range` outlives the index's
  // use of it. O(1).
  void UseResidentRange(ResidentRange* range) { resident_ = range; }

  // True when no resize is under way and the table, one that grows in
  // steps, is at least half full: StartGrowth would start a growth now.
  // O(1), reads only this object.
  bool WantsEarlyGrowth() const {
    return !Resizing() && capacity() >= grow_in_steps_from_ &&
           size_ * 2 >= capacity();
  }
  // Starts the growth a full table would (see "Early growth" in the class
  // comment) when WantsEarlyGrowth; else does nothing. One allocation, no
  // table memory touched. Throws std::bad_alloc (and changes nothing) when
  // memory runs out; the index then works on as it was.
  void StartGrowth() {
    if (!WantsEarlyGrowth()) return;
    // Inserts left before the table is full; 0 when it is.
    const std::size_t room =
        GrowAt(capacity()) - std::min(size_, GrowAt(capacity()));
    const std::size_t work = 3 * capacity();
    StartGrowing(room == 0 ? kGrowStep
                           : std::min(kGrowStep, (work + room - 1) / room));
  }

  // Starts a shrink to the table the class comment describes: one
  // allocation, no table memory touched. Does nothing during a resize, or
  // when that table would not be smaller. Throws std::bad_alloc (and changes
  // nothing) when memory runs out; the index then works on as it was.
  void StartShrink() {
    if (Resizing()) return;
    const std::size_t target = ShrinkTarget();
    if (target >= capacity()) return;
    next_ = Allocate(target);
    next_capacity_ = target;
    cursor_ = 0;
  }

  // Does at most `budget` words of resize work: empties that many words of
  // the new table, or scans that many old-table positions and moves the live
  // words among them. Freeing the old table, when the scan is done or
  // nothing live is left in it, ends the resize. Returns Resizing(): true
  // while there is more to do (false, and nothing done, outside a resize).
  bool ResizeStep(std::size_t budget) {
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
    // the end of the chunk holding the last one. (Locals: the stores into
    // the table could alias the members.)
    std::size_t cursor = cursor_, live = old_live_;
    std::uint64_t* const words = words_;
    const std::size_t mask = mask_;
    const int shift = shift_;
    // In chunks: first the live words are gathered without a branch on
    // each (about half the old words are empty, at random, so that branch
    // would mispredict every other word), then put.
    std::uint64_t gathered[kMigrateChunk];
    while (cursor < end && live > 0) {
      const std::size_t stop = std::min(end, cursor + kMigrateChunk);
      std::size_t n = 0;
      for (; cursor < stop; ++cursor) {
        const std::uint64_t w = old_[cursor];
        gathered[n] = w;
        n += IsLive(w);
      }
      for (std::size_t k = 0; k < n; ++k) Put(words, mask, shift, gathered[k]);
      live -= n;
    }
    cursor_ = cursor;
    old_live_ = live;
    if (old_live_ > 0) {
      ReleaseBehindCursor();
      return true;
    }
    FreeOld();
    EndResize();
    return false;
  }

  // The words ResizeStep still has to empty or scan at most (fewer when the
  // old table runs out of live words early); 0 outside a resize. A step that
  // returns true lowers it by exactly its budget.
  std::size_t ResizeWorkLeft() const {
    if (next_ != nullptr) return next_capacity_ - cursor_ + capacity();
    if (old_ != nullptr) return OldCapacity() - cursor_;
    return 0;
  }

  // Words of the old table of a resize under way whose pages were already
  // given back (see ReleasesOld); 0 outside a migration.
  std::size_t OldWordsGivenBack() const { return released_; }

  // The first broken invariant, or OK. Those of the class comment and the
  // members below: the tables, masks and shifts agree; at most one resize
  // phase is under way, its cursor within its table; no tombstone outside
  // the old table; size() counts the live words of both tables and stays
  // within the load that capacity() states; every live word is reached by
  // a lookup of its hash (the run from its home holds no empty word before
  // it; in the old table, the walk from where a lookup starts there); the
  // entries named are below 2^31; the words from insert_hash_'s home up to
  // insert_at_ are full. O(capacity), plus a walk per old-table word; for
  // tests and checking builds.
  absl::Status CheckInvariants() const {
    const std::size_t cap = capacity();
    TW_INVARIANT(
        cap == 0 || (std::has_single_bit(cap) && shift_ == ShiftFor(cap)),
        "KeyIndex: capacity ", cap, " with shift ", shift_);
    TW_INVARIANT(std::has_single_bit(min_capacity_) && min_capacity_ >= 8,
                 "KeyIndex: floor ", min_capacity_);
    TW_INVARIANT(next_ == nullptr || old_ == nullptr,
                 "KeyIndex: in both phases of a resize");
    if (next_ != nullptr) {
      TW_INVARIANT(std::has_single_bit(next_capacity_) &&
                       cursor_ <= next_capacity_ &&
                       (growing_ ? next_capacity_ == 2 * cap
                                 : next_capacity_ < cap),
                   "KeyIndex: phase 1 from ", cap, " to ", next_capacity_,
                   " words, cursor ", cursor_, growing_ ? " (growth)" : "");
    } else if (old_ != nullptr) {
      TW_INVARIANT(cursor_ <= OldCapacity() && released_ <= cursor_ &&
                       old_shift_ == ShiftFor(OldCapacity()),
                   "KeyIndex: phase 2 from ", OldCapacity(),
                   " words, cursor ", cursor_, ", given back ", released_);
    } else {
      TW_INVARIANT(cursor_ == 0 && !growing_ && insert_step_ == 0,
                   "KeyIndex: no resize, yet cursor ", cursor_,
                   ", insert step ", insert_step_);
    }
    TW_INVARIANT(step_at_ == (insert_step_ != 0 ? 0 : GrowAt(cap)),
                 "KeyIndex: slow path from size ", step_at_,
                 " with insert step ", insert_step_, " at capacity ", cap);
    std::size_t live = 0;
    if (cap != 0) {
      // From just after an empty word, so that every run is seen whole.
      std::size_t start = 0;
      while (start < cap && words_[start] != kEmpty) ++start;
      TW_INVARIANT(start < cap, "KeyIndex: no empty word in ", cap);
      std::size_t run_start = (start + 1) & mask_;
      for (std::size_t k = 1; k <= cap; ++k) {
        const std::size_t i = (start + k) & mask_;
        const std::uint64_t w = words_[i];
        if (w == kEmpty) {
          run_start = (i + 1) & mask_;
          continue;
        }
        ++live;
        TW_INVARIANT(w != kTombstone, "KeyIndex: tombstone at ", i);
        TW_INVARIANT(EntryOf(w) < 0x80000000u, "KeyIndex: word at ", i,
                     " names entry ", EntryOf(w));
        const std::size_t home = Home(HashOf(w));
        TW_INVARIANT(((i - home) & mask_) <= ((i - run_start) & mask_),
                     "KeyIndex: word at ", i, " (home ", home,
                     ") lies past an empty word after its home");
      }
    }
    std::size_t old_live = 0;
    for (std::size_t i = cursor_; i < OldCapacity(); ++i) {
      const std::uint64_t w = old_[i];
      if (!IsLive(w)) continue;
      ++old_live;
      TW_INVARIANT(EntryOf(w) < 0x80000000u, "KeyIndex: old word at ", i,
                   " names entry ", EntryOf(w));
      // FindOld's walk.
      std::size_t j = OldStart(HashOf(w));
      for (std::size_t n = OldCapacity() - cursor_;
           j != i && n != 0 && old_[j] != kEmpty; --n) {
        j = j == old_mask_ ? cursor_ : j + 1;
      }
      TW_INVARIANT(j == i, "KeyIndex: old word at ", i,
                   " is out of its lookup's reach");
    }
    TW_INVARIANT(old_live == old_live_, "KeyIndex: ", old_live,
                 " live old words, counted ", old_live_);
    TW_INVARIANT(live + old_live == size_, "KeyIndex: ", live, " + ",
                 old_live, " live words, size ", size_);
    // size() <= capacity() * 3/4, except in a growth's phase 1: < 25/32.
    TW_INVARIANT(next_ != nullptr && growing_ ? size_ * 32 < cap * 25
                                              : size_ <= GrowAt(cap),
                 "KeyIndex: ", size_, " words in ", cap);
    if (insert_at_ != kAbsent) {
      TW_INVARIANT(insert_at_ < cap, "KeyIndex: insert position ", insert_at_,
                   " in ", cap);
      for (std::size_t i = Home(insert_hash_); i != insert_at_;
           i = (i + 1) & mask_) {
        TW_INVARIANT(words_[i] != kEmpty, "KeyIndex: empty word at ", i,
                     " before the insert position ", insert_at_);
      }
    }
    return absl::OkStatus();
  }

 private:
  // Tests break an index through it, to see CheckInvariants catch it.
  friend class WheelTestPeer;

  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  // No real word takes this value: its entry would be 2^32 - 2.
  static constexpr std::uint64_t kTombstone = kEmpty - 1;
  // Marks a position in the old table of a resize.
  static constexpr std::size_t kOldTable = ~(~std::size_t{0} >> 1);
  // Old positions ResizeStep scans before it puts the live words among them.
  static constexpr std::size_t kMigrateChunk = 64;
  // Old-table words given back at a time as the cursor passes them.
  static constexpr std::size_t kReleaseWords =
      kHugePageBytes / sizeof(std::uint64_t);
  // Growths release the old table in pieces from this many words (16 MiB)
  // on: see ReleasesOld.
  static constexpr std::size_t kReleaseGrowthFrom = std::size_t{1} << 21;

  static std::uint32_t HashOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w >> 32);
  }
  static std::uint32_t EntryOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w);
  }
  // Neither empty nor a tombstone.
  static bool IsLive(std::uint64_t w) { return w < kTombstone; }

  // The size at which a table of `capacity` words is full: load 3/4.
  static std::size_t GrowAt(std::size_t capacity) { return capacity / 4 * 3; }

  // Fibonacci hashing (base/hash.h): the top bits of hash * 2^64/phi, so
  // that a weak user hash (std::hash of an integer is the integer) still
  // spreads; and a table twice as large splits each home in two, in order.
  std::size_t Home(std::uint32_t hash) const { return HomeIn(hash, shift_); }
  static std::size_t HomeIn(std::uint32_t hash, int shift) {
    return FibonacciHome(hash, shift);
  }
  static int ShiftFor(std::size_t capacity) {
    return 64 - std::countr_zero(capacity);
  }
  // Where a lookup in the old table starts: its home, or the cursor when
  // the home lies before it.
  std::size_t OldStart(std::uint32_t hash) const {
    return std::max(HomeIn(hash, old_shift_), cursor_);
  }

  std::size_t OldCapacity() const {
    return old_ == nullptr ? 0 : old_mask_ + 1;
  }
  std::uint64_t& WordAt(std::size_t pos) const {
    if (pos & kOldTable) [[unlikely]]
      return old_[pos ^ kOldTable];
    return words_[pos];
  }

  // Find, also setting run_end to where its walk of words_ stopped (the
  // first empty word from the home), or kAbsent when it found the word or
  // there is no table.
  template <typename Matches>
  std::size_t FindFrom(std::uint32_t hash, Matches& matches,
                       std::size_t& run_end) const {
    run_end = kAbsent;
    if (words_ == nullptr) return kAbsent;
    std::size_t i = Home(hash);
    for (;; i = (i + 1) & mask_) {
      const std::uint64_t w = words_[i];
      if (w == kEmpty) break;
      if (HashOf(w) == hash && matches(EntryOf(w))) return i;
    }
    run_end = i;
    if (old_ == nullptr) [[likely]]
      return kAbsent;
    return FindOld(hash, matches);
  }

  // The old table's part of Find, over positions cursor_ .. end, wrapping
  // around to cursor_: a word there was reached from its home through no
  // empty word, and the words between that are left are still there
  // (moved ones before the cursor aside), tombstones included, so the first
  // empty word still ends the search. The walk is bounded too: that part
  // of the table may hold no empty word.
  template <typename Matches>
  std::size_t FindOld(std::uint32_t hash, Matches& matches) const {
    std::size_t i = OldStart(hash);
    for (std::size_t n = OldCapacity() - cursor_; n != 0; --n) {
      const std::uint64_t w = old_[i];
      if (w == kEmpty) break;
      if (HashOf(w) == hash && IsLive(w) && matches(EntryOf(w))) {
        return i | kOldTable;
      }
      i = i == old_mask_ ? cursor_ : i + 1;
    }
    return kAbsent;
  }

  static void Put(std::uint64_t* words, std::size_t mask, int shift,
                  std::uint64_t w) {
    std::size_t i = HomeIn(HashOf(w), shift);
    while (words[i] != kEmpty) i = (i + 1) & mask;
    words[i] = w;
  }

  // The smallest power of two that holds size_ words at load 3/8 at most,
  // and no less than 8 words, what Reserve asked for, or capacity() /
  // kMaxShrinkFactor.
  std::size_t ShrinkTarget() const {
    const std::size_t fit = std::bit_ceil((size_ * 8 + 2) / 3);
    return std::max(
        {std::size_t{8}, fit, min_capacity_, capacity() / kMaxShrinkFactor});
  }

  // ReserveOneMore's rare part: a step of a resize that inserts drive, and
  // the start of a growth.
  [[gnu::noinline]] void ReserveSlow() {
    if (insert_step_ != 0) {
      ResizeStep(insert_step_);
      // Under way still: the class comment's arithmetic leaves room.
      if (Resizing()) return;
    }
    if (size_ < GrowAt(capacity())) return;
    // Full. A shrink that has not started migrating is dropped; one that has
    // cannot be under way here (its steps above end it first).
    DropNext();
    if (capacity() == 0 || capacity() < grow_in_steps_from_) {
      Rehash(std::max<std::size_t>(8, capacity() * 2));
      return;
    }
    StartGrowing(kGrowStep);
    ResizeStep(insert_step_);
  }

  // Allocates the doubled table and makes each insert do `step` words of
  // the growth from now on.
  void StartGrowing(std::size_t step) {
    next_ = Allocate(capacity() * 2);
    if (resident_ != nullptr) {
      resident_->Post(next_, capacity() * 2 * sizeof(std::uint64_t));
    }
    next_capacity_ = capacity() * 2;
    cursor_ = 0;
    growing_ = true;
    grow_step_ = step;
    insert_step_ = step;
    step_at_ = 0;
  }

  // Phase 1 -> 2: the emptied table becomes the one new words go into. A
  // shrink is dropped instead if the live set has grown past half of the
  // new table meanwhile: migrating would leave too little room.
  void StartMigrating() {
    if (!growing_ && size_ * 2 > next_capacity_) {
      DropNext();
      return;
    }
    old_ = words_;
    old_mask_ = mask_;
    old_shift_ = shift_;
    old_live_ = size_;
    released_ = 0;
    Adopt(next_, next_capacity_);
    next_ = nullptr;
    next_capacity_ = 0;
    cursor_ = 0;
    // A shrink: every insert scans enough positions that the scan is over
    // before this table is full (size_ <= capacity() / 2 leaves a quarter of
    // it; the factor bounds the step).
    const std::size_t room = GrowAt(capacity()) - size_;
    insert_step_ = growing_ ? grow_step_ : (OldCapacity() + room - 1) / room;
    step_at_ = 0;
  }

  // Drops a phase-1 table, which ends a shrink still in phase 1 (a growth's
  // callers end it themselves).
  void DropNext() {
    if (next_ == nullptr) return;
    Free(next_, next_capacity_);
    next_ = nullptr;
    next_capacity_ = 0;
    cursor_ = 0;
  }

  void EndResize() {
    growing_ = false;
    insert_step_ = 0;
    step_at_ = GrowAt(capacity());
    cursor_ = 0;
  }

  // Whether the old table's pages go back as the cursor passes them: always
  // for a shrink, which gives the table back anyway, and for a growth from
  // kReleaseGrowthFrom words, where freeing the table whole could stop the
  // caller for as long as unmapping all of it takes (when it is its own
  // mapping, as blocks that large mostly are; docs/wheel.md). Smaller
  // tables freed by a growth go back to malloc whole: cheap enough, and
  // warm for malloc's next user when they came from its heap.
  bool ReleasesOld() const {
    return !growing_ || OldCapacity() >= kReleaseGrowthFrom;
  }

  // Gives back the whole huge-page-sized pieces of the old table that the
  // cursor has passed: then freeing it costs little, however large it is.
  void ReleaseBehindCursor() {
    if (cursor_ - released_ < kReleaseWords || !ReleasesOld()) return;
    const std::size_t end = cursor_ / kReleaseWords * kReleaseWords;
    LargeReleasePart(old_ + released_, (end - released_) * sizeof(*old_));
    released_ = end;
  }

  void FreeOld() {
    if (old_ == nullptr) return;
    const std::size_t bytes = OldCapacity() * sizeof(std::uint64_t);
    if (ReleasesOld()) {
      LargeReleasePart(old_ + released_, bytes - released_ * sizeof(*old_));
    }
    LargeFree(old_, bytes, alignof(std::uint64_t));
    old_ = nullptr;
    old_live_ = 0;
    released_ = 0;
  }

  void Adopt(std::uint64_t* words, std::size_t capacity) {
    insert_at_ = kAbsent;
    words_ = words;
    mask_ = capacity - 1;
    shift_ = ShiftFor(capacity);
  }

  // Moves every live word, from both tables during a resize, into a new
  // table of `new_capacity` words, ending any resize. Out of line: rare,
  // and kept out of the callers' hot code.
  [[gnu::noinline]] void Rehash(std::size_t new_capacity) {
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
    FreeOld();
    DropNext();
    Adopt(words, new_capacity);
    EndResize();
  }

  static std::uint64_t* Allocate(std::size_t capacity) {
    return static_cast<std::uint64_t*>(
        LargeAllocate(capacity * sizeof(std::uint64_t), alignof(std::uint64_t)));
  }
  // Release is Free for a table a shrink gives back (see LargeRelease).
  static void Release(std::uint64_t* words, std::size_t capacity) {
    LargeRelease(words, capacity * sizeof(std::uint64_t),
                 alignof(std::uint64_t));
  }
  static void Free(std::uint64_t* words, std::size_t capacity) {
    LargeFree(words, capacity * sizeof(std::uint64_t), alignof(std::uint64_t));
  }

  // The members and what holds of them (CheckInvariants checks it).
  //
  // Where Insert puts a word under insert_hash_ without a walk (see
  // FindBeforeInsert), or kAbsent. Only puts fill words_ meanwhile, so the
  // words from that hash's home up to it stay full; whatever empties a word
  // or replaces words_ clears it.
  std::size_t insert_at_ = kAbsent;
  std::uint32_t insert_hash_ = 0;
  // The table lookups start in and new words go into.
  std::uint64_t* words_ = nullptr;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
  // ReserveOneMore takes its slow path from this size on: the table's
  // GrowAt, or 0 while inserts drive a resize.
  std::size_t step_at_ = 0;
  // Work each ReserveOneMore does for the resize under way; 0 when inserts
  // do none (outside a resize, a shrink's phase 1).
  std::size_t insert_step_ = 0;
  // The insert step of the growth under way (kGrowStep, or less for one
  // started early).
  std::size_t grow_step_ = kGrowStep;
  // The resize under way (if any) is a growth.
  bool growing_ = false;
  // Phase 2: the table moved away from, live from cursor_ on, its pages
  // given back below released_. Its fields mirror the current table's
  // above: a resize holds two tables of one layout.
  std::uint64_t* old_ = nullptr;
  std::size_t old_mask_ = 0;
  int old_shift_ = 64;
  std::size_t old_live_ = 0;
  std::size_t released_ = 0;
  // Phase 1: the next word of next_ to empty; phase 2: the next old position
  // to scan.
  std::size_t cursor_ = 0;
  // Phase 1: the table moved to, emptied below cursor_.
  std::uint64_t* next_ = nullptr;
  std::size_t next_capacity_ = 0;
  // Shrinks stop at this capacity (Reserve's floor).
  std::size_t min_capacity_ = 8;
  // Tables below this many words grow at once.
  const std::size_t grow_in_steps_from_;
  // Where a growth posts its new table to be faulted in, or nullptr.
  ResidentRange* resident_ = nullptr;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_KEY_INDEX_H_
