#!/bin/sh
# Instructions the loop's core executes per command and per fired timer,
# counted by valgrind's callgrind: the same figure on every run, however
# loaded the machine, where wall-clock micro-benchmarks swing with the load
# of a shared machine. It says nothing of cache misses (callgrind does not
# model this machine's memory), so read it beside bench/wheel_micro's times,
# not instead of them: fewer instructions for the same misses is a cheaper
# loop.
#
#   bench/instructions.sh BUILD_DIR [BUILD_DIR ...]
#
# For each build tree, runs its bench/wheel_micro under callgrind with only
# the timed part counted (TimedApply, TimedExpire) and prints, per row, the
# instructions per command (BM_Pipeline, 1 Mi commands: kind 0 set into a
# reserved index, 1 move, 2 remove, 3 set with the index growing) and per
# fired timer (BM_Expire, 1 Mi timers due on one tick). Each build tree's
# wheel_micro must have the functions TimedApply and TimedExpire, the only
# ones counted.
set -eu

if [ "$#" -eq 0 ]; then
  echo "usage: $0 BUILD_DIR [BUILD_DIR ...]" >&2
  exit 2
fi
command -v valgrind >/dev/null || {
  echo "$0: needs valgrind (apt-get install valgrind)" >&2
  exit 2
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# count BUILD FILTER FUNCTION ITEMS: instructions per item of one benchmark.
count() {
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect="(anonymous namespace)::$3(*" \
    --callgrind-out-file="$tmp/cg" "$1/bench/wheel_micro" \
    --benchmark_filter="$2" --benchmark_min_time=0.001 \
    --benchmark_format=json >"$tmp/json" 2>/dev/null
  python3 - "$tmp/cg" "$tmp/json" "$4" <<'EOF'
import json, sys
cg, js, items = sys.argv[1], sys.argv[2], int(sys.argv[3])
total = None
for line in open(cg):
    if line.startswith("summary:") or line.startswith("totals:"):
        total = int(line.split()[1])
runs = [b for b in json.load(open(js))["benchmarks"]
        if b.get("run_type") == "iteration"]
iterations = sum(b["iterations"] for b in runs)
print(f"{total / (iterations * items):.1f}")
EOF
}

n=1048576
printf '%-44s' "instructions per item"
for b in "$@"; do printf '  %s' "$b"; done
printf '\n'
for row in "set, index reserved (BM_Pipeline kind 0)|BM_Pipeline/n:$n/kind:0\$|TimedApply" \
  "move (BM_Pipeline kind 1)|BM_Pipeline/n:$n/kind:1\$|TimedApply" \
  "remove (BM_Pipeline kind 2)|BM_Pipeline/n:$n/kind:2\$|TimedApply" \
  "set, index growing (BM_Pipeline kind 3)|BM_Pipeline/n:$n/kind:3\$|TimedApply" \
  "fired timer (BM_Expire)|BM_Expire/$n\$|TimedExpire"; do
  name=${row%%|*}
  rest=${row#*|}
  filter=${rest%%|*}
  fn=${rest#*|}
  printf '%-44s' "$name"
  for b in "$@"; do printf '  %s' "$(count "$b" "$filter" "$fn" "$n")"; done
  printf '\n'
done
