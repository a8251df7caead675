// Where a wheel's ticks come from.
#ifndef TIMINGWHEEL_TICKER_H_
#define TIMINGWHEEL_TICKER_H_

#include <atomic>
#include <mutex>

namespace timingwheel {
namespace internal {
class TickSink;      // what a ManualTicker drives (internal/time/tick_sink.h)
class TickerAccess;  // how a wheel attaches itself to its ManualTicker
}  // namespace internal

// A source of ticks for Options::ticker. The library's only kind is
// ManualTicker; nullptr in Options selects real time.
class Ticker {
 public:
  virtual ~Ticker() = default;

 protected:
  Ticker() = default;
};

// Ticks only when told, so tests of code that uses a wheel are deterministic:
// with it, "now" is start + ticks_done * interval.
class ManualTicker : public Ticker {
 public:
  ManualTicker() = default;
  ManualTicker(const ManualTicker&) = delete;
  ManualTicker& operator=(const ManualTicker&) = delete;

  // Advances the wheel by n ticks (n >= 1; smaller n does nothing). Returns
  // after (a) every command this thread submitted to the wheel before the
  // call has been applied, (b) the n ticks have been processed, and (c) every
  // execute callback those ticks triggered has returned. Ticks are processed
  // one at a time: commands that tick k's callbacks submit are applied before
  // tick k+1. Returns at once when no wheel is attached, the wheel is stopped,
  // or the caller is one of that wheel's own callbacks. Concurrent calls are
  // serialized. Cost: a queue round trip per call plus the ticks' work.
  void Tick(int n = 1);

 private:
  friend class internal::TickerAccess;

  std::mutex mu_;  // held across Tick: serializes ticks and (de)attachment
  // Written under mu_; also read without it, only to compare with the wheel a
  // calling callback belongs to (a callback must not wait for mu_, which its
  // own Tick holds).
  std::atomic<internal::TickSink*> sink_{nullptr};
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_TICKER_H_
