// Freed memory made visible to the explorer: a freed node's key and value
// bytes are overwritten with kPoisonByte (the pool calls TW_CACHE_FREED),
// and a released block (index table, chunk directory, chunk) is kept alive
// in Quarantine until the schedule ends (TW_CACHE_RELEASED) instead of
// being freed. Then a reader that still uses either is caught in the act,
// without undefined behaviour: by the step that touches it (TouchedFreed),
// by the key comparison (CheckedEq), or by the value's copy (HeapValue).
#ifndef TIMINGWHEEL_TESTS_CACHE_EXPLORE_POISON_H_
#define TIMINGWHEEL_TESTS_CACHE_EXPLORE_POISON_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "scheduler.h"

namespace timingwheel {
namespace explore {

inline constexpr unsigned char kPoisonByte = 0xA5;
inline constexpr std::uint64_t kPoisonWord = 0xA5A5A5A5A5A5A5A5ULL;

// Released blocks, kept until Clear (between schedules), and their
// addresses. Blocks are released under a shard's lock, by managed threads
// and by the test's main thread alike.
class Quarantine {
 public:
  static Quarantine& Instance() {
    static Quarantine* const quarantine = new Quarantine;
    return *quarantine;
  }
  // A block as the cache owns it (internal::CacheBlock).
  using Block = std::unique_ptr<void, void (*)(void*)>;

  void Keep(Block& block) {
    std::lock_guard<std::mutex> lock(mu_);
    addresses_.insert(block.get());
    blocks_.push_back(std::move(block));
  }
  bool Holds(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    return addresses_.count(p) != 0;
  }
  void Clear() {
    std::vector<Block> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(blocks_);
      addresses_.clear();
    }
  }

 private:
  mutable std::mutex mu_;
  std::vector<Block> blocks_;
  std::unordered_set<const void*> addresses_;
};

// What freed thing `p` (a node or block a step touches) is, or nullptr if
// it is live: a quarantined block, or a node whose key, its first word (a
// uint64_t in every explored cache), is poisoned.
inline const char* TouchedFreed(const void* p) {
  if (Quarantine::Instance().Holds(p)) return "a released block";
  std::uint64_t first;
  std::memcpy(&first, p, sizeof first);
  if (first == kPoisonWord) return "a freed node";
  return nullptr;
}

// Key equality that reports a comparison with a freed node's key.
struct CheckedEq {
  bool operator()(std::uint64_t a, std::uint64_t b) const {
    if (a == kPoisonWord || b == kPoisonWord) {
      Scheduler::Instance().Fail("compared the key of a freed node");
      return false;
    }
    return a == b;
  }
};

}  // namespace explore
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_EXPLORE_POISON_H_
