// Includes moodycamel's queues from Debian's path or the wrap's.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_MOODYCAMEL_H_
#define TIMINGWHEEL_INTERNAL_LOOP_MOODYCAMEL_H_

#if __has_include(<concurrentqueue/blockingconcurrentqueue.h>)
#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>
#else
#include <blockingconcurrentqueue.h>
#include <concurrentqueue.h>
#endif

#endif  // TIMINGWHEEL_INTERNAL_LOOP_MOODYCAMEL_H_
