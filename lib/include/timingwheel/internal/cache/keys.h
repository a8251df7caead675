// How a cache hashes, compares and hands back its keys: a K, the key as a
// node stores it (stored_key.h), or a lookup key a Get may take instead of
// a K (a string view for std::string keys; anything, under a transparent
// Hash and Eq).
#ifndef TIMINGWHEEL_INTERNAL_CACHE_KEYS_H_
#define TIMINGWHEEL_INTERNAL_CACHE_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/hash/hash.h"
#include "timingwheel/internal/base/hash.h"
#include "timingwheel/internal/cache/stored_key.h"

namespace timingwheel {
namespace internal {

template <typename K, typename Hash, typename Eq>
class CacheKeys {
 public:
  using StoredKey = CacheStoredKey<K, Hash, Eq>;
  // A std::string key under the default Hash and Eq: stored in place and
  // hashed and compared as the std::string_view it is.
  static constexpr bool kDefaultStringKey = kCacheStringKey<K, Hash, Eq>;

  // A key's hash, mixed fully (base/hash.h): good bits everywhere even for
  // an identity Hash. The cache takes its shard from the top bits, and the
  // shard's index and policy the low 32 (Tag).
  template <typename Q>
  std::uint64_t Mix(const Q& key) const {
    if constexpr (kDefaultStringKey) {
      // A std::string and a lookup key alike: absl::Hash<std::string>
      // differs from the view's.
      return MixHash(absl::Hash<std::string_view>{}(AsView(key)));
    } else {
      return MixHash(static_cast<std::uint64_t>(hash_(key)));
    }
  }
  template <typename Q>
  std::uint32_t Tag(const Q& key) const {
    return static_cast<std::uint32_t>(Mix(key));
  }

  // Whether stored key `stored` is `key` (a K, a stored key or a lookup
  // key).
  template <typename Q>
  bool Is(const StoredKey& stored, const Q& key) const {
    if constexpr (kDefaultStringKey) {
      return AsView(stored) == AsView(key);
    } else {
      return eq_(stored, key);
    }
  }

  // A stored key as a K, for the listener. May throw what copying a K
  // throws.
  static K Copy(const StoredKey& key) {
    if constexpr (kDefaultStringKey) {
      return key.ToString();
    } else {
      return key;
    }
  }

 private:
  static std::string_view AsView(const CacheInlineString& key) {
    return key.view();
  }
  template <typename Q>
  static std::string_view AsView(const Q& key) {
    return std::string_view(key);
  }

  [[no_unique_address]] Hash hash_;
  [[no_unique_address]] Eq eq_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_KEYS_H_
