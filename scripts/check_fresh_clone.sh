#!/usr/bin/env bash
# Emulates CI: clones the committed state of this repository (HEAD, or the
# ref given) into a temp dir and runs .ci/run there with CI=true and no stdin,
# so uncommitted files and existing build dirs cannot hide a problem.
# Usage: scripts/check_fresh_clone.sh [REF] [-- ARGS for ./run test]
#   e.g. scripts/check_fresh_clone.sh HEAD -- --fast   (./run test --fast)
# Keeps the clone when KEEP_CLONE=1.
set -euo pipefail

repo=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
ref=HEAD
if [[ $# -gt 0 && $1 != -- ]]; then ref=$1; shift; fi
[[ ${1:-} == -- ]] && shift

tmp=$(mktemp -d "${TMPDIR:-/tmp}/timingwheel-clone.XXXXXX")
if [[ ${KEEP_CLONE:-0} == 1 ]]; then
  echo "check_fresh_clone: keeping $tmp" >&2
else
  trap 'rm -rf "$tmp"' EXIT
fi

git clone -q --no-hardlinks "$repo" "$tmp/timingwheel"
git -C "$tmp/timingwheel" checkout -q --detach "$(git -C "$repo" rev-parse "$ref")"
echo "check_fresh_clone: $(git -C "$tmp/timingwheel" log --oneline -1) in $tmp/timingwheel" >&2

cd "$tmp/timingwheel"
start=$SECONDS
rc=0
if [[ $# -gt 0 ]]; then
  CI=true ./run test "$@" </dev/null || rc=$?
else
  CI=true bash .ci/run </dev/null || rc=$?
fi
echo "check_fresh_clone: exit $rc after $((SECONDS - start)) s" >&2
exit "$rc"
