#!/usr/bin/env bash
# Runs two builds' workloads interleaved (A, B, A, B, ...) so that both see
# the same machine, and prints the median [min-max] of each figure per build:
# how a change is judged on a shared machine, where a figure from another
# hour is not comparable.
#
#   bench/compare.sh A_BUILD_DIR B_BUILD_DIR [--repeat=5] [--cold]
#                    [workloads flags]
#
# --cold also runs B with --prefault_mb=0 each round: the cold case (a heap
# that has not been touched yet) beside the warmed one.
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
cold=0
args=()
for arg in "$@"; do
  case "$arg" in
    --repeat=*) repeat="${arg#--repeat=}" ;;
    --cold) cold=1 ;;
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
for ((run = 1; run <= repeat; ++run)); do
  echo "== run $run of $repeat: $ca, then $cb" >&2
  "$a/bench/workloads" --json --commit="$ca" ${args[@]+"${args[@]}"}
  "$b/bench/workloads" --json --commit="$cb" ${args[@]+"${args[@]}"}
  if ((cold)); then
    "$b/bench/workloads" --json --commit="$cb" --prefault_mb=0 \
      ${args[@]+"${args[@]}"}
  fi
done >"$out"
echo "== $out" >&2
python3 "$here/compare.py" "$out"
