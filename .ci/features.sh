#!/usr/bin/env bash
# Each feature of mcp-task-layer builds and passes clippy on its own: the
# library, the examples and every test target with no feature, then with
# each feature of
# Cargo.toml's [features] alone (read from `cargo metadata`, so a new
# feature is checked without editing this file).
#
#   bash .ci/features.sh          # what .ci/run does
#
# Examples whose required-features are not on are left out by cargo; each
# one is built in the run of its own feature, or, when it needs several,
# in a run with exactly those (the script prints which examples each run
# built, and fails if one was never built). No feature
# is skipped: the list printed first is the list checked.
set -euo pipefail
cd "$(dirname "$0")/.."

meta=$(cargo metadata --format-version 1 --no-deps)
mapfile -t features < <(python3 -c '
import json, sys
m = json.load(sys.stdin)
p = next(p for p in m["packages"] if p["name"] == "mcp-task-layer")
for f in sorted(p["features"]):
    if f != "default":
        print(f)
' <<<"$meta")
mapfile -t examples < <(python3 -c '
import json, sys
m = json.load(sys.stdin)
p = next(p for p in m["packages"] if p["name"] == "mcp-task-layer")
for t in p["targets"]:
    if "example" in t["kind"]:
        print(t["name"])
' <<<"$meta")
(( ${#features[@]} > 0 )) || { echo "features.sh: no feature found in Cargo.toml" >&2; exit 1; }
echo "features: ${features[*]} (and none)"

declare -A built=()
check() { # label, cargo arguments...
    local label="$1" start out names
    shift
    start=$SECONDS
    out=$(mktemp)
    if ! cargo clippy --no-default-features "$@" --lib --examples --tests \
        --message-format=json-render-diagnostics -- -D warnings >"$out"; then
        rm -f "$out"
        echo "features.sh: clippy failed with $label" >&2
        exit 1
    fi
    names=$(python3 -c '
import json, sys
names = set()
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target") or {}
    if m.get("reason") == "compiler-artifact" and "example" in t.get("kind", []) \
            and m.get("package_id", "").find("mcp-task-layer-benches") < 0:
        names.add(t["name"])
print(" ".join(sorted(names)))
' "$out")
    rm -f "$out"
    for n in $names; do built[$n]=1; done
    echo "  $label: clean in $((SECONDS - start)) s; examples: ${names:-none}"
}

check "no feature"
for f in "${features[@]}"; do
    check "--features $f" --features "$f"
done

# An example needing several features (rmcp_server: rmcp,axum) gets a run
# with exactly its required-features.
for e in "${examples[@]}"; do
    [[ -z "${built[$e]:-}" ]] || continue
    needs=$(python3 -c '
import json, sys
m = json.load(sys.stdin)
p = next(p for p in m["packages"] if p["name"] == "mcp-task-layer")
t = next(t for t in p["targets"] if t["name"] == sys.argv[1] and "example" in t["kind"])
print(",".join(t.get("required-features") or []))
' "$e" <<<"$meta")
    [[ -n "$needs" ]] && check "--features $needs" --features "$needs"
done

missing=()
for e in "${examples[@]}"; do
    [[ -n "${built[$e]:-}" ]] || missing+=("$e")
done
if (( ${#missing[@]} > 0 )); then
    echo "features.sh: examples built by no single-feature run: ${missing[*]}" >&2
    echo "  (an example needing two features needs a run of its own here)" >&2
    exit 1
fi
# The benches' build of examples/server.rs (`--example http_server`, what
# benches/http.sh measures) with exactly the feature it needs: every other
# run has more tokio features than it (~1 min on 2 cores, deps checked).
start=$SECONDS
if ! cargo clippy -p mcp-task-layer-benches --no-default-features --features http-server \
    --example http_server -- -D warnings; then
    echo "features.sh: clippy failed with the benches' http_server example" >&2
    exit 1
fi
echo "  benches --features http-server --example http_server: clean in $((SECONDS - start)) s"
echo "features: every build clean, every example built (${examples[*]})"
