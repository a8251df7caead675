// The link between a ManualTicker (timingwheel/ticker.h) and the one wheel
// it drives: the wheel's event loop is a TickSink, and attaches itself
// through TickerAccess, so that the public header declares neither.
#ifndef TIMINGWHEEL_INTERNAL_TIME_TICK_SINK_H_
#define TIMINGWHEEL_INTERNAL_TIME_TICK_SINK_H_

#include "timingwheel/ticker.h"

namespace timingwheel {
namespace internal {

// What a ManualTicker drives: the event loop of one wheel.
class TickSink {
 public:
  // Runs n ticks as ManualTicker::Tick documents; returns at once once the
  // wheel is stopped.
  virtual void RunTicks(int n) = 0;

 protected:
  ~TickSink() = default;
};

// Lets a wheel attach itself to the ManualTicker that drives it.
class TickerAccess {
 public:
  // False if the ticker already drives a wheel.
  static bool Attach(ManualTicker& ticker, TickSink* sink);
  // Waits for a Tick in progress, then forgets `sink`.
  static void Detach(ManualTicker& ticker, TickSink* sink);
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_TIME_TICK_SINK_H_
