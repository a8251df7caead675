// What a caller does for the loop before it queues keyed work.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_CALLER_SHARE_H_
#define TIMINGWHEEL_INTERNAL_LOOP_CALLER_SHARE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "timingwheel/internal/base/resident_block.h"

namespace timingwheel {
namespace internal {

// The part of a burst's cost that its producer pays, so that the timers
// queued behind it on the loop do not (docs/api.md E13). A caller calls
// BeforeSubmit at the start of each keyed call, before it reads the time its
// deadline counts from:
//  - It faults in the memory the loop will grow into next, if the loop has
//    asked for it and nobody provides it yet: the pool's next block
//    (pool_block), the key index's table during a growth (index_table).
//  - While the loop says it is behind (SetBehind), it sleeps kSleep once:
//    on a machine with fewer free cores than busy threads, a producer that
//    never stops takes the loop's core, and every queued timer fires that
//    much later; a sleeping one gives the core to the loop. The call is
//    still accepted.
// Three relaxed loads of lines that change rarely when neither applies; the
// owner keeps its hot fields off these lines (alignas on what follows).
class CallerShare {
 public:
  // How long a paced caller sleeps.
  static constexpr std::chrono::microseconds kSleep{50};

  // Any thread.
  void BeforeSubmit() noexcept {
    if (pool_block_.Wanted()) pool_block_.Provide();
    if (index_table_.Posted()) index_table_.Populate();
    if (behind_.load(std::memory_order_relaxed)) [[unlikely]] {
      Pace();
    }
  }

  // The loop: whether callers should pace themselves. Written only when it
  // changes, so callers' loads stay hits.
  void SetBehind(bool behind) {
    if (behind != behind_.load(std::memory_order_relaxed)) {
      behind_.store(behind, std::memory_order_relaxed);
    }
  }

  // The loop's ends of the memory hand-overs (base/resident_block.h).
  ResidentBlock& pool_block() { return pool_block_; }
  const ResidentBlock& pool_block() const { return pool_block_; }
  ResidentRange& index_table() { return index_table_; }

 private:
  [[gnu::noinline]] static void Pace() noexcept {
    std::this_thread::sleep_for(kSleep);
  }

  ResidentBlock pool_block_;
  ResidentRange index_table_;
  alignas(64) std::atomic<bool> behind_{false};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_CALLER_SHARE_H_
