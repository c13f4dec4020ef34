#!/usr/bin/env bash
# `tasks/get` over HTTP on loopback: examples/server.rs (release) under wrk.
#
#   bash benches/http.sh            # 10 s per run, 2 wrk threads, 64 connections
#   DURATION=5s CONNS=32 bash benches/http.sh
#
# Needs wrk (Debian: apt-get install -y wrk). Starts the server on 127.0.0.1
# only, makes one task that stays `working` (slow_compute, 3000 s) and one
# that completes (failing_job: a tool error after a second), runs wrk
# against `tasks/get` of each for $DURATION, and stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-38117}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
URL="http://127.0.0.1:$PORT/mcp"
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
cargo build --quiet --release --features axum --example server
server="${CARGO_TARGET_DIR:-target}/release/examples/server"
log=$(mktemp)
"$server" --port "$PORT" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
  grep -q listening "$log" && break
  sleep 0.1
done
grep -q listening "$log" || { cat "$log" >&2; exit 1; }

call() { # tool, arguments → taskId
  curl -sf -m 5 "$URL" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $1" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"$1\",\"arguments\":$2,$META}}" |
    sed -n 's/.*"taskId":"\([0-9a-f]*\)".*/\1/p'
}
get() { # taskId → body
  curl -sf -m 5 "$URL" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tasks/get' -H "Mcp-Name: $1" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"$1\",$META}}"
}

working=$(call slow_compute '{"seconds":3000,"label":"bench"}')
completed=$(call failing_job '{}')
[ -n "$working" ] && [ -n "$completed" ] || { echo "no task created" >&2; exit 1; }
sleep 1.5
get "$working" | grep -q '"status":"working"' || { echo "task not working" >&2; exit 1; }
get "$completed" | grep -q '"status":"completed"' || { echo "task not completed" >&2; exit 1; }

for which in working completed; do
  id=${!which}
  echo "== tasks/get of a $which task: wrk -t$THREADS -c$CONNS -d$DURATION"
  TASK_ID=$id wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency \
    -s benches/http/tasks_get.lua "$URL"
done
