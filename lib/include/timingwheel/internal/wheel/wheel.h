// The single-threaded keyed timing wheel. No threads, no clocks: time is a
// tick count that only AdvanceTo moves, so it can be tested and fuzzed alone.
//
// Why over 450 lines: one class whose operations share one filing protocol
// (draining slots, lazy moves, lazy removes: where an entry may be and when
// it is filed again); its self-contained parts already live beside it
// (Level, SlotLists, EntryPool, KeyIndex). Split, a reader must hold both
// files to check any one operation.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_WHEEL_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_WHEEL_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/wheel/entry_pool.h"
#include "timingwheel/internal/wheel/key_index.h"
#include "timingwheel/internal/wheel/level.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/base/manual_storage.h"
#include "timingwheel/internal/base/prefetch.h"
#include "timingwheel/internal/base/stored_key.h"
#include "timingwheel/internal/wheel/slot_lists.h"
#include "timingwheel/internal/base/ticks.h"

namespace timingwheel {
namespace internal {

// Wheel<K, V> maps each key to one pending timer with a deadline in ticks.
//
// Pieces: entries live in an EntryPool and link into the SlotLists by
// 32-bit index; the KeyIndex maps a key's hash to its entry, so the key is
// stored once, in the entry. For 8-byte keys and values an entry is 32
// bytes, the index 8 to 16 more.
//
// Levels: level 0 has num_slots slots (rounded up to a power of two) of one
// tick; each level above has level_slots slots, each spanning a whole
// rotation of the level below, up to a top level that reaches kMaxTick.
// Each level holds two rotations, now's and the next, and a deadline is
// filed on the lowest level that holds it (see Level). A due slot holds only
// timers due in it, any delay costs the same few refilings (about one per
// level it starts above level 0), and precision does not degrade with
// distance: every timer fires on the tick of its deadline.
//
// Cascading ahead: the slot a coarse level will reach next (its "draining"
// slot) already fits the finer levels' next rotation, so its timers can move
// down during the span before it starts: Cascade does that a budget at a
// time, and AdvanceTo finishes it on the tick before the slot starts at the
// latest. Moving a coarse slot all at once on its first tick would stall
// that tick for as long as the slot is full.
//
// Lazy moves: moving a timer later only rewrites its deadline; the entry stays in its slot,
// which is processed no later than the old deadline, and is filed again
// then. Moving earlier unlinks at once.
//
// Kept deadlines: AdvanceTo may be given a `kept` function, asked for a
// due timer's deadline kept outside the wheel (a connection's own field,
// written on each request), and a later one files the timer again instead
// of firing it: the same path as a lazy move, with the deadline read where
// the caller keeps it, so that pushing a timer later costs the wheel
// nothing until its slot comes round.
//
// Lazy removes, on level 0 only: a removed timer whose entry is known to be
// filed on level 0 (so its slot comes within two rotations of level 0, at
// most 2 * num_slots ticks) leaves the entry in the list, key and value
// destroyed, marked kRemoved, and the scan of that slot frees it. The
// unlink would write both neighbours, two more cache misses, for entries
// the scan walks anyway. A timer filed on a coarse level unlinks at once,
// so no removed entry lingers there: a coarse slot may be far off, and the
// memory of every timer removed meanwhile would wait for it. Which level an
// entry is on follows from its deadline and the draining slots (see
// RemovesLazily), so neither sets nor moves pay for telling.
//
// Scheduling: each level keeps a bitmap of occupied slots, so the next tick
// with work (a level-0 slot, or a coarse slot starting to drain or due to
// be drained) is a count of trailing zeros or two per level, and idle
// stretches are skipped in one step.
//
// Batches: a caller applying many operations computes HashOf(key) once per
// operation, calls PrefetchIndex a few operations ahead and PrefetchEntry
// nearer, so the cache misses of several operations overlap; the
// operations then take the same hash.
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
  // How entries hold a key: as a K, or a string key's characters in place
  // (base/stored_key.h). Sets take one, sinks are handed one, and
  // Store::Take turns it into a K on the thread that will own it.
  using Store = KeyStore<K, Eq>;
  using StoredKey = typename Store::Stored;
  // Largest num_slots: level 0 and the levels above fit the lists' ids.
  static constexpr std::uint32_t kMaxSlots = Lists::kMaxSlots / 2;
  // Slots of each level above level 0, unless the constructor says.
  static constexpr std::uint32_t kLevelSlots = 64;

  // num_slots in [1, kMaxSlots]: level 0's slots, rounded up to a power of
  // two. level_slots, a power of two in [2, 64], is the slot count of every
  // level above (tests use 2 to 4 to make cascades frequent). Allocates
  // 4 * kLanes bytes and a bit per slot of every level: about 20 KiB for
  // the defaults.
  explicit Wheel(std::uint32_t num_slots, Hash hash = Hash(), Eq eq = Eq(),
                 std::uint32_t level_slots = kLevelSlots)
      : level0_bits_(std::countr_zero(std::bit_ceil(num_slots))),
        level_bits_(std::countr_zero(level_slots)),
        hash_(std::move(hash)),
        eq_(std::move(eq)),
        levels_(MakeLevels(level0_bits_, level_bits_)),
        lists_(levels_.back().first_slot() + levels_.back().slots()) {}

  ~Wheel() {
    ForEachTimer([](Entry& e) { DestroyEntry(e); });
  }

  Wheel(const Wheel&) = delete;
  Wheel& operator=(const Wheel&) = delete;

  // Makes room for n timers in the key index (no rehash below that).
  void Reserve(std::size_t n) { index_.Reserve(n); }

  // Memory another thread makes resident for the wheel
  // (base/resident_block.h): the pool's next chunk or slab, allocated ahead,
  // and the key index's new table during a growth, faulted in ahead of the
  // growth's steps. nullptr: the wheel faults its memory in itself. O(1).
  void UseResidentMemory(ResidentBlock* pool, ResidentRange* index) {
    pool_.UseResidentBlock(pool);
    index_.UseResidentRange(index);
  }

  // Ticks processed so far.
  std::uint64_t now() const { return now_; }
  // Pending timers.
  std::size_t size() const { return index_.size(); }
  // Removed timers whose entries still wait in a level-0 list for their
  // slot's scan to free them (see Lazy removes).
  std::size_t removed_in_lists() const { return removed_in_lists_; }
  // Level 0's slots in one rotation (num_slots rounded up to a power of
  // two).
  std::uint32_t num_slots() const { return levels_[0].slots() / 2; }
  // Levels, level 0 included.
  std::size_t num_levels() const { return levels_.size(); }
  // Timers filed again when the slot they sat in was processed: cascades to
  // a finer level, and timers moved later catching up. A timer is refiled at
  // most once per level above level 0 it starts on, plus once per lazy move
  // it had pending when its slot came.
  std::uint64_t refiled() const { return refiled_; }

  // The hash every operation on `key` uses; compute it once per operation.
  // Folded, not mixed: the index's FibonacciHome spreads it (base/hash.h).
  std::uint32_t HashOf(const K& key) const { return HashWith(hash_, key); }
  // The same with a given hasher: for callers that hash a key on another
  // thread for a command to this wheel (the result must be HashOf's).
  static std::uint32_t HashWith(const Hash& hash, const K& key) {
    return FoldHash32(hash(key));
  }

  // Schedules `key` at tick `deadline`. A deadline at or before now() is
  // treated as now() + 1 (the next tick), one past kMaxTick as kMaxTick. A
  // present key gets the new value (the old one is destroyed: superseded) and
  // the new deadline. Returns true if the key was present. One index probe.
  // Throws std::bad_alloc, changing nothing, when memory runs out.
  bool Set(StoredKey key, V value, std::uint64_t deadline,
           std::uint32_t hash) {
    deadline = Clamp(deadline);
    const Found found = Find</*kBeforeInsert=*/true>(key, hash);
    if (found.entry != nullptr) {
      Entry& e = *found.entry;
      e.value.Destroy();
      e.value.Construct(std::move(value));
      Reschedule(found.i, e, deadline);
      return true;
    }
    pool_.ReserveOne();
    index_.ReserveOneMore();
    const std::uint32_t i = pool_.Allocate();
    Entry& e = pool_.At(i);
    e.key.Construct(std::move(key));
    e.value.Construct(std::move(value));
    e.deadline = deadline;
    e.hash.Set(hash);
    index_.Insert(hash, i);
    Link(i, e);
    return false;
  }
  bool Set(K key, V value, std::uint64_t deadline) {
    const std::uint32_t hash = HashOf(key);
    return Set(StoredKey(std::move(key)), std::move(value), deadline, hash);
  }

  // Reschedules a present key to `deadline` (clamped as in Set), keeping its
  // value. Returns false if the key is absent. A later deadline costs one
  // index probe and one write; an earlier one also relinks the entry.
  // (`key` is a K or a StoredKey, as for Remove.)
  template <typename Key>
  bool Move(const Key& key, std::uint64_t deadline, std::uint32_t hash) {
    const Found found = Find(key, hash);
    if (found.entry == nullptr) return false;
    Reschedule(found.i, *found.entry, Clamp(deadline));
    return true;
  }
  bool Move(const K& key, std::uint64_t deadline) {
    return Move(key, deadline, HashOf(key));
  }

  // Removes a present key; its value is destroyed. Returns false if absent.
  // One index probe and an O(1) unlink.
  template <typename Key>
  bool Remove(const Key& key, std::uint32_t hash) {
    const Found found = Find(key, hash);
    if (found.entry == nullptr) return false;
    index_.EraseAt(found.pos);
    Entry& e = *found.entry;
    DestroyEntry(e);
    if (RemovesLazily(e.deadline)) {
      e.deadline = kRemoved;
      ++removed_in_lists_;
      return true;
    }
    Unlink(e);
    pool_.Free(found.i, e);
    return true;
  }
  bool Remove(const K& key) { return Remove(key, HashOf(key)); }

  // The deadline of a present key, or nullopt. One index probe.
  std::optional<std::uint64_t> DeadlineOf(const K& key) const {
    const std::size_t pos = index_.Find(HashOf(key), [&](std::uint32_t i) {
      return Store::Equal(eq_, pool_.At(i).key.Get(), key);
    });
    if (pos == KeyIndex::kAbsent) return std::nullopt;
    return pool_.At(index_.EntryAt(pos)).deadline;
  }

  // Batch hints (see Batches above); none changes the wheel.
  //
  // Fetches the index lines where a lookup of `hash` starts (its home's and
  // the next: see KeyIndex::Prefetch).
  void PrefetchIndex(std::uint32_t hash) const { index_.Prefetch(hash); }
  // Once those lines have arrived: fetches the entry of the first word stored
  // under `hash`, without reading any entry (a collision at worst fetches
  // the wrong one).
  void PrefetchEntry(std::uint32_t hash) const {
    const std::size_t pos =
        index_.Find(hash, [](std::uint32_t) { return true; });
    if (pos != KeyIndex::kAbsent) {
      PrefetchObject(&pool_.At(index_.EntryAt(pos)));
    }
  }

  // The first tick after now() at which the wheel has work, or kNever when
  // it is empty: a timer may fire, or a coarse slot starts to drain, or must
  // have drained (see Cascade). May be early (timers moved later, or work
  // that only refiles), never late. A bitmap search per level.
  std::uint64_t NextDueTick() const {
    if (index_.size() == 0 && removed_in_lists_ == 0) return kNever;
    std::uint64_t due = levels_[0].NextOccupiedTick(now_);
    for (std::size_t l = 1; l < levels_.size(); ++l) {
      const Level& level = levels_[l];
      if (level.DrainingSlot(now_) != Level::kNone) {
        due = std::min(due, level.DrainDeadline(now_));
      }
      due = std::min(due, level.NextDrainStart(now_));
    }
    // Nothing ahead yet timers pending: only at the end of time, where a
    // timer set at now() == kMaxTick sits in now()'s own slot.
    return due == kNever ? kMaxTick : due;
  }

  // Processes ticks now()+1 .. target in order. Every timer whose deadline
  // is reached is removed and handed to sink(tick, StoredKey&&, V&&), in
  // tick order. Costs O(levels) per tick with work, plus the entries of the
  // slots processed; ticks without work are skipped.
  template <typename Sink>
  void AdvanceTo(std::uint64_t target, Sink&& sink) {
    AdvanceTo(target, sink, [](const StoredKey&, const V&) noexcept {
      return std::uint64_t{0};
    });
  }
  // The same, with deadlines the caller keeps: a timer whose deadline is
  // reached is first passed to kept(const StoredKey&, const V&), noexcept,
  // which returns the tick the caller keeps for it; one after the current
  // tick files the timer again at that tick (clamped as in Set) instead of
  // firing it, and counts in refiled(). kept must not call the wheel.
  template <typename Sink, typename Kept>
  void AdvanceTo(std::uint64_t target, Sink&& sink, Kept&& kept) {
    static_assert(noexcept(kept(std::declval<const StoredKey&>(),
                                std::declval<const V&>())),
                  "kept runs mid-scan: it must not throw");
    target = std::min(target, kMaxTick);
    while (now_ < target) {
      const std::uint64_t due = NextDueTick();
      if (due > target) {
        now_ = target;
        return;
      }
      now_ = std::max(due, now_ + 1);
      ProcessTick(sink, kept);
    }
  }

  // Removes every timer, handing each to sink(StoredKey&&, V&&) in no set
  // order. O(pool + slots).
  template <typename Sink>
  void TakeAll(Sink&& sink) {
    ForEachTimer([&](Entry& e) {
      sink(std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
    });
    index_.Clear();
    lists_.Clear();
    for (Level& level : levels_) level.UnmarkAll();
    pool_.Clear();
    removed_in_lists_ = 0;
  }

  // Moves timers of the coarse slots that are draining (those due to start
  // within one slot span: see Level) down to finer levels, about `budget`
  // a level, more as a slot's last tick nears. Returns true while some
  // draining slot still holds timers. Optional: a slot not drained by the
  // tick before it starts is drained whole then, by AdvanceTo; calling this
  // between advances spreads that work out, so no tick waits for a whole
  // coarse slot. Costs a bit test per level when nothing drains.
  bool Cascade(std::size_t budget) {
    bool more = false;
    for (std::size_t l = levels_.size(); l-- > 1;) {
      Level& level = levels_[l];
      const std::int64_t slot = level.DrainingSlot(now_);
      if (slot == Level::kNone) continue;
      // The nearer the deadline, the more at once: all of it on its tick.
      const std::uint64_t left = level.DrainDeadline(now_) - now_ + 1;
      const std::uint64_t span = std::uint64_t{1} << level.shift();
      const std::size_t share =
          budget * static_cast<std::size_t>(std::max<std::uint64_t>(
                       1, std::min<std::uint64_t>(span / left, 1 << 20)));
      Drain(level, static_cast<std::uint32_t>(slot), share);
      more |= level.Marked(static_cast<std::uint32_t>(slot));
    }
    return more;
  }

  // WantsCompaction: true when Compact has work, two comparisons or so.
  // Compact gives memory back when most timers are gone: a bounded step of
  // moving the key index into a smaller table and of relocating live entries
  // out of the pool's high chunks, which are then freed. (A key index growth
  // that sets left under way is GrowStep's, below.) Each step looks at about
  // `budget` index words and pool entries; returns true while there is more
  // to do. Costs two comparisons when there is nothing to do.
  //
  // Removed entries still waiting in level-0 lists (see Lazy removes) would
  // keep the pool from shrinking until their slots come round, or forever
  // under a clock that stops: when the pool would shrink without them,
  // Compact first walks the pool and unlinks them, `budget` entries a step.
  bool WantsCompaction() const {
    return index_.Shrinking() || index_.WantsShrink() || pool_.Shrinking() ||
           pool_.WantsShrink() || WantsPurge();
  }
  bool Compact(std::size_t budget) {
    if (WantsPurge()) {
      Purge(budget);
      return true;
    }
    if (index_.Shrinking()) {
      index_.ResizeStep(budget);
    } else if (index_.WantsShrink()) {
      index_.StartShrink();
    }
    if (pool_.WantsShrink()) pool_.StartShrink();
    while (pool_.Shrinking()) {
      const std::uint32_t from = pool_.NextToRelocate(budget);
      if (from == Pool::kNil) break;
      Relocate(from, pool_.Allocate());
    }
    return index_.Shrinking() || pool_.Shrinking();
  }

  // The key index grows as sets fill it, in steps the sets do (see
  // KeyIndex). A caller with time to spare may do those steps sooner, and
  // start the growth sooner while sets arrive fast:
  //   if (wheel.WantsEarlyGrowth() && sets_arrive_fast) wheel.StartGrowth();
  //   wheel.GrowStep(budget);
  // WantsEarlyGrowth: the index is at least half full and not resizing.
  // StartGrowth: allocates the doubled table (no memory touched), and may
  // throw std::bad_alloc, changing nothing. O(1) both.
  bool WantsEarlyGrowth() const { return index_.WantsEarlyGrowth(); }
  void StartGrowth() { index_.StartGrowth(); }
  // Does about `budget` words of a growth under way; returns true while
  // one is. A compare when none is.
  bool GrowStep(std::size_t budget) {
    return index_.Growing() && index_.ResizeStep(budget);
  }

  // Bytes the wheel holds: pool, index, slot lists and bitmaps.
  std::size_t MemoryBytes() const {
    std::size_t bytes =
        pool_.MemoryBytes() + index_.MemoryBytes() + lists_.MemoryBytes();
    for (const Level& level : levels_) bytes += level.MemoryBytes();
    return bytes;
  }

  // Bytes of one pooled entry.
  static constexpr std::size_t EntryBytes() { return sizeof(Entry); }

  // The first broken invariant, or OK. The pool's and the index's own, and
  // across the pieces:
  // - every live entry is in exactly one slot list (reached once from the
  //   heads), and a level marks exactly its non-empty slots;
  // - removed entries (kRemoved) wait on level 0 only, removed_in_lists()
  //   of them; the others are the index's size() timers, each found by a
  //   lookup of its key, whose word names it (so every word names a live
  //   entry whose key hashes to the word's hash);
  // - a timer is due after now() (or at kMaxTick), in a slot of its level's
  //   two rotations ahead of now() that starts no later than its deadline
  //   (later moves are lazy); on a coarse level, not in a draining slot past
  //   its drain deadline, nor where a remove would leave it in its list
  //   (RemovesLazily);
  // - RemovesLazily's note that nothing drains is true when it is current.
  // O(pool + slots * kLanes), plus a lookup per timer; for tests and
  // checking builds.
  absl::Status CheckInvariants() const {
    TW_RETURN_IF_ERROR(pool_.CheckInvariants());
    TW_RETURN_IF_ERROR(index_.CheckInvariants());
    TW_INVARIANT(now_ <= kMaxTick, "Wheel: now ", now_);
    bool draining = false;
    for (std::size_t l = 1; l < levels_.size(); ++l) {
      draining |= levels_[l].DrainingSlot(now_) != Level::kNone;
    }
    TW_INVARIANT(drain_checked_at_ != now_ || !nothing_draining_ || !draining,
                 "Wheel: noted that nothing drains at tick ", now_,
                 ", yet a slot does");
    std::vector<bool> seen;
    std::size_t linked = 0, removed = 0, timers = 0;
    for (std::size_t l = 0; l < levels_.size(); ++l) {
      const Level& level = levels_[l];
      const int shift = level.shift();
      // The first slot number ahead of now_: a physical slot p holds slot
      // number a, the one of the two rotations ahead that maps to it.
      const std::uint64_t ahead = (now_ >> shift) + 1;
      // The marked slots in order, and the runs of unmarked ones before
      // each, which must be empty.
      for (std::uint32_t from = 0;;) {
        const std::int64_t marked = level.NextMarked(from);
        TW_INVARIANT(marked < std::int64_t{level.slots()}, "Wheel: level ",
                     l, " marks slot ", marked, " of ", level.slots());
        const std::uint32_t p = marked == Level::kNone
                                    ? level.slots()
                                    : static_cast<std::uint32_t>(marked);
        TW_INVARIANT(lists_.EmptySlots(level.first_slot() + from, p - from),
                     "Wheel: an unmarked slot of level ", l, " in [", from,
                     ", ", p, ") holds entries");
        if (p == level.slots()) break;
        from = p + 1;
        const std::uint32_t slot = level.first_slot() + p;
        TW_INVARIANT(!lists_.Empty(slot), "Wheel: slot ", p, " of level ", l,
                     " is empty but marked");
        const std::uint64_t a =
            ahead + ((p - level.SlotOf(ahead)) & (level.slots() - 1));
        auto visit = [&](std::uint32_t i) -> absl::Status {
          if (i >= seen.size()) seen.resize(i + 1);
          TW_INVARIANT(!seen[i], "Wheel: entry ", i, " is in two lists");
          seen[i] = true;
          ++linked;
          const Entry& e = pool_.At(i);
          if (e.deadline == kRemoved) {
            TW_INVARIANT(l == 0, "Wheel: removed entry ", i,
                         " waits on level ", l);
            ++removed;
            return absl::OkStatus();
          }
          ++timers;
          const StoredKey& key = e.key.Get();
          const std::uint32_t hash = HashOf(Store::AsKey(key));
          TW_INVARIANT(HashOfEntry(e) == hash, "Wheel: entry ", i,
                       " holds a hash that is not its key's");
          const std::size_t pos =
              index_.Find(hash, [&](std::uint32_t j) {
                return pool_.Holds(j) && pool_.InUse(j) &&
                       pool_.At(j).deadline != kRemoved &&
                       Store::Equal(eq_, pool_.At(j).key.Get(), key);
              });
          TW_INVARIANT(pos != KeyIndex::kAbsent && index_.EntryAt(pos) == i,
                       "Wheel: a lookup of the key of entry ", i,
                       " does not find it");
          TW_INVARIANT(e.deadline <= kMaxTick &&
                           (e.deadline > now_ || e.deadline == kMaxTick),
                       "Wheel: entry ", i, " is due at ", e.deadline,
                       ", now is ", now_);
          if (now_ == kMaxTick) return absl::OkStatus();  // nothing ahead
          TW_INVARIANT(a <= e.deadline >> shift &&
                           level.Holds(now_, a << shift),
                       "Wheel: entry ", i, " due at ", e.deadline,
                       " is in slot ", a, " of level ", l, ", now is ", now_);
          if (l == 0) return absl::OkStatus();
          TW_INVARIANT(a != ahead || now_ < level.DrainDeadline(now_),
                       "Wheel: entry ", i, " is still in level ", l,
                       "'s slot ", a, " at its drain deadline ", now_);
          TW_INVARIANT(!InCurrentRotation(e.deadline) &&
                           (!InCurrentRotation(e.deadline - num_slots()) ||
                            draining),
                       "Wheel: a remove would leave entry ", i, " of level ",
                       l, " in its list");
          return absl::OkStatus();
        };
        for (std::uint32_t lane = 0; lane < kLanes; ++lane) {
          TW_RETURN_IF_ERROR(lists_.CheckLane(pool_, slot, lane, visit));
        }
      }
    }
    for (std::uint32_t i = 0; linked != pool_.Live() && pool_.Holds(i); ++i) {
      TW_INVARIANT(!pool_.InUse(i) || (i < seen.size() && seen[i]),
                   "Wheel: live entry ", i, " is in no list");
    }
    TW_INVARIANT(linked == pool_.Live(), "Wheel: ", linked,
                 " entries in lists, ", pool_.Live(), " live");
    TW_INVARIANT(removed == removed_in_lists_, "Wheel: ", removed,
                 " removed entries in lists, counted ", removed_in_lists_);
    TW_INVARIANT(timers == index_.size(), "Wheel: ", timers,
                 " timers in lists, ", index_.size(), " in the index");
    return absl::OkStatus();
  }

 private:
  // Tests break a wheel through it, to see CheckInvariants catch it.
  friend class WheelTestPeer;

  // Keys whose hash is a multiply or two (integers, enums, pointers) are
  // hashed again when their entry fires or moves in a shrink; any other
  // key (a string) keeps its hash in the entry, so the loop never hashes
  // it. That costs 4 bytes, and for a key held as a std::string the
  // padding after them, against a hash of the whole key on every firing,
  // which for long keys is much of what a firing costs the loop. (A string
  // key held inline packs against them: its entry is 72 bytes with an
  // 8-byte value.)
  static constexpr bool kStoresHash =
      !(std::is_integral_v<K> || std::is_enum_v<K> || std::is_pointer_v<K>);
  struct NoStoredHash {
    void Set(std::uint32_t) {}
  };
  struct StoredHashField {
    void Set(std::uint32_t h) { value = h; }
    std::uint32_t value;
  };
  using StoredHash =
      std::conditional_t<kStoresHash, StoredHashField, NoStoredHash>;
  // The stored hash comes before the key, where an inline string key
  // (4-byte aligned) packs against it.
  struct Entry {
    std::uint64_t deadline;
    std::uint32_t prev;
    std::uint32_t next;  // also the pool's free-list link
    [[no_unique_address]] StoredHash hash;
    ManualStorage<StoredKey> key;
    ManualStorage<V> value;
  };
  // The hash of a live entry's key: stored, or computed (kStoresHash).
  std::uint32_t HashOfEntry(const Entry& e) const {
    if constexpr (kStoresHash) {
      return e.hash.value;
    } else {
      return HashOf(Store::AsKey(e.key.Get()));
    }
  }
  // How many fired entries wait between leaving their list and leaving the
  // index (see ScanSlot).
  static constexpr std::size_t kFiring = 16;
  // The deadline of a removed entry left in its list (see Lazy removes): no
  // pending timer has it, since every deadline is after some now().
  static constexpr std::uint64_t kRemoved = 0;

  // Level 0 of 2^level0_bits one-tick slots, then levels of 2^level_bits
  // slots until one covers bit 62, the top bit of a deadline.
  static std::vector<Level> MakeLevels(int level0_bits, int level_bits) {
    std::vector<Level> levels;
    levels.emplace_back(0, level0_bits, 0);
    for (int shift = level0_bits; shift < 63; shift += level_bits) {
      const Level& below = levels.back();
      levels.emplace_back(shift, level_bits,
                          below.first_slot() + below.slots());
    }
    return levels;
  }

  // What Find found: the index position, pool index and entry of a key;
  // entry is null when the key is absent.
  struct Found {
    std::size_t pos;
    std::uint32_t i;
    Entry* entry;
  };
  // The entry it compared the key with comes back too, so that the caller
  // need not look it up in the pool again. kBeforeInsert: the caller
  // inserts the key next if it is absent (KeyIndex::FindBeforeInsert).
  template <bool kBeforeInsert = false, typename Key>
  Found Find(const Key& key, std::uint32_t hash) {
    Found found{KeyIndex::kAbsent, 0, nullptr};
    auto matches = [&](std::uint32_t i) {
      Entry& e = pool_.At(i);
      if (!Store::Equal(eq_, e.key.Get(), key)) return false;
      found.i = i;
      found.entry = &e;
      return true;
    };
    if constexpr (kBeforeInsert) {
      found.pos = index_.FindBeforeInsert(hash, matches);
    } else {
      found.pos = index_.Find(hash, matches);
    }
    return found;
  }

  // Calls fn(entry) for the entry of every timer, in pool order: O(pool
  // indices handed out), reading the pool in sequence, where following the
  // index to each entry would wait for a cache miss per timer.
  template <typename Fn>
  void ForEachTimer(Fn&& fn) {
    for (std::uint32_t i = 0; pool_.Holds(i); ++i) {
      if (!pool_.InUse(i)) continue;
      Entry& e = pool_.At(i);
      if (e.deadline != kRemoved) fn(e);  // a removed one holds no timer
    }
  }

  void PrefetchIfEntry(std::uint32_t i) const {
    if (pool_.Holds(i)) PrefetchObject(&pool_.At(i));
  }

  std::uint64_t Clamp(std::uint64_t deadline) const {
    return std::min(std::max(deadline, now_ + 1), kMaxTick);
  }

  static void DestroyEntry(Entry& e) {
    e.key.Destroy();
    e.value.Destroy();
  }

  // True if a pending entry with this deadline is filed on level 0, as far
  // as the deadline shows. Its registered deadline r (where it is filed: at
  // or before this one, after now_) lies in the same rotation of level 0 or
  // an earlier one. In now_'s rotation, r is on level 0: every coarse slot
  // covering that rotation was drained before it began. In the next, r is
  // on level 0 unless it still waits in a coarse level's draining slot: so
  // when no level has one (Link never files into a draining slot, since the
  // level below holds its span, so that only changes as now_ moves). A few
  // shifts, and a bit test per level once per tick. (CheckInvariants checks
  // the filing this relies on, and Link the draining slots.)
  bool RemovesLazily(std::uint64_t deadline) {
    if (InCurrentRotation(deadline)) return true;
    // The next rotation: one rotation (num_slots ticks) earlier is now_'s.
    if (!InCurrentRotation(deadline - num_slots())) return false;
    if (drain_checked_at_ != now_) NoteDraining();
    return nothing_draining_;
  }
  // True if `deadline` is in now_'s rotation of level 0.
  bool InCurrentRotation(std::uint64_t deadline) const {
    const int top = levels_[0].top();
    return (deadline >> top) == (now_ >> top);
  }
  [[gnu::noinline]] void NoteDraining() {
    nothing_draining_ = true;
    for (std::size_t l = 1; l < levels_.size(); ++l) {
      nothing_draining_ &= levels_[l].DrainingSlot(now_) == Level::kNone;
    }
    drain_checked_at_ = now_;
  }

  // The level a deadline is filed on now: the lowest that holds it (its
  // rotation is now's or the next). Most timers stop at level 0 or 1.
  std::size_t LevelFor(std::uint64_t deadline) const {
    std::size_t l = 0;
    while (!levels_[l].Holds(now_, deadline)) ++l;
    return l;
  }
  std::uint32_t SlotFor(std::uint64_t deadline) const {
    const Level& level = levels_[LevelFor(deadline)];
    return level.first_slot() + level.SlotOfTick(deadline);
  }

  // Links entry i, which is e, into the slot its deadline is filed in, and
  // marks the slot occupied.
  void Link(std::uint32_t i, Entry& e) {
    const std::uint64_t deadline = e.deadline;
    Level& level = levels_[LevelFor(deadline)];
    const std::uint32_t slot = level.SlotOfTick(deadline);
    // Never into a draining slot: the level below holds its span.
    TW_DCHECK(&level == &levels_[0] || level.DrainingSlot(now_) != slot);
    lists_.Link(pool_, i, e, level.first_slot() + slot);
    level.Mark(slot);
  }

  // Unlinks entry e. A slot left empty is unmarked, so an idle loop is not
  // woken for it.
  void Unlink(Entry& e) {
    const std::uint32_t slot = lists_.Unlink(pool_, e);
    if (slot != Lists::kNoSlot && lists_.Empty(slot)) {
      Level& level = LevelOfSlot(slot);
      level.Unmark(slot - level.first_slot());
    }
  }

  Level& LevelOfSlot(std::uint32_t slot) {
    const std::uint32_t level0 = levels_[0].slots();
    return levels_[slot < level0 ? 0
                                 : 1 + ((slot - level0) >> (level_bits_ + 1))];
  }

  bool WantsPurge() const {
    return removed_in_lists_ != 0 && pool_.WouldShrinkWith(index_.size());
  }

  // Looks at `budget` pool entries from where the last call stopped, going
  // round, and frees the removed ones still in lists.
  void Purge(std::size_t budget) {
    for (; budget != 0 && removed_in_lists_ != 0; --budget) {
      if (!pool_.Holds(purge_cursor_)) purge_cursor_ = 0;
      const std::uint32_t i = purge_cursor_++;
      if (pool_.InUse(i) && pool_.At(i).deadline == kRemoved) {
        Unlink(pool_.At(i));
        pool_.Free(i);
        --removed_in_lists_;
      }
    }
  }

  // Moves entry `from` to the unused index `to`: contents, list links and
  // index word. Only between operations (no fired entry waits in ScanSlot's
  // ring).
  void Relocate(std::uint32_t from, std::uint32_t to) {
    Entry& a = pool_.At(from);
    Entry& b = pool_.At(to);
    b.deadline = a.deadline;
    b.prev = a.prev;
    b.next = a.next;
    if (a.deadline == kRemoved) {  // no key, no index word
      lists_.TakeOver(pool_, to);
      pool_.Free(from);
      return;
    }
    b.key.Construct(std::move(a.key.Get()));
    b.value.Construct(std::move(a.value.Get()));
    b.hash = a.hash;
    DestroyEntry(a);
    lists_.TakeOver(pool_, to);
    const std::size_t pos = index_.Find(
        HashOfEntry(b), [from](std::uint32_t i) { return i == from; });
    index_.SetEntryAt(pos, to);
    pool_.Free(from);
  }

  void Reschedule(std::uint32_t i, Entry& e, std::uint64_t deadline) {
    if (deadline >= e.deadline) {
      // Lazy: the entry's slot is processed no later than its old deadline,
      // and files it again then.
      e.deadline = deadline;
      return;
    }
    Unlink(e);
    e.deadline = deadline;
    Link(i, e);
  }

  // The cursor has reached now_: finish draining every coarse slot that
  // starts on the next tick (its timers due then must be on level 0 by
  // then), then empty level 0's slot of this tick. Nothing refiled lands in
  // that slot: every timer moved lies ahead of now_.
  template <typename Sink, typename Kept>
  void ProcessTick(Sink& sink, Kept& kept) {
    for (std::size_t l = levels_.size(); l-- > 1;) {
      Level& level = levels_[l];
      const std::int64_t slot = level.DrainingSlot(now_);
      if (slot != Level::kNone && level.DrainDeadline(now_) <= now_) {
        Drain(level, static_cast<std::uint32_t>(slot), ~std::size_t{0});
      }
    }
    Level& level0 = levels_[0];
    const std::uint32_t slot = level0.SlotOfTick(now_);
    if (level0.Marked(slot)) ScanSlot(level0, slot, sink, kept);
  }

  // Moves up to `budget` timers out of physical slot `slot` of `level` (a
  // draining one) to where they are filed now, a finer level. The lanes are
  // walked side by side as in ScanSlot, and each lane is cut once where the
  // walk stopped, rather than unlinked entry by entry.
  void Drain(Level& level, std::uint32_t slot, std::size_t budget) {
    const std::uint32_t list = level.first_slot() + slot;
    std::uint32_t cursor[kLanes];
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      cursor[l] = lists_.Head(list, l);
      PrefetchIfEntry(cursor[l]);
    }
    for (std::size_t moved = 0; moved < budget;) {
      bool any = false;
      for (std::uint32_t l = 0; l < kLanes && moved < budget; ++l) {
        const std::uint32_t i = cursor[l];
        if (i == Pool::kNil) continue;
        any = true;
        Entry& e = pool_.At(i);
        TW_DCHECK(e.deadline != kRemoved);  // level 0 only
        cursor[l] = e.next;
        PrefetchIfEntry(cursor[l]);
        Link(i, e);
        ++refiled_;
        ++moved;
      }
      if (!any) break;
    }
    bool empty = true;
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      lists_.Cut(pool_, list, l, cursor[l]);
      empty &= cursor[l] == Pool::kNil;
    }
    if (empty) level.Unmark(slot);
  }

  // Empties level 0's physical slot `slot`, that of now_: fires what is
  // due, frees removed entries, and files the rest again (timers moved
  // later, or whose kept deadline is later: they lie ahead of now_, so
  // never in this slot). The lanes are
  // walked side by side, one entry of each in turn, prefetching each lane's
  // next entry as soon as its link is known. A fired entry then waits in a ring
  // (kFiring deep) between leaving its list and leaving the index, so that
  // its index lines arrive while the walk goes on. The slot's lists are
  // reset at the end rather than unlinked entry by entry.
  // Whether a due entry's kept deadline is after `tick`; if so, it becomes
  // the entry's deadline (the scan files it again).
  template <typename Kept>
  static bool KeptLater(Entry& e, std::uint64_t tick, Kept& kept) {
    const std::uint64_t later =
        std::min(kept(e.key.Get(), e.value.Get()), kMaxTick);
    if (later <= tick) return false;
    e.deadline = later;
    return true;
  }

  template <typename Sink, typename Kept>
  void ScanSlot(Level& level, std::uint32_t physical, Sink& sink,
                Kept& kept) {
    const std::uint32_t slot = level.first_slot() + physical;
    const std::uint64_t tick = now_;
    std::uint32_t cursor[kLanes];
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      cursor[l] = lists_.Head(slot, l);
      PrefetchIfEntry(cursor[l]);
    }
    lists_.ClearSlot(slot);
    level.Unmark(physical);
    struct Firing {
      Entry* e;
      std::uint32_t i, hash;
    };
    Firing firing[kFiring];
    std::size_t fired = 0;
    // The entry's word is the one naming it: found without reading the key.
    auto retire = [&](const Firing& f) {
      index_.EraseAt(
          index_.Find(f.hash, [&f](std::uint32_t i) { return i == f.i; }));
      Entry& e = *f.e;
      sink(tick, std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
      pool_.Free(f.i, e);
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
        if (e.deadline == kRemoved) {
          pool_.Free(i, e);
          --removed_in_lists_;
        } else if (e.deadline <= tick && !KeptLater(e, tick, kept)) {
          Firing& f = firing[fired++ % kFiring];
          if (fired > kFiring) retire(f);
          f = {&e, i, HashOfEntry(e)};
          index_.Prefetch(f.hash);
        } else {
          Link(i, e);
          ++refiled_;
        }
      }
    }
    for (std::size_t k = fired > kFiring ? fired - kFiring : 0; k < fired;
         ++k) {
      retire(firing[k % kFiring]);
    }
  }

  const int level0_bits_;
  const int level_bits_;
  Hash hash_;
  Eq eq_;
  std::uint64_t now_ = 0;
  std::uint64_t refiled_ = 0;
  std::size_t removed_in_lists_ = 0;
  std::uint32_t purge_cursor_ = 0;  // where Purge goes on
  // RemovesLazily's note: whether no coarse level had a draining slot at
  // tick drain_checked_at_.
  std::uint64_t drain_checked_at_ = kNever;
  bool nothing_draining_ = false;

  Pool pool_;
  KeyIndex index_;
  std::vector<Level> levels_;
  Lists lists_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_WHEEL_H_
