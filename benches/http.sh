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
#   SERVER_CPUS=0 CLIENT_CPUS=1 bash benches/http.sh  # servers on CPU 0, wrk on CPU 1 (taskset)
#   AA=1 bash benches/http.sh                         # the ceiling against a second ceiling (A/A)
#   ORDER=abba MIRRORS=3 DURATION=3s bash benches/http.sh  # each round: abba three times, 3 s a run
#   ORDER=abba MIRRORS=5 DURATION=2s ROUNDS=5 WORKLOADS=get bash benches/http.sh  # issue 32's goal
#
# ORDER=abba runs each side twice a round, mirrored, and takes the round's
# ratio of the two sums: a host whose speed drifts during a round (this one
# does, by up to 2x between runs) then weighs on both sides alike, where
# the plain order (server, then ceiling) gives the drift to the ratio.
#
# MIRRORS=n (with ORDER=abba) runs the mirrored group n times a round,
# each side's round figure the mean of its 2n runs: shorter runs, closer
# together, for a round about as long (MIRRORS=3 DURATION=3s: twelve runs
# of 3 s against four of 10 s), so a step in the host's speed falls on
# both sides more evenly. The A/A rounds (AA=1) of MIRRORS=5 DURATION=2s
# were the steadiest of every method tried, 0.95-1.03 (BENCHMARKS.md,
# issue 32's thirteenth and fourteenth passes): the method to judge a
# round by.
#
# SERVER_CPUS and CLIENT_CPUS (taskset lists) keep the servers and wrk on
# cores of their own, as a client on another machine would be: unpinned,
# two wrk threads and the server's workers share this host's two cores as
# the scheduler places them, and share each core's caches. Both sides of
# a round are pinned alike; a server's tokio runtime then sizes itself to
# its CPUs (one worker on one CPU).
#
# AA=1 puts a second ceiling, answering as many bytes, where the server's
# side of each run was: the ratios then measure the host against itself,
# the spread any server's ratio has on it (BENCHMARKS.md, issue 32's
# thirteenth pass). The example server still starts, for the answers'
# sizes.
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
SERVER_CPUS=${SERVER_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
AA=${AA:-}
MIRRORS=${MIRRORS:-1}

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
# shellcheck source=http/common.sh
source benches/http/common.sh
binaries
scratch

# on CPUS CMD…: CMD, on those CPUs when CPUS is set (exec: the pid is CMD's).
on() {
  local cpus=$1
  shift
  if [ -n "$cpus" ]; then exec taskset -c "$cpus" "$@"; else exec "$@"; fi
}

start server on "$SERVER_CPUS" "$SERVER" --port "$PORT"
completed_task
CALL_BODY="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"greet\",\"arguments\":{\"name\":\"bench\"},$META}}"
post tools/call greet "$CALL_BODY" >"$dir/call"
grep -q 'Hello, bench!' "$dir/call" || { echo "greet failed: $(cat "$dir/call")" >&2; exit 1; }
get_bytes=$(wc -c <"$dir/get")
call_bytes=$(wc -c <"$dir/call")
start ceiling_get on "$SERVER_CPUS" "$CEILING" --port $((PORT + 1)) --bytes "$get_bytes"
start ceiling_call on "$SERVER_CPUS" "$CEILING" --port $((PORT + 2)) --bytes "$call_bytes"
# Where each workload's server side is: the server, or (AA=1) a second ceiling.
server_get=$PORT
server_call=$PORT
if [ -n "$AA" ]; then
  start aa_get on "$SERVER_CPUS" "$CEILING" --port $((PORT + 3)) --bytes "$get_bytes"
  start aa_call on "$SERVER_CPUS" "$CEILING" --port $((PORT + 4)) --bytes "$call_bytes"
  server_get=$((PORT + 3))
  server_call=$((PORT + 4))
fi

# busy CPUS: the busy and the total jiffies of those CPUs (a taskset list
# of numbers and ranges) so far, from /proc/stat.
busy() {
  awk -v list="$1" 'BEGIN { n = split(list, a, ",")
      for (i = 1; i <= n; i++) { m = split(a[i], r, "-"); for (c = r[1]; c <= r[m]; c++) want["cpu" c] = 1 } }
    ($1 in want) { t = 0; for (i = 2; i <= 9; i++) t += $i; b += t - $5 - $6; T += t }
    END { print b, T }' /proc/stat
}
percent() { # before, after (busy total) → busy %
  echo "$1 $2" | awk '{ printf "%.0f", ($4 > $2) ? 100 * ($3 - $1) / ($4 - $2) : 0 }'
}

rate() { # port, method, name, body → requests per second
  local s0 w0
  if [ -n "$SERVER_CPUS" ] && [ -n "$CLIENT_CPUS" ]; then s0=$(busy "$SERVER_CPUS"); w0=$(busy "$CLIENT_CPUS"); fi
  (MCP_METHOD=$2 MCP_NAME=$3 BODY=$4 on "$CLIENT_CPUS" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" \
    -s benches/http/mcp.lua "http://127.0.0.1:$1/mcp") >"$dir/wrk"
  if [ -n "${s0:-}" ]; then
    printf ' %s/%s' "$(percent "$s0" "$(busy "$SERVER_CPUS")")" "$(percent "$w0" "$(busy "$CLIENT_CPUS")")" >>"$dir/busy"
  fi
  grep -q 'Non-2xx' "$dir/wrk" && { cat "$dir/wrk" >&2; exit 1; }
  awk '/^Requests\/sec:/ {print $2}' "$dir/wrk"
}
mean() { awk '{t += $1} END {print t / NR}'; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS rounds, order $ORDER$([ "$MIRRORS" = 1 ] || echo " x$MIRRORS")${AA:+, A/A: a second ceiling on the server side}, CPUs: servers ${SERVER_CPUS:-any}, wrk ${CLIENT_CPUS:-any}; answers: tasks/get $get_bytes bytes, tools/call $call_bytes bytes"
for round in $(seq "$ROUNDS"); do
  echo "round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for workload in $WORKLOADS; do
    if [ $workload = get ]; then args=(tasks/get "$task" "$GET_BODY"); ceiling=$((PORT + 1)); server=$server_get
    else args=(tools/call greet "$CALL_BODY"); ceiling=$((PORT + 2)); server=$server_call; fi
    if [ "$ORDER" = abba ]; then
      # MIRRORS times server, ceiling, ceiling, server; each side's mean.
      ss=() cs=()
      for _ in $(seq "$MIRRORS"); do
        ss+=("$(rate "$server" "${args[@]}")")
        cs+=("$(rate "$ceiling" "${args[@]}")" "$(rate "$ceiling" "${args[@]}")")
        ss+=("$(rate "$server" "${args[@]}")")
      done
      printf '  %-9s server' "$workload"; printf ' %9.0f' "${ss[@]}"
      printf '  ceiling'; printf ' %9.0f' "${cs[@]}"; echo ' req/s'
      s=$(printf '%s\n' "${ss[@]}" | mean)
      c=$(printf '%s\n' "${cs[@]}" | mean)
    else
      s=$(rate "$server" "${args[@]}")
      c=$(rate "$ceiling" "${args[@]}")
    fi
    echo "$s" >>"$dir/$workload.server"
    echo "$c" >>"$dir/$workload.ceiling"
    echo "$s / $c" | bc -l >>"$dir/$workload.ratio"
    printf '  %-9s server %9.0f req/s  ceiling %9.0f req/s  ratio %.3f\n' \
      "$workload" "$s" "$c" "$(tail -1 "$dir/$workload.ratio")"
    if [ -f "$dir/busy" ]; then
      echo "  busy %, servers' CPUs / wrk's, run by run:$(cat "$dir/busy")"
      rm "$dir/busy"
    fi
  done
done
for workload in $WORKLOADS; do
  s=$(median <"$dir/$workload.server")
  c=$(median <"$dir/$workload.ceiling")
  label=$([ $workload = get ] && echo "tasks/get (completed)" || echo "tools/call greet (Sync)")
  printf 'median %-24s server %9.0f req/s  ceiling %9.0f req/s  ratio %.3f\n' \
    "$label" "$s" "$c" "$(median <"$dir/$workload.ratio")"
done
