// The seam through which a test explores the cache's thread schedules
// (tests/cache/explore/): each atomic step of the lock-free protocol is
// preceded by TW_CACHE_STEP, and the few mutants the explorer must catch
// are switched by TW_CACHE_MUTANT. Only a test executable that defines
// TIMINGWHEEL_CACHE_EXPLORE (and includes no other cache code) sees the
// hooks; everywhere else they are nothing, and the code is as if they were
// not there.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_SCHEDULE_POINT_H_
#define TIMINGWHEEL_INTERNAL_CACHE_SCHEDULE_POINT_H_

#ifdef TIMINGWHEEL_CACHE_EXPLORE

namespace timingwheel {
namespace internal {
namespace explore {

// The protocol's changes the explorer must catch (docs/tests.md).
enum class Mutant {
  kNone,
  kNoLoadsOpenCheck,  // a Set without the lock ignores open loads
  kEarlyFree,         // retired memory freed one epoch early
  kNoSecondRead,      // a Get trusts a value without reading its deadline again
  kTakeByExchange,    // an entry taken by exchange, not compare-and-swap
};

// Implemented by the explorer: hands control to its scheduler before the
// step named `what`; whether `m` is the mutant of this run.
void Step(const char* what);
bool IsMutant(Mutant m);

}  // namespace explore
}  // namespace internal
}  // namespace timingwheel

#define TW_CACHE_STEP(what) ::timingwheel::internal::explore::Step(what)
#define TW_CACHE_MUTANT(name)                 \
  ::timingwheel::internal::explore::IsMutant( \
      ::timingwheel::internal::explore::Mutant::name)

#else

#define TW_CACHE_STEP(what) static_cast<void>(0)
#define TW_CACHE_MUTANT(name) false

#endif

#endif  // TIMINGWHEEL_INTERNAL_CACHE_SCHEDULE_POINT_H_
