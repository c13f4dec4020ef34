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

# shellcheck source=node.sh
source "$ROOT/.ci/node.sh"
# shellcheck source=server.sh
source "$ROOT/.ci/server.sh"
cleanup() { stop_server; }
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf 'conformance: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v cargo >/dev/null || die "cargo is not installed"

# --- Node 22 (the harness crashes on Node 20) ---------------------------------
ensure_node "$CACHE"

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
build_server "$OUT"
start_server "$OUT"

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
