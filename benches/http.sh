#!/usr/bin/env bash
# The crate's HTTP path against the machine's ceiling, in one run: the
# example server (release, `--port`) and a bare hyper server answering a
# fixed body of the same size (benches/examples/ceiling.rs), both under the
# same wrk client, alternating, ROUNDS times:
#
#   1. `tasks/get` of a completed task (a `failing_job` task: a tool error
#      after a second), against a ceiling answering as many bytes;
#   2. `tools/call` of the `Sync` tool `greet`, passed through the layer to
#      the example's inner server, against a ceiling answering as many bytes.
#
# It prints each run's requests per second and the round's ratio, then per
# workload the median of each side and the median of the rounds' ratios (BENCHMARKS.md, "HTTP at the
# ceiling"). The load average is printed before each round.
#
#   bash benches/http.sh                              # 3 rounds of 10 s per run, 2 wrk threads, 64 connections
#   ROUNDS=1 DURATION=5s CONNS=32 bash benches/http.sh
#   SERVER=/path/to/another/build/of/server bash benches/http.sh
#   CEILING=/path/to/a/build/of/the/ceiling bash benches/http.sh
#   ORDER=abba bash benches/http.sh                   # each round: server, ceiling, ceiling, server
#   WORKLOADS=get bash benches/http.sh                # `tasks/get` only
#
# ORDER=abba runs each side twice a round, mirrored, and takes the round's
# ratio of the two sums: a host whose speed drifts during a round (this one
# does, by up to 2x between runs) then weighs on both sides alike, where
# the plain order (server, then ceiling) gives the drift to the ratio.
#
# Needs wrk (Debian: apt-get install -y wrk) and curl. Every server listens
# on 127.0.0.1 only and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-38117}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
ORDER=${ORDER:-ab}
WORKLOADS=${WORKLOADS:-get call}

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
# shellcheck source=http/common.sh
source benches/http/common.sh
binaries
scratch

start server "$SERVER" --port "$PORT"
completed_task
CALL_BODY="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"bench\"},$META}}"
post tools/call greet "$CALL_BODY" >"$dir/call"
grep -q 'Hello, bench!' "$dir/call" || { echo "greet failed: $(cat "$dir/call")" >&2; exit 1; }
get_bytes=$(wc -c <"$dir/get")
call_bytes=$(wc -c <"$dir/call")
start ceiling_get "$CEILING" --port $((PORT + 1)) --bytes "$get_bytes"
start ceiling_call "$CEILING" --port $((PORT + 2)) --bytes "$call_bytes"

rate() { # port, method, name, body → requests per second
  MCP_METHOD=$2 MCP_NAME=$3 BODY=$4 wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" \
    -s benches/http/mcp.lua "http://127.0.0.1:$1/mcp" >"$dir/wrk"
  grep -q 'Non-2xx' "$dir/wrk" && { cat "$dir/wrk" >&2; exit 1; }
  awk '/^Requests\/sec:/ {print $2}' "$dir/wrk"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS rounds, order $ORDER; answers: tasks/get $get_bytes bytes, tools/call $call_bytes bytes"
for round in $(seq "$ROUNDS"); do
  echo "round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for workload in $WORKLOADS; do
    if [ $workload = get ]; then args=(tasks/get "$task" "$GET_BODY"); ceiling=$((PORT + 1));
    else args=(tools/call greet "$CALL_BODY"); ceiling=$((PORT + 2)); fi
    s=$(rate "$PORT" "${args[@]}")
    c=$(rate "$ceiling" "${args[@]}")
    if [ "$ORDER" = abba ]; then
      c2=$(rate "$ceiling" "${args[@]}")
      s2=$(rate "$PORT" "${args[@]}")
      printf '  %-9s server %9.0f, %9.0f req/s  ceiling %9.0f, %9.0f req/s\n' "$workload" "$s" "$s2" "$c" "$c2"
      s=$(echo "($s + $s2) / 2" | bc -l)
      c=$(echo "($c + $c2) / 2" | bc -l)
    fi
    echo "$s" >>"$dir/$workload.server"
    echo "$c" >>"$dir/$workload.ceiling"
    echo "$s / $c" | bc -l >>"$dir/$workload.ratio"
    printf '  %-9s server %9.0f req/s  ceiling %9.0f req/s  ratio %.3f\n' \
      "$workload" "$s" "$c" "$(tail -1 "$dir/$workload.ratio")"
  done
done
for workload in $WORKLOADS; do
  s=$(median <"$dir/$workload.server")
  c=$(median <"$dir/$workload.ceiling")
  label=$([ $workload = get ] && echo "tasks/get (completed)" || echo "tools/call greet (Sync)")
  printf 'median %-24s server %9.0f req/s  ceiling %9.0f req/s  ratio %.3f\n' \
    "$label" "$s" "$c" "$(median <"$dir/$workload.ratio")"
done
