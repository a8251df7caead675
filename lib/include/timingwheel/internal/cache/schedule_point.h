// The seam through which a test explores thread schedules of the cache's
// lock-free protocol (tests/cache/explore/), as loom explores tokio's: each
// atomic step of the protocol is preceded by a schedule point, where a
// scheduler decides which thread runs next.
//
// Only an executable that defines TIMINGWHEEL_CACHE_EXPLORE (the explorer
// test, through its cpp_args) gets the hooks, and it implements them; the
// cache headers then compile differently, so its explorer source must be
// the only one in that executable that includes them (the library's own
// sources include none). Everywhere else each macro is nothing or a
// constant, and the cache's code is what it would be without them.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SCHEDULE_POINT_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SCHEDULE_POINT_H_

#ifdef TIMINGWHEEL_CACHE_EXPLORE
#include <cstddef>
#include <cstdint>
#include <memory>
#endif

namespace timingwheel {
namespace internal {

// Breakages of the protocol, each behind TW_CACHE_MUTANT, that the
// explorer must find a failing schedule for. Off (a constant false) in
// every build but the explorer's.
enum class CacheMutant {
  kNone,
  // SetWithoutLock stores in place even while a GetOrLoad is open.
  kSkipLoadsOpenCheck,
  // Reclaim frees a retired node once the epoch is one later, not two.
  kFreeNodesOneEpochEarly,
  // ReadEntry uses the value without reading the deadline again.
  kSkipSeqlockRecheck,
  // SetWithoutLock takes the entry by an exchange for kWriting instead of a
  // compare-and-swap from the deadline it read.
  kTakeByExchange,
  // Reclaim releases a retired block (index table, chunk directory,
  // chunk) once the epoch is one later, not two.
  kReleaseBlocksOneEpochEarly,
};

#ifdef TIMINGWHEEL_CACHE_EXPLORE

// Implemented by the explorer test. A thread the explorer does not manage
// (the cache's wheel threads, the test's main thread) passes through each
// hook untouched.
namespace cache_explore {
// A schedule point before an atomic step: the scheduler may run other
// threads first. `touches`: the node, index table or chunk directory the
// step reads or writes, if any, which must not have been freed or
// released by then.
void Step(const char* name, const void* touches = nullptr);
// The calling thread waits for another one to move (a lock held, a
// deadline marked kWriting): the scheduler runs another thread first.
void Spin(const char* name);
// Whether mutant `m` is switched on for this schedule.
bool Mutant(CacheMutant m);
// The cache's clock as this thread reads it: `ns` plus the thread's skew.
std::int64_t Now(std::int64_t ns);
// [p, p + bytes) held a freed node's key or value: the test poisons it.
void Freed(void* p, std::size_t bytes);
// A retired block (index table, chunk directory, chunk) is released: the
// test may keep it (quarantine) and catch a reader that still uses it.
void Released(std::unique_ptr<void, void (*)(void*)>& block);
}  // namespace cache_explore

#define TW_CACHE_STEP(...) \
  ::timingwheel::internal::cache_explore::Step(__VA_ARGS__)
#define TW_CACHE_SPIN(name) ::timingwheel::internal::cache_explore::Spin(name)
#define TW_CACHE_MUTANT(name)                     \
  ::timingwheel::internal::cache_explore::Mutant( \
      ::timingwheel::internal::CacheMutant::name)
#define TW_CACHE_NOW(ns) ::timingwheel::internal::cache_explore::Now(ns)
#define TW_CACHE_FREED(p, bytes) \
  ::timingwheel::internal::cache_explore::Freed(p, bytes)
#define TW_CACHE_RELEASED(block) \
  ::timingwheel::internal::cache_explore::Released(block)

#else

#define TW_CACHE_STEP(...) static_cast<void>(0)
#define TW_CACHE_SPIN(name) static_cast<void>(0)
#define TW_CACHE_MUTANT(name) false
#define TW_CACHE_NOW(ns) (ns)
#define TW_CACHE_FREED(p, bytes) static_cast<void>(0)
#define TW_CACHE_RELEASED(block) static_cast<void>(0)

#endif  // TIMINGWHEEL_CACHE_EXPLORE

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SCHEDULE_POINT_H_
