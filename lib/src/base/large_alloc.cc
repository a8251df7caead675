#include "timingwheel/internal/base/large_alloc.h"

#include <cstdint>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace timingwheel {
namespace internal {
namespace {

// Gives the pages wholly inside [p, p + bytes) back to the system: the block
// keeps its addresses, and a page touched again comes back zero-filled.
// glibc keeps big freed blocks in its heap once its adaptive mmap threshold
// has risen, and memory freed there stays with the process until someone
// calls malloc_trim; given back here, it leaves at once.
void ReleasePages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_DONTNEED)
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (start + page - 1) / page * page;
  const std::uintptr_t last = (start + bytes) / page * page;
  if (last > first) {
    madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
#else
  (void)p;
  (void)bytes;
#endif
}

std::size_t RoundToHugePages(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

}  // namespace

void* LargeAllocate(std::size_t bytes, std::size_t align) {
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    return ::operator new (bytes, std::align_val_t{align});
  }
  const std::size_t rounded = RoundToHugePages(bytes);
  return ::operator new (rounded, std::align_val_t{kHugePageBytes});
}

void LargeFree(void* p, std::size_t bytes, std::size_t align) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    ::operator delete (p, std::align_val_t{align});
  } else {
    ::operator delete (p, std::align_val_t{kHugePageBytes});
  }
}

void LargeReleasePart(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) ReleasePages(p, bytes);
}

bool PopulateForWrite(void* p, std::size_t bytes) noexcept {
  if (p == nullptr || bytes == 0) return true;
#if defined(__linux__)
#if !defined(MADV_POPULATE_WRITE)
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older headers
#endif
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = start / page * page;
  const std::uintptr_t last = (start + bytes + page - 1) / page * page;
  return madvise(reinterpret_cast<void*>(first), last - first,
                 MADV_POPULATE_WRITE) == 0;
#else
  return false;
#endif
}

void MakeResident(void* p, std::size_t bytes) noexcept {
  if (p == nullptr || bytes == 0 || PopulateForWrite(p, bytes)) return;
  // An older kernel: touch each page. Volatile, so the writes stay.
  volatile unsigned char* v = static_cast<unsigned char*>(p);
  for (std::size_t off = 0; off < bytes; off += 4096) v[off] = 0;
  v[bytes - 1] = 0;
}

void LargeRelease(void* p, std::size_t bytes, std::size_t align) noexcept {
  if (p == nullptr) return;
  ReleasePages(p, bytes);
  LargeFree(p, bytes, align);
}

}  // namespace internal
}  // namespace timingwheel
