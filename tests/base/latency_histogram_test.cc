// LatencyHistogram and LatencyRecorder: durations land in the bucket whose
// bounds hold them, quantiles answer with that bucket's upper bound (never
// past max), and what several threads add is all there.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "timingwheel/internal/base/latency_recorder.h"
#include "timingwheel/stats.h"

namespace timingwheel {
namespace internal {
namespace {

using H = LatencyHistogram;

TEST(LatencyHistogram, BucketsAreLogSpacedMicroseconds) {
  EXPECT_EQ(H::BucketOf(-5), 0);
  EXPECT_EQ(H::BucketOf(0), 0);
  EXPECT_EQ(H::BucketOf(999), 0);
  EXPECT_EQ(H::BucketOf(1000), 1);  // [1 us, 2 us)
  EXPECT_EQ(H::BucketOf(1999), 1);
  EXPECT_EQ(H::BucketOf(2000), 2);  // [2 us, 4 us)
  EXPECT_EQ(H::BucketOf(4000), 3);
  EXPECT_EQ(H::BucketOf(1'000'000), 10);  // 1 ms: [512 us, 1024 us)
  EXPECT_EQ(H::BucketOf(std::int64_t{1} << 62), H::kBuckets - 1);
  for (int b = 1; b < H::kBuckets - 1; ++b) {
    const std::int64_t lower = std::int64_t{1000} << (b - 1);
    const std::int64_t upper = absl::ToInt64Nanoseconds(H::UpperBound(b));
    EXPECT_EQ(upper, 2 * lower);
    EXPECT_EQ(H::BucketOf(lower), b);
    EXPECT_EQ(H::BucketOf(upper - 1), b);
    EXPECT_EQ(H::BucketOf(upper), b + 1);
  }
  EXPECT_EQ(H::UpperBound(H::kBuckets - 1), absl::InfiniteDuration());
}

TEST(LatencyHistogram, QuantilesAreBucketBoundsCappedAtMax) {
  LatencyRecorder r;
  EXPECT_EQ(r.Snapshot().Quantile(0.5), absl::ZeroDuration());
  // 98 durations of 1.5 ms (bucket [1.024, 2.048) ms), one of 40 ms and one
  // of 50 ms (both in [32.8, 65.5) ms).
  for (int i = 0; i < 98; ++i) r.Record(1'500'000);
  r.Record(40'000'000);
  r.Record(50'000'000);
  const H h = r.Snapshot();
  EXPECT_EQ(h.count, 100u);
  EXPECT_EQ(h.buckets[H::BucketOf(1'500'000)], 98u);
  EXPECT_EQ(h.buckets[H::BucketOf(40'000'000)], 2u);
  EXPECT_EQ(h.sum, absl::Nanoseconds(98 * 1'500'000 + 90'000'000));
  EXPECT_EQ(h.max, absl::Milliseconds(50));
  EXPECT_EQ(h.Quantile(0.5), absl::Microseconds(2048));
  EXPECT_EQ(h.Quantile(0.98), absl::Microseconds(2048));
  EXPECT_EQ(h.Quantile(0.99), absl::Milliseconds(50));  // bound 65.5, max 50
  EXPECT_EQ(h.Quantile(1.0), absl::Milliseconds(50));
}

TEST(LatencyRecorder, ConcurrentAddsAreAllCounted) {
  LatencyRecorder r;
  constexpr int kThreads = 4, kBatches = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < kBatches; ++i) {
        LocalLatencies local;
        local.Record(1000 * (t + 1));  // 1-4 us
        local.Record(1'000'000 + t);   // ~1 ms
        r.Add(local);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const H h = r.Snapshot();
  EXPECT_EQ(h.count, std::uint64_t{2} * kThreads * kBatches);
  std::uint64_t in_buckets = 0;
  for (std::uint64_t c : h.buckets) in_buckets += c;
  EXPECT_EQ(in_buckets, h.count);
  EXPECT_EQ(h.buckets[H::BucketOf(1'000'000)],
            std::uint64_t{kThreads} * kBatches);
  EXPECT_EQ(h.max, absl::Nanoseconds(1'000'000 + kThreads - 1));
  std::int64_t sum = 0;
  for (int t = 0; t < kThreads; ++t) sum += 1000 * (t + 1) + 1'000'000 + t;
  EXPECT_EQ(h.sum, absl::Nanoseconds(sum * kBatches));
}

}  // namespace
}  // namespace internal
}  // namespace timingwheel
