#!/usr/bin/env python3
"""Tabulates bench/idle_server_run.sh's JSON lines: per backend, the median
and range over rounds of each figure. The timers' CPU per request and bytes
per connection are read against the `none` backend of the same round (no
idle timers): a backend's server CPU per request minus none's, its RSS with
the idle population held minus none's, over the connections held. Rounds
run with --profile also give the timers' share of the server's samples
(bench/timer_samples.py) and that share of the same window's CPU per
request: the timers' cost read inside one process, not as a difference.

  bench/idle_server_table.py RESULTS.jsonl
"""
import json
import statistics
import sys


def fmt(values, digits=2):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    by_round = {}
    for r in rows:
        by_round.setdefault(r["round"], {})[r["backend"]] = r
    backends = [b for b in ("local", "local-kept", "shared", "asio",
                            "asio-kept", "none")
                if any(b in rr for rr in by_round.values())]
    fig = {b: {k: [] for k in ("rps", "cpu", "timer_cpu", "share", "rss_conn",
                               "own_conn", "op_ns", "req_ns", "p50", "p99", "max",
                               "early", "missed", "twice", "sampled_share",
                               "sampled_ns", "window_closes")}
           for b in backends}
    for rr in by_round.values():
        none = rr.get("none")
        for b, r in rr.items():
            f = fig[b]
            f["rps"].append(r["wrk_rps"] / 1000.0)
            f["cpu"].append(r["cpu_us_per_request"])
            # A round whose snapshot did not see the whole population held
            # says nothing about bytes per connection.
            held = r["held"] == r["conns"] and (
                none is None or none["held"] == none["conns"])
            if none is not None and b != "none":
                d = r["cpu_us_per_request"] - none["cpu_us_per_request"]
                f["timer_cpu"].append(d * 1000.0)
                f["share"].append(100.0 * d / r["cpu_us_per_request"])
                if held:
                    f["rss_conn"].append((r["rss_held"] - none["rss_held"]) /
                                         r["held"])
            if held:
                f["own_conn"].append(r["timer_bytes_held"] / r["held"])
            # The timing's own cost (a cycle-counter pair and a virtual
            # call) is what none's empty calls measure.
            empty = none["timer_op_ns"] if none else 0.0
            f["op_ns"].append(r["timer_op_ns"] - empty)
            if "timer_ns_per_request" in r and none is not None:
                f["req_ns"].append(r["timer_ns_per_request"] -
                                   none.get("timer_ns_per_request", 0.0))
            prof = r.get("profile")
            if prof and prof.get("samples"):
                f["sampled_share"].append(100.0 * prof["timer_share"])
                f["sampled_ns"].append(prof["timer_share"] *
                                       r["cpu_us_per_request"] * 1000.0)
            end = r["server_end"]
            f["p50"].append(end["late_us_p50"] / 1000.0)
            f["p99"].append(end["late_us_p99"] / 1000.0)
            f["max"].append(end["late_us_max"] / 1000.0)
            c = r["client"]
            f["early"].append(c["closed_early"] + end["early_closes"])
            f["missed"].append(c["not_closed"])
            f["twice"].append(end["double_closes"])
            # Runs before the field was recorded say nothing of it.
            if "window_idle_closes" in r:
                f["window_closes"].append(r["window_idle_closes"])
    print(f"{len(by_round)} rounds; {rows[0]['conns']} idle connections, "
          f"wrk -c{rows[0]['wrk_connections']} for {rows[0]['wrk_seconds']} s; "
          "median (range)\n")
    head = ["figure"] + backends
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    lines = [
        ("requests/s, thousands", "rps", 1),
        ("server CPU per request, us", "cpu", 2),
        ("timers' CPU per request, ns (minus none)", "timer_cpu", 0),
        ("timers' share of server CPU, %", "share", 1),
        ("timers' share of the server's samples, %", "sampled_share", 2),
        ("timers' CPU per request, sampled, ns", "sampled_ns", 0),
        ("timer calls per request, ns (minus none's empty calls)", "req_ns", 0),
        ("a timer call on the io thread, ns (minus none's)", "op_ns", 0),
        ("bytes per connection, RSS minus none", "rss_conn", 0),
        ("timer bytes per connection, own count", "own_conn", 0),
        ("idle-close lateness p50, ms", "p50", 2),
        ("idle-close lateness p99, ms", "p99", 2),
        ("idle-close lateness max, ms", "max", 2),
        ("idle closes inside the wrk window (meant to be none)",
         "window_closes", 0),
    ]
    for label, key, digits in lines:
        print("| " + label + " | " +
              " | ".join(fmt(fig[b][key], digits) for b in backends) + " |")
    for label, key in (("closed early", "early"), ("not closed", "missed"),
                       ("closed twice", "twice")):
        print("| " + label + " | " +
              " | ".join(str(sum(fig[b][key])) for b in backends) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
