// The many-producer, one-consumer channel from callers to the loop.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_COMMAND_QUEUE_H_
#define TIMINGWHEEL_INTERNAL_LOOP_COMMAND_QUEUE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "timingwheel/internal/loop/admission.h"
#include "timingwheel/internal/loop/moodycamel.h"
#include "timingwheel/internal/loop/producer_gate.h"
#include "timingwheel/internal/loop/wakeup.h"

namespace timingwheel {
namespace internal {

// Bigger blocks than moodycamel's default 32: a producer allocates and
// indexes a block every 256 commands instead of every 32, which is most of
// an enqueue's cost with small commands (docs/design.md).
struct CommandQueueTraits : moodycamel::ConcurrentQueueDefaultTraits {
  static constexpr std::size_t BLOCK_SIZE = 256;
};

// Wraps a moodycamel ConcurrentQueue (lock-free; each producer thread's
// items come out in the order it pushed them) with what the wheel needs
// around it: refusing pushes once closed, admission (Options::max_pending
// and max_lag), and a wake-up for the sleeping consumer.
template <typename Cmd>
class CommandQueue {
 public:
  CommandQueue(std::size_t max_pending, absl::Duration max_lag)
      : admission_(max_pending, max_lag) {}

  // Producer side. FailedPrecondition once closed, ResourceExhausted when
  // admission refuses a keyed command (see Admission). Cost: one enqueue
  // into this thread's sub-queue, a gate enter/leave, a fence; plus one
  // shared atomic add when max_pending or max_lag is set.
  absl::Status Push(Cmd cmd) {
    const int ticket = gate_.Enter();
    if (ticket == ProducerGate::kRefused) return Stopped();
    const std::size_t counted = cmd.counted() ? 1 : 0;
    if (absl::Status s = admission_.Admit(counted); !s.ok()) {
      return Refused(ticket, std::move(s));
    }
    const bool ok = queue_.enqueue(std::move(cmd));
    return Enqueued(ticket, ok, counted);
  }

  // Producer side: the n keyed commands make(0), ..., make(n - 1), all or
  // none, in that order, with one gate pass, one admission and one bulk
  // enqueue. When make cannot throw, the commands are made in place in the
  // queue, and only once it has room for all n: when the push fails, make
  // was not called. Otherwise they are made first into a buffer (so that
  // a throw leaves nothing queued); std::bad_alloc there is
  // ResourceExhausted, other exceptions propagate. Errors as Push.
  template <typename Make>
  absl::Status PushEach(std::size_t n, Make&& make) {
    if constexpr (noexcept(make(std::size_t{0}))) {
      return PushBulk(MadeCommands<Make>(&make), n);
    } else {
      std::vector<Cmd> commands;
      try {
        commands.reserve(n);
        for (std::size_t i = 0; i < n; ++i) commands.push_back(make(i));
      } catch (const std::bad_alloc&) {
        return absl::ResourceExhaustedError("timing wheel: out of memory");
      }
      return PushBulk(std::make_move_iterator(commands.begin()), n);
    }
  }

  // Refuses later pushes and returns once every push in progress is done.
  // False if already closed.
  bool Close() { return gate_.Close(); }
  bool closed() const { return gate_.closed(); }
  // A push of no commands: FailedPrecondition once closed, else OK.
  absl::Status EmptyBatch() const {
    return closed() ? Stopped() : absl::OkStatus();
  }

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
    if (admission_.counting() && n != 0) {
      std::size_t counted = 0;
      for (std::size_t i = 0; i < n; ++i) counted += out[i].counted();
      admission_.Taken(counted);
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

  // Any thread: ends the consumer's WaitForWork or Nap in progress, or
  // the next one to start, when something other than a command needs it
  // (a manual tick's callbacks have returned). Takes a lock: for rare
  // events.
  void WakeConsumer() { wakeup_.Wake(); }

  // Consumer side: sleeps for `nap` without asking to be woken, so that
  // pushes meanwhile cost their producers no wake-up call. For a consumer
  // that has just emptied the queue while commands are still flowing: an
  // announced sleep would cost a futex wake per command once the consumer
  // outruns its producers, and spinning instead would burn a core at
  // moderate rates (docs/design.md). A producer refused for
  // max_pending ends the nap, so that a tight bound is not met by refusals
  // for a whole nap.
  void Nap(absl::Duration nap) { wakeup_.Nap(nap); }

  // True when Options::max_lag is set: the consumer should then time its
  // work with RecordApplied.
  bool BoundsLag() const { return admission_.bounds_lag(); }
  // Consumer side, for max_lag: a round of taking commands starts now; the
  // consumer is about to sleep (see Admission::RoundStarts).
  void RoundStarts(std::chrono::steady_clock::time_point now) {
    admission_.RoundStarts(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               now.time_since_epoch())
                               .count());
  }
  void Idle() { admission_.Idle(); }
  // Consumer side, for max_lag: when its first tick with work is due (see
  // Admission::WorkDueAt).
  void WorkDueAt(std::int64_t due_ns) { admission_.WorkDueAt(due_ns); }
  // Consumer side: what applying `commands` took, for max_lag.
  void RecordApplied(std::size_t commands, absl::Duration elapsed) {
    admission_.RecordApplied(commands, elapsed);
  }
  // Consumer side: where a round of taking commands ends, for max_lag (see
  // Admission::lag_limit).
  std::int64_t LagLimit() const { return admission_.lag_limit(); }

 private:
  // An input iterator over make(0), make(1), ...: what moodycamel's bulk
  // enqueue reads, so each command is built straight into its queue slot.
  template <typename Make>
  class MadeCommands {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Cmd;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Cmd;

    explicit MadeCommands(Make* make) : make_(make) {}
    Cmd operator*() const noexcept { return (*make_)(i_); }
    MadeCommands& operator++() {
      ++i_;
      return *this;
    }
    MadeCommands operator++(int) {
      MadeCommands before = *this;
      ++i_;
      return before;
    }

   private:
    Make* make_;
    std::size_t i_ = 0;
  };

  // n keyed commands read from `first`, dereferenced only once the queue
  // has room for all of them.
  template <typename It>
  absl::Status PushBulk(It first, std::size_t n) {
    const int ticket = gate_.Enter();
    if (ticket == ProducerGate::kRefused) return Stopped();
    if (absl::Status s = admission_.Admit(n); !s.ok()) {
      return Refused(ticket, std::move(s));
    }
    const bool ok = queue_.enqueue_bulk(first, n);
    return Enqueued(ticket, ok, n);
  }

  static absl::Status Stopped() {
    return absl::FailedPreconditionError("timing wheel is stopped");
  }

  absl::Status Refused(int ticket, absl::Status why) {
    gate_.Leave(ticket);
    wakeup_.Wake();  // the loop may be napping on a full queue
    return why;
  }

  absl::Status Enqueued(int ticket, bool ok, std::size_t counted) {
    if (!ok) admission_.Cancel(counted);
    gate_.Leave(ticket);
    if (!ok) return absl::ResourceExhaustedError("timing wheel: out of memory");
    wakeup_.Notify();
    return absl::OkStatus();
  }

  moodycamel::ConcurrentQueue<Cmd, CommandQueueTraits> queue_;
  moodycamel::ConsumerToken consumer_{queue_};  // the loop's only
  ProducerGate gate_;
  Wakeup wakeup_;
  Admission admission_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_COMMAND_QUEUE_H_
