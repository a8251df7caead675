// The process's memory: reading its RSS, and faulting heap in before a
// measurement. Shared by the example, benchmark and soak programs only, not
// part of the installed library.
#ifndef TIMINGWHEEL_SUPPORT_MEMORY_H_
#define TIMINGWHEEL_SUPPORT_MEMORY_H_

#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace support {

// VmRSS of this process in bytes, from /proc/self/status; -1 if unknown.
// Read with stdio rather than iostreams so that a reading allocates next to
// nothing of the memory it measures.
inline std::int64_t RssBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  std::int64_t kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) {
      kib = std::strtoll(line + 6, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

// Gives the process `mb` MiB of heap whose pages are already faulted in, and
// keeps it: later allocations (the wheel's pool and index, the queue's
// blocks, the program's arrays) reuse it instead of touching fresh pages.
//
// Why: on virtual machines that hand freed guest pages back to the host, the
// first touch of a page is costly and a process's freed memory goes back
// within seconds, so a benchmark that fills a fresh wheel would measure page
// faults more than the wheel, and differently from run to run. A running
// service reuses its memory, as the JVM and Go peers reuse their heaps; so
// do the benchmarks. mb <= 0 does nothing (the cold case).
inline void PrefaultHeap(std::int64_t mb) {
  if (mb <= 0) return;
  // One arena for every thread (the loop's allocations included), blocks up
  // to 32 MiB (glibc's largest threshold) from it rather than from mmap, and
  // nothing trimmed back to the OS.
  constexpr std::size_t kPiece = std::size_t{32} << 20;
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kPiece));
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  std::vector<char*> pieces;
  for (std::int64_t done = 0; done < mb; done += 31) {
    char* p = static_cast<char*>(std::malloc(kPiece - 4096));
    if (p == nullptr) break;
    for (std::size_t i = 0; i < kPiece - 4096; i += 4096) p[i] = 1;
    pieces.push_back(p);
  }
  for (char* p : pieces) std::free(p);
}

}  // namespace support

#endif  // TIMINGWHEEL_SUPPORT_MEMORY_H_
