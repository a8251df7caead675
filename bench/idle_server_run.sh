#!/usr/bin/env bash
# Idle timeouts in a real server (examples/idle_server/): each timer backend
# (local, local-kept, shared, asio, asio-kept, and none as the baseline;
# --backends=a,b,... picks some) measured with real clients
# on loopback. A round, per backend, in a fresh server process:
#   1. idle_client opens CONNS keep-alive connections (one request each) and
#      leaves them idle; once the server holds them all, a snapshot gives
#      its RSS and its timers' own byte count;
#   2. wrk drives C more connections with keep-alive for D seconds; the
#      server's CPU over that window, over the requests it answered, is its
#      CPU per request;
#   3. the idle population is closed by the timeout; the server's lateness
#      (close minus last request minus timeout) p50/p99/max, and the
#      client's checks (none early, every one closed once).
# Backends alternate within a round, rounds repeat; every line goes to
#   bench/results/<date>-idle-server.jsonl
# and bench/idle_server_table.py prints the medians and ranges: the timers'
# CPU per request is a backend's minus none's, their bytes per connection a
# backend's RSS minus none's over CONNS.
#
# --profile samples the server during the wrk window (perf record -e
# cpu-clock, stacks unwound from DWARF; Debian's linux-perf, installed if
# missing) and counts the samples that are the timers' work
# (bench/timer_samples.py says which): their share of the server's CPU, in
# the same process and window as the requests, which a difference between
# two servers' CPU cannot give on a noisy machine.
#
#   bench/idle_server_run.sh [--use-build=DIR] [--rounds=N] [--conns=N]
#                            [--wrk_connections=C] [--wrk_seconds=D]
#                            [--timeout_ms=MS] [--threads=N] [--profile]
#
# Defaults: 5 rounds, 16,000 idle connections (a process holds at most
# 20,000 descriptors here), wrk -t1 -c32 for 8 s, a 20 s idle timeout, 2 io
# threads, 10 ms ticks. Needs Debian's wrk and libasio-dev (installed if
# missing, as ./run does). Every step is bounded in time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
builddir=""
rounds=5
conns=16000
wrk_connections=32
wrk_seconds=8
timeout_ms=20000
threads=2
backends=(none local local-kept shared asio asio-kept)
profile=0
for a in "$@"; do
  case "$a" in
    --use-build=*) builddir="${a#--use-build=}" ;;
    --rounds=*) rounds="${a#--rounds=}" ;;
    --conns=*) conns="${a#--conns=}" ;;
    --wrk_connections=*) wrk_connections="${a#--wrk_connections=}" ;;
    --wrk_seconds=*) wrk_seconds="${a#--wrk_seconds=}" ;;
    --timeout_ms=*) timeout_ms="${a#--timeout_ms=}" ;;
    --threads=*) threads="${a#--threads=}" ;;
    --backends=*) IFS=, read -r -a backends <<<"${a#--backends=}" ;;
    --profile) profile=1 ;;
    *) echo "idle_server_run.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done

needed=(wrk libasio-dev)
((profile)) && needed+=(linux-perf)
for p in "${needed[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" >/dev/null
  fi
done

source "$here/release_build.sh"
release_build examples examples/idle_server/idle_server \
  examples/idle_server/idle_client
server="$builddir/examples/idle_server/idle_server"
client="$builddir/examples/idle_server/idle_client"
out=$(results_file idle-server)
work=$(mktemp -d)
spid=""
cpid=""
cleanup() {
  [[ -n "$spid" ]] && kill -TERM "$spid" 2>/dev/null || true
  [[ -n "$cpid" ]] && kill -TERM "$cpid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# snapshot: asks the server for a JSON line (SIGUSR1) and prints it.
snapshot() {
  local before
  before=$(grep -c '"what":"snapshot"' "$work/server.out" || true)
  kill -USR1 "$spid"
  for _ in $(seq 200); do
    [[ $(grep -c '"what":"snapshot"' "$work/server.out" || true) -gt $before ]] && break
    sleep 0.05
  done
  grep '"what":"snapshot"' "$work/server.out" | tail -1
}
field() { grep -o "\"$1\":[-0-9.e+]*" <<<"$2" | head -1 | cut -d: -f2; }

run_one() {  # BACKEND ROUND
  local backend=$1 round=$2
  : >"$work/server.out"
  "$server" --backend="$backend" --port=0 --threads="$threads" \
    --timeout_ms="$timeout_ms" --tick_ms=10 >"$work/server.out" 2>/dev/null &
  spid=$!
  for _ in $(seq 100); do
    grep -q '^listening on' "$work/server.out" && break
    sleep 0.1
  done
  local port
  port=$(awk '/^listening on/ {print $3}' "$work/server.out")
  "$client" --port="$port" --connections="$conns" --addresses=4 \
    --timeout_ms="$timeout_ms" --grace_ms=10000 >"$work/client.out" &
  cpid=$!
  # Until the server holds the whole idle population (at most 60 s).
  local snap open t0=$SECONDS
  while :; do
    snap=$(snapshot)
    open=$(field open "$snap")
    [[ "$open" -ge "$conns" || $((SECONDS - t0)) -ge 60 ]] && break
    sleep 0.2
  done
  local held=$snap
  [[ "$(field open "$held")" == "$conns" ]] ||
    echo "idle_server_run.sh: $backend round $round held $(field open "$held") of $conns" >&2
  local url="http://127.0.0.1:$port/"
  local before after
  before=$(snapshot)
  local perf_pid=""
  if ((profile)); then
    perf record -q -e cpu-clock -F 999 --call-graph dwarf,16384 -p "$spid" \
      -o "$work/perf.data" -- sleep "$wrk_seconds" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  wrk -t1 -c"$wrk_connections" -d"${wrk_seconds}s" "$url" >"$work/wrk.out" 2>&1 || true
  [[ -n "$perf_pid" ]] && { wait "$perf_pid" || true; }
  after=$(snapshot)
  local samples=null
  if ((profile)); then
    samples=$(perf script -i "$work/perf.data" -F comm,tid,ip,sym 2>/dev/null |
              python3 "$here/timer_samples.py")
  fi
  # The idle population's closes, then the server's end line.
  wait "$cpid" || true
  cpid=""
  kill -TERM "$spid"
  wait "$spid" || true
  spid=""
  local end
  end=$(grep '"what":"end"' "$work/server.out" | tail -1)
  local requests cpu
  requests=$(( $(field requests "$after") - $(field requests "$before") ))
  cpu=$(python3 -c "print($(field cpu_s "$after") - $(field cpu_s "$before"))")
  local wrk_rps timer_ns
  wrk_rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.out")
  # The timer calls' time over the window, per request answered in it.
  timer_ns=$(python3 -c "print(($(field timer_ops "$after") * $(field timer_op_ns "$after") - $(field timer_ops "$before") * $(field timer_op_ns "$before")) / max(1, $requests))")
  # Idle closes inside the window: the window is meant to hold none (a
  # slow start of the idle population can let the first ones expire).
  local window_closes
  window_closes=$(( $(field idle_closes "$after") - $(field idle_closes "$before") ))
  printf '{"round":%d,"backend":"%s","conns":%d,"held":%d,"wrk_connections":%d,"wrk_seconds":%d,"requests":%d,"window_idle_closes":%d,"wrk_rps":%s,"cpu_s":%s,"cpu_us_per_request":%s,"rss_held":%s,"timer_bytes_held":%s,"timer_op_ns":%s,"timer_ns_per_request":%s,"profile":%s,"server_end":%s,"client":%s}\n' \
    "$round" "$backend" "$conns" "$(field open "$held")" "$wrk_connections" \
    "$wrk_seconds" "$requests" "$window_closes" "${wrk_rps:-0}" "$cpu" \
    "$(python3 -c "print($cpu * 1e6 / max(1, $requests))")" \
    "$(field rss_bytes "$held")" "$(field timer_bytes "$held")" \
    "$(field timer_op_ns "$after")" "$timer_ns" "$samples" "$end" \
    "$(cat "$work/client.out")" \
    | tee -a "$out"
}

for round in $(seq "$rounds"); do
  for backend in "${backends[@]}"; do
    run_one "$backend" "$round"
  done
done
echo "results: $out" >&2
python3 "$here/idle_server_table.py" "$out"
