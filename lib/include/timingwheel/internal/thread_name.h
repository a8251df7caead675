// Names the library's threads, so `top -H`, `perf` and debuggers show which
// thread is the loop and which are workers: "tw-loop", "tw-execute",
// "tw-drain".
#ifndef TIMINGWHEEL_INTERNAL_THREAD_NAME_H_
#define TIMINGWHEEL_INTERNAL_THREAD_NAME_H_

#include <pthread.h>

namespace timingwheel {
namespace internal {

// Names the calling thread (at most 15 characters on Linux). Best effort: a
// name is for people reading tools, so a failure changes nothing else.
inline void NameThisThread(const char* name) {
  (void)pthread_setname_np(pthread_self(), name);
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_THREAD_NAME_H_
