#!/usr/bin/env python3
"""Prints, for a results file of several builds (bench/compare.sh), a
Markdown table of each figure's median [min-max] per build (by commit, and
cold or warm: the "warm" field, or for lines from before it prefault_mb > 0),
one row per workload line.

  bench/compare.py bench/results/<date>-compare.jsonl
"""

import json
import statistics
import sys

# The figures worth comparing, in the order shown; absent ones are skipped.
FIGURES = [
    "ops_per_s", "producer_cpu_ns_per_op", "loop_cpu_ns_per_op",
    "rss_bytes_per_timer", "wheel_bytes_per_timer", "wall_seconds",
    "late_ms_p50", "late_ms_p99", "late_ms_max", "early", "fired_twice",
    "never_fired", "wheel_cpu_ns_per_timer", "producer_cpu_ns_per_timer",
    "cpu_s_per_s_empty", "cpu_s_per_s_full", "cpu_s_per_s_spread",
    "loop_cpu_s_per_s_spread", "worker_cpu_s_per_s_spread",
    "loop_cpu_us_per_firing_tick", "worker_cpu_us_per_firing_tick",
    "sleeper_cpu_us_per_wake", "worker_cpu_us_per_wake",
    "touches_per_s", "loop_cpu_s_per_s", "loop_cpu_ns_per_touch",
    "entries_per_s", "seconds",
    "rss_bytes_per_pending", "fired", "cpu_us_per_fired",
    "loop_cpu_us_per_fired", "retained", "retained_before_trim",
    "rss_peak_mib", "rss_after_mib",
    # W4-str, W5-twice.
    "rss_bytes_per_timer_besides_key", "submit_seconds", "minor_faults",
    # The cache workloads (cache_workloads).
    "thread_cpu_ns_per_op", "process_cpu_ns_per_op", "rss_bytes_per_entry",
    "hit_ratio", "notified_expired", "never_notified",
]


def key_of(line):
    # presized 0 is the default, and a line without the field counts as 0.
    return (line.get("workload"), line.get("name"), line.get("producers"),
            line.get("execute_workers"), line.get("presized") or None)


def fmt(v):
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e6:
        return "%.2f M" % (v / 1e6)
    if a >= 100:
        return "%.0f" % v
    if a >= 1:
        return "%.2f" % v
    return "%.2g" % v


def main():
    rows = {}
    builds = []
    loads = []
    for raw in open(sys.argv[1]):
        raw = raw.strip()
        if not raw.startswith("{"):
            continue
        line = json.loads(raw)
        warm = line.get("warm", (line.get("prefault_mb") or 0) > 0)
        build = "%s %s" % (line.get("commit", "?"), "warm" if warm else "cold")
        if build not in builds:
            builds.append(build)
        if "load1" in line:
            loads.append(line["load1"])
        for fig in FIGURES:
            if fig == "seconds" and line.get("workload") != "drain":
                continue
            # null: a figure the run does not have (W8-lag's RSS).
            if line.get(fig) is not None:
                rows.setdefault((key_of(line), fig), {}).setdefault(
                    build, []).append(line[fig])
    print("| workload | figure | " + " | ".join(builds) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in builds) + " |")
    for (key, fig), per_build in rows.items():
        label = " ".join(str(k) for k in key if k is not None)
        cells = []
        for b in builds:
            v = per_build.get(b)
            if not v:
                cells.append("")
            else:
                cells.append("%s [%s-%s] (%d)" % (fmt(statistics.median(v)),
                                                  fmt(min(v)), fmt(max(v)),
                                                  len(v)))
        print("| %s | %s | %s |" % (label, fig, " | ".join(cells)))
    if loads:
        print("\nload1 during the runs: median %.2f, range %.2f-%.2f" %
              (statistics.median(loads), min(loads), max(loads)))


if __name__ == "__main__":
    main()
