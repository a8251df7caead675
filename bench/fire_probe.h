// The fire probe of bench/workloads.cc (W5, W5-twice, W8): the execute
// callback that logs when each timer fired, and the analysis of those logs
// after the run. A header of its own so that workloads.cc stays readable.
#ifndef TIMINGWHEEL_BENCH_FIRE_PROBE_H_
#define TIMINGWHEEL_BENCH_FIRE_PROBE_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "support/clock.h"

namespace bench {

using support::MonoNanos;

// The execute callback of W5 and W8 is the probe, so it must be light: at
// W5's peak the wheel fires ~10,000 timers a millisecond, and a probe that
// wrote into arrays indexed by key (two random cache misses a timer) would
// keep one worker busier than the wheel and measure itself; W8 divides CPU
// time by the timers fired, so a heavy probe would be charged to the wheel.
// Each worker thread appends (id, time) to a log of its own, reserved up
// front; counting, lateness and "fired twice" are worked out from the logs
// after the run (AnalyseFirings).
struct FireLog {
  std::vector<std::pair<std::uint64_t, std::int64_t>> records;
  alignas(64) std::atomic<std::int64_t> size{0};  // published records
};

class FireRecorder {
 public:
  // One log per execute worker, with room for `capacity` records each.
  FireRecorder(int workers, std::int64_t capacity) : run_(NextRun()) {
    for (int w = 0; w < workers; ++w) {
      logs_.push_back(std::make_unique<FireLog>());
      // Resizing, not just reserving, faults the pages in now: a log of
      // W8's size comes from mmap, not from the prefaulted heap, and its
      // page faults would land in the window's CPU time.
      logs_.back()->records.resize(capacity);
      logs_.back()->records.clear();
    }
  }

  // The callback's body: logs `id` (an index into the caller's deadlines)
  // with the time now.
  void Record(std::uint64_t id) {
    const std::int64_t t = MonoNanos();
    // Each worker thread claims a log the first time it runs a callback of
    // this recorder. A run number tells recorders apart, not an address: a
    // later one may live where an earlier one did.
    thread_local int my_run = 0;
    thread_local FireLog* mine = nullptr;
    if (my_run != run_) {
      my_run = run_;
      mine = logs_[next_log_.fetch_add(1)].get();
    }
    mine->records.emplace_back(id, t);
    mine->size.store(static_cast<std::int64_t>(mine->records.size()),
                     std::memory_order_release);
  }

  // Records published so far, by every worker.
  std::int64_t Logged() const {
    std::int64_t total = 0;
    for (const auto& log : logs_) {
      total += log->size.load(std::memory_order_acquire);
    }
    return total;
  }

  // Read the records only once the wheel is gone: workers append until then.
  const std::vector<std::unique_ptr<FireLog>>& logs() const { return logs_; }

 private:
  static int NextRun() {
    static std::atomic<int> runs{0};
    return runs.fetch_add(1) + 1;
  }

  const int run_;
  std::vector<std::unique_ptr<FireLog>> logs_;
  std::atomic<int> next_log_{0};
};

// What the logs say about the ids [first, first + count) (by default all of
// 0..n-1, n = deadline_ns.size()): callbacks up to `to` (MonoNanos) are
// counted, and the ids whose first callback ran in [from, to] are judged
// against their deadlines. Ids below n outside the range belong to another
// round of the same run (W5-twice) and are skipped; ids from n up are strays.
struct Firings {
  std::int64_t fired = 0;    // ids first called back in [from, to]
  std::int64_t before = 0;   // ids first called back before `from`
  std::int64_t never = 0;    // ids not called back by `to`
  std::int64_t early = 0;    // of `fired`: before the deadline (must be 0)
  std::int64_t twice = 0;    // callbacks of an id after its first (must be 0)
  std::int64_t stray = 0;    // callbacks of ids never set
  std::int64_t last_ns = 0;  // the latest first callback of `fired`
  std::vector<std::int64_t> late_ns;  // of `fired`, callback - deadline, sorted

  // The q-quantile of the lateness, in ms; NAN if nothing fired.
  double LateMs(double q) const {
    if (late_ns.empty()) return NAN;
    const std::size_t i = std::min(
        late_ns.size() - 1, static_cast<std::size_t>(q * (late_ns.size() - 1)));
    return late_ns[i] / 1e6;
  }
  double MinLateMs() const { return LateMs(0); }
  double MaxLateMs() const { return LateMs(1); }
};

inline Firings AnalyseFirings(
    const FireRecorder& recorder, const std::vector<std::int64_t>& deadline_ns,
    std::int64_t from, std::int64_t to, std::uint64_t first = 0,
    std::uint64_t count = std::numeric_limits<std::uint64_t>::max()) {
  const std::uint64_t all = deadline_ns.size();
  first = std::min(first, all);
  const std::uint64_t n = std::min(count, all - first);
  std::vector<std::int64_t> first_ns(n, 0);
  std::vector<std::uint32_t> calls(n, 0);
  Firings f;
  for (const auto& log : recorder.logs()) {
    for (const auto& [id, t] : log->records) {
      if (t > to) continue;
      if (id >= all) {
        ++f.stray;
      } else if (id >= first && id - first < n) {
        const std::uint64_t k = id - first;
        if (calls[k]++ != 0) ++f.twice;
        // With more than one worker, an id's callbacks may sit in different
        // logs, so its first is the earliest, not the first one read.
        if (calls[k] == 1 || t < first_ns[k]) first_ns[k] = t;
      }
    }
  }
  for (std::uint64_t k = 0; k < n; ++k) {
    if (calls[k] == 0) {
      ++f.never;
    } else if (first_ns[k] < from) {
      ++f.before;
    } else {
      ++f.fired;
      const std::int64_t deadline = deadline_ns[first + k];
      f.late_ns.push_back(first_ns[k] - deadline);
      if (first_ns[k] < deadline) ++f.early;
      f.last_ns = std::max(f.last_ns, first_ns[k]);
    }
  }
  std::sort(f.late_ns.begin(), f.late_ns.end());
  return f;
}

}  // namespace bench

#endif  // TIMINGWHEEL_BENCH_FIRE_PROBE_H_
