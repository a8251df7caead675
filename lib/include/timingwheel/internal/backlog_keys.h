// The key hashes of commands taken off the queue but not yet applied.
#ifndef TIMINGWHEEL_INTERNAL_BACKLOG_KEYS_H_
#define TIMINGWHEEL_INTERNAL_BACKLOG_KEYS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace timingwheel {
namespace internal {

// A set of 32-bit key hashes (the wheel's HashOf) that only grows until it
// is cleared: the loop adds the hash of every keyed command it sets aside,
// and asks, for each timer due meanwhile, whether a command waiting in the
// backlog may concern it. Contains never misses a hash that was added;
// it may say yes for one that was not (two keys with one hash), which only
// holds a timer back until the backlog is applied.
//
// Open addressing with linear probing, at most half full, so an Add or a
// Contains costs about one cache line. Clear costs the table's size, and
// lets a large table go: a burst's table is not kept for the next one.
class BacklogKeys {
 public:
  // Adds `hash`. Amortized O(1); the table doubles at half full. Throws
  // std::bad_alloc, changing nothing, when memory runs out.
  void Add(std::uint32_t hash) {
    if (2 * (size_ + 1) > table_.size()) Grow();
    Put(Stored(hash));
    ++size_;
  }

  // Makes room for n hashes in all without growing.
  void Reserve(std::size_t n) {
    while (2 * n > table_.size()) Grow();
  }

  // Adds hashes[0, n), their lines fetched a few ahead so that their
  // cache misses overlap. As Add otherwise.
  void AddAll(const std::uint32_t* hashes, std::size_t n) {
    while (2 * (size_ + n) > table_.size()) Grow();
    constexpr std::size_t kAhead = 8;
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) Prefetch(hashes[i + kAhead]);
      Put(Stored(hashes[i]));
    }
    size_ += n;
  }

  // Fetches the line a Contains(hash) or Add(hash) starts from.
  void Prefetch(std::uint32_t hash) const {
    if (table_.empty()) return;
    __builtin_prefetch(&table_[Home(Stored(hash), table_.size() - 1)]);
  }

  // True if `hash` was added since the last Clear (or shares its stored
  // form with one that was: see Stored). About one cache line.
  bool Contains(std::uint32_t hash) const {
    if (size_ == 0) return false;
    const std::uint32_t want = Stored(hash);
    const std::size_t mask = table_.size() - 1;
    for (std::size_t i = Home(want, mask);; i = (i + 1) & mask) {
      if (table_[i] == want) return true;
      if (table_[i] == kEmpty) return false;
    }
  }

  // Hashes added since the last Clear, repeats counted.
  std::size_t size() const { return size_; }

  // Forgets every hash. O(table); a table above kKeptSlots is freed.
  void Clear() {
    if (table_.size() > kKeptSlots) {
      std::vector<std::uint32_t>().swap(table_);
    } else {
      std::fill(table_.begin(), table_.end(), kEmpty);
    }
    size_ = 0;
  }

  std::size_t MemoryBytes() const {
    return table_.capacity() * sizeof(std::uint32_t);
  }

 private:
  static constexpr std::uint32_t kEmpty = 0;
  static constexpr std::size_t kMinSlots = 1024;
  static constexpr std::size_t kKeptSlots = std::size_t{1} << 16;

  // Zero marks an empty slot, so the hash 0 is stored as 1: a Contains(1)
  // may then say yes for it, which is allowed.
  static std::uint32_t Stored(std::uint32_t hash) {
    return hash == kEmpty ? 1 : hash;
  }
  // The slot a probe starts from: the hash's high bits, mixed, since the
  // wheel's hashes may have been masked for its own index.
  static std::size_t Home(std::uint32_t stored, std::size_t mask) {
    return static_cast<std::size_t>(
               (std::uint64_t{stored} * 0x9E3779B97F4A7C15ull) >> 32) &
           mask;
  }

  // Inserts without counting; a repeat meets itself on its probe and is
  // stored once.
  void Put(std::uint32_t stored) {
    const std::size_t mask = table_.size() - 1;
    std::size_t i = Home(stored, mask);
    while (table_[i] != kEmpty) {
      if (table_[i] == stored) return;
      i = (i + 1) & mask;
    }
    table_[i] = stored;
  }

  // Doubles the table, re-inserting with the lines fetched a few ahead.
  void Grow() {
    std::vector<std::uint32_t> old(std::max(kMinSlots, 2 * table_.size()),
                                   kEmpty);
    old.swap(table_);
    constexpr std::size_t kAhead = 8;
    const std::size_t mask = table_.size() - 1;
    for (std::size_t i = 0; i < old.size(); ++i) {
      if (i + kAhead < old.size() && old[i + kAhead] != kEmpty) {
        __builtin_prefetch(&table_[Home(old[i + kAhead], mask)], 1);
      }
      if (old[i] != kEmpty) Put(old[i]);
    }
  }

  std::vector<std::uint32_t> table_;
  std::size_t size_ = 0;  // Adds since Clear: bounds the table's load
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BACKLOG_KEYS_H_
