// The lock of a cache shard: internal::Mutex, but for the explorer test
// (schedule_point.h), where a thread waiting for it must not block in the
// OS while the thread holding it waits for the scheduler to run it again.
// There it is taken by try-lock, with a schedule point between tries.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SHARD_MUTEX_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SHARD_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "timingwheel/internal/base/mutex.h"
#include "timingwheel/internal/cache/schedule_point.h"

namespace timingwheel {
namespace internal {

#ifdef TIMINGWHEEL_CACHE_EXPLORE

class ABSL_LOCKABLE CacheMutex {
 public:
  CacheMutex() = default;
  CacheMutex(const CacheMutex&) = delete;
  CacheMutex& operator=(const CacheMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    TW_CACHE_STEP("mutex.lock");
    while (!mu_.TryLock()) TW_CACHE_SPIN("mutex.lock.held");
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    TW_CACHE_STEP("mutex.unlock");
    mu_.Unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    TW_CACHE_STEP("mutex.try_lock");
    return mu_.TryLock();
  }
  void AssumeHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE CacheMutexLock {
 public:
  explicit CacheMutexLock(CacheMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_.Lock();
  }
  ~CacheMutexLock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  CacheMutexLock(const CacheMutexLock&) = delete;
  CacheMutexLock& operator=(const CacheMutexLock&) = delete;

 private:
  CacheMutex& mu_;
};

#else

using CacheMutex = Mutex;
using CacheMutexLock = MutexLock;

#endif  // TIMINGWHEEL_CACHE_EXPLORE

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SHARD_MUTEX_H_
