// A cheap timestamp for timing short calls inside the server: the x86 cycle
// counter (about 20 cycles to read), elsewhere the steady clock in
// nanoseconds. CyclesPerSecond says how to turn a difference into time.
#ifndef TIMINGWHEEL_EXAMPLES_IDLE_SERVER_CYCLES_H_
#define TIMINGWHEEL_EXAMPLES_IDLE_SERVER_CYCLES_H_

#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace idle_server {

inline std::uint64_t Cycles() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
#endif
}

// Measured once, over 50 ms of the steady clock.
inline double CyclesPerSecond() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t c0 = Cycles();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::uint64_t c1 = Cycles();
  const auto t1 = std::chrono::steady_clock::now();
  return static_cast<double>(c1 - c0) /
         std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace idle_server

#endif  // TIMINGWHEEL_EXAMPLES_IDLE_SERVER_CYCLES_H_
