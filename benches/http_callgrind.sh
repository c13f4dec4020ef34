#!/usr/bin/env bash
# Instructions per HTTP request in the server process, valgrind callgrind:
# `tasks/get` of a completed task and `tools/call` of the `Sync` tool
# `greet`, each over one keep-alive connection (benches/http/drive.py), and
# the ceiling (benches/examples/ceiling.rs) for the same `tasks/get`
# request. The counters are zeroed after a warm-up and dumped after N
# requests: the figure is the server's whole work per request (hyper, the
# endpoint, the layer, tokio; not the kernel's), independent of the host's
# speed.
#
#   bash benches/http_callgrind.sh                  # N=2000
#   SERVER=/path/to/server CEILING=/path/to/ceiling bash benches/http_callgrind.sh
#   KEEP=/tmp/cg/run bash benches/http_callgrind.sh # keeps each dump for callgrind_annotate
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000}
PORT=${PORT:-38127}
SERVER=${SERVER:-}
CEILING=${CEILING:-}
if [ -z "$SERVER" ]; then
  cargo build --quiet --release --features axum --example server
  SERVER="${CARGO_TARGET_DIR:-target}/release/examples/server"
fi
if [ -z "$CEILING" ]; then
  cargo build --quiet --release -p mcp-task-layer-benches --example ceiling
  CEILING="${CARGO_TARGET_DIR:-target}/release/examples/ceiling"
fi
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

start() { # binary args... → pid, waits for "listening"
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$@" >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q listening "$dir/log" && return
    sleep 0.1
  done
  cat "$dir/log" >&2
  exit 1
}
stop() {
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
  rm -f "$dir"/cg.*
}
measure() { # label, drive.py args... → instructions per request
  local label=$1
  shift
  python3 benches/http/drive.py "$PORT" 200 "$@"
  callgrind_control -z "$pid" >/dev/null 2>&1
  python3 benches/http/drive.py "$PORT" "$N" "$@"
  callgrind_control -d "$pid" >/dev/null 2>&1
  local total dump
  # each dump is a numbered file (cg.PID.1, ...): the newest holds the N requests
  dump=$(ls -t "$dir"/cg.*.* | head -1)
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
  echo "$label: $((total / N)) instructions per request ($total / $N)"
  [ -n "${KEEP:-}" ] && cp "$dump" "$KEEP.$(echo "$label" | tr -c "a-z0-9\n" _)"
  rm -f "$dir"/cg.*.*
}

start "$SERVER" --port "$PORT"
completed=$(python3 benches/http/drive.py "$PORT" 1 call failing_job)
sleep 3
measure "server tasks/get (completed)" get "$completed"
measure "server tools/call greet (Sync)" greet
stop
start "$CEILING" --port "$PORT"
measure "ceiling" get "$completed"
stop
