// Clocks for the example, benchmark and soak programs: monotonic wall time
// and CPU time. Shared by those programs only, not part of the installed
// library.
#ifndef TIMINGWHEEL_SUPPORT_CLOCK_H_
#define TIMINGWHEEL_SUPPORT_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace support {

// Monotonic nanoseconds. The wheel measures deadlines on steady_clock too, so
// comparing against it never mixes clocks (absl::Now() is wall time and may
// be slewed).
inline std::int64_t MonoNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU seconds (user + system) used so far by every thread of this process.
inline double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// CPU seconds used so far by the calling thread.
inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_CLOCK_H_
