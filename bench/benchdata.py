"""Reading benchmark results and bench/peers.json (shared by chart.py and
table.py; python3 stdlib only)."""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load_peers(path=None):
    with open(path or os.path.join(HERE, "peers.json")) as f:
        return json.load(f)


def load_results(path):
    """The JSON lines of a workloads results file (lines not starting with
    '{', such as the human-readable '# ' lines, are skipped)."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out


def is_warm(r):
    """Whether a result line comes from a warmed process (heap faulted in
    ahead): its "warm" field, or for lines from before that field, whether
    prefault_mb was > 0."""
    if "warm" in r:
        return bool(r["warm"])
    return (r.get("prefault_mb") or 0) > 0


def select(results, sel):
    """The last result matching every key of `sel` (a results file may hold
    more than one run)."""
    found = None
    for r in results:
        if all(r.get(k) == v for k, v in sel.items()):
            found = r
    return found


def values(results, metric):
    """Every run's figure for a metric of peers.json, in its unit."""
    out = []
    for r in results:
        if all(r.get(k) == v for k, v in metric["select"].items()):
            if r.get(metric["field"]) is not None:
                out.append(r[metric["field"]] * metric.get("scale", 1))
    return out


def ours(results, metric):
    """Our figure for a metric of peers.json: the median of the runs in the
    results file (bench/run.sh repeats the workloads; on a shared machine
    one run is not a figure), or None."""
    v = sorted(values(results, metric))
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def median_run(results, sel, field):
    """The run matching `sel` whose `field` is the median (for details)."""
    runs = sorted((r for r in results
                   if all(r.get(k) == v for k, v in sel.items())
                   and r.get(field) is not None), key=lambda r: r[field])
    return runs[(len(runs) - 1) // 2] if runs else None


def target(results, metric, metrics_by_id):
    if metric.get("target_ref"):
        return ours(results, metrics_by_id[metric["target_ref"]])
    return metric.get("target")


def peer_ranges(metric):
    """[(peer, low, high, note)] for the peers with a figure."""
    out = []
    for name, fig in (metric.get("peers") or {}).items():
        if fig:
            out.append((name, fig[0], fig[1], fig[2] if len(fig) > 2 else ""))
    return out


def best_peer(metric):
    """The best peer figure as (peer, value, note): the top of the best range
    for higher-is-better, the bottom for lower-is-better. Figures that count
    enqueued rather than applied commands are left out: they measure
    something else (peers.md)."""
    best = None
    for name, lo, hi, note in peer_ranges(metric):
        if note == "enqueued":
            continue
        v = hi if metric["better"] == "higher" else lo
        if best is None or (metric["better"] == "higher" and v > best[1]) or (
                metric["better"] == "lower" and v < best[1]):
            best = (name, v, note)
    return best


def advantage(metric, ours_v, other):
    """How many times better ours is than `other` (> 1: ours is better)."""
    if ours_v is None or other is None:
        return None
    if metric["better"] == "higher":
        return ours_v / other if other else None
    return other / ours_v if ours_v else float("inf")


def load_micro(path):
    """Google Benchmark JSON: [(name, ns per item by CPU time, extra)]."""
    with open(path) as f:
        data = json.load(f)
    out = []
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        ips = b.get("items_per_second")
        ns = 1e9 / ips if ips else None
        out.append((b["name"], ns, b))
    return out, data.get("context", {})
