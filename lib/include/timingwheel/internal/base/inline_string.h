// A string key's characters, held in place when they are short.
#ifndef TIMINGWHEEL_INTERNAL_BASE_INLINE_STRING_H_
#define TIMINGWHEEL_INTERNAL_BASE_INLINE_STRING_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace timingwheel {
namespace internal {

// Up to kCapacity characters live in the object itself; a longer string
// lives in a heap block the object owns. kCapacity + 1 bytes, 4-aligned. A
// std::string of more than 15 characters is a heap block, which a timer's key
// carries from the caller's thread to the loop and on to an execute worker:
// whichever thread frees it, it is another thread's block, and glibc's malloc
// then takes the owning arena's lock and the block's cache lines cross cores.
// Held here instead, a key of a command or an entry is plain bytes: the caller
// copies them in, the loop compares and copies them, and the worker that hands
// the key to a callback builds (and the callback frees) its own std::string.
//
// The wheel's (InlineString, below) is 44 bytes, so that an entry
// (deadline, links, stored hash, key, an 8-byte value) is 72 bytes with no
// padding, and a 36-character key (a UUID's text) fits with room for a short
// prefix. The cache's is 40 (cache/stored_key.h).
template <std::size_t kCapacityT>
class BasicInlineString {
 public:
  static constexpr std::size_t kCapacity = kCapacityT;

  explicit BasicInlineString(std::string_view s) { Assign(s); }
  // Taking a std::string leaves it empty, as a move would (a caller that
  // hands over a key, SetTimers' items, sees it moved out).
  explicit BasicInlineString(std::string&& s) {
    Assign(s);
    s.clear();
  }
  BasicInlineString(const BasicInlineString& other) { Assign(other.view()); }
  BasicInlineString(BasicInlineString&& other) noexcept { Take(other); }
  BasicInlineString& operator=(const BasicInlineString& other) {
    if (this != &other) {
      BasicInlineString copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  BasicInlineString& operator=(BasicInlineString&& other) noexcept {
    if (this != &other) {
      Release();
      Take(other);
    }
    return *this;
  }
  ~BasicInlineString() { Release(); }

  std::string_view view() const {
    if (size_ != kOnHeap) return {chars_, size_};
    return {HeapData(), HeapSize()};
  }
  // The characters as a std::string, allocated by the calling thread.
  std::string ToString() const { return std::string(view()); }

  friend bool operator==(const BasicInlineString& a,
                         const BasicInlineString& b) {
    return a.view() == b.view();
  }

 private:
  // size_ when the characters are on the heap: chars_ then holds the
  // block's address and length, copied in and out with memcpy (the object
  // is only 4-byte aligned).
  static constexpr std::uint8_t kOnHeap = 0xff;
  static_assert(kCapacity < kOnHeap && (kCapacity + 1) % 4 == 0);
  static_assert(sizeof(char*) + sizeof(std::size_t) <= kCapacity);

  void Assign(std::string_view s) {
    if (s.size() <= kCapacity) {
      std::memcpy(chars_, s.data(), s.size());
      size_ = static_cast<std::uint8_t>(s.size());
      return;
    }
    char* data = new char[s.size()];
    std::memcpy(data, s.data(), s.size());
    const std::size_t size = s.size();
    std::memcpy(chars_, &data, sizeof(data));
    std::memcpy(chars_ + sizeof(data), &size, sizeof(size));
    size_ = kOnHeap;
  }
  // Takes what `other` holds, characters or heap block, leaving it empty.
  void Take(BasicInlineString& other) {
    std::memcpy(chars_, other.chars_, kCapacity);
    size_ = other.size_;
    other.size_ = 0;
  }
  void Release() {
    if (size_ == kOnHeap) delete[] HeapData();
  }
  char* HeapData() const {
    char* data;
    std::memcpy(&data, chars_, sizeof(data));
    return data;
  }
  std::size_t HeapSize() const {
    std::size_t size;
    std::memcpy(&size, chars_ + sizeof(char*), sizeof(size));
    return size;
  }

  alignas(4) char chars_[kCapacity];
  std::uint8_t size_;
};

using InlineString = BasicInlineString<43>;
static_assert(sizeof(InlineString) == 44 && alignof(InlineString) == 4);

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_INLINE_STRING_H_
