// Room for one T whose lifetime the owner manages by hand.
#ifndef TIMINGWHEEL_INTERNAL_BASE_MANUAL_STORAGE_H_
#define TIMINGWHEEL_INTERNAL_BASE_MANUAL_STORAGE_H_

#include <new>
#include <utility>

namespace timingwheel {
namespace internal {

// Storage for a T that is constructed and destroyed by hand, so that pooled
// entries and queued commands need no default constructor of K or V. The
// owner knows whether a T lives there; ManualStorage does not.
template <typename T>
class ManualStorage {
 public:
  template <typename... Args>
  void Construct(Args&&... args) {
    ::new (static_cast<void*>(bytes_)) T(std::forward<Args>(args)...);
  }
  void Destroy() { Get().~T(); }
  T& Get() { return *std::launder(reinterpret_cast<T*>(bytes_)); }
  const T& Get() const {
    return *std::launder(reinterpret_cast<const T*>(bytes_));
  }

 private:
  alignas(T) unsigned char bytes_[sizeof(T)];
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_MANUAL_STORAGE_H_
