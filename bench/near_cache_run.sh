#!/usr/bin/env bash
# What a near cache in front of Redis (examples/near_cache/) buys, on
# loopback: runs examples/near_cache_bench REPEAT times for each figure,
# stores every result line in
#   bench/results/<date>-near-cache.jsonl
# and prints the median and range of each figure.
#
#   bench/near_cache_run.sh [--use-build=DIR] [--repeat=N] [--seconds=S]
#
# 1. latency: a local hit against a Redis GET (each run its own server);
# 2. staleness: from another instance's Set returning to the copy dropped;
# 3. load: 4 processes reading a Zipf workload (100,000 keys, q 1.3, 1%
#    writes, 5,000 reads/s each, 10,000 local copies: about 90% local hits)
#    for S seconds (default 20), once through near caches and once with
#    GETs straight to Redis, against one redis-server started here on a
#    loopback port; Redis's own counters give the GETs it served and the
#    CPU it used in each. Every process runs under `timeout`.
#
# Without --use-build it configures and builds build-examples-release
# (release, NDEBUG, examples only). Needs Debian's redis-server and
# libhiredis-dev.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
repeat=5
seconds=20
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --repeat=*) repeat="${a#--repeat=}" ;;
    --seconds=*) seconds="${a#--seconds=}" ;;
    *) echo "near_cache_run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

source "$here/release_build.sh"
release_build examples examples/near_cache_bench
program="$builddir/examples/near_cache_bench"
[[ -x "$program" ]] || { echo "no $program (is libhiredis-dev installed?)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "no redis-server" >&2; exit 1; }

out=$(results_file near-cache)
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
tag() {  # adds the run's fields to each JSON line on stdin
  python3 -c 'import json,sys
for l in sys.stdin:
    if l.strip().startswith("{"):
        d = json.loads(l); d.update(json.loads(sys.argv[1])); print(json.dumps(d))' "$1"
}

# A redis-server of our own for the load runs, gone when the script ends.
dir="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' \
  --appendonly no --daemonize no --logfile "$dir/redis.log" &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null; wait $redis_pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
cli() { redis-cli -p "$port" "$@"; }
# Redis's CPU seconds (user + system) and GETs served so far.
redis_cpu() { cli info cpu | awk -F: '/used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}'; }
redis_gets() { cli info commandstats | awk -F'[=,:]' '/cmdstat_get:/ {print $3}' | grep . || echo 0; }

for ((i = 1; i <= repeat; i++)); do
  echo "run $i/$repeat: latency, staleness" >&2
  timeout 300 "$program" --mode=latency | tag "{\"run\": $i, \"commit\": \"$commit\"}" >>"$out"
  timeout 300 "$program" --mode=staleness --samples=5000 |
    tag "{\"run\": $i, \"commit\": \"$commit\"}" >>"$out"
  for near in true false; do
    echo "run $i/$repeat: 4 processes, near=$near, $seconds s" >&2
    cli flushall >/dev/null
    cli config resetstat >/dev/null
    timeout 300 "$program" --mode=zipf --port="$port" --seconds=0 --near=false \
      --keys=100000 >/dev/null
    cpu0=$(redis_cpu); gets0=$(redis_gets)
    pids=()
    for p in 1 2 3 4; do
      # One live line on stderr (the first process's); the others quiet.
      if [[ $p == 1 ]]; then err=/dev/stderr; else err=/dev/null; fi
      timeout $((seconds + 120)) "$program" --mode=zipf --port="$port" \
        --near="$near" --populate=false --keys=100000 --zipf_q=1.3 \
        --max_entries=10000 --rate=5000 --write_ratio=0.01 \
        --seconds="$seconds" >"$dir/zipf-$p.json" 2>"$err" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    cpu1=$(redis_cpu); gets1=$(redis_gets)
    python3 - "$dir" "$near" "$cpu0" "$cpu1" "$gets0" "$gets1" "$i" "$commit" >>"$out" <<'PY'
import json, sys
d, near, cpu0, cpu1, gets0, gets1, run, commit = sys.argv[1:]
procs = [json.loads(open(f"{d}/zipf-{p}.json").read()) for p in (1, 2, 3, 4)]
reads = sum(p["reads"] for p in procs)
seconds = max(p["seconds"] for p in procs)
print(json.dumps({
    "mode": "load", "near": near == "true", "run": int(run), "commit": commit,
    "reads": reads, "reads_per_s": reads / seconds,
    "hit_ratio": sum(p["hit_ratio"] * p["reads"] for p in procs) / reads,
    "errors": sum(p["errors"] for p in procs),
    "invalidations": sum(p["invalidations"] for p in procs),
    "redis_gets": int(gets1) - int(gets0),
    "redis_cpu_s": float(cpu1) - float(cpu0),
}))
PY
  done
done
echo "results: $out" >&2

python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def show(label, v, digits):
    f = lambda x: f"{x:,.{digits}f}"
    print(f"  {label:52s} {f(statistics.median(v))} [{f(min(v))}-{f(max(v))}]")
lat = [r for r in rows if r["mode"] == "latency"]
st = [r for r in rows if r["mode"] == "staleness"]
near = sorted((r for r in rows if r["mode"] == "load" and r["near"]), key=lambda r: r["run"])
plain = sorted((r for r in rows if r["mode"] == "load" and not r["near"]), key=lambda r: r["run"])
print(f"{len(lat)} runs: median [min-max]")
show("local hit, ns", [r["hit_ns"] for r in lat], 0)
show("Redis GET on loopback p50, us", [r["get_p50_us"] for r in lat], 1)
show("GET p50 / local hit", [r["ratio"] for r in lat], 0)
show("staleness after the Set returned p50, us", [r["p50_us"] for r in st], 1)
show("staleness p99, us", [r["p99_us"] for r in st], 1)
show("staleness max, us", [r["max_us"] for r in st], 1)
show("copies dropped before the Set returned, %", [100 * r["early"] / r["samples"] for r in st], 1)
show("copies never dropped (must be 0)", [r["never_dropped"] for r in st], 0)
show("load, near: local hit ratio, %", [100 * r["hit_ratio"] for r in near], 1)
show("load, near: reads/s (4 processes)", [r["reads_per_s"] for r in near], 0)
show("load, plain: reads/s (4 processes)", [r["reads_per_s"] for r in plain], 0)
show("load: GETs Redis served, near / plain, %", [100 * n["redis_gets"] / p["redis_gets"] for n, p in zip(near, plain)], 1)
show("load: Redis CPU, near / plain, %", [100 * n["redis_cpu_s"] / p["redis_cpu_s"] for n, p in zip(near, plain)], 1)
show("load, near: Redis CPU s", [r["redis_cpu_s"] for r in near], 2)
show("load, plain: Redis CPU s", [r["redis_cpu_s"] for r in plain], 2)
show("load: errors", [r["errors"] for r in near + plain], 0)
PY
