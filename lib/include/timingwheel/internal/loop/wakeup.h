// Letting the loop sleep until a deadline or the next command.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_WAKEUP_H_
#define TIMINGWHEEL_INTERNAL_LOOP_WAKEUP_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/functional/function_ref.h"
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
      std::lock_guard<std::mutex> lock(mu_);
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
      std::unique_lock<std::mutex> lock(mu_);
      if (!signaled_) cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout));
      signaled_ = false;
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

  // Sleeps up to `timeout` unannounced: Notify() does not end it, Wake() does.
  void Nap(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!signaled_) cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout));
    signaled_ = false;
  }

  // Ends a Sleep or a Nap in progress, or the next one to start. Takes the
  // lock: for rare events (a full queue, Stop).
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    signaled_ = true;
    cv_.notify_one();
  }

 private:
  std::atomic<bool> sleeping_{false};
  // Standard primitives: ThreadSanitizer sees them even when the system's
  // Abseil was built without it.
  std::mutex mu_;
  std::condition_variable cv_;  // steady clock: immune to wall-clock jumps
  bool signaled_ = false;       // guarded by mu_
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_WAKEUP_H_
