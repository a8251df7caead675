// A value that counts its own destruction, to check that a wheel destroys
// each value it holds exactly once, and when.
#ifndef TIMINGWHEEL_TESTS_COMMON_COUNTED_H_
#define TIMINGWHEEL_TESTS_COMMON_COUNTED_H_

#include <atomic>
#include <memory>
#include <utility>

namespace timingwheel {
namespace testing {

// Counts how many of its instances holding a live value were destroyed: a
// moved-from instance counts nothing.
class Counted {
 public:
  Counted(int id, std::shared_ptr<std::atomic<int>> destroyed)
      : id_(id), destroyed_(std::move(destroyed)) {}
  Counted(Counted&& other) noexcept
      : id_(other.id_), destroyed_(std::move(other.destroyed_)) {}
  Counted& operator=(Counted&& other) noexcept {
    if (this != &other) {
      Release();
      id_ = other.id_;
      destroyed_ = std::move(other.destroyed_);
    }
    return *this;
  }
  ~Counted() { Release(); }
  int id() const { return id_; }

 private:
  void Release() {
    if (destroyed_ != nullptr) destroyed_->fetch_add(1);
    destroyed_.reset();
  }
  int id_;
  std::shared_ptr<std::atomic<int>> destroyed_;
};

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_COUNTED_H_
