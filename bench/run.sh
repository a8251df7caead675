#!/usr/bin/env bash
# Runs the benchmark suite and stores its results:
#   bench/results/<date>.jsonl       W1-W9 (bench/workloads --json), then
#                                    the OS's wake-up floor (wake_floor)
#   bench/results/<date>-micro.json  the Wheel micro-benchmarks (Google
#                                    Benchmark JSON)
#   bench/results/chart.svg          ours vs the peers (bench/chart.py)
#
#   bench/run.sh [--use-build=DIR] [--repeat=N] [workloads flags, e.g. --n=100000]
#
# By default it configures and builds a release tree, build-release (NDEBUG,
# no tests or examples), so the figures are not those of a debug build.
# --use-build=DIR runs the binaries of an existing build tree instead (what
# `meson compile bench` does). Extra flags go to the workloads program: the
# workloads run cold (nothing faulted in ahead, as a user's process) unless
# --warm is among them (1 GiB of heap faulted in first); table.py shows the
# cold lines of a file, or with --warm the warm ones.
# MICRO_MIN_TIME (seconds per micro-benchmark, default 0.5) shortens the
# micro run; MICRO_FILTER selects benchmarks (a regex, default all).
# --repeat=N (default 3) runs the workloads N times into the same file; the
# table and the chart show the median (one run on a shared machine is noise).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
repeat=3
args=()
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --repeat=*) repeat="${a#--repeat=}" ;;
    *) args+=("$a") ;;
  esac
done

if [[ -z "$builddir" ]]; then
  builddir="$root/build-release"
  if [[ ! -f "$builddir/build.ninja" ]]; then
    meson setup "$builddir" "$root" --buildtype=release -Db_ndebug=true \
      -Dtests=disabled -Dexamples=disabled
  fi
  ninja -C "$builddir" bench/workloads bench/wheel_micro bench/wake_floor
fi

results="$here/results"
mkdir -p "$results"
date="$(date -u +%Y-%m-%dT%H%M%SZ)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! git -C "$root" diff --quiet HEAD -- lib 2>/dev/null; then
  commit="$commit+dirty-lib"
fi

echo "== workloads -> $results/$date.jsonl" >&2
for ((run = 1; run <= repeat; ++run)); do
  echo "== run $run of $repeat" >&2
  "$builddir/bench/workloads" --json --commit="$commit" ${args[@]+"${args[@]}"}
done | tee "$results/$date.jsonl"
if [[ -x "$builddir/bench/wake_floor" ]]; then
  "$builddir/bench/wake_floor" --json --commit="$commit" \
    | tee -a "$results/$date.jsonl"
fi

if [[ -x "$builddir/bench/wheel_micro" ]]; then
  echo "== micro-benchmarks -> $results/$date-micro.json" >&2
  "$builddir/bench/wheel_micro" --benchmark_format=json \
    --benchmark_out="$results/$date-micro.json" \
    --benchmark_out_format=json --benchmark_format=console \
    --benchmark_min_time="${MICRO_MIN_TIME:-0.5}" \
    --benchmark_filter="${MICRO_FILTER:-.}"
fi

echo "== chart and table" >&2
python3 "$here/chart.py" "$results/$date.jsonl" -o "$results/chart.svg"
table_mode=()
for a in ${args[@]+"${args[@]}"}; do
  if [[ "$a" == --warm || "$a" == --warm=true || "$a" == --prefault_mb=[1-9]* ]]; then
    table_mode=(--warm)
  fi
done
python3 "$here/table.py" "$results/$date.jsonl" \
  --micro="$results/$date-micro.json" ${table_mode[@]+"${table_mode[@]}"}
