#include "timingwheel/internal/large_alloc.h"

#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace timingwheel {
namespace internal {

void* LargeAllocate(std::size_t bytes, std::size_t align) {
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    return ::operator new (bytes, std::align_val_t{align});
  }
  const std::size_t rounded =
      (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = ::operator new (rounded, std::align_val_t{kHugePageBytes});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: where THP is off the block simply stays on small pages.
  madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

void LargeFree(void* p, std::size_t bytes, std::size_t align) noexcept {
  if (p == nullptr) return;
  if (bytes < kHugePageBytes || align > kHugePageBytes) {
    ::operator delete (p, std::align_val_t{align});
  } else {
    ::operator delete (p, std::align_val_t{kHugePageBytes});
  }
}

}  // namespace internal
}  // namespace timingwheel
