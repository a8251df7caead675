#!/usr/bin/env bash
# How many Redis locks one lease keeper (examples/lease/) holds: runs
# examples/lease_keeper --json REPEAT times, each a fresh process with its
# own redis-server on a loopback port, stores every line in
#   bench/results/<date>-lease.jsonl
# and prints the median and range of each figure.
#
#   bench/lease_run.sh [--use-build=DIR] [--repeat=N] [--locks=N]
#                      [--ttl_ms=MS] [--seconds=S]
#
# Defaults: 1,000,000 locks, ttl 30 s (renewed every 10 s), held 35 s (three
# renewal rounds), 5 runs. Without --use-build it configures and builds
# build-examples-release (release, NDEBUG, examples only). Needs Debian's
# redis-server and libhiredis-dev.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
repeat=5
locks=1000000
ttl_ms=30000
seconds=35
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --repeat=*) repeat="${a#--repeat=}" ;;
    --locks=*) locks="${a#--locks=}" ;;
    --ttl_ms=*) ttl_ms="${a#--ttl_ms=}" ;;
    --seconds=*) seconds="${a#--seconds=}" ;;
    *) echo "lease_run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

source "$here/release_build.sh"
release_build examples examples/lease_keeper
program="$builddir/examples/lease_keeper"
[[ -x "$program" ]] || { echo "no $program (is libhiredis-dev installed?)" >&2; exit 1; }

out=$(results_file lease)
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
for ((i = 1; i <= repeat; i++)); do
  echo "run $i/$repeat: $locks locks, ttl ${ttl_ms} ms, ${seconds} s" >&2
  "$program" --json --scenario=false --locks="$locks" --ttl_ms="$ttl_ms" \
    --seconds="$seconds" |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["commit"]=sys.argv[1]; print(json.dumps(d))' \
      "$commit" >>"$out"
done
echo "results: $out" >&2

python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
fields = [
    ("peak_renewals_per_s", "renewals a second, busiest second", 0),
    ("renewals_per_s", "renewals a second, whole run", 0),
    ("renew_late_p99_ms", "renewal lateness p99, ms", 1),
    ("renew_late_max_ms", "renewal lateness max, ms", 1),
    ("keeper_us_per_renewal", "keeper CPU a renewal, us", 2),
    ("wheel_us_per_renewal", "of it the wheel's threads, us", 2),
    ("wheel_share_pct", "the wheel's share of the keeper's CPU, %", 1),
    ("redis_us_per_renewal", "redis-server CPU a renewal, us", 2),
    ("acquire_s", "acquiring every lock, s", 2),
    ("rss_mb", "keeper RSS, MB", 0),
    ("lost", "locks lost", 0),
    ("renew_failures", "renewals that failed", 0),
]
print(f"{rows[0]['locks']:,} locks, ttl {rows[0]['ttl_ms']} ms, {len(rows)} runs: median [min-max]")
for key, label, digits in fields:
    v = [r[key] for r in rows]
    f = lambda x: f"{x:,.{digits}f}"
    print(f"  {label:44s} {f(statistics.median(v))} [{f(min(v))}-{f(max(v))}]")
PY
