#include "timingwheel/internal/loop/producer_gate.h"

#include <thread>

namespace timingwheel {
namespace internal {
namespace {

int ThisThreadShard(int shards) {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned mine =
      next.fetch_add(1, std::memory_order_relaxed);
  return static_cast<int>(mine % static_cast<unsigned>(shards));
}

}  // namespace

int ProducerGate::Enter() {
  const int shard = ThisThreadShard(kShards);
  // seq_cst on both sides (here and in Close) is the Dekker handshake: either
  // this producer sees closed_, or Close sees it inside and waits.
  shards_[shard].inside.fetch_add(1, std::memory_order_seq_cst);
  if (closed_.load(std::memory_order_seq_cst)) {
    shards_[shard].inside.fetch_sub(1, std::memory_order_release);
    return kRefused;
  }
  return shard;
}

void ProducerGate::Leave(int ticket) {
  shards_[ticket].inside.fetch_sub(1, std::memory_order_release);
}

bool ProducerGate::Close() {
  if (closed_.exchange(true, std::memory_order_seq_cst)) return false;
  for (Shard& shard : shards_) {
    // Producers stay inside only for one enqueue: spin briefly.
    while (shard.inside.load(std::memory_order_seq_cst) != 0) {
      std::this_thread::yield();
    }
  }
  return true;
}

}  // namespace internal
}  // namespace timingwheel
