#!/usr/bin/env bash
# idle_server under each timer backend at once (local, local-kept, shared,
# asio, asio-kept), with idle_client: 300
# keep-alive connections, 50 of them sending a request every 100 ms for 2 s,
# then all quiet until the server closes them. Passes when, for every
# backend, the client saw every connection closed, none early (measured
# from its own last request) and none while still active, and the server
# counted 300 idle closes, none early and none twice.
#
#   idle_server_smoke.sh IDLE_SERVER IDLE_CLIENT
set -euo pipefail
server=$1
client=$2
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

timeout_ms=2000
conns=300
backends=(local local-kept shared asio asio-kept)
for backend in "${backends[@]}"; do
  "$server" --backend="$backend" --port=0 --threads=2 \
    --timeout_ms=$timeout_ms --tick_ms=10 >"$work/$backend.server" \
    2>"$work/$backend.server.err" &
  pids+=($!)
done
# Each server prints "listening on PORT" first.
ports=()
for backend in "${backends[@]}"; do
  for _ in $(seq 100); do
    grep -q '^listening on' "$work/$backend.server" 2>/dev/null && break
    sleep 0.1
  done
  port=$(awk '/^listening on/ {print $3}' "$work/$backend.server")
  [[ -n "$port" ]] || { echo "FAIL $backend: server did not start"; cat "$work/$backend.server.err"; exit 1; }
  ports+=("$port")
done

clients=()
i=0
for backend in "${backends[@]}"; do
  "$client" --port="${ports[$i]}" --connections=$conns --active=50 \
    --period_ms=100 --active_s=2 --timeout_ms=$timeout_ms --grace_ms=8000 \
    >"$work/$backend.client" &
  clients+=($!)
  i=$((i + 1))
done

failed=0
i=0
for backend in "${backends[@]}"; do
  rc=0
  wait "${clients[$i]}" || rc=$?
  kill -TERM "${pids[$i]}"
  src=0
  wait "${pids[$i]}" || src=$?
  c=$(cat "$work/$backend.client")
  s=$(grep '"what":"end"' "$work/$backend.server" || true)
  echo "$backend client: $c"
  echo "$backend server: $s"
  field() { grep -o "\"$1\":[-0-9]*" <<<"$2" | cut -d: -f2; }
  if [[ $rc -ne 0 || $src -ne 0 ]]; then
    echo "FAIL $backend: client exit $rc, server exit $src"; failed=1
  fi
  if [[ "$(field idle_closes "$s")" != "$conns" || "$(field early_closes "$s")" != 0 ||
        "$(field double_closes "$s")" != 0 || "$(field closed "$c")" != "$conns" ||
        "$(field closed_early "$c")" != 0 ]]; then
    echo "FAIL $backend: want $conns idle closes, none early, none twice"; failed=1
  fi
  i=$((i + 1))
done
[[ $failed -eq 0 ]] && echo "OK: every backend closed every idle connection once, none early"
exit $failed
