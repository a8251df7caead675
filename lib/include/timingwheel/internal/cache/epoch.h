// Epoch-based reclamation for a cache's lock-free reads: a Get probes the
// index and copies a value without its shard's lock, so nothing it may be
// reading (a node, an index table, a chunk directory) is destroyed or
// reused until every Get that could have seen it has finished.
//
// Each thread that reads gets a reader slot, a small process-wide number
// (ThisThreadReaderSlot) that indexes a per-cache array of CacheReaderSlot.
// A Get announces the cache's current epoch in its slot on entry and clears
// it on exit. A writer that unlinks something retires it under the current
// epoch E; the epoch moves from E to E + 1 only once every announced slot
// shows E; so once the epoch is E + 2, every Get that announced E or earlier
// has ended, and no later Get can reach what was unlinked before E ended.
// See docs/cache.md, "Reads without a lock".
#ifndef TIMINGWHEEL_INTERNAL_CACHE_EPOCH_H_
#define TIMINGWHEEL_INTERNAL_CACHE_EPOCH_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace timingwheel {
namespace internal {

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
    std::uint64_t e = epoch_.load(std::memory_order_acquire);
    const int n = CacheReaderSlotRegistry::Get().high_water();
    for (int i = 0; i < n; ++i) {
      const std::uint64_t a = slots_[i].epoch.load(std::memory_order_acquire);
      if (a != 0 && a != e) return e;
    }
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
    // Sequentially consistent, before any read of the structures: either
    // a writer's scan (TryAdvance) sees this announcement, or this reader
    // sees what the writer unlinked before it scanned. A release too: a
    // scan that reads it has everything this thread read before it (its
    // earlier sections) happen before the writer frees what it retired.
    slot_->epoch.exchange(epochs.epoch_.load(std::memory_order_relaxed),
                          std::memory_order_seq_cst);
  }
  ~CacheReadSection() {
    if (slot_ != nullptr && !nested_) {
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
