// Prefetch: asks for a cache line ahead of its use.
#ifndef TIMINGWHEEL_INTERNAL_BASE_PREFETCH_H_
#define TIMINGWHEEL_INTERNAL_BASE_PREFETCH_H_

namespace timingwheel {
namespace internal {

// Starts fetching the cache line holding `p` into every cache level, without
// waiting for it. Never faults, whatever `p` is.
//
// Every prefetch of the library goes through here, because gcc counts
// __builtin_prefetch as no side effect: a function that does nothing else
// (or only reads memory besides) is deemed const or pure, and a call to it
// whose result is unused is deleted when it was not inlined early. The
// empty volatile asm is a side effect and costs no instruction.
inline void Prefetch(const void* p) {
  __builtin_prefetch(p);
  asm volatile("" : : "r"(p));
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_PREFETCH_H_
