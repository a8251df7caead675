#!/usr/bin/env bash
# bench/asio_timers.cc for none, local and asio, alternating, ROUNDS rounds,
# each run a fresh process; lines to bench/results/<date>-asio-timers.jsonl,
# then the median and range of each backend's CPU per request pushed later
# (minus none's: the loop turns alone) and bytes per connection.
#
#   bench/asio_timers_run.sh [--use-build=DIR] [--rounds=N] [--conns=N]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
rounds=5
conns=16000
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --rounds=*) rounds="${a#--rounds=}" ;;
    --conns=*) conns="${a#--conns=}" ;;
    *) echo "asio_timers_run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
source "$here/release_build.sh"
release_build bench bench/asio_timers
out=$(results_file asio-timers)
for _ in $(seq "$rounds"); do
  for b in none local asio; do
    "$builddir/bench/asio_timers" --backend="$b" --conns="$conns" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
none = [r["ns_per_touch"] for r in rows if r["backend"] == "none"]
def f(v): return f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})"
print("| backend | CPU per request pushed later, ns (minus none's) | bytes per connection |")
print("| --- | --- | --- |")
for b in ("local", "asio"):
    rs = [r for r in rows if r["backend"] == b]
    # Paired with the none run of the same round.
    cost = [r["ns_per_touch"] - n for r, n in zip(rs, none)]
    print(f"| {b} | {f(cost)} | {f([r['bytes_per_conn'] for r in rs])} |")
PY
echo "results: $out" >&2
