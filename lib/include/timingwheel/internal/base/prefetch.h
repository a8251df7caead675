// Prefetch: asks for a cache line ahead of its use.
#ifndef TIMINGWHEEL_INTERNAL_BASE_PREFETCH_H_
#define TIMINGWHEEL_INTERNAL_BASE_PREFETCH_H_

#include <cstddef>

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

// Starts fetching every cache line `*object` spans: one when T fits a line
// and its objects do not straddle them, two or more otherwise (a 72-byte
// entry always spans two, and reading its far end would wait for the
// second).
template <typename T>
inline void PrefetchObject(const T* object) {
  const char* p = reinterpret_cast<const char*>(object);
  Prefetch(p);
  if constexpr (sizeof(T) > 1 && (sizeof(T) > 64 || 64 % sizeof(T) != 0)) {
    for (std::size_t at = 64; at < sizeof(T) + 63; at += 64) {
      // The line of the object's last byte, and any between.
      Prefetch(p + (at < sizeof(T) ? at : sizeof(T) - 1));
    }
  }
}

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_PREFETCH_H_
