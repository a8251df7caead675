// Memory for the wheel's big arrays, on huge pages where the OS allows.
#ifndef TIMINGWHEEL_INTERNAL_LARGE_ALLOC_H_
#define TIMINGWHEEL_INTERNAL_LARGE_ALLOC_H_

#include <cstddef>

namespace timingwheel {
namespace internal {

// The size from which LargeAllocate asks for huge pages.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Allocates `bytes` (uninitialized), aligned to `align` at least; throws
// std::bad_alloc. From
// kHugePageBytes up the block is huge-page aligned and advised
// MADV_HUGEPAGE: the entry pool and the key index are read at random, and
// with 4 KiB pages nearly every access of a million-timer wheel also misses
// the TLB, whose page walk (nested, in a VM) costs about as much as the
// cache miss itself. Freed with LargeFree(p, bytes, align) or LargeRelease.
void* LargeAllocate(std::size_t bytes, std::size_t align);
void LargeFree(void* p, std::size_t bytes, std::size_t align) noexcept;

// LargeFree for memory a shrink gives back: on Linux the block's pages leave
// the process at once (madvise DONTNEED) instead of waiting in malloc's heap
// for a malloc_trim. Not for blocks freed on destruction or growth: malloc
// hands those on with their pages warm, where a released block would have
// to be faulted in again by its next user.
void LargeRelease(void* p, std::size_t bytes, std::size_t align) noexcept;

// Gives back the pages wholly inside [p, p + bytes), a part of a block from
// LargeAllocate that stays allocated: on Linux they leave the process at once
// and read as zero if touched again. For handing back a big block in pieces,
// so that no single call pays for all of it; free the block as usual after.
void LargeReleasePart(void* p, std::size_t bytes) noexcept;

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LARGE_ALLOC_H_
