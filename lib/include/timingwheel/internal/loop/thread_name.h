// Names the library's threads, so `top -H`, `perf` and debuggers show which
// thread is the loop and which are workers: "tw-loop", "tw-execute",
// "tw-drain".
#ifndef TIMINGWHEEL_INTERNAL_LOOP_THREAD_NAME_H_
#define TIMINGWHEEL_INTERNAL_LOOP_THREAD_NAME_H_

#include <pthread.h>

#include <thread>

namespace timingwheel {
namespace internal {

// Names `thread` (at most 15 characters on Linux). Called by the thread
// that started it, so the name is there by the time the constructor that
// started it returns. Best effort: a name is for people reading tools, so a
// failure changes nothing else.
inline void NameThread(std::thread& thread, const char* name) {
  (void)pthread_setname_np(thread.native_handle(), name);
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_THREAD_NAME_H_
