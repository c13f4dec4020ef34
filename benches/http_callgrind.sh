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
#   CACHE=1 bash benches/http_callgrind.sh          # also the instruction-cache misses and the
#                                                   # code footprint per request (benches/http/footprint.py)
#   CACHE=1 I1=65536,4,64 bash benches/http_callgrind.sh  # misses in another first-level
#                                                   # instruction cache (size,ways,line) than this host's
#
# With CACHE=1 callgrind simulates the host's caches (`--cache-sim=yes`,
# `--dump-instr=yes`): the instruction count is the same, the run slower.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000}
PORT=${PORT:-38127}
# shellcheck source=http/common.sh
source benches/http/common.sh
binaries
scratch
START_TENTHS=600 # valgrind starts slowly

run() { # binary args... under callgrind, waits for "listening"
  start log valgrind --tool=callgrind ${CACHE:+--cache-sim=yes --dump-instr=yes} ${I1:+--I1=$I1} \
    --callgrind-out-file="$dir/cg.%p" "$@"
}
stop() {
  kill "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null || true
  rm -f "$dir"/cg.*
}
measure() { # label, drive.py args... → instructions per request
  local label=$1 pid=${pids[-1]}
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
  [ -n "${CACHE:-}" ] && python3 benches/http/footprint.py "$dump" "$N"
  [ -n "${KEEP:-}" ] && cp "$dump" "$KEEP.$(echo "$label" | tr -c "a-z0-9\n" _)"
  rm -f "$dir"/cg.*.*
}

run "$SERVER" --port "$PORT"
completed=$(python3 benches/http/drive.py "$PORT" 1 call failing_job)
sleep 3
measure "server tasks/get (completed)" get "$completed"
measure "server tools/call greet (Sync)" greet
stop
run "$CEILING" --port "$PORT"
measure "ceiling" get "$completed"
stop
