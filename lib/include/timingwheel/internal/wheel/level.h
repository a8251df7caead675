// One level of the hierarchical wheel: its geometry and its occupancy bitmap.
#ifndef TIMINGWHEEL_INTERNAL_WHEEL_LEVEL_H_
#define TIMINGWHEEL_INTERNAL_WHEEL_LEVEL_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "timingwheel/internal/base/ticks.h"

namespace timingwheel {
namespace internal {

static_assert(kMaxTick < std::uint64_t{1} << 63);

// A level's slots each span 2^shift ticks, and a rotation of the level is
// 2^bits slots: exactly one slot of the level above. A tick's "slot
// number" on the level is tick >> shift; its rotation, tick >> top() with
// top() = shift + bits.
//
// The level holds two rotations: the one containing the current tick and
// the next. So it has 2 * 2^bits physical slots, slot number a in physical
// slot a mod 2^(bits+1), and a deadline in either rotation has a place of
// its own. The wheel files a deadline on the lowest level that holds it.
// That second rotation is what lets a coarse slot be emptied *ahead* of
// its time: during the slot before it, its timers already fit the next
// rotation of the level below, so the wheel can move them down a few at a
// time instead of all at once on the slot's first tick (see Wheel).
//
// Slots are numbered globally (first_slot() + physical slot) so that all
// levels share one SlotLists.
class Level {
 public:
  Level(int shift, int bits, std::uint32_t first_slot)
      : shift_(shift),
        bits_(bits),
        rotation_shift_(std::min(shift + bits, 63)),
        slot_mask_((std::uint32_t{2} << bits) - 1),
        first_slot_(first_slot),
        occupied_((std::size_t{2} << bits) / 64 + 1, 0) {}

  int shift() const { return shift_; }
  // The first bit above this level: a deadline d is in the level's rotation
  // d >> top().
  int top() const { return shift_ + bits_; }
  // Physical slots: two rotations.
  std::uint32_t slots() const { return std::uint32_t{2} << bits_; }
  std::uint32_t first_slot() const { return first_slot_; }

  // True if this level can hold `deadline` at tick `now`: the deadline is
  // in now's rotation or the next.
  bool Holds(std::uint64_t now, std::uint64_t deadline) const {
    return (deadline >> rotation_shift_) - (now >> rotation_shift_) <= 1;
  }

  // The physical slot of slot number a.
  std::uint32_t SlotOf(std::uint64_t a) const {
    return static_cast<std::uint32_t>(a) & slot_mask_;
  }
  // The physical slot where `tick` is filed.
  std::uint32_t SlotOfTick(std::uint64_t tick) const {
    return SlotOf(tick >> shift_);
  }

  void Mark(std::uint32_t slot) {
    occupied_[slot >> 6] |= std::uint64_t{1} << (slot & 63);
  }
  void Unmark(std::uint32_t slot) {
    occupied_[slot >> 6] &= ~(std::uint64_t{1} << (slot & 63));
  }
  bool Marked(std::uint32_t slot) const {
    return (occupied_[slot >> 6] >> (slot & 63)) & 1;
  }
  void UnmarkAll() { std::fill(occupied_.begin(), occupied_.end(), 0); }

  // Level 0 (one tick a slot): the next tick after `now` whose slot is
  // occupied, or kNever. Its entries are due in (now, now + slots()), one
  // physical slot per tick, so the first marked slot after now's, going
  // round, is the earliest.
  std::uint64_t NextOccupiedTick(std::uint64_t now) const {
    const std::uint32_t here = SlotOfTick(now);
    const std::int64_t found = FindFrom((here + 1) & (slots() - 1));
    if (found == kNone || static_cast<std::uint32_t>(found) == here) {
      return kNever;
    }
    return now + ((static_cast<std::uint32_t>(found) - here) & (slots() - 1));
  }

  // Levels above 0: every occupied slot number a lies at or after
  // (now >> shift) + 1. The slot a = (now >> shift) + 1, when occupied, is
  // being emptied ahead ("draining"): it must be empty before its first
  // tick. DrainingSlot returns its physical slot, or kNone.
  std::int64_t DrainingSlot(std::uint64_t now) const {
    const std::uint32_t slot = SlotOf((now >> shift_) + 1);
    return Marked(slot) ? slot : kNone;
  }
  // The last tick at which the draining slot may still be emptied.
  std::uint64_t DrainDeadline(std::uint64_t now) const {
    return (((now >> shift_) + 1) << shift_) - 1;
  }
  // The first tick at which some slot not yet draining starts to drain
  // (the first tick of the slot before it), or kNever.
  std::uint64_t NextDrainStart(std::uint64_t now) const {
    const std::uint64_t from = (now >> shift_) + 2;
    const std::uint32_t start = SlotOf(from);
    const std::int64_t found = FindFrom(start);
    if (found == kNone) return kNever;
    const std::uint64_t a =
        from + ((static_cast<std::uint32_t>(found) - start) & (slots() - 1));
    // A marked slot behind `from` would be now's own or the draining one.
    if (SlotOf(a) == SlotOf(from - 1) || SlotOf(a) == SlotOf(from - 2)) {
      return kNever;
    }
    return (a - 1) << shift_;
  }

  std::size_t MemoryBytes() const {
    return occupied_.capacity() * sizeof(std::uint64_t);
  }

  // The first marked slot at or after `start`, not going round, or kNone.
  // Bits past slots() count too, so that a check sees a stray one. For
  // Wheel::CheckInvariants. O(slots / 64).
  std::int64_t NextMarked(std::uint32_t start) const {
    std::size_t w = start >> 6;
    if (w >= occupied_.size()) return kNone;
    std::uint64_t bits = occupied_[w] & (~std::uint64_t{0} << (start & 63));
    while (bits == 0) {
      if (++w == occupied_.size()) return kNone;
      bits = occupied_[w];
    }
    return static_cast<std::int64_t>(w * 64 + std::countr_zero(bits));
  }

  static constexpr std::int64_t kNone = -1;

 private:
  // The first marked slot at or after `start`, going round; kNone if none.
  std::int64_t FindFrom(std::uint32_t start) const {
    const std::uint32_t n = slots();
    const std::size_t words = (n + 63) / 64;
    std::size_t w = start >> 6;
    std::uint64_t bits = occupied_[w] & (~std::uint64_t{0} << (start & 63));
    for (std::size_t step = 0; step <= words; ++step) {
      if (bits != 0) {
        const std::uint64_t slot = w * 64 + std::countr_zero(bits);
        if (slot < n) return static_cast<std::int64_t>(slot);
      }
      if (++w == words) w = 0;
      bits = occupied_[w];
    }
    return kNone;
  }

  int shift_;
  int bits_;
  // top(), but at most 63, for Holds, which every filing runs (sets,
  // earlier moves, refiles): so it takes no branch. A shift by 64 or more would
  // be undefined, and ticks stay below 2^63 (kMaxTick), so at 63 the top level
  // holds every deadline, as it must.
  int rotation_shift_;
  std::uint32_t slot_mask_;  // slots() - 1
  std::uint32_t first_slot_;
  std::vector<std::uint64_t> occupied_;  // bit s: physical slot s is in use
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WHEEL_LEVEL_H_
