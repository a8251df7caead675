// The wheel's slots: kLanes doubly linked lists of pooled entries each.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_SLOT_LISTS_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_SLOT_LISTS_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/config.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/wheel/entry_pool.h"

namespace timingwheel {
namespace internal {

// Intrusive lists over an EntryPool: an entry's `prev` and `next` are pool
// indices. The first entry of a list has prev = kHeadTag | list id instead
// of an index, so that unlinking an entry never needs to be told its list.
//
// Lanes: each slot is kLanes lists, an entry going to lane (index % kLanes).
// Walking one list waits for a cache miss per entry, since each entry's
// address is in the one before; a slot walked as kLanes lists side by side
// keeps kLanes misses in flight instead of one.
template <typename Entry>
class SlotLists {
 public:
  using Pool = EntryPool<Entry>;
  static constexpr std::uint32_t kNil = Pool::kNil;
  static constexpr std::uint32_t kLanes = 8;
  // Largest slot count: list ids (slot * kLanes + lane) fit below kHeadTag.
  static constexpr std::uint32_t kMaxSlots = (1u << 31) / kLanes;

  // Allocates the heads: 4 * kLanes bytes a slot.
  explicit SlotLists(std::uint32_t slots)
      : heads_(std::size_t{slots} * kLanes, kNil) {}

  // The first entry of lane `lane` of `slot`, or kNil.
  std::uint32_t Head(std::uint32_t slot, std::uint32_t lane) const {
    return heads_[std::size_t{slot} * kLanes + lane];
  }

  // Puts entry i, which is e, first in its lane of `slot`. O(1).
  void Link(Pool& pool, std::uint32_t i, Entry& e, std::uint32_t slot) {
    const std::uint32_t list = ListOf(slot, i);
    e.prev = kHeadTag | list;
    e.next = heads_[list];
    if (e.next != kNil) {
      TW_DCHECK(pool.At(e.next).prev == (kHeadTag | list));
      pool.At(e.next).prev = i;
    }
    heads_[list] = i;
  }

  // Takes entry e out of its list. O(1). Returns the slot if e was the last
  // entry of its lane (the slot may now be empty: see Empty), else kNoSlot.
  static constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
  std::uint32_t Unlink(Pool& pool, Entry& e) {
    TW_DCHECK(e.prev != Pool::kFreeMark);  // a free entry is in no list
    std::uint32_t emptied = kNoSlot;
    if (e.prev & kHeadTag) {
      const std::uint32_t list = e.prev & ~kHeadTag;
      heads_[list] = e.next;
      if (e.next == kNil) emptied = list / kLanes;
    } else {
      pool.At(e.prev).next = e.next;
    }
    if (e.next != kNil) pool.At(e.next).prev = e.prev;
    return emptied;
  }

  // Entry i has been given the prev and next of an entry it replaces (one
  // relocated in the pool): points the neighbours, or the list head, at i.
  // O(1). The entry stays in its old lane, which only spreads entries and
  // is never relied on.
  void TakeOver(Pool& pool, std::uint32_t i) {
    Entry& e = pool.At(i);
    if (e.prev & kHeadTag) {
      heads_[e.prev & ~kHeadTag] = i;
    } else {
      pool.At(e.prev).next = i;
    }
    if (e.next != kNil) pool.At(e.next).prev = i;
  }

  // True if every lane of `slot` is empty. O(kLanes).
  bool Empty(std::uint32_t slot) const {
    for (std::uint32_t l = 0; l < kLanes; ++l) {
      if (Head(slot, l) != kNil) return false;
    }
    return true;
  }

  // Makes entry i (or kNil) the first of lane `lane` of `slot`, dropping
  // the entries before it without touching them: for a caller that has
  // relinked or freed every one of them. O(1).
  void Cut(Pool& pool, std::uint32_t slot, std::uint32_t lane,
           std::uint32_t i) {
    const std::uint32_t list = slot * kLanes + lane;
    heads_[list] = i;
    if (i != kNil) pool.At(i).prev = kHeadTag | list;
  }

  // Empties the lanes of `slot` without touching their entries: for a
  // caller that relinks or frees every one of them. O(kLanes).
  void ClearSlot(std::uint32_t slot) {
    std::fill_n(heads_.begin() + std::size_t{slot} * kLanes, kLanes, kNil);
  }

  // Empties every list (the entries themselves are the caller's).
  void Clear() { std::fill(heads_.begin(), heads_.end(), kNil); }

  std::size_t MemoryBytes() const {
    return heads_.capacity() * sizeof(std::uint32_t);
  }

  // True if every lane of slots [first, first + count) is empty. For
  // CheckInvariants, which the model tests run after every operation, over
  // every slot. A memcmp of the heads (each equal to the next, the first
  // kNil); under a sanitizer, whose memcmp checks both ranges first, a loop
  // it leaves uninstrumented (a read-only scan of the owner's own array,
  // in bounds by construction), where checking it would cost more than all
  // the rest of the check. O(count * kLanes).
  ABSL_ATTRIBUTE_NO_SANITIZE_ADDRESS ABSL_ATTRIBUTE_NO_SANITIZE_THREAD
  ABSL_ATTRIBUTE_NO_SANITIZE_MEMORY
  bool EmptySlots(std::uint32_t first, std::uint32_t count) const {
    if (count == 0) return true;
    const std::uint32_t* heads = heads_.data() + std::size_t{first} * kLanes;
    const std::size_t n = std::size_t{count} * kLanes;
#if defined(ABSL_HAVE_ADDRESS_SANITIZER) || \
    defined(ABSL_HAVE_THREAD_SANITIZER) || defined(ABSL_HAVE_MEMORY_SANITIZER)
    static_assert(kLanes % 2 == 0 && kNil == 0xFFFFFFFFu);
    std::uint64_t all = ~std::uint64_t{0};  // two heads at a time
    for (std::size_t k = 0; k < n; k += 2) {
      std::uint64_t two;
      std::memcpy(&two, heads + k, sizeof(two));
      all &= two;
    }
    return all == ~std::uint64_t{0};
#else
    return heads[0] == kNil &&
           std::memcmp(heads, heads + 1, (n - 1) * sizeof(*heads)) == 0;
#endif
  }

  // For CheckInvariants: walks lane `lane` of `slot`, checking that each
  // entry is live in `pool` and links back to the one before it (the first
  // to the list head), and calls visit(i) for each entry i in order.
  // Returns the first broken link or visit's first error. A list that
  // cycles is cut short after pool.Live() entries. O(length).
  template <typename Visit>
  absl::Status CheckLane(const Pool& pool, std::uint32_t slot,
                         std::uint32_t lane, Visit&& visit) const {
    const std::uint32_t list = slot * kLanes + lane;
    std::uint32_t prev = kHeadTag | list;
    std::uint32_t length = 0;
    for (std::uint32_t i = heads_[list]; i != kNil; i = pool.At(i).next) {
      TW_INVARIANT(pool.Holds(i) && pool.InUse(i), "SlotLists: list ", list,
                   " links ", i, ", not a live entry");
      TW_INVARIANT(pool.At(i).prev == prev, "SlotLists: entry ", i,
                   " of list ", list, " links back to ", pool.At(i).prev,
                   ", not ",
                   prev == (kHeadTag | list) ? std::string("the list head")
                                             : absl::StrCat(prev));
      TW_INVARIANT(++length <= pool.Live(), "SlotLists: list ", list,
                   " cycles");
      TW_RETURN_IF_ERROR(visit(i));
      prev = i;
    }
    return absl::OkStatus();
  }

 private:
  static constexpr std::uint32_t kHeadTag = 0x80000000u;
  // A lane is picked by masking the entry index; pool indices never carry
  // the tag bit.
  static_assert(std::has_single_bit(kLanes));
  static_assert(Pool::kMaxEntries < kHeadTag);
  static_assert(std::uint64_t{kMaxSlots} * kLanes <= kHeadTag);

  static std::uint32_t ListOf(std::uint32_t slot, std::uint32_t i) {
    return slot * kLanes + (i & (kLanes - 1));
  }

  std::vector<std::uint32_t> heads_;  // first entry of each list, or kNil
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_SLOT_LISTS_H_
