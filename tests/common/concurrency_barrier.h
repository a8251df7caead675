// What the tests share to prove that callbacks run at the same time: a
// barrier that callbacks enter, which says how many were inside at once.
#ifndef TIMINGWHEEL_TESTS_COMMON_CONCURRENCY_BARRIER_H_
#define TIMINGWHEEL_TESTS_COMMON_CONCURRENCY_BARRIER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace timingwheel {
namespace testing {

// A number unique to the calling thread for the life of the process. Unlike
// std::thread::id (a pthread_t, whose value a new thread may reuse once an
// old one is joined), a new thread never gets an old thread's token.
inline int ThreadToken() {
  static std::atomic<int> next{1};
  thread_local const int token = next.fetch_add(1);
  return token;
}

// Fns call Enter(): it returns once `target` fns have been inside at the same
// time (at once for every later fn), or when the shared deadline passes. It
// records the largest number of fns inside at once, and which threads came.
class ConcurrencyBarrier {
 public:
  // `timeout` only keeps a broken test from hanging: the outcome is decided
  // by reached() and max_inside(), never by the clock.
  explicit ConcurrencyBarrier(
      int target,
      std::chrono::steady_clock::duration timeout = std::chrono::seconds(10))
      : target_(target),
        deadline_(std::chrono::steady_clock::now() + timeout) {}

  void Enter() {
    std::unique_lock<std::mutex> lock(mu_);
    ++inside_;
    max_inside_ = std::max(max_inside_, inside_);
    thread_ids_.insert(std::this_thread::get_id());
    tokens_.insert(ThreadToken());
    if (inside_ >= target_) {
      reached_ = true;
      cv_.notify_all();
    }
    cv_.wait_until(lock, deadline_, [this] { return reached_; });
    --inside_;
  }

  bool reached() {
    std::lock_guard<std::mutex> lock(mu_);
    return reached_;
  }
  int max_inside() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_inside_;
  }
  std::set<std::thread::id> thread_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_ids_;
  }
  std::set<int> tokens() {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }

 private:
  const int target_;
  const std::chrono::steady_clock::time_point deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  int inside_ = 0;
  int max_inside_ = 0;
  bool reached_ = false;
  std::set<std::thread::id> thread_ids_;
  std::set<int> tokens_;
};

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_CONCURRENCY_BARRIER_H_
