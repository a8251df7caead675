// Letting the loop sleep until a deadline or the next command.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_WAKEUP_H_
#define TIMINGWHEEL_INTERNAL_LOOP_WAKEUP_H_

#include <atomic>
#include <chrono>
#include <condition_variable>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "timingwheel/internal/base/mutex.h"

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
      MutexLock lock(mu_);
      signaled_ = true;
      cv_.notify_one();
    }
  }

  // Sleeps up to `timeout` unless has_work() (checked after announcing the
  // sleep, so no Notify is missed) or until Notify().
  void Sleep(absl::Duration timeout, absl::FunctionRef<bool()> has_work) {
    sleeping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!has_work()) {
      MutexLock lock(mu_);
      if (!signaled_) lock.WaitFor(cv_, absl::ToChronoNanoseconds(timeout));
      signaled_ = false;
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

  // Sleeps up to `timeout` unannounced: Notify() does not end it, Wake() does.
  void Nap(absl::Duration timeout) {
    MutexLock lock(mu_);
    if (!signaled_) lock.WaitFor(cv_, absl::ToChronoNanoseconds(timeout));
    signaled_ = false;
  }

  // Ends a Sleep or a Nap in progress, or the next one to start. Takes the
  // lock: for rare events (a full queue, Stop).
  void Wake() {
    MutexLock lock(mu_);
    signaled_ = true;
    cv_.notify_one();
  }

 private:
  std::atomic<bool> sleeping_{false};
  // Standard primitives (Mutex is a std::mutex): ThreadSanitizer sees them
  // even when the system's Abseil was built without it.
  Mutex mu_;
  std::condition_variable cv_;  // steady clock: immune to wall-clock jumps
  bool signaled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_WAKEUP_H_
