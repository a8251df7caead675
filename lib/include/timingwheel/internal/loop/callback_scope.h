// Knowing, on any thread, whether it is running a wheel's callback.
#ifndef TIMINGWHEEL_INTERNAL_LOOP_CALLBACK_SCOPE_H_
#define TIMINGWHEEL_INTERNAL_LOOP_CALLBACK_SCOPE_H_

namespace timingwheel {
namespace internal {

// Marks the current thread as running a callback of `owner` while in scope.
// Drain, Stop and ManualTicker::Tick consult it to refuse the calls that would
// wait for the very callback making them.
class CallbackScope {
 public:
  explicit CallbackScope(const void* owner);
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

  // True if the current thread is inside a callback of `owner`. Compares
  // addresses only, so `owner` may be dead.
  static bool InCallbackOf(const void* owner);

 private:
  const void* previous_;
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_LOOP_CALLBACK_SCOPE_H_
