#include "timingwheel/ticker.h"

#include "timingwheel/internal/loop/callback_scope.h"
#include "timingwheel/internal/time/tick_sink.h"

namespace timingwheel {

void ManualTicker::Tick(int n) {
  if (n < 1) return;
  // A callback of the driven wheel must not wait for mu_: the Tick that ran
  // it holds mu_ until the callback returns.
  if (internal::CallbackScope::InCallbackOf(
          sink_.load(std::memory_order_acquire))) {
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  internal::TickSink* sink = sink_.load(std::memory_order_relaxed);
  if (sink != nullptr) sink->RunTicks(n);
}

namespace internal {

bool TickerAccess::Attach(ManualTicker& ticker, TickSink* sink) {
  // Checked before locking: a callback of the wheel this ticker drives runs
  // inside a Tick that holds mu_, and creating a wheel there must fail, not
  // wait for that Tick forever.
  if (ticker.sink_.load(std::memory_order_acquire) != nullptr) return false;
  std::lock_guard<std::mutex> lock(ticker.mu_);
  if (ticker.sink_.load(std::memory_order_relaxed) != nullptr) return false;
  ticker.sink_.store(sink, std::memory_order_release);
  return true;
}

void TickerAccess::Detach(ManualTicker& ticker, TickSink* sink) {
  std::lock_guard<std::mutex> lock(ticker.mu_);
  if (ticker.sink_.load(std::memory_order_relaxed) == sink) {
    ticker.sink_.store(nullptr, std::memory_order_release);
  }
}

}  // namespace internal
}  // namespace timingwheel
