#!/usr/bin/env python3
"""Turns soak's CSV into one SVG: RSS and fire lateness over time.

Standard library only (no matplotlib on the build machines), so the SVG is
written by hand. Two panels share the time axis: RSS on top, lateness
(p99 bold, p50 and the period max faint) below. RSS starts at zero so that
"flat" is judged against the real scale; lateness is on a log scale from 1 ms
so that both the usual tick-sized lateness and a rare stall stay readable.

  soak/chart.py docs/soak.csv docs/soak.svg [--title=...] [--note=...]
                [--warmup_s=120] [--interval_ms=10]

The default title names the machine (CPU model, nproc) and the CSV's date.
"""

import csv
import datetime
import html
import math
import os
import sys

W, H = 960, 560
LEFT, RIGHT = 80, 150
PANEL_TOP = (70, 320)  # y of each panel's top edge
PANEL_H = 190


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, nproc {os.cpu_count()}"


def nice_ceiling(v):
    """The smallest 1/2/2.5/5 x 10^k at or above v (an axis top)."""
    if v <= 0:
        return 1.0
    exp = math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if m * 10**exp >= v:
            return m * 10**exp
    return 10 ** (exp + 1)


def fmt(v):
    return f"{v:g}"


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--"))
    if len(args) != 2:
        sys.exit(__doc__)
    src, dst = args
    warmup_s = float(opts.get("warmup_s", 120))
    interval_ms = float(opts.get("interval_ms", 10))
    with open(src) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if not rows:
        sys.exit(f"{src}: no rows")
    date = datetime.datetime.fromtimestamp(os.path.getmtime(src)).strftime(
        "%Y-%m-%d")
    title = opts.get("title", f"timingwheel soak - {machine()} - {date}")

    t = [r["elapsed_s"] / 60 for r in rows]  # minutes read better
    step = nice_ceiling(max(t) / 8)
    t_max = math.ceil(max(t) / step - 1e-9) * step
    plot_w = W - LEFT - RIGHT

    def x(v):
        return LEFT + v / t_max * plot_w

    out = []
    add = out.append
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">')
    add(f'<rect width="{W}" height="{H}" fill="white"/>')
    add(f'<text x="{W / 2}" y="28" text-anchor="middle" font-size="16" '
        f'font-weight="bold">{html.escape(title)}</text>')
    last = rows[-1]
    sub = (f"{len(rows)} reports, {t[-1]:.1f} min; "
           f"{last['applied_ops_s']:.0f} ops/s applied at the end, "
           f"early fires {last['early_total']:.0f}, callback exceptions "
           f"{last['callback_exceptions']:.0f}")
    if "note" in opts:
        sub = f"{opts['note']}; {sub}"
    add(f'<text x="{W / 2}" y="48" text-anchor="middle" fill="#555">'
        f'{html.escape(sub)}</text>')

    def panel(top, label, series, y_top, marks=(), log_from=None):
        """series: (values, colour, width, dash, legend). log_from: bottom of
        a log scale (then the grid is 1-2-5 per decade), else linear from 0."""

        def y(v):
            v = min(v, y_top)
            if log_from is None:
                return top + PANEL_H - v / y_top * PANEL_H
            v = max(v, log_from)
            return top + PANEL_H - (math.log10(v / log_from) /
                                    math.log10(y_top / log_from) * PANEL_H)

        # Warm-up shading: memory grows there by design (the wheel fills).
        wx = x(min(warmup_s / 60, t_max))
        add(f'<rect x="{LEFT}" y="{top}" width="{wx - LEFT:.1f}" '
            f'height="{PANEL_H}" fill="#f2f2f2"/>')
        add(f'<text x="{LEFT + 4}" y="{top + 14}" fill="#888">warm-up</text>')
        if log_from is None:
            grid = [y_top * i / 5 for i in range(6)]
        else:
            grid = [m * 10**e for e in range(-3, 7) for m in (1, 2, 5)
                    if log_from <= m * 10**e <= y_top]
        for v in grid:
            add(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" '
                f'y2="{y(v):.1f}" stroke="#ddd"/>')
            add(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
                f'{fmt(round(v, 3))}</text>')
        for v, text in marks:
            add(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(v):.1f}" '
                f'y2="{y(v):.1f}" stroke="#999" stroke-dasharray="2,3"/>')
            add(f'<text x="{LEFT + plot_w - 4}" y="{y(v) - 4:.1f}" '
                f'text-anchor="end" fill="#777">{html.escape(text)}</text>')
        add(f'<text transform="translate({LEFT - 52},{top + PANEL_H / 2}) '
            f'rotate(-90)" text-anchor="middle">{html.escape(label)}</text>')
        for n, (vals, colour, width, dash, legend) in enumerate(series):
            pts = " ".join(f"{x(a):.1f},{y(max(b, 0)):.1f}"
                           for a, b in zip(t, vals) if b >= 0)
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            add(f'<polyline points="{pts}" fill="none" stroke="{colour}" '
                f'stroke-width="{width}"{dash_attr}/>')
            ly = top + 12 + n * 18
            lx = LEFT + plot_w + 12
            add(f'<line x1="{lx}" x2="{lx + 22}" y1="{ly}" y2="{ly}" '
                f'stroke="{colour}" stroke-width="{width}"{dash_attr}/>')
            add(f'<text x="{lx + 28}" y="{ly + 4}">{html.escape(legend)}'
                f'</text>')
        add(f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" '
            f'fill="none" stroke="#333"/>')

    rss = [r["rss_mib"] for r in rows]
    panel(PANEL_TOP[0], "RSS (MiB)", [(rss, "#1f5fb4", 2.5, None, "RSS")],
          nice_ceiling(max(rss) * 1.1))
    p50 = [r["late_p50_ms"] for r in rows]
    p99 = [r["late_p99_ms"] for r in rows]
    pmax = [r["late_max_ms"] for r in rows]
    # Log scale: a single stall of a second must not flatten the normal
    # p99 of one tick or so into the floor.
    late_top = nice_ceiling(max(pmax + p99) * 1.05)
    panel(PANEL_TOP[1], "lateness per report (ms, log)",
          [(pmax, "#f0a0a0", 1, None, "max"),
           (p99, "#c0282d", 2.5, None, "p99"),
           (p50, "#c0282d", 1.2, "5,4", "p50")],
          late_top, marks=[(interval_ms, f"1 tick ({fmt(interval_ms)} ms)")],
          log_from=1.0)

    # The shared time axis under the lower panel.
    base = PANEL_TOP[1] + PANEL_H
    v = 0.0
    while v <= t_max + 1e-9:
        add(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{base}" '
            f'y2="{base + 5}" stroke="#333"/>')
        add(f'<text x="{x(v):.1f}" y="{base + 18}" text-anchor="middle">'
            f'{fmt(round(v, 3))}</text>')
        v += step
    add(f'<text x="{LEFT + plot_w / 2}" y="{base + 38}" '
        f'text-anchor="middle">elapsed (minutes)</text>')
    add("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv)
