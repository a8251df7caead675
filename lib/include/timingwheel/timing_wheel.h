// timingwheel: keyed timers at scale.
//
// A TimingWheel<K, V> holds at most one pending timer per key. One event-loop
// thread owns the wheel; SetTimer, MoveTimer, RemoveTimer, Drain and Stop are
// commands on a lock-free queue, so submitting never waits on the loop.
// Expired timers are handed to `execute` on worker threads, never early and
// exactly once. See README.md for the timing semantics.
//
//   auto wheel = timingwheel::TimingWheel<std::string, int>::Create(
//       {.interval = absl::Milliseconds(100)},
//       [](std::string key, int value) { Evict(key); });
//   (*wheel)->SetTimer("session-42", 42, absl::Seconds(30)).IgnoreError();
//   (*wheel)->MoveTimer("session-42", absl::Seconds(30));  // touched again
#ifndef TIMINGWHEEL_TIMING_WHEEL_H_
#define TIMINGWHEEL_TIMING_WHEEL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "timingwheel/internal/base/duration.h"
#include "timingwheel/internal/loop/event_loop.h"
#include "timingwheel/internal/loop/validate.h"
#include "timingwheel/options.h"
#include "timingwheel/stats.h"
#include "timingwheel/ticker.h"

namespace timingwheel {

// Keyed timers. K: copyable, hashable by Hash, comparable by Eq. V: movable.
// Every method is thread-safe; commands from one thread are applied in the
// order that thread submitted them.
template <typename K, typename V, typename Hash = absl::Hash<K>,
          typename Eq = std::equal_to<K>>
class TimingWheel {
 public:
  // Called as execute(std::move(key), std::move(value)) on an execute worker
  // when a timer expires. May call SetTimer/MoveTimer/RemoveTimer on its own
  // wheel (re-arming periodic work); an exception it throws is caught and
  // counted in Stats::callback_exceptions.
  using Execute = std::function<void(K key, V value)>;
  // Drain's function, called once per drained timer on a drain worker.
  using DrainFn = std::function<void(K key, V value)>;

  // Validates options and starts the loop and worker threads. Errors:
  // InvalidArgument for a bad option, an empty execute or a ManualTicker
  // that drives another wheel; ResourceExhausted when memory or threads run
  // out. Cost: the slot lists (64 bytes a slot and about 40 KiB for the
  // coarse levels: 68 KiB for 512), the key index if
  // Options::expected_timers is set, the loop thread and execute_workers
  // threads; the drain_workers threads start at the first Drain.
  static absl::StatusOr<std::unique_ptr<TimingWheel>> Create(Options options,
                                                             Execute execute) {
    if (absl::Status s = internal::ValidateOptions(options); !s.ok()) return s;
    if (!execute) return absl::InvalidArgumentError("execute is empty");
    std::unique_ptr<Loop> loop;
    try {
      loop = std::make_unique<Loop>(options, std::move(execute));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory creating the wheel");
    } catch (const std::system_error&) {
      return absl::ResourceExhaustedError("cannot start worker threads");
    }
    if (absl::Status s = loop->Start(); !s.ok()) return s;
    return absl::WrapUnique(
        new TimingWheel(std::move(loop), options.max_pending));
  }

  // Stops the wheel (see Stop) and drops the timers that never fired. From
  // another thread it returns after every callback in flight has returned.
  // From one of this wheel's own execute callbacks or Drain functions
  // (which it cannot wait for) it returns at once: no callback or Drain
  // function starts afterwards (one another worker has already taken may
  // still run), the fired timers not yet run and the drained entries not
  // yet handed out are dropped, and the threads end and the memory goes
  // once the calling callback returns (for a Drain function: once the
  // Drain call running it returns).
  ~TimingWheel() {
    if (loop_ != nullptr && loop_->InOwnCallback()) {
      Loop::DestroyFromCallback(std::move(loop_));
    }
  }

  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  // Schedules `key` to fire with `value` once `delay` (> 0, finite) has
  // passed, measured from this call. A present key gets the new value and
  // deadline, and fires once, with the new value (the old value is
  // superseded). Errors: InvalidArgument, FailedPrecondition once stopped,
  // ResourceExhausted beyond max_pending. Cost on the caller: the key's
  // hash and one lock-free enqueue (plus, rarely, memory the wheel grows
  // into, and a 50 us sleep while the loop is far behind: docs/api.md
  // E13); on the loop: one map probe.
  absl::Status SetTimer(K key, V value, absl::Duration delay) {
    if (absl::Status s = internal::ValidateDelay(delay); !s.ok()) return s;
    loop_->BeforeSubmit();
    const std::uint32_t hash = loop_->HashOf(key);
    return loop_->Push(Cmd::Set(std::move(key), std::move(value),
                                loop_->DeadlineTick(delay), hash));
  }
  template <typename Rep, typename Period>
  absl::Status SetTimer(K key, V value,
                        std::chrono::duration<Rep, Period> delay) {
    return SetTimer(std::move(key), std::move(value),
                    internal::ToDuration(delay));
  }

  // Reschedules a present key to fire `delay` from now, keeping its value;
  // later or earlier, any number of times. An absent key is left absent (and
  // the call still returns OK: commands are asynchronous). Errors as
  // SetTimer. Cost on the loop: one map probe and, when moving later, one
  // write (the entry is relinked when its old slot comes round).
  absl::Status MoveTimer(K key, absl::Duration delay) {
    if (absl::Status s = internal::ValidateDelay(delay); !s.ok()) return s;
    loop_->BeforeSubmit();
    const std::uint32_t hash = loop_->HashOf(key);
    return loop_->Push(
        Cmd::Move(std::move(key), loop_->DeadlineTick(delay), hash));
  }
  template <typename Rep, typename Period>
  absl::Status MoveTimer(K key, std::chrono::duration<Rep, Period> delay) {
    return MoveTimer(std::move(key), internal::ToDuration(delay));
  }

  // Removes a present key so it never fires; absent keys are ignored.
  // Errors: FailedPrecondition once stopped, ResourceExhausted beyond
  // max_pending. Cost on the loop: one map probe and an O(1) unlink.
  absl::Status RemoveTimer(K key) {
    loop_->BeforeSubmit();
    const std::uint32_t hash = loop_->HashOf(key);
    return loop_->Push(Cmd::Remove(std::move(key), hash));
  }

  // --- Batch calls (docs/api.md "Batch calls"): each is the single call
  // for every item in span order, with one submission time read once, all
  // accepted or none (then the status says why and `items` is as it was).
  // An empty span is accepted and does nothing (FailedPrecondition once
  // stopped, as every call). Errors as the single calls;
  // ResourceExhausted when the batch does not fit under max_pending now, and
  // InvalidArgument when it is larger than a non-zero max_pending and so
  // never can. Cost on the caller: one clock read, one admission check and
  // one bulk enqueue for the whole batch, plus building each command in its
  // queue slot; on the loop: as the single calls. K and V must be nothrow
  // movable (the queue cannot undo a throw halfway through a batch).

  // SetTimer(key, value, delay) for every item; moves keys and values out of
  // `items` once accepted.
  absl::Status SetTimers(absl::Span<std::pair<K, V>> items,
                         absl::Duration delay) {
    static_assert(kNothrowMovable, "SetTimers needs nothrow-movable K and V");
    if (absl::Status s = internal::ValidateDelay(delay); !s.ok()) return s;
    if (absl::Status s = CheckBatchSize(items.size()); !s.ok()) return s;
    if (items.empty()) return loop_->EmptyBatch();
    loop_->BeforeSubmit();
    const std::uint64_t deadline = loop_->DeadlineTick(delay);
    return loop_->PushEach(items.size(), [&](std::size_t i) noexcept {
      const std::uint32_t hash = loop_->HashOf(items[i].first);
      return Cmd::Set(std::move(items[i].first), std::move(items[i].second),
                      deadline, hash);
    });
  }
  template <typename Rep, typename Period>
  absl::Status SetTimers(absl::Span<std::pair<K, V>> items,
                         std::chrono::duration<Rep, Period> delay) {
    return SetTimers(items, internal::ToDuration(delay));
  }

  // MoveTimer(key, delay) for every key.
  absl::Status MoveTimers(absl::Span<const K> keys, absl::Duration delay) {
    static_assert(kNothrowMovable, "MoveTimers needs nothrow-movable K and V");
    if (absl::Status s = internal::ValidateDelay(delay); !s.ok()) return s;
    if (absl::Status s = CheckBatchSize(keys.size()); !s.ok()) return s;
    if (keys.empty()) return loop_->EmptyBatch();
    loop_->BeforeSubmit();
    const std::uint64_t deadline = loop_->DeadlineTick(delay);
    return loop_->PushEach(
        keys.size(), [&](std::size_t i) noexcept(kNothrowCopyableKey) {
          return Cmd::Move(keys[i], deadline, loop_->HashOf(keys[i]));
        });
  }
  template <typename Rep, typename Period>
  absl::Status MoveTimers(absl::Span<const K> keys,
                          std::chrono::duration<Rep, Period> delay) {
    return MoveTimers(keys, internal::ToDuration(delay));
  }

  // RemoveTimer(key) for every key.
  absl::Status RemoveTimers(absl::Span<const K> keys) {
    static_assert(kNothrowMovable,
                  "RemoveTimers needs nothrow-movable K and V");
    if (absl::Status s = CheckBatchSize(keys.size()); !s.ok()) return s;
    if (keys.empty()) return loop_->EmptyBatch();
    loop_->BeforeSubmit();
    return loop_->PushEach(
        keys.size(), [&](std::size_t i) noexcept(kNothrowCopyableKey) {
          return Cmd::Remove(keys[i], loop_->HashOf(keys[i]));
        });
  }

  // Removes every timer present when the loop applies this command and calls
  // fn(key, value) for each on up to drain_workers threads; returns after
  // every call has returned. Timers set afterwards stay. The drain workers
  // take the entries a few at a time (one at a time when there are few), so
  // slow fns overlap. Errors: InvalidArgument for an empty fn,
  // FailedPrecondition once stopped or when called from one of this wheel's
  // callbacks. Cost on the loop: O(timers + num_slots); concurrent Drains
  // run their fns one Drain after the other.
  absl::Status Drain(DrainFn fn) { return loop_->Drain(std::move(fn)); }

  // Applies every command accepted before it, stops the loop, waits for every
  // callback in flight and returns the timers that never fired (any order).
  // After it returns no callback of this wheel runs and every other method
  // returns FailedPrecondition; a second Stop returns an empty vector.
  // FailedPrecondition when called from one of this wheel's callbacks.
  absl::StatusOr<std::vector<std::pair<K, V>>> Stop() { return loop_->Stop(); }

  // The wheel's time: how long since Create, on its own clock. With real time
  // that is the monotonic clock (one clock read); under a ManualTicker it is
  // ticks done * interval, so a callback run by tick k sees k * interval. A
  // timer set now with delay d is due at Now() + d, and fires on the first
  // tick at or after it. For code that keeps its own deadlines in step with
  // the wheel's (Cache does).
  absl::Duration Now() const { return loop_->Now(); }

  // A snapshot of the wheel's counters; a few relaxed loads.
  Stats stats() const { return loop_->stats(); }

 private:
  using Loop = internal::EventLoop<K, V, Hash, Eq>;
  using Cmd = typename Loop::Cmd;

  static constexpr bool kNothrowMovable =
      std::is_nothrow_move_constructible_v<K> &&
      std::is_nothrow_move_constructible_v<V>;
  static constexpr bool kNothrowCopyableKey =
      std::is_nothrow_copy_constructible_v<K>;

  explicit TimingWheel(std::unique_ptr<Loop> loop, std::size_t max_pending)
      : loop_(std::move(loop)), max_pending_(max_pending) {}

  // B2: a batch larger than a non-zero max_pending can never fit.
  absl::Status CheckBatchSize(std::size_t n) const {
    if (max_pending_ != 0 && n > max_pending_) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", n, " is larger than Options::max_pending (",
                       max_pending_, ") and can never be accepted"));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Loop> loop_;
  const std::size_t max_pending_;
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_TIMING_WHEEL_H_
