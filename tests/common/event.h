// A one-shot event for the tests' own hand-offs between threads.
#ifndef TIMINGWHEEL_TESTS_COMMON_EVENT_H_
#define TIMINGWHEEL_TESTS_COMMON_EVENT_H_

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace timingwheel {
namespace testing {

// Notified once, waited for with a bound. Built on std::mutex, which
// ThreadSanitizer sees through pthread; the synchronization inside an
// uninstrumented Abseil build (absl::Mutex, absl::Notification) is invisible
// to it and would be reported as races.
class Event {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  // True if notified within `timeout`.
  bool WaitFor(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [this] { return notified_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_EVENT_H_
