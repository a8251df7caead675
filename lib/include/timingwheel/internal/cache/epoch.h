// Epoch-based reclamation for a cache's lock-free reads: a Get probes the
// index and copies a value without its shard's lock, so nothing it may be
// reading (a node, an index table, a chunk directory) is destroyed or
// reused until every Get that could have seen it has finished.
//
// Each thread that reads gets a reader slot, a small process-wide number
// (ThisThreadReaderSlot) that indexes a per-cache array of CacheReaderSlot.
// A Get announces the cache's current epoch in its slot on entry and clears
// it on exit. A writer that unlinks something retires it under the epoch E
// it reads after the unlink (RetireEpoch); the epoch moves from E to E + 1
// only once every announced slot shows E; so once the epoch is
// E + kCacheEpochGrace, every Get that announced E or earlier has ended,
// and no later Get can reach what was unlinked. The fences that make this
// hold in the C++ memory model (a reader's announcement, a retirer's epoch
// read, an advancer's scan) are argued in docs/cache_concurrency.md, "Ordering".
#ifndef TIMINGWHEEL_INTERNAL_CACHE_EPOCH_H_
#define TIMINGWHEEL_INTERNAL_CACHE_EPOCH_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/schedule_point.h"

namespace timingwheel {
namespace internal {

// How many epochs after the one it was retired in a thing may be freed:
// the epoch it was retired in may still have readers, and so may the one
// after (a reader that read the epoch just before it moved on); none can
// have announced E + 2 and still reach it.
inline constexpr std::uint64_t kCacheEpochGrace = 2;

// How many threads can read a cache lock-free at once; a thread that finds
// none free reads under its shard's lock instead, as every thread did
// before (slower, never wrong).
inline constexpr int kCacheReaderSlots = 128;

// Hands out reader slot numbers, lowest free first, and takes them back
// when their thread exits. `high_water` (slots ever handed out) bounds the
// writers' scans.
class CacheReaderSlotRegistry {
 public:
  static CacheReaderSlotRegistry& Get() {
    static CacheReaderSlotRegistry* const registry =
        new CacheReaderSlotRegistry;  // never destroyed: threads outlive it
    return *registry;
  }
  int Acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < kCacheReaderSlots; ++i) {
      if (!used_[i]) {
        used_[i] = true;
        if (i >= high_water_.load(std::memory_order_relaxed)) {
          high_water_.store(i + 1, std::memory_order_release);
        }
        return i;
      }
    }
    return -1;
  }
  void Release(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    used_[i] = false;
  }
  int high_water() const { return high_water_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::vector<bool> used_ = std::vector<bool>(kCacheReaderSlots);
  std::atomic<int> high_water_{0};
};

// This thread's reader slot number, or -1 if all are taken. Cost after
// the first call: a thread-local load.
inline int ThisThreadReaderSlot() {
  struct Holder {
    int slot = CacheReaderSlotRegistry::Get().Acquire();
    ~Holder() {
      if (slot >= 0) CacheReaderSlotRegistry::Get().Release(slot);
    }
  };
  static thread_local Holder holder;
  return holder.slot;
}

// One thread's announcement to one cache, and its hit, miss and
// lock-free replacement counts there (written by that thread only, so no
// read-modify-write). A cache line of its own, so that readers never write a
// shared line.
struct alignas(64) CacheReaderSlot {
  std::atomic<std::uint64_t> epoch{0};  // 0: not reading
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> replaced{0};  // Sets without the lock

  void Count(std::atomic<std::uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1,
                  std::memory_order_relaxed);
  }
};

// A cache's epoch and its readers' slots.
class CacheEpochs {
 public:
  // Epochs start at 1: 0 in a slot means "not reading".
  std::uint64_t current() const {
    return epoch_.load(std::memory_order_acquire);
  }

  // The epoch to retire what the caller has just unlinked under. The
  // sequentially consistent fence orders the unlink before the read, and
  // pairs with a reader's announcement (CacheReadSection): either that
  // reader's later reads see the unlink, or the epoch read here is at
  // least the one the reader announced.
  std::uint64_t RetireEpoch() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    TW_CACHE_STEP("epoch.retire_read");
    return epoch_.load(std::memory_order_acquire);
  }

  // Whether something retired in epoch `retired` may be freed once the
  // epoch is `now` (`grace`: kCacheEpochGrace, but for the explorer's
  // mutants).
  static bool Reclaimable(std::uint64_t retired, std::uint64_t now,
                          std::uint64_t grace = kCacheEpochGrace) {
    return retired + grace <= now;
  }

  CacheReaderSlot& slot(int i) { return slots_[i]; }
  const CacheReaderSlot& slot(int i) const { return slots_[i]; }

  // Moves the epoch on by one if every slot that is reading has announced
  // the current epoch; returns the epoch after. Called by writers after
  // they have unlinked what they retire. Cost: a fence and a load per slot
  // ever handed out.
  std::uint64_t TryAdvance() {
    // Pairs with the fence of a reader's announcement (Enter): either this
    // scan sees the reader's slot, or the reader sees the unlink.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    TW_CACHE_STEP("epoch.advance_read");
    std::uint64_t e = epoch_.load(std::memory_order_acquire);
    const int n = CacheReaderSlotRegistry::Get().high_water();
    for (int i = 0; i < n; ++i) {
      TW_CACHE_STEP("epoch.scan_slot");
      const std::uint64_t a = slots_[i].epoch.load(std::memory_order_acquire);
      if (a != 0 && a != e) return e;
    }
    TW_CACHE_STEP("epoch.advance");
    if (epoch_.compare_exchange_strong(e, e + 1, std::memory_order_acq_rel)) {
      return e + 1;
    }
    return e;  // another writer moved it
  }

 private:
  friend class CacheReadSection;
  alignas(64) std::atomic<std::uint64_t> epoch_{1};
  CacheReaderSlot slots_[kCacheReaderSlots];
};

// A Get's time without a lock: announces the epoch for its lifetime. If the
// thread has no slot, active() is false and the caller takes the lock. A
// section opened inside another on the same thread (a value's copy calling
// the cache) leaves the outer announcement alone.
class CacheReadSection {
 public:
  explicit CacheReadSection(CacheEpochs& epochs) {
    const int i = ThisThreadReaderSlot();
    if (i < 0) return;
    index_ = i;
    slot_ = &epochs.slots_[i];
    if (slot_->epoch.load(std::memory_order_relaxed) != 0) {
      nested_ = true;
      return;
    }
    // The announcement, then a sequentially consistent fence before any
    // read of the structures. It pairs with the fence of every writer's
    // scan (TryAdvance) and epoch read (RetireEpoch): the C++ model orders
    // one of two such fences first, so either the writer's later read of
    // this slot sees the announcement, or this reader's later reads see
    // what the writer unlinked before its fence. (An exchange alone is a
    // full barrier on x86, but the model promises nothing for it against
    // the acquire loads after it.) The epoch read may be stale: a slot
    // showing an old epoch only holds the epoch back.
    TW_CACHE_STEP("epoch.announce");
    const std::uint64_t e = epochs.epoch_.load(std::memory_order_relaxed);
    TW_DCHECK(e != 0);  // epochs start at 1: 0 would read as "not reading"
    slot_->epoch.store(e, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // Release: whatever this section read happens before a writer that
  // reads the cleared slot frees it.
  ~CacheReadSection() {
    if (slot_ != nullptr && !nested_) {
      TW_CACHE_STEP("epoch.leave");
      slot_->epoch.store(0, std::memory_order_release);
    }
  }
  CacheReadSection(const CacheReadSection&) = delete;
  CacheReadSection& operator=(const CacheReadSection&) = delete;

  bool active() const { return slot_ != nullptr; }
  CacheReaderSlot& slot() const { return *slot_; }
  // The thread's reader slot number (ThisThreadReaderSlot), when active().
  int index() const { return index_; }

 private:
  CacheReaderSlot* slot_ = nullptr;
  int index_ = -1;
  bool nested_ = false;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_EPOCH_H_
