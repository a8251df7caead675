#include "timingwheel/internal/loop/callback_scope.h"

namespace timingwheel {
namespace internal {
namespace {
thread_local const void* current_owner = nullptr;
}  // namespace

CallbackScope::CallbackScope(const void* owner) : previous_(current_owner) {
  current_owner = owner;
}

CallbackScope::~CallbackScope() { current_owner = previous_; }

bool CallbackScope::InCallbackOf(const void* owner) {
  return owner != nullptr && current_owner == owner;
}

}  // namespace internal
}  // namespace timingwheel
