// A hash under which every key collides, to check that answers stay right
// when lookups degrade to a scan.
#ifndef TIMINGWHEEL_TESTS_COMMON_CONSTANT_HASH_H_
#define TIMINGWHEEL_TESTS_COMMON_CONSTANT_HASH_H_

#include <cstddef>

namespace timingwheel {
namespace testing {

// Hashes every key, of any type, to 42.
struct ConstantHash {
  template <typename K>
  std::size_t operator()(const K&) const {
    return 42;
  }
};

}  // namespace testing
}  // namespace timingwheel

#endif  // TIMINGWHEEL_TESTS_COMMON_CONSTANT_HASH_H_
