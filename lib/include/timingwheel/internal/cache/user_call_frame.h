// The calls into a user's code (a cache's listener, or its load) in
// progress on this thread: that code may call another cache, or this one,
// or destroy this one. The cache's destructor marks the frames of the cache
// it destroys, and the Notify or GetOrLoad that owns a marked frame touches
// the cache no more.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_USER_CALL_FRAME_H_
#define TIMINGWHEEL_INTERNAL_CACHE_USER_CALL_FRAME_H_

#include <utility>

namespace timingwheel {
namespace internal {

// One call into user code by `Cache` (a CacheImpl), on the stack for the
// call's length; a thread's frames form a list, innermost first, one list
// per Cache type. Only this thread reads or writes its list, so it needs no
// synchronization: a cache destroyed from another thread waits for the
// calls in flight instead (CacheGate).
template <typename Cache>
class UserCallFrame {
 public:
  explicit UserCallFrame(const Cache* cache)
      : cache_(cache), outer_(std::exchange(innermost_, this)) {}
  ~UserCallFrame() { innermost_ = outer_; }
  UserCallFrame(const UserCallFrame&) = delete;
  UserCallFrame& operator=(const UserCallFrame&) = delete;

  // True once the destructor of this frame's cache has run.
  bool destroyed() const { return destroyed_; }

  // The destructor of `cache`: marks this thread's frames of it.
  static void MarkDestroyed(const Cache* cache) {
    for (UserCallFrame* f = innermost_; f != nullptr; f = f->outer_) {
      if (f->cache_ == cache) f->destroyed_ = true;
    }
  }

 private:
  static inline thread_local UserCallFrame* innermost_ = nullptr;

  const Cache* const cache_;
  UserCallFrame* const outer_;
  bool destroyed_ = false;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_USER_CALL_FRAME_H_
