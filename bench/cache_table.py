#!/usr/bin/env python3
"""Prints a Markdown table of the cache workloads C1-C5 (docs/peers.md):
timingwheel::Cache vs Caffeine vs Guava, each cell the median of the runs in
the files with [min-max] and the number of runs, the targets and whether
ours meets them. C1 and C2 get a row per thread count found; C1-str and
C3-str (36-character string keys) and the floors (cache_workloads
--only=floor) get theirs when present.

  bench/cache_table.py bench/results/<date>-cache.jsonl [more.jsonl ...]

The file is what bench/cache_run.sh writes: JSON lines of
bench/cache_workloads (impl "timingwheel") and bench/java/CacheBench.java
(impl "caffeine", "guava", ...), interleaved.
"""

import argparse
import json
import os
import statistics
import sys

IMPLS = [("timingwheel", "timingwheel"), ("caffeine", "Caffeine"),
         ("guava", "Guava")]

# Figures of docs/peers.md ("What the peers measure on the 0.2 workloads").
PEERS_MD = {
    "C1": "Caffeine 1.7 M ops/s (loaded run)",
    "C2": "Caffeine 1.1 M ops/s (loaded run)",
    "C3": "Caffeine 211 B (133 B heap), Guava 203 B (129 B heap)",
    "C4": "Caffeine, Guava: 0 of 100,000",
    "C5": "Caffeine 0.671",
}


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def values(rows, workload, impl, field, threads=None):
    out = []
    for r in rows:
        if (r.get("workload") == workload and r.get("impl") == impl and
                (threads is None or r.get("threads") == threads)):
            v = r.get(field)
            if isinstance(v, (int, float)):
                out.append(float(v))
    return out


def med(vs):
    return statistics.median(vs) if vs else None


def num(v, digits=3):
    if v is None:
        return "n/a"
    a = abs(v)
    if a >= 1e6:
        return "%.2f M" % (v / 1e6)
    if a >= 100 or v == int(v):
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    return "%.*f" % (digits, v)


def cell(vs, scale=1.0, unit="", digits=3):
    if not vs:
        return "n/a"
    vs = [v * scale for v in vs]
    m = med(vs)
    s = "**%s%s**" % (num(m, digits), unit)
    if len(vs) > 1:
        s += " [%s-%s]" % (num(min(vs), digits), num(max(vs), digits))
    return s + " (%d)" % len(vs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    args = ap.parse_args()
    rows = [r for path in args.results for r in load(path)]
    if not rows:
        print("no results in %s" % " ".join(args.results))
        return 1

    dates = sorted(r["date"] for r in rows if "date" in r)
    commits = sorted({r.get("commit", "?") for r in rows})
    machine = rows[0].get("machine", {})
    loads = sorted(r["load1"] for r in rows if isinstance(r.get("load1"),
                                                          (int, float)))
    versions = {}
    for r in rows:
        if r.get("impl_version") and r.get("impl") in ("caffeine", "guava"):
            versions[r["impl"]] = r["impl_version"]
    print("Cache workloads: `%s` (%s to %s; commit %s; %s cores, %s; load1 "
          "%s-%s; Caffeine %s, Guava %s). Each cell: **median** [min-max] "
          "(runs), runs interleaved ours / Caffeine / Guava.\n" % (
              "`, `".join(os.path.basename(p) for p in args.results),
              dates[0] if dates else "?",
              dates[-1] if dates else "?", ", ".join(commits),
              machine.get("cores", "?"), machine.get("cpu", "?"),
              loads[0] if loads else "?", loads[-1] if loads else "?",
              versions.get("caffeine", "?"), versions.get("guava", "?")))

    def v(w, impl, field, threads=None):
        return values(rows, w, impl, field, threads)

    lines = []

    def n_of(w):
        ns = {r.get("n") for r in rows
              if r.get("workload") == w and r.get("n") is not None}
        return ", ".join("{:,}".format(x) for x in sorted(ns)) or "?"

    def row(label, w, field, target, scale=1.0, unit="", digits=3,
            met=None, threads=None):
        cells = [cell(v(w, impl, field, threads), scale, unit, digits)
                 for impl, _ in IMPLS]
        lines.append("| %s | %s | %s | %s |" % (
            label, " | ".join(cells), target, met if met is not None else ""))

    def verdict(ok):
        if ok is None:
            return "n/a"
        return "yes" if ok else "**no**"

    def thread_counts(w):
        return sorted({r.get("threads") for r in rows
                       if r.get("workload") == w and r.get("threads")})

    def ops(w, impl, threads):
        return med(v(w, impl, "ops_per_s", threads))

    # Issue 30's targets: two threads >= 2x Caffeine's, >= 1.8x one thread's;
    # one thread <= 120 ns of CPU an op.
    for w, label in (("C1", "C1 read-mostly"), ("C2", "C2 sliding")):
        counts = thread_counts(w)
        for t in counts:
            ours, caf = ops(w, "timingwheel", t), ops(w, "caffeine", t)
            target, met = "", ""
            if t == 2:
                target = ">= 2x Caffeine, same run"
                met = verdict(None if ours is None or caf is None
                              else ours >= 2 * caf)
                one = ops(w, "timingwheel", 1)
                if one is not None and ours is not None:
                    target += "; >= 1.8x one thread"
                    met += "; %.2fx: %s" % (ours / one,
                                            verdict(ours >= 1.8 * one))
            row("%s, %d thread%s (M ops/s)" % (label, t, "s" if t > 1 else ""),
                w, "ops_per_s", target, scale=1e-6, digits=2, met=met,
                threads=t)
            cpu = med(v(w, "timingwheel", "thread_cpu_ns_per_op", t))
            row("%s CPU per op, %d thread%s, calling threads (ns)" %
                (w, t, "s" if t > 1 else ""), w, "thread_cpu_ns_per_op",
                "<= 120 ns" if t == 1 else "", digits=0, threads=t,
                met=verdict(None if cpu is None else cpu <= 120)
                if t == 1 else "")
        if 2 in counts:
            row("%s CPU per op, 2 threads, whole process (ns)" % w, w,
                "process_cpu_ns_per_op", "", digits=0, threads=2)
        # The floors (no cache around the lookups) go in ours' column.
        for suffix, what in (("-floor-clock", "index probe + entry read + "
                              "clock read"),
                             ("-floor", "the same without the clock read")):
            fv = v(w + suffix, "absl::flat_hash_map + node array",
                   "thread_cpu_ns_per_op")
            if fv:
                lines.append("| %s floor: %s, 1 thread, no cache (ns) | %s |"
                             " %s | |" % (w, what, cell(fv, digits=0),
                                          " | ".join("" for _ in IMPLS)))
    for t in thread_counts("C1-str"):
        ours, caf = ops("C1-str", "timingwheel", t), ops("C1-str", "caffeine",
                                                         t)
        c1 = ops("C1", "timingwheel", t)
        met = ""
        if ours is not None and caf is not None:
            met = "%.2fx Caffeine: %s" % (ours / caf, verdict(ours >= 1.5 * caf))
        if ours is not None and c1 is not None:
            met += "; %.2f of C1: %s" % (ours / c1, verdict(ours >= c1 / 2))
        row("C1-str, 36-char string keys, %d thread%s (M ops/s)" %
            (t, "s" if t > 1 else ""), "C1-str", "ops_per_s",
            ">= 1.5x Caffeine, >= 1/2 of C1" if t == 2 else "", scale=1e-6,
            digits=2, met=met if t == 2 else "", threads=t)
        row("C1-str CPU per op, %d thread%s, calling threads (ns)" %
            (t, "s" if t > 1 else ""), "C1-str", "thread_cpu_ns_per_op", "",
            digits=0, threads=t)
    ours_c3, caf_c3 = med(v("C3", "timingwheel", "rss_bytes_per_entry")), med(
        v("C3", "caffeine", "rss_bytes_per_entry"))
    c3_met = "n/a"
    if ours_c3 is not None and caf_c3 is not None:
        c3_met = "vs this run's Caffeine / 3 (%s B): %s; vs 70 B: %s" % (
            num(caf_c3 / 3, 1), verdict(ours_c3 <= caf_c3 / 3),
            verdict(ours_c3 <= 70))
        c3_met += "; vs 48 B: %s" % verdict(ours_c3 <= 48)
    row("C3 RSS per entry at %s entries (B)" % n_of("C3"), "C3",
        "rss_bytes_per_entry", "<= 1/3 of Caffeine's (~70 B); <= 48 B",
        digits=1, met=c3_met)
    row("C3 live heap per entry, Java (B)", "C3", "live_heap_bytes_per_entry",
        "", digits=1)
    if v("C3-str", "timingwheel", "rss_bytes_per_entry"):
        row("C3-str RSS per entry, 36-char string keys, key included (B)",
            "C3-str", "rss_bytes_per_entry", "", digits=1)
        besides = med(v("C3-str", "timingwheel",
                        "rss_bytes_per_entry_besides_key"))
        row("C3-str the same less one 48 B heap block a key (B)", "C3-str",
            "rss_bytes_per_entry_besides_key", "<= 64 B", digits=1,
            met=verdict(None if besides is None else besides <= 64))
        row("C3-str live heap per entry besides the key, Java (B)", "C3-str",
            "live_heap_bytes_per_entry_besides_key", "", digits=1)
    never = med(v("C4", "timingwheel", "never_notified"))
    p99 = med(v("C4", "timingwheel", "late_ms_p99"))
    row("C4 expired notified within 4 s idle (of %s)" % n_of("C4"), "C4",
        "notified_expired", "all notified",
        met=verdict(None if never is None else never == 0))
    row("C4 lateness p50 (ms)", "C4", "late_ms_p50", "", digits=2)
    row("C4 lateness p99 (ms)", "C4", "late_ms_p99", "<= 20 ms at 10 ms ticks",
        digits=2, met=verdict(None if p99 is None else p99 <= 20))
    row("C4 lateness max (ms)", "C4", "late_ms_max", "", digits=2)
    row("C4 early (must be 0)", "C4", "early", "0",
        met=verdict(None if not v("C4", "timingwheel", "early") else
                    max(v("C4", "timingwheel", "early")) == 0))
    ours_c5, caf_c5 = med(v("C5", "timingwheel", "hit_ratio")), med(
        v("C5", "caffeine", "hit_ratio"))
    row("C5 hit ratio, 100 k of Zipf(0.99) over 10 M", "C5", "hit_ratio",
        ">= Caffeine's - 0.02",
        met=verdict(None if ours_c5 is None or caf_c5 is None
                    else ours_c5 >= caf_c5 - 0.02))
    row("C5 replay rate, 1 thread (M accesses/s)", "C5", "ops_per_s", "",
        scale=1e-6, digits=2)

    print("| workload | " + " | ".join(n for _, n in IMPLS) +
          " | target (peers.md; issue 30) | ours meets it |")
    print("| --- | " + " | ".join("---" for _ in IMPLS) + " | --- | --- |")
    for line in lines:
        print(line)

    notes = []
    # The runs interleave, so the k-th line of a workload for ours and the
    # k-th for Caffeine ran back to back: compare them pairwise.
    for w, label, t in (("C1", "C1, 2 threads", 2), ("C2", "C2, 2 threads", 2),
                        ("C1-str", "C1-str, 2 threads", 2),
                        ("C5", "C5 replay rate", None)):
        ours_r = v(w, "timingwheel", "ops_per_s", t)
        caf_r = v(w, "caffeine", "ops_per_s", t)
        pairs = list(zip(ours_r, caf_r))
        if pairs:
            ratios = sorted(o / c for o, c in pairs if c)
            ahead = sum(1 for o, c in pairs if o >= c)
            notes.append(
                "%s, paired by round (ours, then Caffeine right after): ours "
                "ahead in %d of %d rounds; ours / Caffeine median %.2fx "
                "[%.2f-%.2f]." % (label, ahead, len(pairs),
                                   statistics.median(ratios), ratios[0],
                                   ratios[-1]))
    after = v("C4", "caffeine", "notified_after_one_call") + v(
        "C4", "guava", "notified_after_one_call")
    if after:
        notes.append(
            "C4, Java peers: notifications that came once `cleanUp()` was "
            "called after the idle 4 s: median %s (Caffeine and Guava expire "
            "only during cache calls)." % num(med(after)))
    skipped = [r for r in rows
               if r.get("workload") == "C4" and r.get("skipped")]
    if skipped:
        notes.append("C4 with `Scheduler.systemScheduler()`: %s." %
                     skipped[0]["skipped"])
    if any(r.get("workload") == "C4" and r.get("impl") == "guava"
           for r in rows):
        notes.append("C4, Guava has no per-entry ttl: one fixed "
                     "`expireAfterWrite` of 1.5 s (the middle of [1 s, 2 s]).")
    sums = {r.get("trace_checksum") for r in rows
            if r.get("workload") == "C5"}
    if sums:
        notes.append("C5 trace checksum(s): %s (one value: every side "
                     "replayed the same trace)." %
                     ", ".join(sorted(s for s in sums if s)))
    notes.append("peers.md's earlier single runs: " + "; ".join(
        "%s %s" % (k, PEERS_MD[k]) for k in sorted(PEERS_MD)) + ".")
    print()
    for n in notes:
        print("- " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
