// The many-producer, one-consumer channel from callers to the loop.
#ifndef TIMINGWHEEL_INTERNAL_COMMAND_QUEUE_H_
#define TIMINGWHEEL_INTERNAL_COMMAND_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "timingwheel/internal/moodycamel.h"
#include "timingwheel/internal/producer_gate.h"
#include "timingwheel/internal/wakeup.h"

namespace timingwheel {
namespace internal {

// Bigger blocks than moodycamel's default 32: a producer allocates and
// indexes a block every 256 commands instead of every 32, which is most of
// an enqueue's cost with small commands (docs/design-notes.md).
struct CommandQueueTraits : moodycamel::ConcurrentQueueDefaultTraits {
  static constexpr std::size_t BLOCK_SIZE = 256;
};

// Wraps a moodycamel ConcurrentQueue (lock-free; each producer thread's
// items come out in the order it pushed them) with what the wheel needs
// around it: refusing pushes once closed, the max_pending bound, and a
// wake-up for the sleeping consumer.
template <typename Cmd>
class CommandQueue {
 public:
  // max_pending bounds the counted commands in the queue; 0 = unbounded.
  explicit CommandQueue(std::size_t max_pending) : max_pending_(max_pending) {}

  // Producer side. FailedPrecondition once closed, ResourceExhausted when a
  // counted command would exceed max_pending. Cost: one enqueue into this
  // thread's sub-queue, a gate enter/leave, a fence; plus one shared atomic
  // add when max_pending is set.
  absl::Status Push(Cmd cmd) {
    const int ticket = gate_.Enter();
    if (ticket == ProducerGate::kRefused) {
      return absl::FailedPreconditionError("timing wheel is stopped");
    }
    const bool counted = max_pending_ != 0 && cmd.counted();
    if (counted && queued_.fetch_add(1, std::memory_order_relaxed) >=
                       static_cast<std::int64_t>(max_pending_)) {
      queued_.fetch_sub(1, std::memory_order_relaxed);
      gate_.Leave(ticket);
      wakeup_.Wake();  // the loop may be napping on a full queue
      return absl::ResourceExhaustedError(
          "timing wheel: max_pending commands already queued");
    }
    const bool ok = queue_.enqueue(std::move(cmd));
    if (!ok && counted) queued_.fetch_sub(1, std::memory_order_relaxed);
    gate_.Leave(ticket);
    if (!ok) return absl::ResourceExhaustedError("timing wheel: out of memory");
    wakeup_.Notify();
    return absl::OkStatus();
  }

  // Refuses later pushes and returns once every push in progress is done.
  // False if already closed.
  bool Close() { return gate_.Close(); }
  bool closed() const { return gate_.closed(); }

  // For the closer only: pushes past the closed gate (the Stop command).
  void PushAfterClose(Cmd cmd) {
    while (!queue_.enqueue(std::move(cmd))) {
    }
    wakeup_.Wake();
  }

  // Consumer side: moves up to `max` commands into `out`. The consumer token
  // makes moodycamel rotate among producers (256 commands from each in
  // turn) instead of emptying the newest producer's queue first, so one
  // fast producer cannot starve the others.
  std::size_t PopBulk(Cmd* out, std::size_t max) {
    const std::size_t n = queue_.try_dequeue_bulk(consumer_, out, max);
    if (max_pending_ != 0 && n != 0) {
      std::int64_t counted = 0;
      for (std::size_t i = 0; i < n; ++i) counted += out[i].counted();
      queued_.fetch_sub(counted, std::memory_order_relaxed);
    }
    return n;
  }

  // Commands queued now, about: exact for what every producer had finished
  // pushing when the call started.
  std::size_t SizeApprox() const { return queue_.size_approx(); }

  // Consumer side: sleeps up to `timeout` unless a command is queued; the
  // next Push wakes it.
  void WaitForWork(absl::Duration timeout) {
    wakeup_.Sleep(timeout, [this] { return queue_.size_approx() != 0; });
  }

  // Consumer side: sleeps for `nap` without asking to be woken, so that
  // pushes meanwhile cost their producers no wake-up call. For a consumer
  // that has just emptied the queue while commands are still flowing: an
  // announced sleep would cost a futex wake per command once the consumer
  // outruns its producers, and spinning instead would burn a core at
  // moderate rates (docs/design-notes.md). A producer refused for
  // max_pending ends the nap, so that a tight bound is not met by refusals
  // for a whole nap.
  void Nap(absl::Duration nap) { wakeup_.Nap(nap); }

 private:
  moodycamel::ConcurrentQueue<Cmd, CommandQueueTraits> queue_;
  moodycamel::ConsumerToken consumer_{queue_};  // the loop's only
  ProducerGate gate_;
  Wakeup wakeup_;
  const std::size_t max_pending_;
  alignas(64) std::atomic<std::int64_t> queued_{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_COMMAND_QUEUE_H_
