// Stats and CacheStats as Prometheus text: what a /metrics endpoint serves.
#ifndef TIMINGWHEEL_PROMETHEUS_H_
#define TIMINGWHEEL_PROMETHEUS_H_

#include <string>
#include <string_view>

#include "timingwheel/stats.h"

namespace timingwheel {

// A snapshot in the Prometheus text exposition format (version 0.0.4):
// each counter as `<prefix>_<name>_total`, each gauge as `<prefix>_<name>`,
// each LatencyHistogram as a histogram in seconds (`_bucket{le="..."}`,
// cumulative, then `_sum` and `_count`), with # HELP and # TYPE lines.
// `labels`, when not empty, goes inside every sample's braces as it is
// (e.g. `wheel="sessions"`), so one process can export several wheels.
// Allocates the string; no other cost. `prefix` must be a valid metric
// name (letters, digits, '_', ':').
std::string PrometheusText(const Stats& stats,
                           std::string_view prefix = "timingwheel",
                           std::string_view labels = {});
std::string PrometheusText(const CacheStats& stats,
                           std::string_view prefix = "timingwheel_cache",
                           std::string_view labels = {});

}  // namespace timingwheel

#endif  // TIMINGWHEEL_PROMETHEUS_H_
