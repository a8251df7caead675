// One load in flight for a cache key: the "singleflight" behind
// Cache::GetOrLoad, so concurrent misses of a key call load() once.
#ifndef TIMINGWHEEL_INTERNAL_CACHE_FLIGHT_H_
#define TIMINGWHEEL_INTERNAL_CACHE_FLIGHT_H_

#include <condition_variable>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "timingwheel/internal/base/mutex.h"

namespace timingwheel {
namespace internal {

// The result of one load, published once to every caller waiting on it.
// std::mutex and std::condition_variable (not absl::Mutex) so that
// ThreadSanitizer sees the hand-off. Cost: one lock and one wake-up per
// waiter.
template <typename V>
class CacheFlight {
 public:
  // Publishes the result and wakes every waiter. Called once.
  void Finish(absl::StatusOr<V> result) {
    {
      MutexLock lock(mu_);
      result_ = std::move(result);
      done_ = true;
    }
    cv_.notify_all();
  }

  // Blocks until Finish, then returns a copy of the result.
  absl::StatusOr<V> Wait() {
    MutexLock lock(mu_);
    while (!done_) lock.Wait(cv_);
    return result_;
  }

  // A Set, Delete or Clear of the key came while load() ran: what it loaded
  // may be older than that, so it goes to the callers waiting for it and to
  // the listener (kReplaced) but is not stored. Read and written under the
  // cache shard's mutex only.
  bool superseded = false;
  // The thread running load(): a GetOrLoad of the same key on it would wait
  // for itself. Read and written under the cache shard's mutex only.
  std::thread::id leader;

 private:
  Mutex mu_;
  std::condition_variable cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<V> result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_CACHE_FLIGHT_H_
