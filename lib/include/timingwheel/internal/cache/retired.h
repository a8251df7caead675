// What a shard has unlinked but a Get may still be reading, oldest first,
// each stamped with the epoch it was retired in (epoch.h), until the epochs
// say no reader is left: nodes (by number) and blocks of memory (replaced
// index tables and chunk directories, given-back chunks).
#ifndef TIMINGWHEEL_INTERNAL_CACHE_RETIRED_H_
#define TIMINGWHEEL_INTERNAL_CACHE_RETIRED_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/epoch.h"

namespace timingwheel {
namespace internal {

// A block of memory owned until freed, whatever its type: moving one never
// allocates or throws, so retiring it cannot fail halfway.
using CacheBlock = std::unique_ptr<void, void (*)(void*)>;
template <typename T>
CacheBlock MakeCacheBlock(std::unique_ptr<T> p) {
  return CacheBlock(p.release(), [](void* q) { delete static_cast<T*>(q); });
}

// A queue of retired things. Push never allocates after Reserve, so a
// write reserves before it changes anything and retires after without a
// failure path. Things are pushed unstamped (epoch 0, which no epoch is)
// and stamped together, once the write has unlinked them all, by one read
// of the epoch after a fence (CacheEpochs::RetireEpoch).
template <typename T>
class CacheRetiredQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }

  // Room for `more` pushes. May throw std::bad_alloc (nothing changes).
  void Reserve(std::size_t more) {
    if (items_.size() + more <= items_.capacity()) return;
    Compact();
    items_.reserve(items_.size() + more);
  }
  // After Reserve: never throws.
  void Push(T thing) {
    TW_DCHECK(items_.size() < items_.capacity());
    items_.emplace_back(0, std::move(thing));
  }
  bool HasUnstamped() const { return unstamped_ != items_.size(); }
  void Stamp(std::uint64_t epoch) {
    for (; unstamped_ < items_.size(); ++unstamped_) {
      items_[unstamped_].first = epoch;
    }
  }
  // The oldest stamp; only when !empty() and all are stamped.
  std::uint64_t oldest() const { return items_[head_].first; }

  // Hands every thing retired in an epoch that `now` makes reclaimable
  // to free(thing), oldest first.
  template <typename Free>
  void FreeReclaimable(std::uint64_t now, const Free& free,
                       std::uint64_t grace = kCacheEpochGrace) {
    while (head_ < unstamped_ &&
           CacheEpochs::Reclaimable(items_[head_].first, now, grace)) {
      free(items_[head_].second);
      ++head_;
    }
    if (empty()) {
      items_.clear();
      head_ = unstamped_ = 0;
    }
  }

  // fn(thing) for every thing not yet freed; for CheckInvariants.
  template <typename Fn>
  void ForEach(const Fn& fn) const {
    for (std::size_t k = head_; k < items_.size(); ++k) fn(items_[k].second);
  }

 private:
  void Compact() {
    items_.erase(items_.begin(),
                 items_.begin() + static_cast<std::ptrdiff_t>(head_));
    unstamped_ -= head_;
    head_ = 0;
  }

  std::vector<std::pair<std::uint64_t, T>> items_;
  std::size_t head_ = 0;       // the oldest not yet freed
  std::size_t unstamped_ = 0;  // the first not yet stamped
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_RETIRED_H_
