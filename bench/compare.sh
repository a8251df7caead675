#!/usr/bin/env bash
# Runs two builds' workloads interleaved (A, B, A, B, ...) so that both see
# the same machine, and prints the median [min-max] of each figure per build:
# how a change is judged on a shared machine, where a figure from another
# hour is not comparable.
#
#   bench/compare.sh A_BUILD_DIR B_BUILD_DIR [--repeat=5] [--warm] [--cache]
#                    [workloads flags]
#
# By default A and B run cold (--prefault_mb=0: a heap that has not been
# touched yet, as in a user's process after a deploy). --warm also runs A and
# B with 1 GiB of heap faulted in first (--prefault_mb=1024) each round: the
# wheel's own cost beside the cold one. The size is passed explicitly, not as
# --warm, so that a build tree from before the cold default (whose default
# was warm, and which has no --warm flag) runs the same way. --cold, the old
# flag, is accepted and changes nothing. --cache also runs each tree's
# bench/cache_workloads (C1-C5) each round, cold and, with --warm, warm.
# Each BUILD_DIR is a build tree with bench/workloads (e.g. a release build
# of a `git worktree` at the old commit, and one at the new). Its lines are
# tagged with that tree's commit. Results go to
# bench/results/<date>-compare.jsonl; bench/compare.py prints the table.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
a=$1
b=$2
shift 2
repeat=5
warm=0
cache=0
args=()
for arg in "$@"; do
  case "$arg" in
    --repeat=*) repeat="${arg#--repeat=}" ;;
    --warm) warm=1 ;;
    --cold) echo "compare.sh: runs are cold by default now; --cold ignored" >&2 ;;
    --cache) cache=1 ;;
    *) args+=("$arg") ;;
  esac
done

# A build tree's commit: that of the source tree it was configured from
# (meson-info names it), so that build trees outside the source tree are
# tagged too; the build tree's own repository otherwise.
commit_of() {
  local src
  src=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["directories"]["source"])' \
    "$1/meson-info/meson-info.json" 2>/dev/null) || src=$1
  git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown
}
ca=$(commit_of "$a")
cb=$(commit_of "$b")
out="$here/results/$(date -u +%Y-%m-%dT%H%M%SZ)-compare.jsonl"
mkdir -p "$here/results"
# run_one TREE COMMIT PROGRAM [FLAGS...]: one run of one tree's program.
run_one() {
  local tree=$1 commit=$2 program=$3
  shift 3
  "$tree/bench/$program" --json --commit="$commit" "$@"
}
for ((run = 1; run <= repeat; ++run)); do
  echo "== run $run of $repeat: $ca, then $cb" >&2
  for tree_commit in "$a $ca" "$b $cb"; do
    read -r tree commit <<<"$tree_commit"
    run_one "$tree" "$commit" workloads --prefault_mb=0 ${args[@]+"${args[@]}"}
    if ((warm)); then
      run_one "$tree" "$commit" workloads --prefault_mb=1024 ${args[@]+"${args[@]}"}
    fi
    if ((cache)); then
      run_one "$tree" "$commit" cache_workloads --prefault_mb=0
      if ((warm)); then
        run_one "$tree" "$commit" cache_workloads --prefault_mb=1024
      fi
    fi
  done
done >"$out"
echo "== $out" >&2
python3 "$here/compare.py" "$out"
