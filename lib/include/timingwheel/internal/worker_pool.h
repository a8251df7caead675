// Threads that run callbacks off the loop thread.
#ifndef TIMINGWHEEL_INTERNAL_WORKER_POOL_H_
#define TIMINGWHEEL_INTERNAL_WORKER_POOL_H_

#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "timingwheel/internal/moodycamel.h"

namespace timingwheel {
namespace internal {

// A fixed set of threads taking tasks from a moodycamel blocking queue. Tasks
// submitted by one thread start in submission order. Tasks must not throw.
class WorkerPool {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // Starts `threads` threads; throws std::system_error if the OS refuses.
  explicit WorkerPool(int threads);
  // Shutdown().
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(Task task);

  // Runs every task submitted before it, then joins the threads. Must be
  // called from the thread that submitted the tasks (moodycamel orders items
  // per producer only) or after that thread has stopped submitting and all
  // its tasks ran. Idempotent; not to be called from a task.
  void Shutdown();

 private:
  void Run();

  moodycamel::BlockingConcurrentQueue<Task> tasks_;
  std::vector<std::thread> threads_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_WORKER_POOL_H_
