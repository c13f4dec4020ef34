#!/usr/bin/env python3
"""Where a synchronous tool call's CPU goes over stdio (issue 29): each
process's run time per call, from the scheduler's own record, for the
three paths of `gateway_lat.py` (direct, bare relay, gateway).

    cargo build --release -p mcp-tasks
    cargo build --release -p mcp-task-layer-benches --example line_relay
    MCP_TASKS_PYTHON=... python3 benches/gateway_cpu.py 1000     # as root

Everything runs on the last core. `perf sched record` keeps every switch
on that core during a run of N calls and during a run of N/10; `perf
sched timehist` gives each run's time on the CPU; a process's time per
call is the difference of the two sums over the difference of the calls,
so start-up cancels out. Needs `perf` with access to the sched
tracepoints; another load on the same core inflates every figure.
"""

import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_lat import paths  # noqa: E402

CLIENT = r"""
import json, subprocess, sys
n = int(sys.argv[1])
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def call(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i and "method" not in m:
            return m
call(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cpu", "version": "1"}})
for i in range(1, n + 1):
    assert "result" in call(i, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
p.stdin.close()
p.wait()
"""


def run_times(argv, n, core, work):
    data = os.path.join(work, "sched.data")
    client = os.path.join(work, "client.py")
    with open(client, "w") as f:
        f.write(CLIENT)
    subprocess.run(
        ["perf", "sched", "record", "-C", str(core), "-o", data, "--",
         "taskset", "-c", str(core), sys.executable, client, str(n)] + argv,
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    out = subprocess.run(["perf", "sched", "timehist", "-i", data],
                         check=True, capture_output=True, text=True).stdout
    total = collections.Counter()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 6 or not re.match(r"^\d+\.\d+$", f[0]):
            continue
        name = re.sub(r"\[.*", "", f[2])
        total[name] += float(f[-1]) * 1000  # ms -> us
    return total


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    core = max(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as work:
        for name, argv in paths().items():
            big = run_times(argv, n, core, work)
            small = run_times(argv, n // 10, core, work)
            calls = n - n // 10
            per = {k: (big[k] - small.get(k, 0)) / calls for k in big}
            shown = {k: v for k, v in per.items() if v >= 1}
            line = "  ".join(f"{k} {v:.1f}" for k, v in sorted(shown.items(), key=lambda kv: -kv[1]))
            print(f"{name}: us of CPU per call: {line}  (all: {sum(shown.values()):.0f})")


if __name__ == "__main__":
    main()
