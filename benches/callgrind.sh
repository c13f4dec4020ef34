#!/usr/bin/env bash
# Instructions per operation of the in-process targets (valgrind callgrind):
# benches/examples/ops.rs runs N of one operation inside its `measure`, and
# only that is counted. Independent of the host's speed.
#
#   bash benches/callgrind.sh                     # get, create, lifecycle, input
#   OPS=/path/to/ops bash benches/callgrind.sh    # another build of ops
set -euo pipefail
cd "$(dirname "$0")/.."

OPS=${OPS:-}
if [ -z "$OPS" ]; then
  cargo build --quiet --release -p mcp-task-layer-benches --example ops
  OPS="${CARGO_TARGET_DIR:-target}/release/examples/ops"
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for op_n in get:20000 create:20000 lifecycle:10000 input:5000; do
  op=${op_n%:*}
  n=${op_n#*:}
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measure*' \
    --callgrind-out-file="$dir/cg" "$OPS" "$op" "$n" 2>/dev/null
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$dir/cg")
  echo "$op: $((total / n)) instructions per operation ($total / $n)"
done
