#!/usr/bin/env bash
# A private Redis server for the tests and benches: Debian's redis-server,
# a fresh directory under /tmp, listening on 127.0.0.1 only, on a port of
# its own (56379 or the next free one), append-only persistence, and
# `maxmemory-policy noeviction` (what RedisStore requires).
#
# Sourced, as .ci/run does:
#     source .ci/redis.sh
#     mcp_redis_start           # exports MCP_TASKS_REDIS_URL, MCP_REDIS_DIR
#     mcp_redis_stop            # stops it by PID and cleans up
#
# Run by hand:
#     bash .ci/redis.sh start           # prints the export lines to eval
#     bash .ci/redis.sh stop "$MCP_REDIS_DIR"
#
# Settings (environment):
#     MCP_REDIS_PORT=56379   first port tried
#
# Tests that restart a server start their own (tests/common/redis.rs): this
# one is shared by every test, each under a key prefix of its own.

_mcp_redis_log() { echo "redis.sh: $*" >&2; }

# redis-server, installed from Debian's packages if missing.
_mcp_redis_bin() {
    local bin
    bin=$(command -v redis-server || true)
    if [[ -z "$bin" ]]; then
        if [[ $(id -u) -ne 0 ]]; then
            _mcp_redis_log "redis-server is not installed and this is not root: apt-get install redis-server"
            return 1
        fi
        _mcp_redis_log "installing redis-server from Debian's packages"
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >&2
        bin=$(command -v redis-server || true)
    fi
    [[ -n "$bin" ]] || { _mcp_redis_log "no redis-server after install"; return 1; }
    echo "$bin"
}

_mcp_redis_port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

mcp_redis_start() {
    local bin base port i
    bin=$(_mcp_redis_bin) || return 1
    base=$(mktemp -d /tmp/mcp-redis.XXXXXX) || return 1
    port=${MCP_REDIS_PORT:-56379}
    for ((i = 0; i < 50; i++)); do
        _mcp_redis_port_free "$port" && break
        port=$((port + 1))
    done
    "$bin" --bind 127.0.0.1 --port "$port" --dir "$base" --appendonly yes \
        --save '' --maxmemory-policy noeviction --daemonize no \
        --logfile "$base/server.log" --pidfile "$base/redis.pid" &
    local pid=$!
    for ((i = 0; i < 100; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            _mcp_redis_log "the server did not start:"; tail -n 30 "$base/server.log" >&2 || true
            rm -rf "$base"; return 1
        fi
        redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG && break
        sleep 0.1
    done
    echo "$pid" >"$base/pid"
    export MCP_REDIS_DIR=$base MCP_REDIS_PID=$pid
    export MCP_TASKS_REDIS_URL="redis://127.0.0.1:$port/0"
    _mcp_redis_log "$("$bin" --version | awk '{print $3}') (pid $pid) at $MCP_TASKS_REDIS_URL"
}

# Stop the server mcp_redis_start made (or the one in directory $1) by its
# PID and delete its files. Safe to call twice.
mcp_redis_stop() {
    local base=${1:-${MCP_REDIS_DIR:-}} pid i
    [[ -n "$base" && -d "$base" ]] || return 0
    pid=$(cat "$base/pid" 2>/dev/null || true)
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 300; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    rm -rf "$base"
    if [[ "$base" == "${MCP_REDIS_DIR:-}" ]]; then
        unset MCP_REDIS_DIR MCP_REDIS_PID MCP_TASKS_REDIS_URL
    fi
    _mcp_redis_log "stopped"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    case "${1:-}" in
        start)
            mcp_redis_start
            printf 'export MCP_TASKS_REDIS_URL=%q MCP_REDIS_DIR=%q\n' \
                "$MCP_TASKS_REDIS_URL" "$MCP_REDIS_DIR"
            ;;
        stop) mcp_redis_stop "${2:-${MCP_REDIS_DIR:-}}" ;;
        *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
    esac
fi
