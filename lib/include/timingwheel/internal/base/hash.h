// Hash mixing: every function the library applies to a user's hash before a
// table or a sketch uses the bits, in one place.
//
// There are two pipelines on purpose, because their tables take a key's
// position from different bits:
//
//  - The wheel (Wheel::HashOf, KeyIndex) folds the user's hash to 32 bits
//    (FoldHash32) and spreads it only where a home is taken (FibonacciHome):
//    the key index needs homes that are the top bits of a product, so that a
//    table twice as large splits each home in two, in order, which is what
//    lets it migrate in position order; and one multiply is all the mixing
//    the loop's hot path pays for.
//  - The cache (CacheImpl::HashOf, CacheFrequencySketch) mixes the user's
//    hash fully once (MixHash): its shard takes the top bits, its index the
//    low ones as the home (no multiply there), and the sketch needs rows
//    that do not collide together, so every bit must depend on every bit.
#ifndef TIMINGWHEEL_INTERNAL_BASE_HASH_H_
#define TIMINGWHEEL_INTERNAL_BASE_HASH_H_

#include <cstddef>
#include <cstdint>

namespace timingwheel {
namespace internal {

// 2^64 / phi, rounded to odd: Fibonacci hashing's multiplier, and the seed
// step between the frequency sketch's rows.
inline constexpr std::uint64_t kGoldenRatio64 = 0x9E3779B97F4A7C15ULL;

// splitmix64's finalizer: a bijection of 64 bits in which every output bit
// depends on every input bit, so that even an identity hash (std::hash of an
// integer) gives good bits everywhere. The cache's hash.
inline std::uint64_t MixHash(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The wheel's 32-bit key hash: the two halves of the user's hash xored, so
// that no bit is dropped. No mixing: FibonacciHome spreads it.
inline std::uint32_t FoldHash32(std::uint64_t h) {
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

// Fibonacci hashing: the top 64 - shift bits of hash * 2^64/phi, the home of
// `hash` in a table of 2^(64 - shift) positions. A weak hash still spreads,
// and a table twice as large (shift one less) splits each home in two, in
// order.
inline std::size_t FibonacciHome(std::uint32_t hash, int shift) {
  return static_cast<std::size_t>((hash * kGoldenRatio64) >> shift);
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_HASH_H_
