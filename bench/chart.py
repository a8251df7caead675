#!/usr/bin/env python3
"""Draws our workload results against the peers of docs/peers.md as an SVG
(python3 stdlib only, no gnuplot needed).

  bench/chart.py bench/results/<date>.jsonl [-o bench/results/chart.svg]

One panel per metric of bench/peers.json marked "chart" (W1-W4, W5 p99, W6):
horizontal bars on a log scale (the peers span up to 100x), ours in colour,
peers in grey (a range is drawn as a solid bar to its low end and a lighter
one to its high end; hatched = counts enqueued, not applied, commands), the
target as a dashed red line. Each panel's title says which way is better and
gives ours / target and ours / best peer as "times better".
"""

import argparse
import math
import os
import sys
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchdata  # noqa: E402

PANEL_W, PANEL_H = 560, 200
LABEL_W = 110  # left margin for the series names
COLS = 2
OURS_COLOR = "#1f77b4"
PEER_COLOR = "#8c8c8c"
PEER_LIGHT = "#d0d0d0"
TARGET_COLOR = "#d62728"


def fmt(v):
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.1:
        return "%.2f" % v
    return "%.2g" % v


def ratio_text(r):
    if r is None:
        return "?"
    if r == float("inf"):
        return "inf"
    return ("%.2fx" % r) if r < 10 else ("%.0fx" % r)


def panel(metric, results, by_id, x0, y0):
    """SVG elements of one panel with its top-left corner at (x0, y0)."""
    out = []
    unit = metric["unit"]
    v = benchdata.ours(results, metric)
    t = benchdata.target(results, metric, by_id)
    rows = [("ours", v, v, "")] if v is not None else [("ours", None, None,
                                                         "no result")]
    for name, lo, hi, note in benchdata.peer_ranges(metric):
        rows.append((name, lo, hi, note))
    for name in benchdata.load_peers()["peers"]:
        if name not in [r[0] for r in rows]:
            rows.append((name, None, None, "n/a"))

    values = [x for r in rows for x in (r[1], r[2]) if x]
    if t:
        values.append(t)
    lo_v = min(values) if values else 1
    hi_v = max(values) if values else 10
    d_lo = math.floor(math.log10(lo_v))
    d_hi = math.ceil(math.log10(hi_v))
    if d_hi - d_lo < 2:
        d_hi = d_lo + 2
    plot_x = x0 + LABEL_W
    plot_w = PANEL_W - LABEL_W - 70
    top = y0 + 44
    row_h = (PANEL_H - 44 - 26) / len(rows)

    def X(val):
        return plot_x + (math.log10(val) - d_lo) / (d_hi - d_lo) * plot_w

    best = benchdata.best_peer(metric)
    better = "higher is better" if metric["better"] == "higher" else \
        "lower is better"
    out.append('<text x="%d" y="%d" class="title">%s (%s, %s)</text>' % (
        x0, y0 + 16, escape(metric["label"]), escape(unit or "count"), better))
    sub = []
    if t:
        sub.append("%s target (%s)" % (
            ratio_text(benchdata.advantage(metric, v, t)),
            metric.get("target_text", "")))
    if best:
        sub.append("%s best peer (%s)" % (
            ratio_text(benchdata.advantage(metric, v, best[1])), best[0]))
    out.append('<text x="%d" y="%d" class="sub">ours: %s = %s</text>' % (
        x0, y0 + 32, escape(fmt(v) + " " + unit if v is not None else "n/a"),
        escape("; ".join(sub))))

    # Decade grid.
    for d in range(d_lo, d_hi + 1):
        gx = X(10 ** d)
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" '
                   'class="grid"/>' % (gx, top - 2, gx, top + row_h * len(rows)))
        out.append('<text x="%.1f" y="%.1f" class="tick">%s</text>' % (
            gx, top + row_h * len(rows) + 13, escape(fmt(10 ** d))))
    base = X(10 ** d_lo)
    for i, (name, lo, hi, note) in enumerate(rows):
        y = top + i * row_h
        bh = row_h * 0.7
        out.append('<text x="%d" y="%.1f" class="%s">%s</text>' % (
            x0 + LABEL_W - 6, y + bh * 0.75,
            "lab ours" if name == "ours" else "lab", escape(name)))
        if lo is None:
            out.append('<text x="%.1f" y="%.1f" class="val">%s</text>' % (
                base + 4, y + bh * 0.75, escape(note)))
            continue
        color = OURS_COLOR if name == "ours" else PEER_COLOR
        fill = "url(#hatch)" if note == "enqueued" else color
        if hi > lo:
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
                       'fill="%s"/>' % (base, y, X(hi) - base, bh,
                                        PEER_LIGHT if note != "enqueued"
                                        else "url(#hatch)"))
        out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
                   'fill="%s"/>' % (base, y, max(1, X(lo) - base), bh, fill))
        label = fmt(lo) if lo == hi else "%s-%s" % (fmt(lo), fmt(hi))
        if note:
            label += " (%s)" % note
        out.append('<text x="%.1f" y="%.1f" class="val">%s</text>' % (
            X(hi) + 4, y + bh * 0.75, escape(label)))
    if t:
        tx = X(t)
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" '
                   'class="target"/>' % (tx, top - 6, tx,
                                         top + row_h * len(rows)))
        out.append('<text x="%.1f" y="%.1f" class="tlab">target</text>' % (
            tx + 2, top - 6))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("-o", "--output")
    ap.add_argument("--micro", help="ignored; accepted for run.sh symmetry")
    ap.add_argument("--peers")
    args = ap.parse_args()
    peers = benchdata.load_peers(args.peers)
    results = benchdata.load_results(args.results)
    by_id = {m["id"]: m for m in peers["metrics"]}
    metrics = [m for m in peers["metrics"] if m.get("chart")]
    rows = (len(metrics) + COLS - 1) // COLS
    width = COLS * PANEL_W + 20
    height = rows * PANEL_H + 80
    first = results[0] if results else {}
    machine = first.get("machine", {})
    head = ("timingwheel vs peers (%s, %s cores %s, commit %s, n=%s)" % (
                first.get("date", "?"), machine.get("cores", "?"),
                machine.get("cpu", "?"), first.get("commit", "?"),
                first.get("n", "?")))
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'viewBox="0 0 %d %d" font-family="sans-serif">' % (width, height,
                                                           width, height),
        '<defs><pattern id="hatch" width="6" height="6" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#eeeeee"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="%s" stroke-width="3"/>'
        '</pattern></defs>' % PEER_COLOR,
        '<style>.title{font-size:13px;font-weight:bold}'
        '.sub{font-size:11px;fill:#333}.lab{font-size:11px;text-anchor:end}'
        '.ours{font-weight:bold;fill:%s}.val{font-size:10px;fill:#222}'
        '.tick{font-size:9px;fill:#666;text-anchor:middle}'
        '.grid{stroke:#e4e4e4;stroke-width:1}'
        '.target{stroke:%s;stroke-width:2;stroke-dasharray:5,3}'
        '.tlab{font-size:9px;fill:%s}</style>' % (OURS_COLOR, TARGET_COLOR,
                                                 TARGET_COLOR),
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="10" y="20" style="font-size:14px;font-weight:bold">%s'
        '</text>' % escape(head),
        '<text x="10" y="36" style="font-size:11px">Log scale. Peers from '
        'docs/peers.md; all figures good to ~2x. Ratios: times better than '
        'target / best peer (&gt; 1 = better).</text>',
        '<text x="10" y="50" style="font-size:11px">Hatched: the peer counts '
        'enqueued, not applied, commands; light grey: top of a peer\'s '
        'range; red dashed: target (W1 2 producers: our 1-producer '
        'figure).</text>',
    ]
    for i, metric in enumerate(metrics):
        x0 = 10 + (i % COLS) * PANEL_W
        y0 = 65 + (i // COLS) * PANEL_H
        out.extend(panel(metric, results, by_id, x0, y0))
    out.append("</svg>")
    path = args.output or os.path.join(benchdata.HERE, "results", "chart.svg")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s" % path)


if __name__ == "__main__":
    main()
