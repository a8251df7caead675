#!/usr/bin/env python3
"""Prints a Markdown table of our workload results vs the peers of
docs/peers.md vs the targets, with ratios (for the README).

  bench/table.py bench/results/<date>.jsonl [--micro=<date>-micro.json]
                 [--warm]

The workloads run cold by default (nothing faulted in ahead, as a user's
process); `workloads --warm` lines come from a process with 1 GiB of heap
faulted in first. The table takes the cold lines of the file, or with
--warm the warm ones (all lines, with a note, if the file has none of that
kind), so that the two are never mixed in one median.

"x target" and "x best peer" say how many times better ours is (> 1:
better; for lower-is-better metrics the ratio is inverted so that > 1 still
means better). Peer figures that count only enqueued commands are shown but
not used as the best peer: our figures count applied commands.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdata  # noqa: E402


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    a = abs(v)
    if a == 0:
        s = "0"
    elif a >= 100:
        s = "%.0f" % v
    elif a >= 10:
        s = "%.1f" % v
    elif a >= 0.1:
        s = "%.2f" % v
    else:
        s = "%.2g" % v
    return s + (" " + unit if unit else "")


def fmt_ratio(r):
    if r is None:
        return ""
    if r == float("inf"):
        return "inf"
    return ("%.2fx" % r) if r < 10 else ("%.0fx" % r)


def peer_cell(metric, name):
    fig = (metric.get("peers") or {}).get(name)
    if not fig:
        return "n/a" if metric.get("peers") else ""
    lo, hi = fig[0], fig[1]
    s = fmt(lo) if lo == hi else "%s-%s" % (fmt(lo), fmt(hi))
    if len(fig) > 2:
        s += " (%s)" % fig[2]
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--micro")
    ap.add_argument("--peers")
    ap.add_argument("--warm", action="store_true",
                    help="the warm lines (workloads --warm), not the cold")
    args = ap.parse_args()
    peers = benchdata.load_peers(args.peers)
    results = benchdata.load_results(args.results)
    mode = "warm" if args.warm else "cold"
    chosen = [r for r in results if benchdata.is_warm(r) == args.warm]
    if chosen:
        results = chosen
    elif results:
        mode = "no %s lines in the file: all lines" % mode
    by_id = {m["id"]: m for m in peers["metrics"]}

    first = results[0] if results else {}
    m = first.get("machine", {})
    runs = max(len([r for r in results if r.get("workload") == w])
               for w in ("W4", "W6", "W7", "W8", "W9")) if results else 0
    loads = sorted(r["load1"] for r in results if "load1" in r)
    print("Results: `%s` (%s; %s, %s cores, %s, commit %s, n=%s; median of "
          "%s runs, min-max in brackets; load1 %s-%s)\n" % (
              os.path.basename(args.results), mode, first.get("date", "?"),
              m.get("cores", "?"), m.get("cpu", "?"), first.get("commit", "?"),
              first.get("n", "?"), runs, loads[0] if loads else "?",
              loads[-1] if loads else "?"))
    names = peers["peers"]
    print("| workload | ours | " + " | ".join(names) +
          " | target | x target | x best peer |")
    print("| --- | --- | " + " | ".join("---" for _ in names) +
          " | --- | --- | --- |")
    for metric in peers["metrics"]:
        unit = metric["unit"]
        v = benchdata.ours(results, metric)
        if metric.get("field2"):
            r = benchdata.select(results, metric["select"])
            ours_s = "%s / %s" % (r.get(metric["field"]), r.get(
                metric["field2"])) if r else "n/a"
            t_ratio = ""
        else:
            ours_s = "**%s**" % fmt(v, unit)
            runs = benchdata.values(results, metric)
            if len(runs) > 1:
                ours_s += " (%s-%s)" % (fmt(min(runs)), fmt(max(runs)))
            t = benchdata.target(results, metric, by_id)
            t_ratio = fmt_ratio(benchdata.advantage(metric, v, t)) if t else ""
        best = benchdata.best_peer(metric)
        p_ratio = ""
        if best and v is not None and not metric.get("field2"):
            p_ratio = "%s (%s)" % (
                fmt_ratio(benchdata.advantage(metric, v, best[1])), best[0])
        print("| %s | %s | %s | %s | %s | %s |" % (
            metric["label"], ours_s,
            " | ".join(peer_cell(metric, n) for n in names),
            metric.get("target_text", ""), t_ratio, p_ratio))

    extra = benchdata.median_run(results, {"workload": "W6"},
                                 "cpu_s_per_s_spread")
    if extra and extra.get("cpu_s_per_s_spread") is not None:
        print("\nW6 extension: 1 M timers spread uniformly over the next hour "
              "(not in peers.md): %s CPU s/s." %
              fmt(extra["cpu_s_per_s_spread"]))
    w5 = benchdata.median_run(
        results, {"workload": "W5", "execute_workers": 1, "presized": 0},
        "late_ms_p99")
    if w5:
        print("\nW5 details (1 worker): all callbacks done %.3f s after the "
              "first submission; lateness p50 %s, p99 %s, max %s; early %s, "
              "twice %s." % (w5["wall_seconds"], fmt(w5["late_ms_p50"], "ms"),
                             fmt(w5["late_ms_p99"], "ms"),
                             fmt(w5["late_ms_max"], "ms"), w5["early"],
                             w5["fired_twice"]))
    w5b = benchdata.median_run(
        results, {"workload": "W5", "execute_workers": 2, "presized": 0},
        "late_ms_p99")
    if w5b:
        print("With 2 execute workers: done after %.3f s; p50 %s, p99 %s, "
              "max %s; early %s, twice %s." % (
                  w5b["wall_seconds"], fmt(w5b["late_ms_p50"], "ms"),
                  fmt(w5b["late_ms_p99"], "ms"), fmt(w5b["late_ms_max"], "ms"),
                  w5b["early"], w5b["fired_twice"]))

    twice = [benchdata.median_run(
        results, {"workload": "W5-twice", "round": r}, "late_ms_p99")
        for r in (1, 2)]
    if all(twice):
        print("\nW5-twice (one wheel, the second burst %d ms after the first "
              "has fired): p99 %s then %s (p50 %s, %s; max %s, %s); minor "
              "page faults %s then %s; early %s, %s; twice %s, %s; lost %s, "
              "%s." % (
                  twice[1]["gap_ms"], fmt(twice[0]["late_ms_p99"], "ms"),
                  fmt(twice[1]["late_ms_p99"], "ms"),
                  fmt(twice[0]["late_ms_p50"], "ms"),
                  fmt(twice[1]["late_ms_p50"], "ms"),
                  fmt(twice[0]["late_ms_max"], "ms"),
                  fmt(twice[1]["late_ms_max"], "ms"),
                  twice[0]["minor_faults"], twice[1]["minor_faults"],
                  twice[0]["early"], twice[1]["early"],
                  twice[0]["fired_twice"], twice[1]["fired_twice"],
                  twice[0]["never_fired"], twice[1]["never_fired"]))

    # String keys (36 characters): each figure beside the uint64_t one.
    str_rows = []
    for w in ("W1", "W2", "W3"):
        s_run = benchdata.median_run(
            results, {"workload": w + "-str", "producers": 1}, "ops_per_s")
        u_run = benchdata.median_run(
            results, {"workload": w, "producers": 1, "batch": 0}, "ops_per_s")
        if s_run:
            str_rows.append("%s %s (uint64_t: %s)" % (
                s_run["workload"], fmt(s_run["ops_per_s"] / 1e6, "M/s"),
                fmt(u_run["ops_per_s"] / 1e6, "M/s") if u_run else "n/a"))
    w4s = benchdata.median_run(results, {"workload": "W4-str"},
                               "rss_bytes_per_timer")
    if w4s:
        str_rows.append("W4-str %s RSS per timer, %s besides the key's own "
                        "%s" % (fmt(w4s["rss_bytes_per_timer"], "B"),
                                fmt(w4s["rss_bytes_per_timer_besides_key"],
                                    "B"),
                                fmt(w4s.get("key_own_bytes",
                                            w4s.get("key_heap_bytes")),
                                    "B")))
    for sel, label in (({"workload": "W5-str"}, "W5-str"),
                       ({"workload": "W5-twice-str", "round": 1},
                        "W5-twice-str round 1"),
                       ({"workload": "W5-twice-str", "round": 2},
                        "W5-twice-str round 2")):
        r = benchdata.median_run(results, sel, "late_ms_p99")
        if r:
            str_rows.append("%s p99 %s (early %s, twice %s, lost %s)" % (
                label, fmt(r["late_ms_p99"], "ms"), r["early"],
                r["fired_twice"], r["never_fired"]))
    if str_rows:
        print("\nString keys (36 characters, 1 producer, applied): %s." %
              "; ".join(str_rows))

    # W8 and W9 have sizes of their own (--w8_n, --w9_n), not the header's n.
    w8 = benchdata.median_run(results, {"workload": "W8"}, "cpu_us_per_fired")
    if w8:
        print("\nW8 details (%d timers, log-uniform 10 ms-24 h, 1 ms wheel): "
              "%s applied; %s RSS per timer (%s per timer still pending); "
              "in the %.0f s after the last was applied %d fired (%d before): "
              "%s process CPU each, of which the loop thread %s; lateness "
              "p50 %s, p99 %s, max %s; early %s, twice %s." % (
                  w8["n"], fmt(w8["ops_per_s"] / 1e6, "M/s"),
                  fmt(w8["rss_bytes_per_timer"], "B"),
                  fmt(w8["rss_bytes_per_pending"], "B"),
                  w8["window_seconds"], w8["fired"],
                  w8["fired_before_window"],
                  fmt(w8["cpu_us_per_fired"], "us"),
                  fmt(w8["loop_cpu_us_per_fired"], "us"),
                  fmt(w8["late_ms_p50"], "ms"), fmt(w8["late_ms_p99"], "ms"),
                  fmt(w8["late_ms_max"], "ms"), w8["early"],
                  w8["fired_twice"]))
    w9 = benchdata.median_run(results, {"workload": "W9"}, "retained")
    if w9:
        print("\nW9 details (%d timers set and removed in chunks of %d, fresh "
              "process): RSS before %s, at the peak %s, after %s idle and "
              "malloc_trim %s (%s before the trim): retained %s." % (
                  w9["n"], w9["chunk"], fmt(w9["rss_before_mib"], "MiB"),
                  fmt(w9["rss_peak_mib"], "MiB"),
                  fmt(w9["idle_seconds"], "s"),
                  fmt(w9["rss_after_mib"], "MiB"),
                  fmt(w9["rss_idle_mib"], "MiB"), fmt(w9["retained"])))

    if args.micro and os.path.exists(args.micro):
        micro, ctx = benchdata.load_micro(args.micro)
        print("\nMicro-benchmarks of the Wheel core alone (`%s`, CPU time; "
              "/1024 = cache-resident, /1048576 = 1 Mi timers):\n" %
              os.path.basename(args.micro))
        print("| benchmark | ns per op | M ops/s |")
        print("| --- | --- | --- |")
        for name, ns, b in micro:
            print("| %s | %s | %s |" % (
                name, fmt(ns), fmt(1e3 / ns if ns else None)))
    print("\nRatios: > 1 means ours is better (lower-is-better metrics are "
          "inverted). Figures are good to about 2x on this noisy machine.")


if __name__ == "__main__":
    main()
