// The gate a cache's wheel callbacks pass before touching the cache, which
// ~Cache closes: see Cache::~Cache.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_GATE_H_
#define TIMINGWHEEL_INTERNAL_CACHE_GATE_H_

#include <condition_variable>

#include "absl/base/thread_annotations.h"
#include "timingwheel/internal/base/mutex.h"

namespace timingwheel {
namespace internal {

// Counts the callbacks inside, and once closed lets none in. A callback
// another wheel worker has already taken when the cache is destroyed either
// finishes before the cache's memory goes or finds the gate closed and
// touches nothing. Held by shared_ptr: the wheel's callback may outlive the
// cache (a wheel destroyed from its own callback is torn down after the
// callback returns). std::mutex so that ThreadSanitizer sees the hand-off.
// Cost: two lock round trips per callback.
class CacheGate {
 public:
  // False once closed: the callback must not touch the cache.
  bool Enter() {
    MutexLock lock(mu_);
    if (closed_) return false;
    ++running_;
    return true;
  }
  // After an Enter that returned true.
  void Leave() {
    MutexLock lock(mu_);
    --running_;
    idle_.notify_all();
  }
  // Closes the gate, then waits until only `ours` callbacks (those of the
  // calling thread, which cannot end while it waits) are still inside.
  void Close(int ours) {
    MutexLock lock(mu_);
    closed_ = true;
    while (running_ != ours) lock.Wait(idle_);
  }

 private:
  Mutex mu_;
  std::condition_variable idle_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_GATE_H_
