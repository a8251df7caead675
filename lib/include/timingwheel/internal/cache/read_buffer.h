// A bounded, lossy record of a shard's hits for its eviction policy: Gets
// that run without the shard's lock leave the node they hit here, and the
// policy applies the records later, in a batch, under the lock.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_READ_BUFFER_H_
#define TIMINGWHEEL_INTERNAL_CACHE_READ_BUFFER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace timingwheel {
namespace internal {

// Four stripes of 16 records; a reader writes the stripe of its reader slot
// number (epoch.h), so two threads rarely share one. Records may be lost:
// to a full stripe whose drain found the lock taken, or to two readers on
// one stripe at once. A lost record costs the policy one hit's information
// (the hit ratio a little), never a value: drained records name nodes, and
// the drain checks under the lock that each is still an entry. Cost: a
// relaxed load and two relaxed stores per hit; the drain reads 4 counters.
class CacheReadBuffer {
 public:
  static constexpr int kStripes = 4;
  static constexpr std::uint32_t kRecords = 16;

  // Records a hit on `node` (the key's 32 hash bits `tag`) by reader slot
  // `reader`. True when the stripe is full: the caller should drain it if
  // it can take the lock without waiting.
  bool Record(int reader, std::uint32_t node, std::uint32_t tag) {
    Stripe& s = stripes_[reader & (kStripes - 1)];
    const std::uint32_t n = s.count.load(std::memory_order_relaxed);
    if (n >= kRecords) return true;  // full: this hit is not recorded
    s.records[n].store((std::uint64_t{node} << 32) | tag,
                       std::memory_order_relaxed);
    s.count.store(n + 1, std::memory_order_release);
    return n + 1 == kRecords;
  }

  // Under the shard's lock: fn(node, tag) for every record, oldest first
  // within a stripe, then empties the stripes.
  template <typename Fn>
  void Drain(const Fn& fn) {
    for (Stripe& s : stripes_) {
      const std::uint32_t n =
          std::min(s.count.load(std::memory_order_acquire), kRecords);
      for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint64_t r = s.records[k].load(std::memory_order_relaxed);
        fn(static_cast<std::uint32_t>(r >> 32), static_cast<std::uint32_t>(r));
      }
      if (n != 0) s.count.store(0, std::memory_order_relaxed);
    }
  }

 private:
  struct alignas(64) Stripe {
    std::atomic<std::uint32_t> count{0};
    std::atomic<std::uint64_t> records[kRecords] = {};
  };
  Stripe stripes_[kStripes];
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_READ_BUFFER_H_
