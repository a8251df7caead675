// CPU time by thread name and of another process: how a program shows which
// of its threads (the wheel's tw-loop and tw-execute, its own) and which
// neighbour (a redis-server) used the machine. Read from the kernel's CPU
// clocks, exact to the nanosecond. Shared by the example, benchmark and soak
// programs only, not part of the installed library.
#ifndef TIMINGWHEEL_SUPPORT_THREAD_CPU_H_
#define TIMINGWHEEL_SUPPORT_THREAD_CPU_H_

#include <dirent.h>
#include <sys/types.h>
#include <time.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace support {

// CPU seconds of the clock `id`; 0 if it cannot be read (a process gone).
inline double CpuClockSeconds(clockid_t id) {
  timespec ts;
  if (clock_gettime(id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// CPU seconds used so far by this process's live threads, summed by thread
// name (threads that have exited are not counted).
inline std::map<std::string, double> CpuSecondsByThreadName() {
  std::map<std::string, double> by_name;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return by_name;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    // Linux's clock id of a thread of this process: the kernel's
    // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as glibc builds it for
    // pthread_getcpuclockid.
    const auto tid = static_cast<clockid_t>(std::atoi(e->d_name));
    by_name[name] += CpuClockSeconds((~tid << 3) | 4 | 2);
  }
  closedir(dir);
  return by_name;
}

// CPU seconds used so far by every thread of process `pid` (0 if gone).
inline double CpuSecondsOfProcess(pid_t pid) {
  clockid_t id;
  if (clock_getcpuclockid(pid, &id) != 0) return 0;
  return CpuClockSeconds(id);
}

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_THREAD_CPU_H_
