// Letting the loop sleep until a deadline or the next command.
#ifndef TIMINGWHEEL_INTERNAL_WAKEUP_H_
#define TIMINGWHEEL_INTERNAL_WAKEUP_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace timingwheel {
namespace internal {

// An event count: producers call Notify() after publishing work; the one
// consumer calls Sleep() when it found none. A producer pays a fence and a
// load while the consumer is awake; only a sleeping consumer costs it a lock.
class Wakeup {
 public:
  // After the caller has published work.
  void Notify() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_relaxed)) {
      absl::MutexLock lock(&mu_);
      signaled_ = true;
      cv_.Signal();
    }
  }

  // Sleeps up to `timeout` unless has_work() (checked after announcing the
  // sleep, so no Notify is missed) or until Notify().
  void Sleep(absl::Duration timeout, absl::FunctionRef<bool()> has_work) {
    sleeping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!has_work()) {
      absl::MutexLock lock(&mu_);
      if (!signaled_) cv_.WaitWithTimeout(&mu_, timeout);
      signaled_ = false;
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> sleeping_{false};
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool signaled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WAKEUP_H_
