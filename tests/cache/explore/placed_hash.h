// Keys that say where they go: under PlacedHash, the cache's mixed hash of
// a key (MixHash, which CacheImpl::HashOf applies) is the key itself, so a
// key names its shard (top 6 bits) and its index tag (low 32 bits, whose
// scaled value is its home slot). The explorer uses it to give each
// schedule a fresh shard of a shared cache and to place keys in the index.
#ifndef TIMINGWHEEL_TESTS_CACHE_EXPLORE_PLACED_HASH_H_
#define TIMINGWHEEL_TESTS_CACHE_EXPLORE_PLACED_HASH_H_

#include <cstddef>
#include <cstdint>

namespace timingwheel {
namespace explore {

// The inverse of splitmix64's finalizer (internal::MixHash).
inline std::uint64_t UnmixHash(std::uint64_t x) {
  x = (x ^ (x >> 31) ^ (x >> 62)) * 0x319642B2D24D8EC3ULL;
  x = (x ^ (x >> 27) ^ (x >> 54)) * 0x96DE1B173F119089ULL;
  return x ^ (x >> 30) ^ (x >> 60);
}

struct PlacedHash {
  std::size_t operator()(std::uint64_t key) const { return UnmixHash(key); }
};

inline constexpr int kShardBits = 6;  // an unbounded cache's 64 shards

// Key number `id` (< 2^26) of shard `shard`, with index tag `tag`.
inline std::uint64_t PlacedKey(std::uint32_t shard, std::uint32_t id,
                               std::uint32_t tag) {
  return (std::uint64_t{shard} << (64 - kShardBits)) |
         (std::uint64_t{id} << 32) | tag;
}

}  // namespace explore
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_EXPLORE_PLACED_HASH_H_
