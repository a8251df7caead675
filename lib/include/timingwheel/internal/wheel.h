// The single-threaded keyed timing wheel: slots, pooled entries, the key map,
// lazy (circle/diff) moves and the due bitmap. No threads, no clocks: time is
// a tick count that only AdvanceTo moves, so it can be tested and fuzzed alone.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "timingwheel/internal/key_index.h"
#include "timingwheel/internal/large_alloc.h"

namespace timingwheel {
namespace internal {

// A tick number that no timer reaches.
inline constexpr std::uint64_t kNever = ~std::uint64_t{0};
// Deadlines saturate here: 2^62 ticks is 146 years at a 1ns interval, so a
// saturated timer is one that never fires, and tick arithmetic never wraps.
inline constexpr std::uint64_t kMaxTick = std::uint64_t{1} << 62;

// Storage for a T that is constructed and destroyed by hand, so that pooled
// entries and queued commands need no default constructor of K or V.
template <typename T>
class ManualStorage {
 public:
  template <typename... Args>
  void Construct(Args&&... args) {
    ::new (static_cast<void*>(bytes_)) T(std::forward<Args>(args)...);
  }
  void Destroy() { Get().~T(); }
  T& Get() { return *std::launder(reinterpret_cast<T*>(bytes_)); }
  const T& Get() const {
    return *std::launder(reinterpret_cast<const T*>(bytes_));
  }

 private:
  alignas(T) unsigned char bytes_[sizeof(T)];
};

// Wheel<K, V> maps each key to one pending timer with a deadline in ticks.
//
// Layout: entries live in a chunked pool and link into doubly linked lists
// by 32-bit index. The key map (KeyIndex) holds (32-bit key hash, entry
// index) words, so the key is stored once, in the entry. For 8-byte keys and
// values an entry is 32 bytes and the map 11 to 21 more per timer.
//
// Placement: an entry with deadline D belongs in slot D % num_slots; the
// cursor visits that slot at tick D, and at earlier visits (D further than a
// rotation away: go-zero's "circle") the entry simply stays. Moving a timer
// later only rewrites its deadline: the entry stays in its old slot and is
// re-linked when that slot is next scanned (go-zero's "diff"), which is never
// after the old deadline. Moving earlier and removing unlink at once, so no
// tombstones pile up.
//
// Lanes: each slot is kLanes lists, an entry going to lane (index %
// kLanes). Walking one list waits for a cache miss per entry (~150 ns at a
// million timers), so a due slot is walked lane by lane side by side, with
// kLanes misses in flight instead of one.
//
// Scheduling: each slot keeps a lower bound of its entries' deadlines
// (mins_), and a bitmap (hot_) marks the slots whose bound falls within the
// next rotation. Finding the next tick with work is a bitmap search, so idle
// stretches are skipped in one step and an advance costs O(due slots) plus
// O(min(ticks, num_slots)) bit refreshes, never a walk over future entries.
//
// Batches: a caller applying many operations computes HashOf(key) once per
// operation, calls PrefetchIndex a few operations ahead, PrefetchEntry
// nearer and PrefetchLinks nearer still, so the misses of several operations
// overlap; the operations take the same hash.
//
// Not thread-safe: one thread owns a Wheel.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class Wheel {
 public:
  // Lists per slot (see Lanes above).
  static constexpr std::uint32_t kLanes = 8;
  // Largest num_slots: list ids (slot * kLanes + lane) must fit in 31 bits.
  static constexpr std::uint32_t kMaxSlots = (1u << 31) / kLanes;

  // num_slots in [1, kMaxSlots]. Allocates the slot arrays (kLanes * 4 + 8
  // bytes and a bit per slot).
  explicit Wheel(std::uint32_t num_slots, Hash hash = Hash(), Eq eq = Eq())
      : num_slots_(num_slots),
        hash_(std::move(hash)),
        eq_(std::move(eq)),
        heads_(std::size_t{num_slots} * kLanes, kNil),
        mins_(num_slots, kNever),
        hot_((num_slots + 63) / 64, 0) {}

  ~Wheel() {
    index_.ForEach([this](std::uint32_t i) { DestroyEntry(At(i)); });
    for (std::size_t c = 0; c < chunks_.size(); ++c) FreeChunk(c);
  }

  Wheel(const Wheel&) = delete;
  Wheel& operator=(const Wheel&) = delete;

  // Makes room for n timers in the map (no rehash below that).
  void Reserve(std::size_t n) { index_.Reserve(n); }

  // Ticks processed so far.
  std::uint64_t now() const { return now_; }
  // Pending timers.
  std::size_t size() const { return index_.size(); }
  std::uint32_t num_slots() const { return num_slots_; }

  // The hash every operation on `key` uses; compute it once per operation.
  std::uint32_t HashOf(const K& key) const {
    const std::uint64_t h = hash_(key);
    return static_cast<std::uint32_t>(h ^ (h >> 32));
  }

  // Schedules `key` at tick `deadline`. A deadline at or before now() is
  // treated as now() + 1 (the next tick), one past kMaxTick as kMaxTick. A
  // present key gets the new value (the old one is destroyed: superseded) and
  // the new deadline. Returns true if the key was present. One map probe.
  // Throws std::bad_alloc, changing nothing, when memory runs out.
  bool Set(K key, V value, std::uint64_t deadline, std::uint32_t hash) {
    deadline = Clamp(deadline);
    const std::size_t pos = Find(key, hash);
    if (pos != KeyIndex::kAbsent) {
      const std::uint32_t i = index_.EntryAt(pos);
      Entry& e = At(i);
      e.value.Destroy();
      e.value.Construct(std::move(value));
      Reschedule(i, deadline);
      return true;
    }
    ReserveEntry();
    index_.ReserveOneMore();
    const std::uint32_t i = AllocateEntry();
    Entry& e = At(i);
    e.key.Construct(std::move(key));
    e.value.Construct(std::move(value));
    e.deadline = deadline;
    index_.Insert(hash, i);
    Link(i, Slot(deadline));
    return false;
  }
  bool Set(K key, V value, std::uint64_t deadline) {
    const std::uint32_t hash = HashOf(key);
    return Set(std::move(key), std::move(value), deadline, hash);
  }

  // Reschedules a present key to `deadline` (clamped as in Set), keeping its
  // value. Returns false if the key is absent. A later deadline costs one map
  // probe and one write; an earlier one also relinks the entry.
  bool Move(const K& key, std::uint64_t deadline, std::uint32_t hash) {
    const std::size_t pos = Find(key, hash);
    if (pos == KeyIndex::kAbsent) return false;
    Reschedule(index_.EntryAt(pos), Clamp(deadline));
    return true;
  }
  bool Move(const K& key, std::uint64_t deadline) {
    return Move(key, deadline, HashOf(key));
  }

  // Removes a present key; its value is destroyed. Returns false if absent.
  bool Remove(const K& key, std::uint32_t hash) {
    const std::size_t pos = Find(key, hash);
    if (pos == KeyIndex::kAbsent) return false;
    const std::uint32_t i = index_.EntryAt(pos);
    index_.EraseAt(pos);
    Unlink(i);
    DestroyEntry(At(i));
    FreeEntry(i);
    return true;
  }
  bool Remove(const K& key) { return Remove(key, HashOf(key)); }

  // The deadline of a present key, or nullopt.
  std::optional<std::uint64_t> DeadlineOf(const K& key) const {
    const std::size_t pos = Find(key, HashOf(key));
    if (pos == KeyIndex::kAbsent) return std::nullopt;
    return At(index_.EntryAt(pos)).deadline;
  }

  // Batch hints (see Batches above); no effect on state.
  void PrefetchIndex(std::uint32_t hash) const { index_.Prefetch(hash); }
  // Fetches the entry of the first word stored under `hash`, without reading
  // any entry (a collision at worst fetches the wrong one), and returns it
  // for PrefetchLinks: a candidate, or kNoEntry.
  std::uint32_t PrefetchEntry(std::uint32_t hash) const {
    const std::size_t pos =
        index_.Find(hash, [](std::uint32_t) { return true; });
    if (pos == KeyIndex::kAbsent) return kNoEntry;
    const std::uint32_t i = index_.EntryAt(pos);
    __builtin_prefetch(&At(i), 1);
    return i;
  }
  // Once the candidate's entry has arrived: fetches what unlinking it
  // (removing, or moving earlier than its deadline) and relinking it at
  // `deadline` will write, its neighbours and the new list's head. The
  // candidate may be stale by now; its links are only bounds-checked
  // indices here, never followed.
  void PrefetchLinks(std::uint32_t candidate, bool removing,
                     std::uint64_t deadline) const {
    if (candidate >= used_) return;
    const Entry& e = At(candidate);
    if (!removing && deadline >= e.deadline) return;  // lazy: one write
    PrefetchIfEntry(e.prev);
    PrefetchIfEntry(e.next);
    if (!removing) {
      PrefetchIfEntry(heads_[ListOf(Slot(Clamp(deadline)), candidate)]);
    }
  }
  static constexpr std::uint32_t kNoEntry = 0xFFFFFFFFu;

  // The first tick after now() at which some timer may fire, or kNever when
  // the wheel is empty. May be early (after removals), never late. A bitmap
  // search when something is due within a rotation, else O(num_slots).
  std::uint64_t NextDueTick() const {
    if (index_.size() == 0) return kNever;
    const std::uint32_t start = Slot(now_ + 1);
    const std::int64_t slot = FindHot(start);
    if (slot >= 0) {
      return now_ + 1 +
             (static_cast<std::uint32_t>(slot) + num_slots_ - start) %
                 num_slots_;
    }
    return *std::min_element(mins_.begin(), mins_.end());
  }

  // Processes ticks now()+1 .. target in order. Every timer whose deadline
  // is reached is removed and handed to sink(tick, K&&, V&&), in tick order.
  template <typename Sink>
  void AdvanceTo(std::uint64_t target, Sink&& sink) {
    target = std::min(target, kMaxTick);
    while (now_ < target) {
      if (index_.size() == 0) {
        now_ = target;
        return;
      }
      const std::uint64_t due = NextDueTick();
      if (due > target) {
        ShiftTo(target);
        return;
      }
      ShiftTo(due - 1);
      now_ = due;
      ScanSlot(due, sink);
    }
  }

  // Removes every timer, handing each to sink(K&&, V&&) in no set order.
  // O(size + num_slots).
  template <typename Sink>
  void TakeAll(Sink&& sink) {
    index_.ForEach([&](std::uint32_t i) {
      Entry& e = At(i);
      sink(std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
    });
    index_.Clear();
    std::fill(heads_.begin(), heads_.end(), kNil);
    std::fill(mins_.begin(), mins_.end(), kNever);
    std::fill(hot_.begin(), hot_.end(), 0);
    free_head_ = kNil;
    used_ = 0;
  }

  // Bytes the wheel holds: pool chunks, map and slot arrays.
  std::size_t MemoryBytes() const {
    return chunks_.size() * kChunkBytes + index_.MemoryBytes() +
           heads_.capacity() * sizeof(std::uint32_t) +
           mins_.capacity() * sizeof(std::uint64_t) +
           hot_.capacity() * sizeof(std::uint64_t) +
           chunks_.capacity() * sizeof(chunks_[0]);
  }

  // Bytes of one pooled entry.
  static constexpr std::size_t EntryBytes() { return sizeof(Entry); }

 private:
  // Link values: an index into the pool, kNil, or (prev of a list's first
  // entry) kHeadTag | list id, so an unlink never needs to know the list.
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  static constexpr std::uint32_t kHeadTag = 0x80000000u;
  static constexpr std::uint32_t kMaxEntries = kHeadTag - 1;
  // The pool: chunks of kChunkSize entries. The first kChunksPerSlab are
  // allocated one by one, so a small wheel stays small; later ones are cut
  // from slabs of kChunksPerSlab (2 MiB of 32-byte entries), which sit on
  // huge pages (LargeAllocate).
  static constexpr int kChunkBits = 12;
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr std::size_t kChunksPerSlab = 16;

  struct Entry {
    std::uint64_t deadline;
    std::uint32_t prev;
    std::uint32_t next;  // also the free list's link
    ManualStorage<K> key;
    ManualStorage<V> value;
  };
  static constexpr std::size_t kChunkBytes = kChunkSize * sizeof(Entry);

  void PrefetchIfEntry(std::uint32_t i) const {
    if (i < used_) __builtin_prefetch(&At(i), 1);  // not kNil, not a head tag
  }

  std::size_t Find(const K& key, std::uint32_t hash) const {
    return index_.Find(
        hash, [&](std::uint32_t i) { return eq_(At(i).key.Get(), key); });
  }

  Entry& At(std::uint32_t i) {
    return chunks_[i >> kChunkBits][i & (kChunkSize - 1)];
  }
  const Entry& At(std::uint32_t i) const {
    return chunks_[i >> kChunkBits][i & (kChunkSize - 1)];
  }

  std::uint32_t Slot(std::uint64_t tick) const {
    return static_cast<std::uint32_t>(tick % num_slots_);
  }
  // The list of `slot` that entry i belongs to.
  static std::uint32_t ListOf(std::uint32_t slot, std::uint32_t i) {
    return slot * kLanes + (i & (kLanes - 1));
  }

  std::uint64_t Clamp(std::uint64_t deadline) const {
    return std::min(std::max(deadline, now_ + 1), kMaxTick);
  }

  // Makes sure AllocateEntry will not need to allocate.
  void ReserveEntry() {
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

  void FreeChunk(std::size_t c) {
    if (c < kChunksPerSlab) {
      LargeFree(chunks_[c], kChunkBytes, alignof(Entry));
    } else if (c % kChunksPerSlab == 0) {
      LargeFree(chunks_[c], kChunkBytes * kChunksPerSlab, alignof(Entry));
    }
  }

  std::uint32_t AllocateEntry() {
    if (free_head_ != kNil) {
      std::uint32_t i = free_head_;
      free_head_ = At(i).next;
      return i;
    }
    return used_++;
  }

  void FreeEntry(std::uint32_t i) {
    At(i).next = free_head_;
    free_head_ = i;
  }

  static void DestroyEntry(Entry& e) {
    e.key.Destroy();
    e.value.Destroy();
  }

  void Link(std::uint32_t i, std::uint32_t slot) {
    Entry& e = At(i);
    const std::uint32_t list = ListOf(slot, i);
    e.prev = kHeadTag | list;
    e.next = heads_[list];
    if (e.next != kNil) At(e.next).prev = i;
    heads_[list] = i;
    if (e.deadline < mins_[slot]) {
      mins_[slot] = e.deadline;
      if (e.deadline <= now_ + num_slots_) SetHot(slot);
    }
  }

  // Unlinks entry i. A slot left empty forgets its bound, so an idle loop is
  // not woken for it; otherwise the bound may now be early, which costs at
  // most one needless scan of the slot.
  void Unlink(std::uint32_t i) {
    Entry& e = At(i);
    if (e.prev & kHeadTag) {
      const std::uint32_t list = e.prev & ~kHeadTag;
      heads_[list] = e.next;
      if (e.next == kNil) ForgetIfEmpty(list / kLanes);
    } else {
      At(e.prev).next = e.next;
    }
    if (e.next != kNil) At(e.next).prev = e.prev;
  }

  void ForgetIfEmpty(std::uint32_t slot) {
    const std::uint32_t* lanes = &heads_[std::size_t{slot} * kLanes];
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      if (lanes[l] != kNil) return;
    }
    mins_[slot] = kNever;
    ClearHot(slot);
  }

  void Reschedule(std::uint32_t i, std::uint64_t deadline) {
    Entry& e = At(i);
    if (deadline >= e.deadline) {
      // Lazy: the entry's slot is scanned no later than its old deadline,
      // and the scan relinks it.
      e.deadline = deadline;
      return;
    }
    Unlink(i);
    e.deadline = deadline;
    Link(i, Slot(deadline));
  }

  // Moves the cursor to `tick` when no slot is due in (now_, tick]. The
  // window of the next rotation gains ticks now_+n+1 .. tick+n, whose slots
  // are the ones passed over; mark those now due within it.
  void ShiftTo(std::uint64_t tick) {
    if (tick <= now_) return;
    const std::uint64_t passed =
        std::min<std::uint64_t>(tick - now_, num_slots_);
    const std::uint64_t horizon = tick + num_slots_;
    std::uint32_t slot = Slot(now_ + 1);
    for (std::uint64_t k = 0; k < passed; ++k) {
      if (mins_[slot] <= horizon) SetHot(slot);
      if (++slot == num_slots_) slot = 0;
    }
    now_ = tick;
  }

  // The cursor is at `tick`: fire what is due in its slot, relink entries
  // that were moved later, and recompute the slot's bound. The lanes are
  // walked side by side, one entry of each in turn, prefetching each lane's
  // next entry as soon as its link is known. A fired entry then waits in a
  // short ring (kFiring deep) between leaving its list and leaving the
  // index, so that its index line arrives while the walk goes on.
  template <typename Sink>
  void ScanSlot(std::uint64_t tick, Sink& sink) {
    const std::uint32_t slot = Slot(tick);
    std::uint64_t bound = kNever;
    std::uint32_t cursor[kLanes];
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      cursor[l] = heads_[slot * kLanes + l];
      if (cursor[l] != kNil) __builtin_prefetch(&At(cursor[l]), 1);
    }
    struct Firing {
      std::uint32_t entry, hash;
    };
    Firing firing[kFiring];
    std::size_t fired = 0;
    auto retire = [&](const Firing& f) {
      Entry& e = At(f.entry);
      index_.EraseAt(Find(e.key.Get(), f.hash));
      sink(tick, std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
      FreeEntry(f.entry);
    };
    for (bool walking = true; walking;) {
      walking = false;
      for (std::uint32_t l = 0; l < kLanes; ++l) {
        const std::uint32_t i = cursor[l];
        if (i == kNil) continue;
        walking = true;
        Entry& e = At(i);
        cursor[l] = e.next;
        if (e.next != kNil) __builtin_prefetch(&At(e.next), 1);
        if (e.deadline <= tick) {
          Unlink(i);
          Firing& f = firing[fired++ % kFiring];
          if (fired > kFiring) retire(f);
          f = {i, HashOf(e.key.Get())};
          index_.Prefetch(f.hash);
        } else if (Slot(e.deadline) != slot) {
          Unlink(i);
          Link(i, Slot(e.deadline));
        } else {
          bound = std::min(bound, e.deadline);
        }
      }
    }
    for (std::size_t k = fired > kFiring ? fired - kFiring : 0; k < fired;
         ++k) {
      retire(firing[k % kFiring]);
    }
    mins_[slot] = bound;
    if (bound <= tick + num_slots_) {
      SetHot(slot);
    } else {
      ClearHot(slot);
    }
  }
  static constexpr std::size_t kFiring = 16;

  void SetHot(std::uint32_t slot) {
    hot_[slot >> 6] |= std::uint64_t{1} << (slot & 63);
  }
  void ClearHot(std::uint32_t slot) {
    hot_[slot >> 6] &= ~(std::uint64_t{1} << (slot & 63));
  }

  // The first hot slot at or after `start`, wrapping around; -1 if none.
  std::int64_t FindHot(std::uint32_t start) const {
    const std::size_t words = hot_.size();
    std::size_t w = start >> 6;
    std::uint64_t bits = hot_[w] & (~std::uint64_t{0} << (start & 63));
    for (std::size_t step = 0; step <= words; ++step) {
      if (bits != 0) {
        return static_cast<std::int64_t>(w * 64 + std::countr_zero(bits));
      }
      if (++w == words) w = 0;
      bits = hot_[w];
    }
    return -1;
  }

  const std::uint32_t num_slots_;
  Hash hash_;
  Eq eq_;
  std::uint64_t now_ = 0;

  std::vector<Entry*> chunks_;  // of kChunkSize entries each
  std::uint32_t used_ = 0;      // entries ever handed out from chunks_
  std::uint32_t free_head_ = kNil;

  KeyIndex index_;

  std::vector<std::uint32_t> heads_;  // first entry of each list, or kNil
  std::vector<std::uint64_t> mins_;   // lower bound of each slot's deadlines
  std::vector<std::uint64_t> hot_;    // bit s: mins_[s] <= now_ + num_slots_
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_H_
