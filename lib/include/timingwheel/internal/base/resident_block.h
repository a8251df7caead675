// A block of memory made resident by a caller's thread before the loop
// needs it.
//
// Why: the first touch of a page costs microseconds (more on a virtual
// machine, and for memory the host has not backed yet), and a wheel that
// grows by a million timers touches tens of thousands of pages. Taken by
// the loop, on its hot path, those faults build a backlog that every timer
// behind it waits for. Taken by the thread that creates the work, they slow
// the producer instead, which is where backpressure belongs, and the loop
// finds its next slab or table already resident.
#ifndef TIMINGWHEEL_INTERNAL_BASE_RESIDENT_BLOCK_H_
#define TIMINGWHEEL_INTERNAL_BASE_RESIDENT_BLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "timingwheel/internal/base/large_alloc.h"

namespace timingwheel {
namespace internal {

// One block, handed from any thread to one owner (the loop):
//
//   owner:  block.Want(bytes, align);      // says what it will need next
//   caller: if (block.Wanted()) block.Provide();  // allocates, faults in
//   owner:  void* p = block.Take(bytes, align);   // nullptr: not ready
//
// The owner frees what it takes with LargeFree(p, bytes, align), as a block
// from LargeAllocate(bytes, align). At most one block is held ready, so the
// memory held ahead is bounded by the largest Want. Owner calls are wait-free;
// a caller that finds another one providing goes on at once.
class ResidentBlock {
 public:
  ResidentBlock() = default;
  ~ResidentBlock() { Drop(); }
  ResidentBlock(const ResidentBlock&) = delete;
  ResidentBlock& operator=(const ResidentBlock&) = delete;

  // Owner: the next block it will take is `bytes` with `align`. A ready or
  // wanted block of another size is dropped for it; one being provided
  // stays (the owner may take it later, or drop it then). O(1), plus a free.
  void Want(std::size_t bytes, std::size_t align) {
    int state = state_.load(std::memory_order_acquire);
    if (state == kFilling) return;
    if (bytes_ == bytes && align_ == align && state != kIdle) return;
    if (state == kReady) {
      LargeFree(block_, bytes_, align_);
      block_ = nullptr;
    } else if (state == kWanted &&
               !state_.compare_exchange_strong(state, kIdle,
                                               std::memory_order_acquire)) {
      return;  // a caller took it up meanwhile
    }
    bytes_ = bytes;
    align_ = align;
    state_.store(kWanted, std::memory_order_release);
  }

  // Owner: the ready block if it is `bytes` with `align`, else nullptr
  // (then the owner allocates as usual). O(1).
  void* Take(std::size_t bytes, std::size_t align) {
    if (state_.load(std::memory_order_acquire) != kReady || bytes_ != bytes ||
        align_ != align) {
      return nullptr;
    }
    void* p = block_;
    block_ = nullptr;
    state_.store(kIdle, std::memory_order_relaxed);
    return p;
  }

  // Owner: frees a ready block and withdraws a wanted one (when the owner
  // gives memory back, the reserve goes too). A block being provided stays
  // and is freed by the next Drop, Want or the destructor.
  void Drop() {
    int state = state_.load(std::memory_order_acquire);
    if (state == kReady) {
      LargeFree(block_, bytes_, align_);
      block_ = nullptr;
      state_.store(kIdle, std::memory_order_relaxed);
    } else if (state == kWanted) {
      state_.compare_exchange_strong(state, kIdle, std::memory_order_relaxed);
    }
  }

  // Bytes held ready (for the owner's memory figure). Owner only.
  std::size_t ReadyBytes() const {
    return state_.load(std::memory_order_acquire) == kReady ? bytes_ : 0;
  }

  // Any thread: true when the owner wants a block nobody provides yet. One
  // relaxed load of a line that changes once per block.
  bool Wanted() const {
    return state_.load(std::memory_order_relaxed) == kWanted;
  }

  // Any thread: allocates the wanted block and makes it resident
  // (MakeResident), unless another thread got there first. Memory running
  // out leaves the block wanted: the owner then allocates as usual.
  void Provide() noexcept {
    int state = kWanted;
    if (!state_.compare_exchange_strong(state, kFilling,
                                        std::memory_order_acquire)) {
      return;
    }
    void* p = nullptr;
    try {
      p = LargeAllocate(bytes_, align_);
    } catch (...) {
      state_.store(kIdle, std::memory_order_release);
      return;
    }
    MakeResident(p, bytes_);
    block_ = p;
    state_.store(kReady, std::memory_order_release);
  }

 private:
  // kIdle -> kWanted (owner) -> kFilling (a caller) -> kReady (that
  // caller) -> kIdle (owner's Take or Drop). The owner may also withdraw a
  // wanted block (kWanted -> kIdle). bytes_ and align_ change only while
  // no caller holds kFilling; block_ is written by the caller before kReady
  // and read by the owner after.
  static constexpr int kIdle = 0;
  static constexpr int kWanted = 1;
  static constexpr int kFilling = 2;
  static constexpr int kReady = 3;

  alignas(64) std::atomic<int> state_{kIdle};
  std::size_t bytes_ = 0;
  std::size_t align_ = 0;
  void* block_ = nullptr;
};

// A range of a block the owner has allocated and will fill in order, a
// step at a time (the key index's new table during a growth), which any
// thread may fault in meanwhile:
//
//   owner:  range.Post(p, bytes);         // after allocating p
//   caller: if (range.Posted()) range.Populate();
//
// Faulting in changes no byte, so a caller that populates while the owner
// writes the range races with nothing; and if the owner has freed the block
// by then, madvise fails or populates memory of no one's concern. The
// owner never waits: pages not yet populated it faults in itself.
class ResidentRange {
 public:
  // Owner: asks for [p, p + bytes) to be faulted in, replacing a request
  // no caller has taken yet.
  void Post(void* p, std::size_t bytes) {
    int state = state_.load(std::memory_order_acquire);
    if (state == kTaken) return;  // the caller reads p_ and bytes_: keep
    if (state == kPosted && !state_.compare_exchange_strong(
                                state, kIdle, std::memory_order_acquire)) {
      return;
    }
    p_ = p;
    bytes_ = bytes;
    state_.store(kPosted, std::memory_order_release);
  }

  // Any thread: true when a request waits. One relaxed load.
  bool Posted() const {
    return state_.load(std::memory_order_relaxed) == kPosted;
  }

  // Any thread: faults in the posted range, unless another thread took it.
  void Populate() noexcept {
    int state = kPosted;
    if (!state_.compare_exchange_strong(state, kTaken,
                                        std::memory_order_acquire)) {
      return;
    }
    (void)PopulateForWrite(p_, bytes_);  // never writes: see the class
    state_.store(kIdle, std::memory_order_release);
  }

 private:
  static constexpr int kIdle = 0;
  static constexpr int kPosted = 1;
  static constexpr int kTaken = 2;

  alignas(64) std::atomic<int> state_{kIdle};
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_RESIDENT_BLOCK_H_
