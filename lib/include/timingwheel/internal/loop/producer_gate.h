// The line between "accepted" and "refused" when a wheel stops.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_PRODUCER_GATE_H_
#define TIMINGWHEEL_INTERNAL_LOOP_PRODUCER_GATE_H_

#include <atomic>
#include <cstdint>

namespace timingwheel {
namespace internal {

// Producers enter the gate around each enqueue; Close() shuts it and waits
// for everyone inside to leave. After Close() returns, every producer either
// was refused or has finished its enqueue, so the loop can drain the queue
// knowing nothing accepted will arrive later (api.md S6, S8).
//
// The count of producers inside is sharded by thread over separate cache
// lines, so concurrent producers do not contend on one counter.
class ProducerGate {
 public:
  static constexpr int kRefused = -1;

  // Returns a ticket for Leave(), or kRefused once the gate is closed.
  // Cost: one uncontended atomic add and one load.
  int Enter();
  void Leave(int ticket);

  // Closes the gate and waits until no producer is inside. Returns false if
  // it was already closed.
  bool Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  static constexpr int kShards = 16;
  struct alignas(64) Shard {
    std::atomic<std::int64_t> inside{0};
  };
  Shard shards_[kShards];
  alignas(64) std::atomic<bool> closed_{false};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_PRODUCER_GATE_H_
