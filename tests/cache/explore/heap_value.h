// A value that lives on the heap and knows when it is used after its
// destruction: the cache stores it in a node of its own (not in place), and
// a Get copies it. A canary word says it is alive; a destroyed value's node
// is poisoned (poison.h), so copying one reports a failure instead of
// following its dangling pointer.
#ifndef TIMINGWHEEL_TESTS_CACHE_EXPLORE_HEAP_VALUE_H_
#define TIMINGWHEEL_TESTS_CACHE_EXPLORE_HEAP_VALUE_H_

#include <cstdint>
#include <utility>

#include "poison.h"
#include "scheduler.h"

namespace timingwheel {
namespace explore {

class HeapValue {
 public:
  explicit HeapValue(std::uint64_t id) : id_(new std::uint64_t(id)) {}
  HeapValue(const HeapValue& other) : id_(new std::uint64_t(other.id())) {}
  HeapValue(HeapValue&& other) noexcept
      : id_(other.alive() ? std::exchange(other.id_, nullptr)
                          : new std::uint64_t(other.id())) {}
  HeapValue& operator=(const HeapValue& other) {
    if (this != &other) Reset(new std::uint64_t(other.id()));
    return *this;
  }
  HeapValue& operator=(HeapValue&& other) noexcept {
    if (this != &other) {
      Reset(other.alive() ? std::exchange(other.id_, nullptr)
                          : new std::uint64_t(other.id()));
    }
    return *this;
  }
  ~HeapValue() { delete id_; }

  // The value's number; kPoisonWord, reported, if it was destroyed.
  std::uint64_t id() const {
    if (!alive()) {
      Scheduler::Instance().Fail("used a destroyed value");
      return kPoisonWord;
    }
    return id_ == nullptr ? kMovedFrom : *id_;
  }

  static constexpr std::uint64_t kMovedFrom = ~std::uint64_t{0};

 private:
  static constexpr std::uint64_t kAlive = 0x0A11FE0A11FE0A11ULL;
  bool alive() const { return canary_ == kAlive; }
  void Reset(std::uint64_t* id) {
    delete id_;
    id_ = id;
  }

  std::uint64_t canary_ = kAlive;
  std::uint64_t* id_;
};

}  // namespace explore
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_CACHE_EXPLORE_HEAP_VALUE_H_
