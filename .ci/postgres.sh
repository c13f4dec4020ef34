#!/usr/bin/env bash
# A private PostgreSQL cluster for the tests and benches: Debian's packages,
# a fresh data directory under /tmp, listening on 127.0.0.1 only, on a port
# of its own (55432 or the next free one), trust authentication, and one
# database, mcp_tasks_test.
#
# Sourced, as .ci/run does:
#     source .ci/postgres.sh
#     mcp_pg_start              # exports MCP_TASKS_POSTGRES_URL, MCP_PG_DIR
#     trap mcp_pg_stop EXIT     # stops it by pg_ctl (then by PID) and cleans up
#
# Run by hand:
#     bash .ci/postgres.sh start          # prints the export lines to eval
#     bash .ci/postgres.sh stop "$MCP_PG_DIR"
#
# Settings (environment):
#     MCP_PG_PORT=55432   first port tried
#     MCP_PG_DURABLE=1    keep fsync and synchronous_commit on (for benches);
#                         by default they are off, which is fine for tests
#
# Needs root to install packages and to run the server as the postgres user;
# as another user, PostgreSQL must be installed and the cluster runs as that
# user.

_mcp_pg_log() { echo "postgres.sh: $*" >&2; }

# The newest installed server's bin directory, installing PostgreSQL first if
# there is none.
_mcp_pg_bin() {
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -z "$bin" || ! -x "$bin/initdb" ]]; then
        if [[ $(id -u) -ne 0 ]]; then
            _mcp_pg_log "PostgreSQL is not installed and this is not root: apt-get install postgresql"
            return 1
        fi
        _mcp_pg_log "installing PostgreSQL from Debian's packages"
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
        bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    fi
    [[ -n "$bin" && -x "$bin/initdb" ]] || { _mcp_pg_log "no initdb after install"; return 1; }
    echo "$bin"
}

# Run a server binary as the cluster's owner.
_mcp_pg_as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

_mcp_pg_port_free() {
    # Something answers on the port: not free.
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

mcp_pg_start() {
    local bin base port opts i
    bin=$(_mcp_pg_bin) || return 1
    base=$(mktemp -d /tmp/mcp-pg.XXXXXX) || return 1
    chmod 755 "$base" # the postgres user must be able to enter it
    if [[ $(id -u) -eq 0 ]]; then
        install -d -o postgres -g postgres -m 700 "$base/pg"
    else
        install -d -m 700 "$base/pg"
    fi
    if ! _mcp_pg_as_owner "$bin/initdb" -D "$base/pg/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 --no-sync >"$base/initdb.log" 2>&1; then
        _mcp_pg_log "initdb failed:"; cat "$base/initdb.log" >&2
        rm -rf "$base"; return 1
    fi
    port=${MCP_PG_PORT:-55432}
    for ((i = 0; i < 50; i++)); do
        _mcp_pg_port_free "$port" && break
        port=$((port + 1))
    done
    opts="-c listen_addresses=127.0.0.1 -p $port -k $base/pg"
    if [[ "${MCP_PG_DURABLE:-0}" != 1 ]]; then
        opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    fi
    if ! _mcp_pg_as_owner "$bin/pg_ctl" -D "$base/pg/data" -l "$base/pg/server.log" -w -t 60 \
        -o "$opts" start >&2; then
        _mcp_pg_log "the server did not start:"; tail -n 30 "$base/pg/server.log" >&2 || true
        rm -rf "$base"; return 1
    fi
    export MCP_PG_DIR=$base MCP_PG_BIN=$bin
    MCP_PG_PID=$(head -n 1 "$base/pg/data/postmaster.pid")
    export MCP_PG_PID
    if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt \
        -c 'CREATE DATABASE mcp_tasks_test' >&2; then
        _mcp_pg_log "cannot create the test database"
        mcp_pg_stop; return 1
    fi
    export MCP_TASKS_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/mcp_tasks_test"
    _mcp_pg_log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') (pid $MCP_PG_PID) at $MCP_TASKS_POSTGRES_URL"
}

# Stop the cluster mcp_pg_start made (or the one in directory $1) and delete
# its files. Safe to call twice.
mcp_pg_stop() {
    local base=${1:-${MCP_PG_DIR:-}} bin pid i
    [[ -n "$base" && -d "$base/pg" ]] || return 0
    bin=${MCP_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
    pid=$(head -n 1 "$base/pg/data/postmaster.pid" 2>/dev/null || true)
    if [[ -n "$pid" ]]; then
        _mcp_pg_as_owner "$bin/pg_ctl" -D "$base/pg/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
            kill -INT "$pid" 2>/dev/null || true
        for ((i = 0; i < 300; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            _mcp_pg_log "postmaster $pid still up after 30 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf "$base"
    if [[ "$base" == "${MCP_PG_DIR:-}" ]]; then
        unset MCP_PG_DIR MCP_PG_BIN MCP_PG_PID MCP_TASKS_POSTGRES_URL
    fi
    _mcp_pg_log "stopped"
}

# Run as a script rather than sourced.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    case "${1:-}" in
        start)
            mcp_pg_start
            printf 'export MCP_TASKS_POSTGRES_URL=%q MCP_PG_DIR=%q\n' \
                "$MCP_TASKS_POSTGRES_URL" "$MCP_PG_DIR"
            ;;
        stop) mcp_pg_stop "${2:-${MCP_PG_DIR:-}}" ;;
        *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
    esac
fi
