// One bit per slot: which slots have work within the next rotation.
#ifndef TIMINGWHEEL_INTERNAL_DUE_BITMAP_H_
#define TIMINGWHEEL_INTERNAL_DUE_BITMAP_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace timingwheel {
namespace internal {

// A bitmap over the wheel's slots. Finding the next marked slot from a
// cursor, wrapping around, is a scan of 64-bit words with a count of
// trailing zeros: a wheel of 512 slots answers in at most 9 word reads, so
// the loop can sleep across any stretch of idle ticks in one step.
class DueBitmap {
 public:
  // What FindFrom returns when no bit is set.
  static constexpr std::int64_t kNone = -1;

  explicit DueBitmap(std::uint32_t slots) : words_((slots + 63) / 64, 0) {}

  void Set(std::uint32_t slot) {
    words_[slot >> 6] |= std::uint64_t{1} << (slot & 63);
  }
  void Clear(std::uint32_t slot) {
    words_[slot >> 6] &= ~(std::uint64_t{1} << (slot & 63));
  }
  void ClearAll() { std::fill(words_.begin(), words_.end(), 0); }

  // The first set slot at or after `start`, wrapping around; kNone if none.
  // O(slots / 64).
  std::int64_t FindFrom(std::uint32_t start) const {
    const std::size_t n = words_.size();
    std::size_t w = start >> 6;
    std::uint64_t bits = words_[w] & (~std::uint64_t{0} << (start & 63));
    for (std::size_t step = 0; step <= n; ++step) {
      if (bits != 0) {
        return static_cast<std::int64_t>(w * 64 + std::countr_zero(bits));
      }
      if (++w == n) w = 0;
      bits = words_[w];
    }
    return kNone;
  }

  std::size_t MemoryBytes() const {
    return words_.capacity() * sizeof(std::uint64_t);
  }

 private:
  std::vector<std::uint64_t> words_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_DUE_BITMAP_H_
