// The single-threaded keyed timing wheel. No threads, no clocks: time is a
// tick count that only AdvanceTo moves, so it can be tested and fuzzed alone.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "timingwheel/internal/due_bitmap.h"
#include "timingwheel/internal/entry_pool.h"
#include "timingwheel/internal/key_index.h"
#include "timingwheel/internal/manual_storage.h"
#include "timingwheel/internal/slot_lists.h"
#include "timingwheel/internal/ticks.h"

namespace timingwheel {
namespace internal {

// Wheel<K, V> maps each key to one pending timer with a deadline in ticks.
//
// Pieces: entries live in an EntryPool and link into the SlotLists by
// 32-bit index; the KeyIndex maps a key's hash to its entry, so the key is
// stored once, in the entry; a DueBitmap marks the slots with work soon.
// For 8-byte keys and values an entry is 32 bytes, the index 8 to 16 more.
//
// Placement: an entry with deadline D belongs in slot D % num_slots; the
// cursor visits that slot at tick D, and at earlier visits (D further than a
// rotation away: go-zero's "circle") the entry simply stays, and is walked
// past. Moving a timer later only rewrites its deadline: the entry stays in
// its old slot and is relinked when that slot is next scanned (go-zero's
// "diff"), which is never after the old deadline. Moving earlier and
// removing unlink at once, so no tombstones pile up.
//
// Scheduling: each slot keeps a lower bound of its entries' deadlines
// (mins_), and the DueBitmap marks the slots whose bound falls within the
// next rotation. Finding the next tick with work is a bitmap search, so idle
// stretches are skipped in one step, and an advance costs O(due slots) plus
// O(min(ticks, num_slots)) bit refreshes, never a walk over future entries.
//
// Batches: a caller applying many operations computes HashOf(key) once per
// operation, calls PrefetchIndex a few operations ahead, PrefetchEntry
// nearer and PrefetchLinks nearer still, so the cache misses of several
// operations overlap; the operations then take the same hash.
//
// Not thread-safe: one thread owns a Wheel.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class Wheel {
  struct Entry;
  using Pool = EntryPool<Entry>;
  using Lists = SlotLists<Entry>;

 public:
  static constexpr std::uint32_t kLanes = Lists::kLanes;
  static constexpr std::uint32_t kMaxSlots = Lists::kMaxSlots;
  // What PrefetchEntry returns when no entry is stored under the hash.
  static constexpr std::uint32_t kNoEntry = Pool::kNil;

  // num_slots in [1, kMaxSlots]. Allocates the slot arrays: 4 * kLanes + 8
  // bytes and a bit per slot.
  explicit Wheel(std::uint32_t num_slots, Hash hash = Hash(), Eq eq = Eq())
      : num_slots_(num_slots),
        hash_(std::move(hash)),
        eq_(std::move(eq)),
        lists_(num_slots),
        mins_(num_slots, kNever),
        due_(num_slots) {}

  ~Wheel() {
    index_.ForEach([this](std::uint32_t i) { DestroyEntry(pool_.At(i)); });
  }

  Wheel(const Wheel&) = delete;
  Wheel& operator=(const Wheel&) = delete;

  // Makes room for n timers in the key index (no rehash below that).
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
  // the new deadline. Returns true if the key was present. One index probe.
  // Throws std::bad_alloc, changing nothing, when memory runs out.
  bool Set(K key, V value, std::uint64_t deadline, std::uint32_t hash) {
    deadline = Clamp(deadline);
    const std::size_t pos = Find(key, hash);
    if (pos != KeyIndex::kAbsent) {
      const std::uint32_t i = index_.EntryAt(pos);
      Entry& e = pool_.At(i);
      e.value.Destroy();
      e.value.Construct(std::move(value));
      Reschedule(i, deadline);
      return true;
    }
    pool_.ReserveOne();
    index_.ReserveOneMore();
    const std::uint32_t i = pool_.Allocate();
    Entry& e = pool_.At(i);
    e.key.Construct(std::move(key));
    e.value.Construct(std::move(value));
    e.deadline = deadline;
    index_.Insert(hash, i);
    Link(i);
    return false;
  }
  bool Set(K key, V value, std::uint64_t deadline) {
    const std::uint32_t hash = HashOf(key);
    return Set(std::move(key), std::move(value), deadline, hash);
  }

  // Reschedules a present key to `deadline` (clamped as in Set), keeping its
  // value. Returns false if the key is absent. A later deadline costs one
  // index probe and one write; an earlier one also relinks the entry.
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
  // One index probe and an O(1) unlink.
  bool Remove(const K& key, std::uint32_t hash) {
    const std::size_t pos = Find(key, hash);
    if (pos == KeyIndex::kAbsent) return false;
    const std::uint32_t i = index_.EntryAt(pos);
    index_.EraseAt(pos);
    Unlink(i);
    DestroyEntry(pool_.At(i));
    pool_.Free(i);
    return true;
  }
  bool Remove(const K& key) { return Remove(key, HashOf(key)); }

  // The deadline of a present key, or nullopt. One index probe.
  std::optional<std::uint64_t> DeadlineOf(const K& key) const {
    const std::size_t pos = Find(key, HashOf(key));
    if (pos == KeyIndex::kAbsent) return std::nullopt;
    return pool_.At(index_.EntryAt(pos)).deadline;
  }

  // Batch hints (see Batches above); none changes the wheel.
  //
  // Fetches the index line where a lookup of `hash` starts.
  void PrefetchIndex(std::uint32_t hash) const { index_.Prefetch(hash); }
  // Once that line has arrived: fetches the entry of the first word stored
  // under `hash`, without reading any entry (a collision at worst fetches
  // the wrong one), and returns it for PrefetchLinks: a candidate, or
  // kNoEntry.
  std::uint32_t PrefetchEntry(std::uint32_t hash) const {
    const std::size_t pos =
        index_.Find(hash, [](std::uint32_t) { return true; });
    if (pos == KeyIndex::kAbsent) return kNoEntry;
    const std::uint32_t i = index_.EntryAt(pos);
    __builtin_prefetch(&pool_.At(i), 1);
    return i;
  }
  // Once the candidate's entry has arrived: fetches what unlinking it
  // (removing, or moving earlier than its deadline) and relinking it at
  // `deadline` will write: its neighbours and the new list's head. The
  // candidate may be stale by now; its links are only bounds-checked here,
  // never followed.
  void PrefetchLinks(std::uint32_t candidate, bool removing,
                     std::uint64_t deadline) const {
    if (!pool_.Holds(candidate)) return;
    const Entry& e = pool_.At(candidate);
    if (!removing && deadline >= e.deadline) return;  // lazy: one write
    PrefetchIfEntry(e.prev);
    PrefetchIfEntry(e.next);
    if (!removing) {
      __builtin_prefetch(lists_.HeadFor(Slot(Clamp(deadline)), candidate), 1);
    }
  }

  // The first tick after now() at which some timer may fire, or kNever when
  // the wheel is empty. May be early (after removals), never late. A bitmap
  // search when something is due within a rotation, else O(num_slots).
  std::uint64_t NextDueTick() const {
    if (index_.size() == 0) return kNever;
    const std::uint32_t start = Slot(now_ + 1);
    const std::int64_t slot = due_.FindFrom(start);
    if (slot != DueBitmap::kNone) {
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
      Entry& e = pool_.At(i);
      sink(std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
    });
    index_.Clear();
    lists_.Clear();
    std::fill(mins_.begin(), mins_.end(), kNever);
    due_.ClearAll();
    pool_.Clear();
  }

  // Bytes the wheel holds: pool, index and slot arrays.
  std::size_t MemoryBytes() const {
    return pool_.MemoryBytes() + index_.MemoryBytes() + lists_.MemoryBytes() +
           mins_.capacity() * sizeof(std::uint64_t) + due_.MemoryBytes();
  }

  // Bytes of one pooled entry.
  static constexpr std::size_t EntryBytes() { return sizeof(Entry); }

 private:
  struct Entry {
    std::uint64_t deadline;
    std::uint32_t prev;
    std::uint32_t next;  // also the pool's free-list link
    ManualStorage<K> key;
    ManualStorage<V> value;
  };
  // How many fired entries wait between leaving their list and leaving the
  // index (see ScanSlot).
  static constexpr std::size_t kFiring = 16;

  std::size_t Find(const K& key, std::uint32_t hash) const {
    return index_.Find(
        hash, [&](std::uint32_t i) { return eq_(pool_.At(i).key.Get(), key); });
  }

  void PrefetchIfEntry(std::uint32_t i) const {
    if (pool_.Holds(i)) __builtin_prefetch(&pool_.At(i), 1);
  }

  std::uint32_t Slot(std::uint64_t tick) const {
    return static_cast<std::uint32_t>(tick % num_slots_);
  }

  std::uint64_t Clamp(std::uint64_t deadline) const {
    return std::min(std::max(deadline, now_ + 1), kMaxTick);
  }

  static void DestroyEntry(Entry& e) {
    e.key.Destroy();
    e.value.Destroy();
  }

  // Links entry i into the slot of its deadline and lowers that slot's
  // bound if needed.
  void Link(std::uint32_t i) {
    const std::uint64_t deadline = pool_.At(i).deadline;
    const std::uint32_t slot = Slot(deadline);
    lists_.Link(pool_, i, slot);
    if (deadline < mins_[slot]) {
      mins_[slot] = deadline;
      if (deadline <= now_ + num_slots_) due_.Set(slot);
    }
  }

  // Unlinks entry i. A slot left empty forgets its bound, so an idle loop is
  // not woken for it; otherwise the bound may now be early, which costs at
  // most one needless scan of the slot.
  void Unlink(std::uint32_t i) {
    const std::uint32_t slot = lists_.Unlink(pool_, i);
    if (slot != Lists::kNoSlot && lists_.Empty(slot)) {
      mins_[slot] = kNever;
      due_.Clear(slot);
    }
  }

  void Reschedule(std::uint32_t i, std::uint64_t deadline) {
    Entry& e = pool_.At(i);
    if (deadline >= e.deadline) {
      // Lazy: the entry's slot is scanned no later than its old deadline,
      // and the scan relinks it.
      e.deadline = deadline;
      return;
    }
    Unlink(i);
    e.deadline = deadline;
    Link(i);
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
      if (mins_[slot] <= horizon) due_.Set(slot);
      if (++slot == num_slots_) slot = 0;
    }
    now_ = tick;
  }

  // The cursor is at `tick`: fire what is due in its slot, relink entries
  // that were moved later, and recompute the slot's bound. The lanes are
  // walked side by side, one entry of each in turn, prefetching each lane's
  // next entry as soon as its link is known. A fired entry then waits in a
  // ring (kFiring deep) between leaving its list and leaving the index, so
  // that its index line arrives while the walk goes on.
  template <typename Sink>
  void ScanSlot(std::uint64_t tick, Sink& sink) {
    const std::uint32_t slot = Slot(tick);
    std::uint64_t bound = kNever;
    std::uint32_t cursor[kLanes];
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      cursor[l] = lists_.Head(slot, l);
      PrefetchIfEntry(cursor[l]);
    }
    struct Firing {
      std::uint32_t entry, hash;
    };
    Firing firing[kFiring];
    std::size_t fired = 0;
    auto retire = [&](const Firing& f) {
      Entry& e = pool_.At(f.entry);
      index_.EraseAt(Find(e.key.Get(), f.hash));
      sink(tick, std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
      pool_.Free(f.entry);
    };
    for (bool walking = true; walking;) {
      walking = false;
      for (std::uint32_t l = 0; l < kLanes; ++l) {
        const std::uint32_t i = cursor[l];
        if (i == Pool::kNil) continue;
        walking = true;
        Entry& e = pool_.At(i);
        cursor[l] = e.next;
        PrefetchIfEntry(e.next);
        if (e.deadline <= tick) {
          Unlink(i);
          Firing& f = firing[fired++ % kFiring];
          if (fired > kFiring) retire(f);
          f = {i, HashOf(e.key.Get())};
          index_.Prefetch(f.hash);
        } else if (Slot(e.deadline) != slot) {
          Unlink(i);
          Link(i);
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
      due_.Set(slot);
    } else {
      due_.Clear(slot);
    }
  }

  const std::uint32_t num_slots_;
  Hash hash_;
  Eq eq_;
  std::uint64_t now_ = 0;

  Pool pool_;
  KeyIndex index_;
  Lists lists_;
  std::vector<std::uint64_t> mins_;  // lower bound of each slot's deadlines
  DueBitmap due_;                    // slot s: mins_[s] <= now_ + num_slots_
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_H_
