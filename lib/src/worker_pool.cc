#include "timingwheel/internal/worker_pool.h"

#include <utility>

namespace timingwheel {
namespace internal {

WorkerPool::WorkerPool(int threads) {
  threads_.reserve(threads);
  try {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  } catch (...) {
    Shutdown();
    throw;
  }
}

WorkerPool::~WorkerPool() { Shutdown(); }

void WorkerPool::Submit(Task task) {
  while (!tasks_.enqueue(std::move(task))) {
  }
}

void WorkerPool::Shutdown() {
  // One empty task per thread: each thread exits on the first it takes, and
  // with one producer (FIFO) every real task is taken before any of them.
  for (std::size_t i = 0; i < threads_.size(); ++i) Submit(Task());
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::Run() {
  for (;;) {
    Task task;
    tasks_.wait_dequeue(task);
    if (!task) return;
    std::move(task)();
  }
}

}  // namespace internal
}  // namespace timingwheel
