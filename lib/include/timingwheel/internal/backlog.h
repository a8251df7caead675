// Commands taken off the queue ahead of applying them, so that a tick may
// run before them.
#ifndef TIMINGWHEEL_INTERNAL_BACKLOG_H_
#define TIMINGWHEEL_INTERNAL_BACKLOG_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <new>
#include <vector>

#include "timingwheel/internal/backlog_keys.h"

namespace timingwheel {
namespace internal {

// A FIFO of command batches the loop has taken off its queue but not yet
// applied, with the hashes of their keys. Ticks wait for the commands
// queued before them (a move sent before a deadline wins); under a flood
// that is the whole queue, and every timer fires as late as the loop is
// behind. With the queue's commands taken into a Backlog (a copy and a hash
// each, far cheaper than applying them), a due tick can run at once,
// holding back only the timers whose key a waiting command names
// (Wheel::AdvanceTo's hold): no other timer's fate depends on them.
// A drain, tick or stop waiting in the backlog depends on every timer, so
// no tick runs ahead of one (Unkeyed).
//
// Batches are Pipeline-sized arrays of commands, reused; a Backlog that
// empties forgets its keys and keeps a few batches for the next burst.
template <typename Cmd>
class Backlog {
 public:
  // batch: commands per batch; max_commands: the most it holds (then
  // TakeQueued stops short, and ticks wait for the rest as before). The
  // keys are kept until the backlog empties, so TakeQueued also stops
  // short once it has taken 2 * max_commands since the backlog was last
  // empty: a flood that never lets it empty is then applied to the end,
  // ticks waiting, and the keys start afresh.
  Backlog(std::size_t batch, std::size_t max_commands)
      : batch_(batch), max_commands_(max_commands), hashes_(batch) {
    spare_.reserve(kSpareBatches);
  }

  // Takes commands off `queue` (its PopBulk) until it is found empty, adding
  // hash_of(key) of each keyed one to the keys. Returns true if the queue
  // was found empty and every key is known: then every command queued
  // before the call is in the backlog. False if the backlog filled, or
  // memory ran out, first (commands not taken stay queued, in order).
  template <typename Queue, typename HashOf>
  bool TakeQueued(Queue& queue, HashOf&& hash_of) {
    if (keys_.size() == 0) {
      // Room for what is queued now, at once, rather than growth upon
      // growth while it is taken.
      try {
        keys_.Reserve(std::min(2 * max_commands_, queue.SizeApprox()));
      } catch (const std::bad_alloc&) {
        // AddAll grows as it goes, and reports running out there.
      }
    }
    for (;;) {
      if (size_ >= max_commands_ || keys_.size() >= 2 * max_commands_ ||
          !keys_known_) {
        return false;
      }
      if (batches_.empty() || batches_.back().size == batch_) {
        if (!AddBatch()) return false;
      }
      Batch& b = batches_.back();
      const std::size_t room = batch_ - b.size;
      const std::size_t n = queue.PopBulk(b.commands.data() + b.size, room);
      std::size_t keyed = 0;
      for (std::size_t i = b.size; i < b.size + n; ++i) {
        Cmd& c = b.commands[i];
        if (c.counted()) {
          hashes_[keyed++] = hash_of(c.key());
          if (c.kind() != Cmd::Kind::kRemove) {
            b.min_deadline = std::min(b.min_deadline, c.deadline());
          }
        } else {
          ++b.unkeyed;
          ++unkeyed_;
        }
      }
      try {
        keys_.AddAll(hashes_.data(), keyed);
      } catch (const std::bad_alloc&) {
        // A key not in the set would let a tick fire its timer ahead of
        // its command: no tick runs ahead until the backlog empties.
        keys_known_ = false;
      }
      b.size += n;
      size_ += n;
      taken_ += n;
      if (n < room) return keys_known_;
    }
  }

  bool empty() const { return size_ == 0; }
  // Commands held.
  std::size_t size() const { return size_; }
  // Commands ever taken, and ever applied (PopFront): a command taken when
  // taken() was t has been applied once applied() >= t.
  std::uint64_t taken() const { return taken_; }
  std::uint64_t applied() const { return taken_ - size_; }

  // The oldest batch: front()[0, front_size()), to be applied in order.
  Cmd* front() { return batches_.front().commands.data(); }
  std::size_t front_size() const { return batches_.front().size; }

  // The oldest batch has been applied. When the backlog empties, its keys
  // are forgotten.
  void PopFront() {
    Batch& b = batches_.front();
    size_ -= b.size;
    unkeyed_ -= b.unkeyed;
    if (spare_.size() < kSpareBatches) spare_.push_back(std::move(b.commands));
    batches_.pop_front();
    if (size_ == 0) {
      batches_.clear();
      keys_.Clear();
      keys_known_ = true;
    }
  }

  // The earliest deadline (in ticks) a set or move in the backlog asks
  // for; ~0 if none. O(batches).
  std::uint64_t MinDeadline() const {
    std::uint64_t least = ~std::uint64_t{0};
    for (const Batch& b : batches_) least = std::min(least, b.min_deadline);
    return least;
  }

  // True if a drain, tick or stop waits in the backlog.
  bool Unkeyed() const { return unkeyed_ != 0; }

  // Wheel::AdvanceTo's hold: Holds(hash) is true if a command in the
  // backlog may name a key of this hash (see BacklogKeys: never a wrong
  // no); Prefetch(hash) fetches the line it will read.
  bool Holds(std::uint32_t hash) const {
    return !keys_known_ || keys_.Contains(hash);
  }
  void Prefetch(std::uint32_t hash) const { keys_.Prefetch(hash); }

 private:
  // Batches kept for the next burst once the backlog empties.
  static constexpr std::size_t kSpareBatches = 16;

  struct Batch {
    std::vector<Cmd> commands;
    std::size_t size = 0;
    std::size_t unkeyed = 0;
    std::uint64_t min_deadline = ~std::uint64_t{0};  // of its sets and moves
  };

  bool AddBatch() {
    try {
      Batch b;
      if (!spare_.empty()) {
        b.commands = std::move(spare_.back());
        spare_.pop_back();
      } else {
        b.commands.resize(batch_);
      }
      batches_.push_back(std::move(b));
      return true;
    } catch (const std::bad_alloc&) {
      return false;
    }
  }

  const std::size_t batch_;
  const std::size_t max_commands_;
  std::deque<Batch> batches_;
  std::vector<std::vector<Cmd>> spare_;
  BacklogKeys keys_;
  std::vector<std::uint32_t> hashes_;  // of a batch's keyed commands
  bool keys_known_ = true;             // every keyed command's hash is in keys_
  std::size_t size_ = 0;
  std::size_t unkeyed_ = 0;
  std::uint64_t taken_ = 0;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BACKLOG_H_
