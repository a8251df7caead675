// How a cache node stores its key: as the K itself, or, for std::string
// keys under the default Hash and Eq, as a CacheInlineString, which keeps
// a key of up to 39 bytes in the node, so that a lookup compares it on the
// line it reads for the deadline and value instead of following a pointer.
// (The wheel's KeyStore, base/stored_key.h, does the same for its entries;
// the cache also needs the default Hash, since it hashes stored keys and
// lookup views alike as std::string_views.)
#ifndef TIMINGWHEEL_INTERNAL_CACHE_STORED_KEY_H_
#define TIMINGWHEEL_INTERNAL_CACHE_STORED_KEY_H_

#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/hash/hash.h"
#include "timingwheel/internal/base/inline_string.h"

namespace timingwheel {
namespace internal {

// Whether a cache keyed by K under Hash and Eq has string keys it may hash
// and compare as std::string_views (and so store as CacheInlineString,
// and look up by view).
template <typename K, typename Hash, typename Eq>
inline constexpr bool kCacheStringKey =
    (std::is_same_v<K, std::string> &&
     std::is_same_v<Hash, absl::Hash<std::string>> &&
     std::is_same_v<Eq, std::equal_to<std::string>>);

// A string key as a node holds it: 40 bytes, 4-aligned, the bytes in place
// up to 39 of them (base/inline_string.h), so that with an 8-byte value the
// node is 64 bytes, one cache line.
using CacheInlineString = BasicInlineString<39>;
static_assert(sizeof(CacheInlineString) == 40);

// The type a node of a cache keyed by K under Hash and Eq stores.
template <typename K, typename Hash, typename Eq>
using CacheStoredKey =
    std::conditional_t<kCacheStringKey<K, Hash, Eq>, CacheInlineString, K>;

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_STORED_KEY_H_
