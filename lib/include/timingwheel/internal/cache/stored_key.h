// How a cache node stores its key: as the K itself, or, for std::string
// keys under the default Hash and Eq, as a CacheInlineString, which keeps
// a key of up to 39 bytes in the node, so that a lookup compares it on the
// line it reads for the deadline and value instead of following a pointer.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_STORED_KEY_H_
#define TIMINGWHEEL_INTERNAL_CACHE_STORED_KEY_H_

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/hash/hash.h"

namespace timingwheel {
namespace internal {

// Whether a cache keyed by K under Hash and Eq has string keys it may hash
// and compare as std::string_views (and so store as CacheInlineString,
// and look up by view).
template <typename K, typename Hash, typename Eq>
inline constexpr bool kCacheStringKey = std::is_same_v<K, std::string>&&
    std::is_same_v<Hash, absl::Hash<std::string>>&&
        std::is_same_v<Eq, std::equal_to<std::string>>;

// A string key as a node holds it: 40 bytes, the bytes in place up to
// kInline of them, else a pointer to a heap copy and its size. Never
// copied or moved: it lives and dies in its node.
class CacheInlineString {
 public:
  static constexpr std::size_t kInline = 39;

  explicit CacheInlineString(std::string_view s) {
    if (s.size() <= kInline) {
      std::memcpy(bytes_, s.data(), s.size());
      bytes_[kInline] = static_cast<char>(s.size());
      return;
    }
    char* heap = new char[s.size()];
    std::memcpy(heap, s.data(), s.size());
    const std::size_t size = s.size();
    std::memcpy(bytes_, &heap, sizeof heap);
    std::memcpy(bytes_ + sizeof heap, &size, sizeof size);
    bytes_[kInline] = static_cast<char>(kOnHeap);
  }
  ~CacheInlineString() {
    if (on_heap()) delete[] Heap();
  }
  CacheInlineString(const CacheInlineString&) = delete;
  CacheInlineString& operator=(const CacheInlineString&) = delete;

  std::string_view view() const {
    if (!on_heap()) {
      return std::string_view(bytes_,
                              static_cast<unsigned char>(bytes_[kInline]));
    }
    std::size_t size;
    std::memcpy(&size, bytes_ + sizeof(char*), sizeof size);
    return std::string_view(Heap(), size);
  }
  operator std::string_view() const { return view(); }

 private:
  static constexpr unsigned char kOnHeap = 0xFF;
  bool on_heap() const {
    return static_cast<unsigned char>(bytes_[kInline]) == kOnHeap;
  }
  char* Heap() const {
    char* heap;
    std::memcpy(&heap, bytes_, sizeof heap);
    return heap;
  }

  alignas(8) char bytes_[kInline + 1];
};
static_assert(sizeof(CacheInlineString) == 40);

// The type a node of a cache keyed by K under Hash and Eq stores.
template <typename K, typename Hash, typename Eq>
using CacheStoredKey =
    std::conditional_t<kCacheStringKey<K, Hash, Eq>, CacheInlineString, K>;

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_STORED_KEY_H_
