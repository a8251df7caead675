// Applying a batch of commands to the wheel with their cache misses overlapped.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_APPLY_PIPELINE_H_
#define TIMINGWHEEL_INTERNAL_LOOP_APPLY_PIPELINE_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "timingwheel/internal/loop/command.h"
#include "timingwheel/internal/wheel/wheel.h"
#include "timingwheel/stats.h"

namespace timingwheel {
namespace internal {

// At a million timers nearly every command misses the cache at least twice
// (the index line, the entry), and a miss the processor waits for costs far
// more than the work. Misses that are in flight together overlap, so the
// batch goes through a software pipeline: while command i is applied, the
// entry of i + d and the index lines of i + 2d are on their way. Each stage
// only prefetches what the next one will read; the commands still take
// effect strictly in order, so the result is that of applying them one by
// one. (No stage fetches the neighbours an unlink writes: it would have to
// read the entry to find them, and most moves and removes unlink nothing,
// so it would cost more than it saves. docs/design.md.)
template <typename K, typename V, typename Hash, typename Eq>
class ApplyPipeline {
 public:
  using WheelType = Wheel<K, V, Hash, Eq>;
  using Cmd = Command<K, V, typename WheelType::StoredKey>;

  // Most commands in one batch.
  static constexpr std::size_t kBatch = 256;
  // Commands between the stages (d above).
  static constexpr std::size_t kDistance = 8;
  static_assert(2 * kDistance <= kBatch);

  explicit ApplyPipeline(WheelType* wheel) : wheel_(wheel) {}

  // Applies commands[0, n) in order, n <= kBatch: set, move and remove to
  // the wheel, counted in `counts`; every other command (drain, tick, stop)
  // is handed to other(command) at its turn. Flattened: the wheel's
  // per-command code is inlined whole (its cold paths are noinline), so
  // that the inliner's size limits, which unrelated edits shift, do not set
  // the loop's cost per command (docs/design.md).
  template <typename Other>
  [[gnu::flatten]] void Apply(Cmd* commands, std::size_t n, Stats& counts,
                              Other&& other) {
    constexpr std::size_t d = kDistance;
    // The first 2d steps only fetch. Then every step applies one command;
    // the fetches' bounds are tested as unsigned differences (i - d wraps
    // for i < d), one compare each.
    for (std::size_t i = 0; i < 2 * d; ++i) {
      if (i < n) FetchIndex(commands, i);
      if (i - d < n) FetchEntry(commands, i - d);
    }
    for (std::size_t i = 2 * d; i < n + 2 * d; ++i) {
      if (i < n) FetchIndex(commands, i);
      if (i - d < n) FetchEntry(commands, i - d);
      ApplyOne(commands, i - 2 * d, counts, other);
    }
  }

 private:
  // Stage 1: fetch the key's index lines (the caller hashed the key).
  void FetchIndex(Cmd* commands, std::size_t i) {
    if (!commands[i].counted()) return;
    wheel_->PrefetchIndex(commands[i].hash());
  }

  // Stage 2: the index lines have arrived; fetch the entry they name.
  void FetchEntry(Cmd* commands, std::size_t i) {
    if (!commands[i].counted()) return;
    wheel_->PrefetchEntry(commands[i].hash());
  }

  // Stage 3: apply.
  template <typename Other>
  void ApplyOne(Cmd* commands, std::size_t i, Stats& counts, Other& other) {
    Cmd& c = commands[i];
    switch (c.kind()) {
      case Cmd::Kind::kSet:
        ++counts.applied;
        if (wheel_->Set(std::move(c.key()), std::move(c.value()), c.deadline(),
                        c.hash())) {
          ++counts.superseded;
        }
        return;
      case Cmd::Kind::kMove:
        ++counts.applied;
        if (wheel_->Move(c.key(), c.deadline(), c.hash())) ++counts.moved;
        return;
      case Cmd::Kind::kRemove:
        ++counts.applied;
        if (wheel_->Remove(c.key(), c.hash())) ++counts.removed;
        return;
      default:
        other(c);
        return;
    }
  }

  WheelType* const wheel_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_APPLY_PIPELINE_H_
