# What benches/http.sh, http_sys.sh and http_callgrind.sh share; sourced
# from the repository root.
#
#   binaries        SERVER and CEILING: as given, or release builds of the
#                   example server and the ceiling (built here). The
#                   example server is examples/server.rs built by the
#                   benches package (`--example http_server`): the same
#                   source as `cargo build --example server`, without
#                   the root package's dev-dependency tokio features
#                   (`full`, `test-util`: the tests' pausable clock,
#                   `parking_lot` locks, `process`'s orphan reaping);
#                   BENCHMARKS.md, issue 32's eleventh pass
#   scratch         a scratch directory `dir` and the list `pids`, both
#                   cleaned up (the processes stopped) on exit
#   start LOG CMD…  runs CMD in the background (its pid appended to `pids`),
#                   its output in $dir/LOG, and waits for "listening" (at
#                   most START_TENTHS tenths of a second, default 100)
#   post M NAME B   a 2026-07-28 POST to the server on PORT → its answer
#   completed_task  makes a `failing_job` task and waits until it has
#                   completed: sets `task` and GET_BODY (its `tasks/get`),
#                   leaves the answer in $dir/get

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}'

binaries() {
  local bin="${CARGO_TARGET_DIR:-target}/release/examples"
  SERVER=${SERVER:-}
  CEILING=${CEILING:-}
  if [ -z "$SERVER" ]; then
    cargo build --quiet --release -p mcp-task-layer-benches --features http-server --example http_server
    SERVER="$bin/http_server"
  fi
  if [ -z "$CEILING" ]; then
    cargo build --quiet --release -p mcp-task-layer-benches --example ceiling
    CEILING="$bin/ceiling"
  fi
}

scratch() {
  dir=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
}

start() {
  local log="$dir/$1"
  shift
  "$@" >"$log" 2>&1 &
  pids+=($!)
  for _ in $(seq "${START_TENTHS:-100}"); do
    grep -q listening "$log" && return
    sleep 0.1
  done
  cat "$log" >&2
  exit 1
}

post() {
  curl -sf -m 5 "http://127.0.0.1:$PORT/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H "Mcp-Method: $1" -H "Mcp-Name: $2" -d "$3"
}

completed_task() {
  task=$(post tools/call failing_job \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"failing_job\",\"arguments\":{},$META}}" |
    sed -n 's/.*"taskId":"\([0-9a-f]*\)".*/\1/p')
  [ -n "$task" ] || { echo "no task created" >&2; exit 1; }
  GET_BODY="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"$task\",$META}}"
  for _ in $(seq 50); do
    post tasks/get "$task" "$GET_BODY" >"$dir/get" && grep -q '"status":"completed"' "$dir/get" && break
    sleep 0.1
  done
  grep -q '"status":"completed"' "$dir/get" || { echo "task not completed" >&2; exit 1; }
}
