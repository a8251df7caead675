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

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

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
// Layout: entries live in a chunked pool and link into per-slot doubly linked
// lists by 32-bit index. The key map is a flat set of (entry index, 32-bit
// key hash) pairs, so the key is stored once (in the entry), and growing the
// map rehashes from the stored hashes without reading a single entry. For
// 8-byte keys and values an entry is 32 bytes and the map 9 to 18 more.
//
// Placement: an entry with deadline D belongs in slot D % num_slots; the
// cursor visits that slot at tick D, and at earlier visits (D further than a
// rotation away: go-zero's "circle") the entry simply stays. Moving a timer
// later only rewrites its deadline: the entry stays in its old slot and is
// re-linked when that slot is next scanned (go-zero's "diff"), which is never
// after the old deadline. Moving earlier and removing unlink at once, so no
// tombstones pile up.
//
// Scheduling: each slot keeps a lower bound of its entries' deadlines
// (mins_), and a bitmap (hot_) marks the slots whose bound falls within the
// next rotation. Finding the next tick with work is a bitmap search, so idle
// stretches are skipped in one step and an advance costs O(due slots) plus
// O(min(ticks, num_slots)) bit refreshes, never a walk over future entries.
//
// Not thread-safe: one thread owns a Wheel.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class Wheel {
 public:
  // num_slots in [1, 2^31). Allocates the slot arrays (12.1 bytes a slot).
  explicit Wheel(std::uint32_t num_slots, Hash hash = Hash(), Eq eq = Eq())
      : num_slots_(num_slots),
        hash_(std::move(hash)),
        eq_(std::move(eq)),
        index_(0, IndexHash{}, IndexEq{this}),
        heads_(num_slots, kNil),
        mins_(num_slots, kNever),
        hot_((num_slots + 63) / 64, 0) {}

  ~Wheel() {
    for (const IndexSlot& s : index_) DestroyEntry(At(s.entry));
  }

  Wheel(const Wheel&) = delete;
  Wheel& operator=(const Wheel&) = delete;

  // Makes room for n timers in the map (no rehash below that).
  void Reserve(std::size_t n) { index_.reserve(n); }

  // Ticks processed so far.
  std::uint64_t now() const { return now_; }
  // Pending timers.
  std::size_t size() const { return index_.size(); }
  std::uint32_t num_slots() const { return num_slots_; }

  // Schedules `key` at tick `deadline`. A deadline at or before now() is
  // treated as now() + 1 (the next tick), one past kMaxTick as kMaxTick. A
  // present key gets the new value (the old one is destroyed: superseded) and
  // the new deadline. Returns true if the key was present. One map probe.
  bool Set(K key, V value, std::uint64_t deadline) {
    deadline = Clamp(deadline);
    ReserveEntry();  // may throw bad_alloc before anything changes
    bool inserted = false;
    const KeyRef ref = Ref(key);
    auto it = index_.lazy_emplace(ref, [&](const auto& construct) {
      inserted = true;
      std::uint32_t i = AllocateEntry();
      Entry& e = At(i);
      e.key.Construct(std::move(key));
      e.value.Construct(std::move(value));
      e.deadline = deadline;
      construct(IndexSlot{i, ref.hash});
      Link(i, Slot(deadline));
    });
    if (inserted) return false;
    Entry& e = At(it->entry);
    e.value.Destroy();
    e.value.Construct(std::move(value));
    Reschedule(it->entry, deadline);
    return true;
  }

  // Reschedules a present key to `deadline` (clamped as in Set), keeping its
  // value. Returns false if the key is absent. A later deadline costs one map
  // probe and one write; an earlier one also relinks the entry.
  bool Move(const K& key, std::uint64_t deadline) {
    auto it = index_.find(Ref(key));
    if (it == index_.end()) return false;
    Reschedule(it->entry, Clamp(deadline));
    return true;
  }

  // Removes a present key; its value is destroyed. Returns false if absent.
  bool Remove(const K& key) {
    auto it = index_.find(Ref(key));
    if (it == index_.end()) return false;
    const std::uint32_t i = it->entry;
    index_.erase(it);
    Unlink(i);
    DestroyEntry(At(i));
    FreeEntry(i);
    return true;
  }

  // The deadline of a present key, or nullopt.
  std::optional<std::uint64_t> DeadlineOf(const K& key) const {
    auto it = index_.find(Ref(key));
    if (it == index_.end()) return std::nullopt;
    return At(it->entry).deadline;
  }

  // Batch hints, no effect on state. A loop applying a batch of commands
  // calls PrefetchBuckets for a command a few places ahead and PrefetchEntry
  // for one nearer, so the cache misses of several commands overlap instead
  // of each command waiting on bucket, then entry, in turn.
  void PrefetchBuckets(const K& key) const { index_.prefetch(Ref(key)); }
  // Finds the key's entry by its stored 32-bit hash alone (the entry is not
  // read, so a collision at worst prefetches the wrong entry).
  void PrefetchEntry(const K& key) const {
    KeyRef ref = Ref(key);
    ref.hash_only = true;
    auto it = index_.find(ref);
    if (it != index_.end()) __builtin_prefetch(&At(it->entry), 1);
  }

  // The first tick after now() at which some timer may fire, or kNever when
  // the wheel is empty. May be early (after removals), never late. A bitmap
  // search when something is due within a rotation, else O(num_slots).
  std::uint64_t NextDueTick() const {
    if (index_.empty()) return kNever;
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
      if (index_.empty()) {
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
    for (const IndexSlot& s : index_) {
      Entry& e = At(s.entry);
      sink(std::move(e.key.Get()), std::move(e.value.Get()));
      DestroyEntry(e);
    }
    index_.clear();
    std::fill(heads_.begin(), heads_.end(), kNil);
    std::fill(mins_.begin(), mins_.end(), kNever);
    std::fill(hot_.begin(), hot_.end(), 0);
    free_head_ = kNil;
    used_ = 0;
  }

  // Bytes the wheel holds: pool chunks, map table and slot arrays.
  std::size_t MemoryBytes() const {
    return chunks_.size() * kChunkSize * sizeof(Entry) +
           index_.capacity() * (sizeof(IndexSlot) + 1) +
           heads_.capacity() * sizeof(std::uint32_t) +
           mins_.capacity() * sizeof(std::uint64_t) +
           hot_.capacity() * sizeof(std::uint64_t) +
           chunks_.capacity() * sizeof(chunks_[0]);
  }

  // Bytes of one pooled entry.
  static constexpr std::size_t EntryBytes() { return sizeof(Entry); }

 private:
  // Link values: an index into the pool, kNil, or (prev of a list's first
  // entry) kHeadTag | slot, so an unlink never needs to know the slot.
  static constexpr std::uint32_t kNil = 0xFFFFFFFFu;
  static constexpr std::uint32_t kHeadTag = 0x80000000u;
  static constexpr std::uint32_t kMaxEntries = kHeadTag - 1;
  static constexpr int kChunkBits = 12;
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;

  struct Entry {
    std::uint64_t deadline;
    std::uint32_t prev;
    std::uint32_t next;  // also the free list's link
    ManualStorage<K> key;
    ManualStorage<V> value;
  };

  // What the map stores: the entry, and its key's hash folded to 32 bits.
  struct IndexSlot {
    std::uint32_t entry;
    std::uint32_t hash;
  };
  // A key to look up, hashed once per operation.
  struct KeyRef {
    const K* key;
    std::uint32_t hash;
    bool hash_only = false;  // for PrefetchEntry: match on hash alone
  };
  KeyRef Ref(const K& key) const {
    const std::uint64_t h = hash_(key);
    return KeyRef{&key, static_cast<std::uint32_t>(h ^ (h >> 32))};
  }
  // The map hashes the folded hash again, so that stored slots and looked-up
  // keys agree and probe positions stay well spread.
  struct IndexHash {
    using is_transparent = void;
    std::size_t operator()(IndexSlot s) const {
      return absl::Hash<std::uint32_t>()(s.hash);
    }
    std::size_t operator()(KeyRef k) const {
      return absl::Hash<std::uint32_t>()(k.hash);
    }
  };
  struct IndexEq {
    using is_transparent = void;
    const Wheel* wheel;
    bool operator()(IndexSlot a, IndexSlot b) const {
      return a.entry == b.entry;
    }
    bool operator()(IndexSlot a, KeyRef k) const {
      return a.hash == k.hash &&
             (k.hash_only || wheel->eq_(wheel->At(a.entry).key.Get(), *k.key));
    }
    bool operator()(KeyRef k, IndexSlot a) const { return (*this)(a, k); }
  };

  Entry& At(std::uint32_t i) {
    return chunks_[i >> kChunkBits][i & (kChunkSize - 1)];
  }
  const Entry& At(std::uint32_t i) const {
    return chunks_[i >> kChunkBits][i & (kChunkSize - 1)];
  }

  std::uint32_t Slot(std::uint64_t tick) const {
    return static_cast<std::uint32_t>(tick % num_slots_);
  }

  std::uint64_t Clamp(std::uint64_t deadline) const {
    return std::min(std::max(deadline, now_ + 1), kMaxTick);
  }

  // Makes sure AllocateEntry will not need to allocate.
  void ReserveEntry() {
    if (free_head_ != kNil || used_ < chunks_.size() * kChunkSize) return;
    if (used_ >= kMaxEntries) throw std::bad_alloc();
    chunks_.push_back(std::unique_ptr<Entry[]>(new Entry[kChunkSize]));
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
    e.prev = kHeadTag | slot;
    e.next = heads_[slot];
    if (e.next != kNil) At(e.next).prev = i;
    heads_[slot] = i;
    if (e.deadline < mins_[slot]) {
      mins_[slot] = e.deadline;
      if (e.deadline <= now_ + num_slots_) SetHot(slot);
    }
  }

  void Unlink(std::uint32_t i) {
    Entry& e = At(i);
    if (e.prev & kHeadTag) {
      const std::uint32_t slot = e.prev & ~kHeadTag;
      heads_[slot] = e.next;
      if (e.next == kNil) {
        mins_[slot] = kNever;
        ClearHot(slot);
      }
    } else {
      At(e.prev).next = e.next;
    }
    if (e.next != kNil) At(e.next).prev = e.prev;
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
  // that were moved later, and recompute the slot's bound.
  template <typename Sink>
  void ScanSlot(std::uint64_t tick, Sink& sink) {
    const std::uint32_t slot = Slot(tick);
    std::uint64_t bound = kNever;
    std::uint32_t i = heads_[slot];
    while (i != kNil) {
      Entry& e = At(i);
      const std::uint32_t next = e.next;
      if (e.deadline <= tick) {
        Unlink(i);
        index_.erase(Ref(e.key.Get()));
        sink(tick, std::move(e.key.Get()), std::move(e.value.Get()));
        DestroyEntry(e);
        FreeEntry(i);
      } else if (Slot(e.deadline) != slot) {
        Unlink(i);
        Link(i, Slot(e.deadline));
      } else {
        bound = std::min(bound, e.deadline);
      }
      i = next;
    }
    mins_[slot] = bound;
    if (bound <= tick + num_slots_) {
      SetHot(slot);
    } else {
      ClearHot(slot);
    }
  }

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

  std::vector<std::unique_ptr<Entry[]>> chunks_;
  std::uint32_t used_ = 0;  // entries ever handed out from chunks_
  std::uint32_t free_head_ = kNil;

  absl::flat_hash_set<IndexSlot, IndexHash, IndexEq> index_;

  std::vector<std::uint32_t> heads_;  // first entry of each slot, or kNil
  std::vector<std::uint64_t> mins_;   // lower bound of each slot's deadlines
  std::vector<std::uint64_t> hot_;    // bit s: mins_[s] <= now_ + num_slots_
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_H_
