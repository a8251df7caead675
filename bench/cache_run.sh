#!/usr/bin/env bash
# Runs the cache workloads C1-C5 (docs/peers.md) on timingwheel::Cache and on
# the Java peers, Caffeine and Guava, INTERLEAVED (ours, Caffeine, Guava,
# ours, Caffeine, Guava, ...) so that the load of a shared machine falls on
# all of them alike, and stores every line in
#   bench/results/<date>-cache.jsonl
# then prints the table (bench/cache_table.py) and stores it next to it as
#   bench/results/<date>-cache-table.md
#
#   bench/cache_run.sh [--use-build=DIR] [--repeat=N] [--no-java] [--no-ours]
#                      [--impls=caffeine,guava] [--commit=REV] [--cold]
#                      [flags for both, e.g. --n=100000]
#
# --cold runs both sides as a user's fresh process would: ours with
# --prefault_mb=0, the JVM with its 3 GiB heap reserved but not pre-touched
# (JAVA_OPTS, when set, still wins). Without it, ours pre-faults 1 GiB and
# the JVM pre-touches its heap.
# By default it configures and builds build-cache-release (release, NDEBUG,
# no tests or examples) from this working tree; --use-build=DIR runs the
# cache_workloads of an existing build tree. --repeat=N rounds (default 5).
# The commit recorded is HEAD when it builds, "+dirty-lib" if lib/ differs
# from HEAD then (other people's edits in a shared tree); with --use-build it
# is HEAD at the start, unless --commit=REV says what that tree was built
# from.
# The C5 trace is written once to $C5_TRACE (default
# /tmp/timingwheel-c5-trace.bin, 80 MB) by cache_workloads and replayed by
# both sides. Java needs default-jdk-headless, libcaffeine-java and
# libguava-java (see bench/java/run.sh); bench/run.sh is unaffected.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
repeat=5
java=1
ours=1
impls="caffeine,guava"
commit=""
cold=0
args=()
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --repeat=*) repeat="${a#--repeat=}" ;;
    --no-java) java=0 ;;
    --no-ours) ours=0 ;;
    --impls=*) impls="${a#--impls=}" ;;
    --commit=*) commit="${a#--commit=}" ;;
    --cold) cold=1 ;;
    *) args+=("$a") ;;
  esac
done

head_commit() {
  local c
  c="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if ! git -C "$root" diff --quiet HEAD -- lib 2>/dev/null; then
    c="$c+dirty-lib"
  fi
  echo "$c"
}

bin=""
if ((ours)); then
  if [[ ! -f "$root/lib/include/timingwheel/cache.h" ]]; then
    echo "== no lib/include/timingwheel/cache.h yet: running the Java peers only" >&2
    ours=0
  else
    if [[ -z "$builddir" ]]; then
      builddir="$root/build-cache-release"
      if [[ ! -f "$builddir/build.ninja" ]]; then
        meson setup "$builddir" "$root" --wrap-mode=nodownload \
          --buildtype=release -Db_ndebug=true -Dtests=disabled \
          -Dexamples=disabled
      fi
      [[ -n "$commit" ]] || commit="$(head_commit)"
      ninja -C "$builddir" -j1 bench/cache_workloads
    fi
    bin="$builddir/bench/cache_workloads"
  fi
fi

results="$here/results"
mkdir -p "$results"
date="$(date -u +%Y-%m-%dT%H%M%SZ)"
out="$results/$date-cache.jsonl"
[[ -n "$commit" ]] || commit="$(head_commit)"

trace="${C5_TRACE:-/tmp/timingwheel-c5-trace.bin}"
if ((ours)); then
  # Always rewritten: the C5 flags may differ from the last run's.
  c5_flags=()
  for a in ${args[@]+"${args[@]}"}; do
    case "$a" in --c5_*) c5_flags+=("$a") ;; esac
  done
  "$bin" --write_trace="$trace" ${c5_flags[@]+"${c5_flags[@]}"} >&2
fi

: >"$out"
echo "== results -> $out (load: $(uptime))" >&2
for ((run = 1; run <= repeat; ++run)); do
  if ((ours)); then
    echo "== round $run of $repeat: timingwheel (load1 $(cut -d' ' -f1 /proc/loadavg))" >&2
    ours_args=()
    ((cold)) && ours_args+=(--prefault_mb=0)
    "$bin" --json --commit="$commit" --trace="$trace" \
      ${ours_args[@]+"${ours_args[@]}"} ${args[@]+"${args[@]}"} | tee -a "$out"
  fi
  if ((java)); then
    IFS=',' read -r -a impl_list <<<"$impls"
    for impl in "${impl_list[@]}"; do
      echo "== round $run of $repeat: $impl (load1 $(cut -d' ' -f1 /proc/loadavg))" >&2
      if ((cold)); then
        JAVA_OPTS="${JAVA_OPTS:--Xms3g -Xmx3g -XX:+UseG1GC}" \
          "$here/java/run.sh" --json --commit="$commit" --trace="$trace" \
          --impl="$impl" ${args[@]+"${args[@]}"} | tee -a "$out"
      else
        "$here/java/run.sh" --json --commit="$commit" --trace="$trace" \
          --impl="$impl" ${args[@]+"${args[@]}"} | tee -a "$out"
      fi
    done
  fi
done

echo "== table -> $results/$date-cache-table.md" >&2
python3 "$here/cache_table.py" "$out" | tee "$results/$date-cache-table.md"
