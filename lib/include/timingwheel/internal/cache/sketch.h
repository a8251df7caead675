// TinyLFU's frequency sketch: how often each key was seen lately, in 4-bit
// counters, so a cache can refuse to evict a popular entry for a one-off.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SKETCH_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SKETCH_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "timingwheel/internal/base/hash.h"

namespace timingwheel {
namespace internal {

// A count-min sketch of depth 4 with 4-bit counters (16 to a 64-bit word),
// about one word per cached entry. Every counter is halved once
// 10 * capacity increments have been recorded, so old popularity fades (the
// "reset" of TinyLFU). Estimates only ever over-count, by collisions. Not
// thread-safe: the shard's lock guards it. Cost: 4 words touched per call.
class CacheFrequencySketch {
 public:
  // Sizes the sketch for `capacity` entries and forgets everything.
  void Reset(std::size_t capacity) {
    const std::size_t words =
        std::bit_ceil(std::max<std::size_t>(capacity, 16));
    table_.assign(words, 0);
    mask_ = words - 1;
    sample_size_ = 10 * std::max<std::size_t>(capacity, 1);
    additions_ = 0;
  }

  // The estimated count of `hash` (0..15).
  int Frequency(std::uint64_t hash) const {
    if (table_.empty()) return 0;
    int freq = 15;
    for (int i = 0; i < 4; ++i) {
      const std::uint64_t h = Mix(hash, i);
      freq = std::min(freq, Get(h & mask_, Counter(h)));
    }
    return freq;
  }

  // Counts one more occurrence of `hash`.
  void Increment(std::uint64_t hash) {
    if (table_.empty()) return;
    bool added = false;
    for (int i = 0; i < 4; ++i) {
      const std::uint64_t h = Mix(hash, i);
      std::uint64_t& word = table_[h & mask_];
      const int shift = Counter(h) * 4;
      if (((word >> shift) & 0xF) != 0xF) {
        word += std::uint64_t{1} << shift;
        added = true;
      }
    }
    if (added && ++additions_ >= sample_size_) Halve();
  }

 private:
  static std::uint64_t Mix(std::uint64_t x, int i) {
    // splitmix64's finalizer over a per-row seed: four independent rows.
    return MixHash(x + kGoldenRatio64 * static_cast<std::uint64_t>(i + 1));
  }
  // Which of the word's 16 counters: bits the word index does not use.
  static int Counter(std::uint64_t h) { return static_cast<int>(h >> 60); }
  int Get(std::size_t word, int counter) const {
    return static_cast<int>((table_[word] >> (counter * 4)) & 0xF);
  }
  void Halve() {
    for (std::uint64_t& w : table_) w = (w >> 1) & 0x7777777777777777ULL;
    additions_ /= 2;
  }

  std::vector<std::uint64_t> table_;
  std::size_t mask_ = 0;
  std::size_t sample_size_ = 0;
  std::size_t additions_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SKETCH_H_
