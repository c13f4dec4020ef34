# Sourced by the .ci scripts: build and run examples/server.rs (or the
# example SERVER_EXAMPLE names, built with the features SERVER_FEATURES;
# defaults: server and axum,stdio). SERVER_BUILD replaces the build's
# profile and feature flags (default `--release --features
# $SERVER_FEATURES`); .ci/run passes `--all-features`, the debug build that
# `cargo test --all-features` has just made of both examples, so that CI
# compiles no release build of the crate and its dependencies twice.
#
#   build_server OUT   cargo build $SERVER_BUILD --example $SERVER_EXAMPLE;
#                      sets SERVER_BIN (the log is OUT/build.jsonl)
#   start_server OUT   starts it on a free loopback port, waits at most
#                      READY_TIMEOUT_S (default 30) seconds for its
#                      "listening on" line; sets SERVER_PID and URL
#                      (output in OUT/server.stdout, OUT/server.stderr)
#   stop_server        SIGTERM, up to 5 s, then SIGKILL; only SERVER_PID
#
# SERVER_COMMAND, when set, is the whole command line to serve instead
# (split on spaces; it must print the same "listening on" line, and its
# port must be chosen by the OS): `build_server` then builds nothing. The
# gateway's conformance run uses it for `mcp-tasks gateway --listen
# 127.0.0.1:0 ... -- UPSTREAM`.
#
# Needs ROOT (the repository), NODE (see node.sh), cargo, and the callers'
# `say` and `die`. CARGO_TARGET_DIR is honoured by cargo as usual.

SERVER_PID=""
SERVER_EXAMPLE="${SERVER_EXAMPLE:-server}"
SERVER_FEATURES="${SERVER_FEATURES:-axum,stdio}"

build_server() {
  local out="$1"
  if [[ -n "${SERVER_COMMAND:-}" ]]; then
    say "serving: $SERVER_COMMAND"
    return
  fi
  command -v cargo >/dev/null || die "cargo is not installed"
  local flags
  read -ra flags <<<"${SERVER_BUILD:---release --features $SERVER_FEATURES}"
  say "building examples/$SERVER_EXAMPLE.rs (cargo build ${flags[*]})"
  (cd "$ROOT" && cargo build "${flags[@]}" --example "$SERVER_EXAMPLE" \
    --message-format=json-render-diagnostics) >"$out/build.jsonl"
  SERVER_BIN="$("$NODE" -e '
    const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
    for (const line of lines) {
      let m;
      try { m = JSON.parse(line); } catch { continue; }
      if (m.reason === "compiler-artifact" && m.target && m.target.name === process.argv[2]
          && m.target.kind.includes("example") && m.executable) console.log(m.executable);
    }' "$out/build.jsonl" "$SERVER_EXAMPLE" | tail -n 1)"
  [[ -x "$SERVER_BIN" ]] || die "cargo did not report the server binary"
}

start_server() {
  local out="$1" timeout_s="${READY_TIMEOUT_S:-30}"
  # Port 0: the OS picks a free port and the server prints it.
  local argv
  if [[ -n "${SERVER_COMMAND:-}" ]]; then
    read -ra argv <<<"$SERVER_COMMAND"
  else
    argv=("$SERVER_BIN" --port 0)
  fi
  "${argv[@]}" >"$out/server.stdout" 2>"$out/server.stderr" &
  SERVER_PID=$!
  URL=""
  for _ in $(seq $((timeout_s * 10))); do
    URL="$(sed -n 's#^listening on \(http://127\.0\.0\.1:[0-9][0-9]*/mcp\)$#\1#p' "$out/server.stdout" | head -n 1)"
    [[ -n "$URL" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited: $(tail -n 20 "$out/server.stderr")"
    sleep 0.1
  done
  [[ -n "$URL" ]] || die "the server did not print 'listening on' within ${timeout_s}s"
  say "server $SERVER_PID listening on $URL"
}

stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
