// Stats and CacheStats in the Prometheus text exposition format.
#include "timingwheel/prometheus.h"

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "timingwheel/stats.h"

namespace timingwheel {
namespace {

// A number as Prometheus reads it: integers exactly, other values with all
// the digits a double holds.
std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Writes metrics of one prefix and one label set.
class Writer {
 public:
  Writer(std::string_view prefix, std::string_view labels)
      : prefix_(prefix), labels_(labels) {}

  void Counter(std::string_view name, std::string_view help,
               std::uint64_t value) {
    const std::string full = Join({prefix_, "_", name, "_total"});
    Header(full, help, "counter");
    Sample(full, {}, std::to_string(value));
  }
  void Gauge(std::string_view name, std::string_view help, double value) {
    const std::string full = Join({prefix_, "_", name});
    Header(full, help, "gauge");
    Sample(full, {}, Number(value));
  }
  // In seconds, as Prometheus names durations; empty buckets above the last
  // one holding anything are left out (the +Inf bucket carries the count).
  void Histogram(std::string_view name, std::string_view help,
                 const LatencyHistogram& h) {
    const std::string full = Join({prefix_, "_", name, "_seconds"});
    Header(full, help, "histogram");
    int last = 0;
    for (int b = 0; b < LatencyHistogram::kBuckets - 1; ++b) {
      if (h.buckets[b] != 0) last = b;
    }
    std::uint64_t cumulative = 0;
    for (int b = 0; b <= last; ++b) {
      cumulative += h.buckets[b];
      char le[32];
      std::snprintf(le, sizeof(le), "le=\"%g\"",
                    absl::ToDoubleSeconds(LatencyHistogram::UpperBound(b)));
      Sample(full + "_bucket", le, std::to_string(cumulative));
    }
    Sample(full + "_bucket", "le=\"+Inf\"", std::to_string(h.count));
    Sample(full + "_sum", {}, Number(absl::ToDoubleSeconds(h.sum)));
    Sample(full + "_count", {}, std::to_string(h.count));
  }

  std::string Take() { return std::move(out_); }

  static std::string Join(std::initializer_list<std::string_view> parts) {
    std::string s;
    for (std::string_view p : parts) s.append(p);
    return s;
  }

 private:
  void Header(std::string_view name, std::string_view help,
              std::string_view type) {
    Append({"# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n"});
  }
  void Sample(std::string_view name, std::string_view label,
              std::string_view value) {
    Append({name});
    if (!labels_.empty() || !label.empty()) {
      Append({"{", labels_, !labels_.empty() && !label.empty() ? "," : "",
              label, "}"});
    }
    Append({" ", value, "\n"});
  }

  void Append(std::initializer_list<std::string_view> parts) {
    for (std::string_view p : parts) out_.append(p);
  }

  const std::string_view prefix_;
  const std::string_view labels_;
  std::string out_;
};

}  // namespace

std::string PrometheusText(const Stats& s, std::string_view prefix,
                           std::string_view labels) {
  Writer w(prefix, labels);
  w.Gauge("pending_timers", "Timers in the wheel now.",
          static_cast<double>(s.pending));
  w.Counter("ticks", "Ticks the wheel has processed.", s.ticks);
  w.Counter("commands_applied", "Set, move and remove commands applied.",
            s.applied);
  w.Counter("fired", "Timers handed to the execute callback.", s.fired);
  w.Counter("moved", "MoveTimer calls that found their key.", s.moved);
  w.Counter("removed", "RemoveTimer calls that found their key.", s.removed);
  w.Counter("superseded", "SetTimer calls that replaced a pending timer.",
            s.superseded);
  w.Counter("drained", "Timers handed to a Drain function.", s.drained);
  w.Counter("callback_exceptions", "Exceptions caught from callbacks.",
            s.callback_exceptions);
  w.Counter("refiled", "Timers filed again as their deadline neared.",
            s.refiled);
  w.Gauge("memory_bytes", "Bytes the wheel's timers, index and slots hold.",
          static_cast<double>(s.memory_bytes));
  w.Histogram("fire_lateness",
              "Callback start minus the time of the tick the timer was due "
              "on.",
              s.fire_lateness);
  w.Gauge("commands_queued", "Commands queued for the loop (approximate).",
          static_cast<double>(s.commands_queued));
  w.Gauge("loop_lag_seconds",
          "How long the oldest queued command has waited, at most.",
          absl::ToDoubleSeconds(s.loop_lag));
  w.Gauge("lag_limit_commands",
          "Commands max_lag allows in the queue now (0: no max_lag).",
          static_cast<double>(s.lag_limit_commands));
  w.Gauge("callbacks_pending",
          "Fired timers whose execute callback has not returned.",
          static_cast<double>(s.callbacks_pending));
  return w.Take();
}

std::string PrometheusText(const CacheStats& s, std::string_view prefix,
                           std::string_view labels) {
  Writer w(prefix, labels);
  w.Counter("hits", "Get and GetOrLoad calls that found a live value.", s.hits);
  w.Counter("misses", "Get and GetOrLoad calls that found none.", s.misses);
  w.Gauge("hit_ratio", "hits / (hits + misses) since creation.", s.hit_ratio());
  w.Counter("loads", "GetOrLoad load() calls that returned a value.", s.loads);
  w.Counter("load_failures", "GetOrLoad load() calls that failed.",
            s.load_failures);
  w.Histogram("load_latency", "How long GetOrLoad's load() calls took.",
              s.load_latency);
  w.Counter("expired", "Values removed because their time to live ran out.",
            s.expired);
  w.Counter("evicted", "Values evicted to keep max_entries.", s.evicted);
  w.Counter("deleted", "Live values removed by Delete or Clear.", s.deleted);
  w.Counter("replaced", "Live values replaced by a Set or a load.", s.replaced);
  w.Counter("listener_exceptions",
            "Exceptions caught from the removal listener.",
            s.listener_exceptions);
  w.Gauge("entries", "Entries present.", static_cast<double>(s.size));
  return w.Take();
}

}  // namespace timingwheel
