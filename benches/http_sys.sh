#!/usr/bin/env bash
# What the kernel sees of one HTTP `tasks/get`, the example server against
# the ceiling (benches/examples/ceiling.rs), under the wrk client of
# benches/http.sh: per request, each side's system calls (all, and the
# socket reads, writes, `epoll_wait`s and `futex`es), context switches and
# wake-ups, and the CPU time of the server process and of wrk, user and
# system apart (from /proc and the shell's `time`).
#
#   bash benches/http_sys.sh                        # 5 s a side, 2 wrk threads, 64 connections
#   SERVER=/path/to/server CEILING=/path/to/ceiling REPS=3 DURATION=5s bash benches/http_sys.sh
#
# The counts come from `perf stat` on tracepoints (root, or
# kernel.perf_event_paranoid <= 1; this host has no hardware counters).
# The counts per request are steady; the CPU times per request depend on
# the host's state as wrk's rates do (run it on a quiet host), and count
# what each side's instructions cost in time: cache misses, the kernel's
# work for the same system calls (BENCHMARKS.md, issue 32's tenth pass).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-38137}
DURATION=${DURATION:-5s}
REPS=${REPS:-2}

command -v wrk >/dev/null || { echo "wrk not found: apt-get install -y wrk" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf not found" >&2; exit 1; }
# shellcheck source=http/common.sh
source benches/http/common.sh
binaries
scratch

start server "$SERVER" --port "$PORT"
server_pid=${pids[-1]}
completed_task
start ceiling "$CEILING" --port $((PORT + 1)) --bytes "$(wc -c <"$dir/get")"
ceiling_pid=${pids[-1]}

events=raw_syscalls:sys_enter,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_writev,syscalls:sys_enter_write
events=$events,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,sched:sched_switch,sched:sched_wakeup
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14, $15}' "/proc/$1/stat"; } # user, system ticks

echo "wrk -t2 -c64 -d$DURATION, tasks/get; per request (the server's or the ceiling's process; wrk apart)"
for rep in $(seq "$REPS"); do
  for side in server ceiling; do
    if [ $side = server ]; then pid=$server_pid port=$PORT; else pid=$ceiling_pid port=$((PORT + 1)); fi
    perf stat -x, -e "$events" -p "$pid" -o "$dir/perf" -- sleep 1000 2>/dev/null &
    perf_pid=$!
    sleep 0.3
    read -r u0 s0 < <(cpu "$pid")
    TIMEFORMAT='%U %S'
    { time MCP_METHOD=tasks/get MCP_NAME=$task BODY=$GET_BODY wrk -t2 -c64 -d"$DURATION" \
      -s benches/http/mcp.lua "http://127.0.0.1:$port/mcp" >"$dir/wrk"; } 2>"$dir/time"
    read -r u1 s1 < <(cpu "$pid")
    # perf stat ends with its command (SIGINT is ignored by a script's
    # background jobs): end the command.
    kill "$(pgrep -P $perf_pid)"
    wait $perf_pid 2>/dev/null || true
    read -r wu ws <"$dir/time"
    n=$(awk '/requests in/ {print $1}' "$dir/wrk")
    rate=$(awk '/^Requests\/sec:/ {print $2}' "$dir/wrk")
    awk -F, -v n="$n" '$1 ~ /^[0-9]+$/ {v[$3] = $1 / n}
      END {printf "  syscalls %.2f (recvfrom %.2f, read %.2f, writev %.2f, write %.3f, epoll_wait %.3f, futex %.3f); switches %.3f, wake-ups %.3f\n",
        v["raw_syscalls:sys_enter"], v["syscalls:sys_enter_recvfrom"], v["syscalls:sys_enter_read"],
        v["syscalls:sys_enter_writev"], v["syscalls:sys_enter_write"], v["syscalls:sys_enter_epoll_wait"],
        v["syscalls:sys_enter_futex"], v["sched:sched_switch"], v["sched:sched_wakeup"]}' "$dir/perf" >"$dir/counts"
    awk -v side=$side -v n="$n" -v rate="$rate" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v t="$ticks" \
      -v wu="$wu" -v ws="$ws" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
      f = 1e6 / t / n
      printf "%-7s %7.0f req/s, load %s; CPU us: %s user %.2f system %.2f, wrk user %.2f system %.2f\n",
        side, rate, load, side, u * f, s * f, wu * 1e6 / n, ws * 1e6 / n }'
    cat "$dir/counts"
  done
done
