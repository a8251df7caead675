// The wheel's key -> entry map: open addressing over (hash, entry) words.
#ifndef TIMINGWHEEL_INTERNAL_KEY_INDEX_H_
#define TIMINGWHEEL_INTERNAL_KEY_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "timingwheel/internal/large_alloc.h"

namespace timingwheel {
namespace internal {

// Maps a key's 32-bit hash to the pool index of its entry. The keys live in
// the entries, not here, so a lookup passes a predicate that compares the
// entry's key; it is asked only about entries whose stored hash is equal.
//
// Why not absl::flat_hash_set: the loop hides the map's cache misses by
// prefetching a few commands ahead, and flat_hash_set's prefetch fetches one
// line of a probe group that spans two or three, so most lookups still
// waited for a miss. Here a key's words start at one known position, so one
// prefetch covers the lookup. (docs/design-notes.md has the measurements.)
//
// Layout: one array of 8-byte words, hash << 32 | entry, empty = all ones;
// linear probing from home(hash); deletion shifts later words back, so there
// are no tombstones and probe runs stay short; capacity a power of two, grown
// at 3/4 load: 8 to 16 bytes a key.
//
// Growth rehashes everything at once, O(keys), and the loop does nothing
// else meanwhile (Options::expected_timers avoids it). An incremental
// rehash was tried and cost more than it saved (docs/design-notes.md).
class KeyIndex {
 public:
  // What Find returns when no entry matches.
  static constexpr std::size_t kAbsent = ~std::size_t{0};

  KeyIndex() = default;
  ~KeyIndex() { Free(words_, capacity()); }
  KeyIndex(const KeyIndex&) = delete;
  KeyIndex& operator=(const KeyIndex&) = delete;

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return words_ == nullptr ? 0 : mask_ + 1; }
  std::size_t MemoryBytes() const { return capacity() * sizeof(std::uint64_t); }

  // Fetches the line where a lookup of `hash` starts. No effect on state.
  void Prefetch(std::uint32_t hash) const {
    if (words_ != nullptr) __builtin_prefetch(&words_[Home(hash)]);
  }

  // The position of the word for `hash` whose entry satisfies matches(entry),
  // or kAbsent.
  template <typename Matches>
  std::size_t Find(std::uint32_t hash, Matches&& matches) const {
    if (words_ == nullptr) return kAbsent;
    for (std::size_t i = Home(hash);; i = (i + 1) & mask_) {
      const std::uint64_t w = words_[i];
      if (w == kEmpty) return kAbsent;
      if (HashOf(w) == hash && matches(EntryOf(w))) return i;
    }
  }

  // The entry of the word at `pos` (a position Find returned).
  std::uint32_t EntryAt(std::size_t pos) const { return EntryOf(words_[pos]); }

  // Makes room for one more word, so that the next Insert does not allocate.
  // Throws std::bad_alloc (and changes nothing) when memory runs out.
  void ReserveOneMore() {
    if ((size_ + 1) * 4 > capacity() * 3)
      Rehash(std::max<std::size_t>(8, capacity() * 2));
  }
  // Makes room for n words in all.
  void Reserve(std::size_t n) {
    if (n * 4 > capacity() * 3)
      Rehash(std::bit_ceil(std::max<std::size_t>(8, n * 4 / 3 + 1)));
  }

  // Adds `entry` under `hash`; the caller knows no word for it exists and has
  // called ReserveOneMore.
  void Insert(std::uint32_t hash, std::uint32_t entry) {
    Put(words_, mask_, hash, entry);
    ++size_;
  }

  // Removes the word at `pos`, moving back the words after it that probed
  // past it.
  void EraseAt(std::size_t pos) {
    std::size_t hole = pos;
    for (std::size_t i = (pos + 1) & mask_;; i = (i + 1) & mask_) {
      const std::uint64_t w = words_[i];
      if (w == kEmpty) break;
      // w may fill the hole unless its home lies in (hole, i]: a lookup for
      // it starts at its home and must still reach it.
      if (((i - Home(HashOf(w))) & mask_) >= ((i - hole) & mask_)) {
        words_[hole] = w;
        hole = i;
      }
    }
    words_[hole] = kEmpty;
    --size_;
  }

  // Calls f(entry) for every word, in no set order.
  template <typename F>
  void ForEach(F&& f) const {
    for (std::size_t i = 0; i < capacity(); ++i) {
      if (words_[i] != kEmpty) f(EntryOf(words_[i]));
    }
  }

  // Removes every word; keeps the capacity.
  void Clear() {
    if (words_ != nullptr)
      std::memset(words_, 0xFF, capacity() * sizeof(std::uint64_t));
    size_ = 0;
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  static std::uint32_t HashOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w >> 32);
  }
  static std::uint32_t EntryOf(std::uint64_t w) {
    return static_cast<std::uint32_t>(w);
  }

  // Fibonacci hashing: the top bits of hash * 2^64/phi, so that a weak user
  // hash (std::hash of an integer is the integer) still spreads.
  std::size_t Home(std::uint32_t hash) const { return HomeIn(hash, shift_); }
  static std::size_t HomeIn(std::uint32_t hash, int shift) {
    return static_cast<std::size_t>((hash * 0x9E3779B97F4A7C15ull) >> shift);
  }

  void Put(std::uint64_t* words, std::size_t mask, std::uint32_t hash,
           std::uint32_t entry) const {
    std::size_t i = HomeIn(hash, shift_);
    while (words[i] != kEmpty) i = (i + 1) & mask;
    words[i] = std::uint64_t{hash} << 32 | entry;
  }

  void Rehash(std::size_t new_capacity) {
    auto* words = static_cast<std::uint64_t*>(LargeAllocate(
        new_capacity * sizeof(std::uint64_t), alignof(std::uint64_t)));
    std::memset(words, 0xFF, new_capacity * sizeof(std::uint64_t));
    std::uint64_t* old = words_;
    const std::size_t old_capacity = capacity();
    words_ = words;
    mask_ = new_capacity - 1;
    shift_ = 64 - std::countr_zero(new_capacity);
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i] != kEmpty) Put(words_, mask_, HashOf(old[i]), EntryOf(old[i]));
    }
    Free(old, old_capacity);
  }

  static void Free(std::uint64_t* words, std::size_t capacity) {
    LargeFree(words, capacity * sizeof(std::uint64_t), alignof(std::uint64_t));
  }

  std::uint64_t* words_ = nullptr;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_KEY_INDEX_H_
