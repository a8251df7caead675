// The word a cache node's state lives in: a deadline while the node is an
// entry, or one of four marks. Every change a node goes through while a
// Get or a Set without the lock can reach it is one of the named
// transitions below, each with the memory order the protocol needs and a
// TW_DCHECK of the state it expects (docs/cache_concurrency.md, "The deadline word").
//
//                 Init(d)            Take            Publish(d')
//   kFree ------------------> d >= 0 ----> kWriting ------------> d' > d
//     ^  \ InitSentinel        |  ^  |        | Publish(d): backing off
//     |   `-> kSentinel        |  |  `--------'
//     |          |      Slide  |  |  (a later d')
//     |  Free    |      d -> d'`--'
//     +----------+                 Retire
//     +-------------------- kRetired <------- d >= 0
//
// Free, Init and InitSentinel are plain stores: they happen only when no
// reader can reach the node (not yet published, or freed after the epochs
// say no reader is left). Take, Slide and Retire are compare-and-swaps from
// a deadline the caller read, so two writers never both act on what they
// read: whoever lands first wins and the other reads again. Publish is the
// only store into a reachable node, and only its taker makes it.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_DEADLINE_H_
#define TIMINGWHEEL_INTERNAL_CACHE_DEADLINE_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <thread>

#include "timingwheel/internal/base/check.h"
#include "timingwheel/internal/cache/schedule_point.h"

// A schedule point on the word's node (schedule_point.h).
#ifdef TIMINGWHEEL_CACHE_EXPLORE
#define TW_CACHE_WORD_STEP(name) TW_CACHE_STEP(name, node)
#else
#define TW_CACHE_WORD_STEP(name) TW_CACHE_STEP(name)
#endif

namespace timingwheel {
namespace internal {

class CacheTestPeer;

class CacheDeadline {
 public:
  // Never used by an entry (whose deadlines are >= 0).
  static constexpr std::int64_t kFree =
      std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kSentinel = kFree + 1;
  static constexpr std::int64_t kRetired = kFree + 2;
  // An entry whose value a writer is storing in place (or that a writer
  // under the lock holds while it replaces it): its taker's until Publish.
  static constexpr std::int64_t kWriting = kFree + 3;
  // How long Settled spins before it yields: a write in place lasts a few
  // instructions, but its writer may have been descheduled.
  static constexpr std::uint64_t kSpinsBeforeYield = 64;

  static constexpr bool IsDeadline(std::int64_t d) { return d >= 0; }

  // The word as it is, for the writers under the lock that only look (an
  // entry or not, invariants) and for tests. Relaxed: it orders nothing.
  std::int64_t Peek() const { return word_.load(std::memory_order_relaxed); }

  // A reader's first read of the word (a sequence lock's begin): acquire,
  // so a value stored before the Publish that wrote it is visible after.
  // (Its schedule point is the caller's, which names the read.)
  std::int64_t ReadBegin() const {
    return word_.load(std::memory_order_acquire);
  }
  // A reader's second read, after its reads of the value (a sequence
  // lock's end): the fence keeps those reads before this one; equal to
  // ReadBegin's means no write began or ended in between.
  std::int64_t ReadEnd() const {
    std::atomic_thread_fence(std::memory_order_acquire);
    TW_CACHE_WORD_STEP("deadline.read_end");
    return word_.load(std::memory_order_relaxed);
  }

  // The word once no writer holds it: waits out kWriting, spinning, then
  // yielding; past `max_yields` gives up and returns kWriting (a mark left
  // behind: CheckInvariants). Acquire, as ReadBegin.
  std::int64_t Settled(std::uint64_t max_yields =
                           std::numeric_limits<std::uint64_t>::max()) const {
    TW_CACHE_WORD_STEP("deadline.settled");
    std::int64_t d = word_.load(std::memory_order_acquire);
    for (std::uint64_t k = 0; d == kWriting; ++k) {
      if (k >= kSpinsBeforeYield) {
        if (k - kSpinsBeforeYield >= max_yields) break;
        std::this_thread::yield();
      }
      TW_CACHE_SPIN("deadline.settled.writing");
      d = word_.load(std::memory_order_acquire);
    }
    return d;
  }

  // A free node becomes an entry due at `d`, or a bucket's sentinel. No
  // reader can reach it yet: the index slot that will name it is stored
  // with release after.
  void Init(std::int64_t d) {
    TW_DCHECK(Peek() == kFree || IsDeadline(Peek()));
    TW_DCHECK(IsDeadline(d));
    word_.store(d, std::memory_order_relaxed);
  }
  void InitSentinel() {
    TW_DCHECK(Peek() == kFree);
    word_.store(kSentinel, std::memory_order_relaxed);
  }
  // A node no reader can reach any more goes back to the free list.
  void Free() {
    TW_DCHECK(Peek() != kFree);  // not freed twice
    word_.store(kFree, std::memory_order_relaxed);
  }

  // Takes entry deadline `from` for a write in place: true if the word was
  // still `from` (it is kWriting now, and the caller must Publish), false
  // with `from` updated if not. Sequentially consistent: a Set without the
  // lock then reads the shard's open loads, which a GetOrLoad announces
  // before its lookup (the two are a store-buffering pair). Its release
  // half is the fence after it: a sequence lock's writer makes its mark
  // visible before the value it stores.
  bool Take(std::int64_t& from) {
    TW_DCHECK(IsDeadline(from));
    TW_CACHE_WORD_STEP("deadline.take");
    bool taken;
    if (TW_CACHE_MUTANT(kTakeByExchange)) {
      // The mutant: takes whatever the word holds, as if it were `from`.
      word_.exchange(kWriting, std::memory_order_seq_cst);
      taken = true;
    } else {
      taken = word_.compare_exchange_strong(from, kWriting,
                                            std::memory_order_seq_cst);
    }
    if (taken) std::atomic_thread_fence(std::memory_order_release);
    return taken;
  }
  // Ends a Take: the entry is due at `d`, a deadline strictly later than
  // the one taken (so a reader's two reads cannot agree across the write),
  // or the one taken itself when the taker backs off without writing.
  // Release: what the taker stored is visible to whoever reads `d`.
  void Publish(std::int64_t d) {
    TW_DCHECK(Peek() == kWriting);
    TW_DCHECK(IsDeadline(d));
    TW_CACHE_WORD_STEP("deadline.publish");
    word_.store(d, std::memory_order_release);
  }

  // A hit moves unexpired deadline `from` to `later`: false, with `from`
  // updated, if the word changed meanwhile. Relaxed: it publishes nothing
  // but itself; a swap, so that a Retire or a Take landing meanwhile is
  // not overwritten.
  bool Slide(std::int64_t& from, std::int64_t later) {
    TW_DCHECK(IsDeadline(from) && later > from);
    TW_CACHE_WORD_STEP("deadline.slide");
    return word_.compare_exchange_strong(from, later,
                                         std::memory_order_relaxed);
  }

  // Retires entry deadline `from`, under the shard's lock, once the entry
  // is unlinked or about to be: false, with `from` updated, if the word
  // changed meanwhile. After it nobody changes the node's value.
  // Acquire: the value a write in place stored before its Publish is the
  // one the retirer then copies.
  bool Retire(std::int64_t& from) {
    TW_DCHECK(IsDeadline(from));
    TW_CACHE_WORD_STEP("deadline.retire");
    return word_.compare_exchange_strong(from, kRetired,
                                         std::memory_order_acq_rel);
  }

 private:
  friend class CacheTestPeer;  // to break the word on purpose
  std::atomic<std::int64_t> word_{kFree};

#ifdef TIMINGWHEEL_CACHE_EXPLORE
 public:
  // The node the word is in (CacheNode's constructor sets it), which the
  // explorer's steps name so that it can tell a freed node touched.
  const void* node = nullptr;
#endif
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_DEADLINE_H_
