#!/usr/bin/env bash
# W1-W4 on a LocalWheel (bench/local_ops.cc), each run a fresh process:
# ROUNDS cold runs (nothing faulted in ahead: the headline), ROUNDS warm
# ones (the workload once first, same wheel) and ROUNDS cold ones that
# count delays from the loop turn's time, alternating. Lines go to
#   bench/results/<date>-local-ops.jsonl
# and the median and range of each figure are printed.
#
#   bench/local_run.sh [--use-build=DIR] [--rounds=N] [--timers=N]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
rounds=5
timers=1000000
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --rounds=*) rounds="${a#--rounds=}" ;;
    --timers=*) timers="${a#--timers=}" ;;
    *) echo "local_run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
source "$here/release_build.sh"
release_build bench bench/local_ops
out=$(results_file local-ops)
for _ in $(seq "$rounds"); do
  "$builddir/bench/local_ops" --timers="$timers" | tee -a "$out"
  "$builddir/bench/local_ops" --timers="$timers" --warm | tee -a "$out"
  "$builddir/bench/local_ops" --timers="$timers" --turn_time | tee -a "$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = ["set_ns", "set_loop_ns", "move_ns", "move_loop_ns", "remove_ns",
        "remove_loop_ns", "rss_bytes_per_timer", "own_bytes_per_timer"]
print("| figure | cold | warm | cold, the loop turn's time |\n| --- | --- | --- | --- |")
for k in keys:
    cells = []
    for warm, turn in ((0, 0), (1, 0), (0, 1)):
        v = [r[k] for r in rows if r["warm"] == warm and r.get("turn_time", 0) == turn]
        cells.append(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})")
    print(f"| {k} | {cells[0]} | {cells[1]} |")
PY
echo "results: $out" >&2
