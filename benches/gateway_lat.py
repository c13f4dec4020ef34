#!/usr/bin/env python3
"""A synchronous tool call's latency over stdio (issue 29): straight to the
upstream, through a bare line relay (benches/examples/line_relay.rs: the
floor of any process in the middle), and through `mcp-tasks gateway
--stdio`, in alternating rounds of one run.

    cargo build --release -p mcp-tasks
    cargo build --release -p mcp-task-layer-benches --example line_relay
    MCP_TASKS_PYTHON=... python3 benches/gateway_lat.py 1000 7
    PIN=1 MCP_TASKS_PYTHON=... python3 benches/gateway_lat.py 1000 5

With PIN=1 every process (this client, the gateway or relay, the
upstream) runs on one core, the last: no wake-up waits for an idle core
to come up, so a call's latency is the CPU time of everything on its path,
and rounds agree within a few percent where the default scheduling
scatters them by tens of percent on a small shared host.

A 2025-11-25 client sends `tools/call echo` to tests/gateway/upstream.py
(the Python `mcp` SDK) one at a time: 50 calls to warm up, then N timed;
each round prints the median per call of each path and its ratio to the
direct one, and the last line the medians of the rounds.
"""

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def paths():
    """The three commands; UPSTREAM (a command line, split at spaces)
    replaces tests/gateway/upstream.py."""
    up = os.environ.get("UPSTREAM", "").split() or [
        os.environ["MCP_TASKS_PYTHON"], os.path.join(ROOT, "tests/gateway/upstream.py")]
    relay = os.path.join(TARGET, "release/examples/line_relay")
    gateway = os.path.join(TARGET, "release/mcp-tasks")
    return {
        "direct": up,
        "relay": [relay, "--"] + up,
        "gateway": [gateway, "gateway", "--stdio", "--policy", "echo=sync", "--"] + up,
    }


def run(argv, n):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def call(i, method, params):
        line = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        p.stdin.write(line.encode() + b"\n")
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i and "method" not in m:
                return m

    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lat", "version": "1"}}
    call(0, "initialize", init)
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.flush()
    echo = {"name": "echo", "arguments": {"text": "hi"}}
    for i in range(1, 51):
        call(i, "tools/call", echo)
    times = []
    for i in range(51, 51 + n):
        t = time.perf_counter()
        answer = call(i, "tools/call", echo)
        times.append(time.perf_counter() - t)
        assert "result" in answer, answer
    p.stdin.close()
    p.wait()
    return statistics.median(times) * 1e6


def main():
    n, rounds = int(sys.argv[1]), int(sys.argv[2])
    if os.environ.get("PIN"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    cmds = paths()
    got = {k: [] for k in cmds}
    for r in range(rounds):
        for k, argv in cmds.items():
            got[k].append(run(argv, n))
        d = got["direct"][-1]
        print(f"round {r + 1}: " + "  ".join(f"{k} {v[-1]:.0f} us ({v[-1] / d:.2f})" for k, v in got.items()), flush=True)
    med = {k: statistics.median(v) for k, v in got.items()}
    d = med["direct"]
    print("median: " + "  ".join(f"{k} {v:.0f} us (+{(v / d - 1) * 100:.0f}%)" for k, v in med.items()))


if __name__ == "__main__":
    main()
