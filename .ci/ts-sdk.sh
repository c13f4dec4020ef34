#!/usr/bin/env bash
# Drive examples/server.rs with the official TypeScript SDK client
# (@modelcontextprotocol/sdk 1.32.2, its 2025-11-25 `client.experimental.tasks`):
# the node:test suite in tests/ts-sdk/: tasks.test.mjs over Streamable HTTP,
# and stdio.test.mjs, whose `StdioClientTransport` launches the same binary
# with `--stdio` (skipped with MCP_URL, which names no binary). Exits non-zero
# if any test fails.
#
# Standalone and idempotent. Needs cargo, npm (any Node; Node 22 is installed
# from the npm registry into a cache) and coreutils. The SDK is installed with
# `npm ci` from tests/ts-sdk/package-lock.json.
#
# Environment:
#   TS_SDK_CACHE      where Node 22 is installed (default: the conformance cache,
#                     ${XDG_CACHE_HOME:-$HOME/.cache}/mcp-task-layer-conformance)
#   TS_SDK_OUT        where the build and server logs go (default: a temporary
#                     directory, removed on success)
#   MCP_URL           test a server that is already running instead of building one
#   CARGO_TARGET_DIR  honoured by cargo as usual
set -euo pipefail

READY_TIMEOUT_S=30
TEST_TIMEOUT_S=600

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TS_SDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-task-layer-conformance}"
if [[ -n "${TS_SDK_OUT:-}" ]]; then
  OUT="$TS_SDK_OUT"
  KEEP_OUT=1
else
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/mcp-task-layer-ts-sdk.XXXXXX")"
  KEEP_OUT=0
fi
mkdir -p "$OUT" "$CACHE"

export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

say() { printf 'ts-sdk: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# shellcheck source=node.sh
source "$ROOT/.ci/node.sh"
# shellcheck source=server.sh
source "$ROOT/.ci/server.sh"
cleanup() {
  local rc=$?
  stop_server
  if [[ "$rc" -ne 0 && -f "$OUT/server.stderr" ]]; then
    say "--- server stderr (last 50 lines) ---"
    tail -n 50 "$OUT/server.stderr" >&2 || true
  fi
  if [[ "$KEEP_OUT" -eq 0 && "$rc" -eq 0 ]]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ensure_node "$CACHE"
say "node $("$NODE" --version), npm $(npm --version)"

# --- the SDK, exactly as locked ------------------------------------------------
(cd "$ROOT/tests/ts-sdk" && npm ci --loglevel=error) >&2
sdk_version="$(cd "$ROOT/tests/ts-sdk" \
  && "$NODE" -p 'require("./node_modules/@modelcontextprotocol/sdk/package.json").version')"
[[ "$sdk_version" == "1.32.2" ]] || die "expected @modelcontextprotocol/sdk 1.32.2, got $sdk_version"

# --- the server ----------------------------------------------------------------
if [[ -n "${MCP_URL:-}" ]]; then
  URL="$MCP_URL"
  say "testing the server at $URL"
else
  build_server "$OUT"
  start_server "$OUT"
fi

# --- the tests -----------------------------------------------------------------
suites=(tasks.test.mjs)
[[ -n "${SERVER_BIN:-}" ]] && suites+=(stdio.test.mjs)
rc=0
(cd "$ROOT/tests/ts-sdk" && MCP_URL="$URL" SERVER_BIN="${SERVER_BIN:-}" timeout "$TEST_TIMEOUT_S" \
  "$NODE" --test --test-reporter=spec "${suites[@]}") || rc=$?
if [[ -n "$SERVER_PID" ]] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
  say "the server died during the tests"
  rc=1
fi
[[ "$rc" -eq 0 ]] || die "the TypeScript SDK tests failed (exit $rc; logs in $OUT)"
say "all TypeScript SDK tests passed"
