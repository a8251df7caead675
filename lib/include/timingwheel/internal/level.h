// One level of the hierarchical wheel: its geometry and its occupancy bitmap.
#ifndef TIMINGWHEEL_INTERNAL_LEVEL_H_
#define TIMINGWHEEL_INTERNAL_LEVEL_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "timingwheel/internal/ticks.h"

namespace timingwheel {
namespace internal {

// A level has 2^bits slots of 2^shift ticks each, so one rotation of it
// spans 2^(shift + bits) ticks: exactly one slot of the level above (Kafka's
// overflow wheel, tokio's levels). A tick's digit on the level is
// (tick >> shift) mod 2^bits, and the level's "range" containing a tick is
// the rotation that tick falls in.
//
// The wheel files a deadline D on the level of the highest bit in which D
// and the current tick differ (tokio's rule), in the slot of D's digit. So
// on each level every occupied slot lies ahead of the current tick within
// the current range: the first occupied slot is the next one due, found by
// a count of trailing zeros on one word (a few words on a wide level 0).
//
// Slots are numbered globally (first_slot() + digit) so that all levels
// share one SlotLists.
class Level {
 public:
  Level(int shift, int bits, std::uint32_t first_slot)
      : shift_(shift),
        bits_(bits),
        first_slot_(first_slot),
        occupied_(((std::size_t{1} << bits) + 63) / 64, 0) {}

  int shift() const { return shift_; }
  std::uint32_t slots() const { return std::uint32_t{1} << bits_; }
  std::uint32_t first_slot() const { return first_slot_; }

  // The digit of `tick` on this level: its slot in the current range.
  std::uint32_t DigitOf(std::uint64_t tick) const {
    return static_cast<std::uint32_t>((tick >> shift_) & (slots() - 1));
  }

  // True if `tick` is the first tick of one of this level's slots.
  bool StartsSlotAt(std::uint64_t tick) const {
    return (tick & ((std::uint64_t{1} << shift_) - 1)) == 0;
  }

  void Mark(std::uint32_t digit) {
    occupied_[digit >> 6] |= std::uint64_t{1} << (digit & 63);
  }
  void Unmark(std::uint32_t digit) {
    occupied_[digit >> 6] &= ~(std::uint64_t{1} << (digit & 63));
  }
  bool Marked(std::uint32_t digit) const {
    return (occupied_[digit >> 6] >> (digit & 63)) & 1;
  }
  void UnmarkAll() { std::fill(occupied_.begin(), occupied_.end(), 0); }

  // The first tick of the first occupied slot after `now`'s own slot in
  // now's range, or kNever. One word on a level of 64 slots or fewer.
  std::uint64_t NextStart(std::uint64_t now) const {
    const std::uint32_t from = DigitOf(now) + 1;
    if (from >= slots()) return kNever;
    std::size_t w = from >> 6;
    std::uint64_t bits = occupied_[w] & (~std::uint64_t{0} << (from & 63));
    while (bits == 0) {
      if (++w == occupied_.size()) return kNever;
      bits = occupied_[w];
    }
    const std::uint64_t digit = w * 64 + std::countr_zero(bits);
    return RangeStart(now) + (digit << shift_);
  }

  std::size_t MemoryBytes() const {
    return occupied_.capacity() * sizeof(std::uint64_t);
  }

 private:
  // The first tick of the rotation of this level that contains `tick`.
  std::uint64_t RangeStart(std::uint64_t tick) const {
    const int span = shift_ + bits_;
    return span >= 64 ? 0 : tick & ~((std::uint64_t{1} << span) - 1);
  }

  int shift_;
  int bits_;
  std::uint32_t first_slot_;
  std::vector<std::uint64_t> occupied_;  // bit d: slot d holds an entry
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LEVEL_H_
