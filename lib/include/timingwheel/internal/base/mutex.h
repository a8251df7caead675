// Mutex and MutexLock: std::mutex with the capability annotations that let
// clang's -Wthread-safety check ABSL_GUARDED_BY members.
#ifndef TIMINGWHEEL_INTERNAL_BASE_MUTEX_H_
#define TIMINGWHEEL_INTERNAL_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace timingwheel {
namespace internal {

// A std::mutex, annotated. libstdc++'s std::mutex carries no capability
// attributes, so the analysis cannot see what it guards; absl::Mutex does,
// but ThreadSanitizer only models it when the system's Abseil was built for
// TSan, and its waits are not std::condition_variable's. This is the same
// std::mutex, every call inline: the code is that of std::mutex.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the mutex if it is free, without waiting; true if taken.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }

  // Tells the analysis that the calling thread holds this mutex, where it
  // cannot follow: in a lambda run under the lock. Checks nothing at run
  // time and costs nothing.
  void AssumeHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope, as std::lock_guard holds a std::mutex, and
// waits on a std::condition_variable with it, as std::unique_lock does.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_.Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // std::condition_variable::wait: releases the mutex while blocked, holds
  // it again on return. May return spuriously, so a caller loops on its
  // condition, which the analysis then sees read under the lock:
  //   while (!done_) lock.Wait(cv_);
  // is what cv_.wait(lock, [&] { return done_; }) does.
  void Wait(std::condition_variable& cv) {
    std::unique_lock<std::mutex> lock(mu_.mu_, std::adopt_lock);
    cv.wait(lock);
    lock.release();  // still held: this MutexLock unlocks it
  }

  // std::condition_variable::wait_for: Wait, for at most `timeout`.
  template <typename Rep, typename Period>
  std::cv_status WaitFor(std::condition_variable& cv,
                         const std::chrono::duration<Rep, Period>& timeout) {
    std::unique_lock<std::mutex> lock(mu_.mu_, std::adopt_lock);
    const std::cv_status status = cv.wait_for(lock, timeout);
    lock.release();
    return status;
  }

 private:
  Mutex& mu_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_MUTEX_H_
