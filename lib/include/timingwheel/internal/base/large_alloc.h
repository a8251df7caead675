// Memory for the wheel's big arrays, which can be given back in pieces.
#ifndef TIMINGWHEEL_INTERNAL_BASE_LARGE_ALLOC_H_
#define TIMINGWHEEL_INTERNAL_BASE_LARGE_ALLOC_H_

#include <cstddef>

namespace timingwheel {
namespace internal {

// The size from which LargeAllocate aligns blocks to 2 MiB: the piece the
// key index gives back at a time, and a huge page where the system puts
// memory on huge pages by itself (THP "always").
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Allocates `bytes` (uninitialized), aligned to `align` at least; throws
// std::bad_alloc. From kHugePageBytes up the block is rounded up to, and
// aligned to, whole 2 MiB pieces. It is not advised MADV_HUGEPAGE: the
// first touch of a huge page faults in 2 MiB at once, which stops the
// loop where fresh memory is slow to back, and huge pages do not make a
// warm wheel faster (docs/wheel.md has the measurements). Freed with
// LargeFree(p, bytes, align) or LargeRelease.
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

// Faults in every page of [p, p + bytes) for writing, so that the thread
// that uses the block next takes no first-touch fault: on Linux one
// madvise(MADV_POPULATE_WRITE), which is cheaper than touching each page,
// else a write to each page. The contents stay unspecified.
void MakeResident(void* p, std::size_t bytes) noexcept;

// MakeResident without the writes: only the madvise, which changes no byte
// and fails harmlessly on memory no longer mapped, so it may run on a block
// another thread owns and may free meanwhile. False where it is not
// available (then nothing is done).
bool PopulateForWrite(void* p, std::size_t bytes) noexcept;

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_LARGE_ALLOC_H_
