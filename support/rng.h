// A fast, repeatable random generator and a 64-bit mixer for the benchmark
// and soak programs. Shared by the example, benchmark and soak programs only,
// not part of the installed library.
#ifndef TIMINGWHEEL_SUPPORT_RNG_H_
#define TIMINGWHEEL_SUPPORT_RNG_H_

#include <cstdint>

namespace support {

// splitmix64's finalizer: a bijection on 64 bits, so distinct indices give
// distinct keys that are spread like real ids (not 0..N-1, which a hash
// might treat too kindly).
inline std::uint64_t Mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Mix of a counter: fast and the same sequence for a seed on every machine,
// which is what a benchmark's or soak's inputs need; statistical quality
// matters little there, and std::mt19937_64 would be a visible share of a
// producer's time. Seed s + 1 gives seed s's sequence one draw later: where
// threads need unrelated sequences, seed them with Mix(s).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}

  std::uint64_t Next() { return Mix(s_++); }

  // Uniform in [0, n), by multiply-shift (the bias is negligible for the n
  // these programs use).
  std::uint64_t Below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<U128>(Next()) * n) >> 64);
  }

  // Uniform in [lo, hi].
  std::int64_t Between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(
                    Below(static_cast<std::uint64_t>(hi - lo + 1)));
  }

 private:
  // -Wpedantic rejects a plain unsigned __int128; __extension__ says we mean
  // it.
  __extension__ typedef unsigned __int128 U128;

  std::uint64_t s_;
};

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_RNG_H_
