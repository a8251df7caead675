// Durations recorded from many threads into a LatencyHistogram.
#ifndef TIMINGWHEEL_INTERNAL_BASE_LATENCY_RECORDER_H_
#define TIMINGWHEEL_INTERNAL_BASE_LATENCY_RECORDER_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "timingwheel/stats.h"

namespace timingwheel {
namespace internal {

// A thread's durations not yet added to a LatencyRecorder: plain counts, so
// that a worker running a batch of callbacks pays an increment per duration
// and the recorder's atomic operations once per batch.
struct LocalLatencies {
  std::array<std::uint64_t, LatencyHistogram::kBuckets> buckets{};
  std::uint64_t count = 0;
  std::int64_t sum_ns = 0;
  std::int64_t max_ns = 0;

  void Record(std::int64_t ns) {
    ns = std::max<std::int64_t>(ns, 0);
    ++buckets[LatencyHistogram::BucketOf(ns)];
    ++count;
    sum_ns += ns;
    max_ns = std::max(max_ns, ns);
  }
};

// Shared counts any thread adds to (relaxed atomic operations: a snapshot
// may see one field of a concurrent Add before another, never a torn one)
// and any thread reads.
class LatencyRecorder {
 public:
  // Any thread: adds `local` (and leaves it as it was). One atomic add per
  // non-empty bucket, plus count, sum and, when it grows, max.
  void Add(const LocalLatencies& local) {
    if (local.count == 0) return;
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
      if (local.buckets[b] != 0) {
        buckets_[b].fetch_add(local.buckets[b], std::memory_order_relaxed);
      }
    }
    count_.fetch_add(local.count, std::memory_order_relaxed);
    sum_ns_.fetch_add(local.sum_ns, std::memory_order_relaxed);
    std::int64_t max = max_ns_.load(std::memory_order_relaxed);
    while (local.max_ns > max &&
           !max_ns_.compare_exchange_weak(max, local.max_ns,
                                          std::memory_order_relaxed)) {
    }
  }
  // Any thread: one duration.
  void Record(std::int64_t ns) {
    LocalLatencies one;
    one.Record(ns);
    Add(one);
  }

  // Any thread: what has been added so far.
  LatencyHistogram Snapshot() const {
    LatencyHistogram h;
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
      h.buckets[b] = buckets_[b].load(std::memory_order_relaxed);
    }
    h.count = count_.load(std::memory_order_relaxed);
    h.sum = absl::Nanoseconds(sum_ns_.load(std::memory_order_relaxed));
    h.max = absl::Nanoseconds(max_ns_.load(std::memory_order_relaxed));
    return h;
  }

 private:
  std::array<std::atomic<std::uint64_t>, LatencyHistogram::kBuckets> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::int64_t> sum_ns_{0};
  std::atomic<std::int64_t> max_ns_{0};
};

}  // namespace internal
}  // namespace timingwheel

#endif  // TIMINGWHEEL_INTERNAL_BASE_LATENCY_RECORDER_H_
