// The threads that run the execute callback on fired timers.
#ifndef TIMINGWHEEL_INTERNAL_EXECUTE_POOL_H_
#define TIMINGWHEEL_INTERNAL_EXECUTE_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "timingwheel/internal/callback_scope.h"
#include "timingwheel/internal/moodycamel.h"

namespace timingwheel {
namespace internal {

// Fired timers go from the loop to the workers one by one through a
// moodycamel queue, not in batches: with several workers each takes one at
// a time, so a slow callback holds up nothing but itself (api.md S10) while
// the others carry on with the rest of its tick. A single worker takes up to
// 64 at a time, since nothing could overtake its slow callback anyway.
// Handing a timer over costs the loop a bulk enqueue (a few ns) and no
// allocation once the queue's blocks are warm. The loop enqueues as an
// implicit producer: an explicit one (ProducerToken) decides a block is free
// for reuse after a relaxed load and an acquire fence, which
// ThreadSanitizer does not model and reports as a race.
// A fired timer on its way to a worker; empty = a stop marker. (A type of
// its own, so that tests/tsan.supp can name this queue's elements.)
template <typename K, typename V>
struct FiredTimer : std::optional<std::pair<K, V>> {
  using std::optional<std::pair<K, V>>::optional;
};

template <typename K, typename V>
class ExecutePool {
 public:
  using Callback = std::function<void(K, V)>;
  using Item = FiredTimer<K, V>;

  // Starts `threads` workers calling execute(key, value) inside a
  // CallbackScope of `owner`, counting exceptions in `*exceptions`. Throws
  // std::system_error if the OS refuses a thread (none is left running).
  ExecutePool(int threads, const Callback* execute, const void* owner,
              std::atomic<std::uint64_t>* exceptions)
      : execute_(execute),
        owner_(owner),
        exceptions_(exceptions),
        chunk_(threads == 1 ? 64 : 1) {
    threads_.reserve(threads);
    try {
      for (int i = 0; i < threads; ++i)
        threads_.emplace_back([this] { Run(); });
    } catch (...) {
      Shutdown();
      throw;
    }
  }
  ~ExecutePool() { Shutdown(); }
  ExecutePool(const ExecutePool&) = delete;
  ExecutePool& operator=(const ExecutePool&) = delete;

  // Loop thread only: hands every item of `fired` to the workers, leaving
  // `fired` empty.
  void Submit(std::vector<Item>& fired) {
    if (fired.empty()) return;
    outstanding_.fetch_add(fired.size(), std::memory_order_relaxed);
    while (!queue_.enqueue_bulk(std::make_move_iterator(fired.begin()),
                                fired.size())) {
      std::this_thread::yield();  // out of memory for a block: retry
    }
    fired.clear();
  }

  // Returns once every item submitted so far has been run.
  void WaitIdle() {
    for (std::uint64_t n;
         (n = outstanding_.load(std::memory_order_acquire)) != 0;) {
      outstanding_.wait(n, std::memory_order_acquire);
    }
  }

  // Runs every item submitted before it, then joins the workers. Call it
  // from the thread that submitted (moodycamel keeps order per producer, so
  // the stop markers queue behind every item) or when none was submitted.
  // Idempotent; not from a worker.
  void Shutdown() {
    if (threads_.empty()) return;
    // A worker leaves at the first marker it takes and takes at most chunk_
    // at a time, so chunk_ markers per worker reach every one of them.
    std::vector<Item> markers(threads_.size() * chunk_);
    while (!queue_.enqueue_bulk(std::make_move_iterator(markers.begin()),
                                markers.size())) {
      std::this_thread::yield();
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Run() {
    CallbackScope scope(owner_);
    moodycamel::ConsumerToken token(queue_);
    std::vector<Item> items(chunk_);
    for (;;) {
      const std::size_t n =
          queue_.wait_dequeue_bulk(token, items.begin(), chunk_);
      bool stop = false;
      std::size_t ran = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (!items[i].has_value()) {
          stop = true;
          continue;
        }
        try {
          (*execute_)(std::move(items[i]->first), std::move(items[i]->second));
        } catch (...) {
          exceptions_->fetch_add(1, std::memory_order_relaxed);
        }
        items[i].reset();
        ++ran;
      }
      if (ran != 0 &&
          outstanding_.fetch_sub(ran, std::memory_order_acq_rel) == ran) {
        outstanding_.notify_all();
      }
      if (stop) return;
    }
  }

  const Callback* const execute_;
  const void* const owner_;
  std::atomic<std::uint64_t>* const exceptions_;
  const std::size_t chunk_;  // items a worker takes at a time
  moodycamel::BlockingConcurrentQueue<Item> queue_;
  alignas(64) std::atomic<std::uint64_t> outstanding_{0};  // submitted, not run
  std::vector<std::thread> threads_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_EXECUTE_POOL_H_
