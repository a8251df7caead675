// The one thread a LocalWheel belongs to, checked where TW_DCHECK checks.
#ifndef TIMINGWHEEL_INTERNAL_LOCAL_OWNER_THREAD_H_
#define TIMINGWHEEL_INTERNAL_LOCAL_OWNER_THREAD_H_

#include <atomic>
#include <thread>

#include "timingwheel/internal/base/check.h"

namespace timingwheel {
namespace internal {

// The owner is the thread of the first call, not of construction: a server
// typically builds its per-loop wheels on the main thread and hands each to
// its loop's thread. Where TW_DCHECK checks nothing this is empty and free.
class OwnerThread {
 public:
#if TIMINGWHEEL_DCHECK_IS_ON
  // Aborts, naming the check, when called on a thread other than the first
  // caller's. The id is atomic so that the check of a misuse is itself no
  // data race (ThreadSanitizer would report the race, not the misuse).
  void Check() const {
    const std::thread::id self = std::this_thread::get_id();
    std::thread::id owner = owner_.load(std::memory_order_relaxed);
    if (owner == std::thread::id()) {
      owner_.compare_exchange_strong(owner, self, std::memory_order_relaxed);
      if (owner == std::thread::id()) return;  // bound to this thread now
    }
    TW_DCHECK(owner == self && "a LocalWheel is called on its owning thread");
  }

 private:
  mutable std::atomic<std::thread::id> owner_{};
#else
  void Check() const {}
#endif
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOCAL_OWNER_THREAD_H_
