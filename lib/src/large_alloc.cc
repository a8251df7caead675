#include "timingwheel/internal/large_alloc.h"

#include <cstdint>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace timingwheel {
namespace internal {
namespace {

std::size_t RoundToHugePages(std::size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

}  // namespace

#if defined(__linux__)

// Big blocks are mapped directly rather than taken from malloc: glibc serves
// them from its heap once its adaptive mmap threshold has risen, and memory
// freed inside the heap stays with the process until someone calls
// malloc_trim. Mapped, a freed block goes back to the system at once, which
// is what lets the wheel's memory follow its live set.
void* LargeAllocate(std::size_t bytes, std::size_t align) {
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    return ::operator new (bytes, std::align_val_t{align});
  }
  const std::size_t rounded = RoundToHugePages(bytes);
  // Map one huge page more and cut the block out at a huge-page boundary.
  const std::size_t mapped = rounded + kHugePageBytes;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned =
      (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(p, aligned - start);
  const std::uintptr_t end = start + mapped;
  if (end > aligned + rounded) {
    munmap(reinterpret_cast<void*>(aligned + rounded), end - aligned - rounded);
  }
#if defined(MADV_HUGEPAGE)
  // Advice only: where THP is off the block simply stays on small pages.
  madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(aligned);
}

void LargeFree(void* p, std::size_t bytes, std::size_t align) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    ::operator delete (p, std::align_val_t{align});
  } else {
    munmap(p, RoundToHugePages(bytes));
  }
}

#else

void* LargeAllocate(std::size_t bytes, std::size_t align) {
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    return ::operator new (bytes, std::align_val_t{align});
  }
  return ::operator new (RoundToHugePages(bytes),
                         std::align_val_t{kHugePageBytes});
}

void LargeFree(void* p, std::size_t bytes, std::size_t align) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    ::operator delete (p, std::align_val_t{align});
  } else {
    ::operator delete (p, std::align_val_t{kHugePageBytes});
  }
}

#endif

}  // namespace internal
}  // namespace timingwheel
