// Counters a TimingWheel and a Cache keep about themselves.
#ifndef TIMINGWHEEL_STATS_H_
#define TIMINGWHEEL_STATS_H_

#include <cstddef>
#include <cstdint>

namespace timingwheel {

// A snapshot of a wheel's counters. The loop publishes them once per batch of
// commands and once per tick, so a snapshot may lag the calls that a caller
// just made by that much. Reading one costs a handful of relaxed loads.
struct Stats {
  std::size_t pending = 0;                // timers in the wheel now
  std::uint64_t ticks = 0;                // ticks the wheel has processed
  std::uint64_t applied = 0;              // set/move/remove commands applied
  std::uint64_t fired = 0;                // timers handed to execute
  std::uint64_t moved = 0;                // MoveTimer that found its key
  std::uint64_t removed = 0;              // RemoveTimer that found its key
  std::uint64_t superseded = 0;           // SetTimer that replaced a value
  std::uint64_t drained = 0;              // timers handed to a Drain fn
  std::uint64_t callback_exceptions = 0;  // exceptions caught from callbacks
  // Timers filed again when the slot they sat in came due: moved down a
  // level as their deadline approached, or caught up with a later move. A
  // timer is refiled about once per level it passes through.
  std::uint64_t refiled = 0;
  // Bytes the wheel's timers, key index and slots hold now. Falls back when
  // most timers are gone: the loop gives the memory back between ticks.
  std::size_t memory_bytes = 0;
};

// A snapshot of a cache's counters since creation.
struct CacheStats {
  std::uint64_t hits = 0, misses = 0;
  std::uint64_t loads = 0, load_failures = 0;  // GetOrLoad's load() calls
  std::uint64_t expired = 0, evicted = 0;      // removals by kExpired, kSize
  std::size_t size = 0;                        // entries present
  // Extension: exceptions thrown by the removal listener (each caught; the
  // value still counts as gone, and the other removals are still told).
  std::uint64_t listener_exceptions = 0;
};

}  // namespace timingwheel

#endif  // TIMINGWHEEL_STATS_H_
