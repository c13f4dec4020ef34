#!/usr/bin/env python3
"""Where a synchronous call's time goes over stdio (issue 29): the CPU
of the process in front (the gateway, the bare relay) and of the
upstream behind it, per call, for the direct call, the relay and the
gateway, one path after another, every process on the last core.

    cargo build --release -p mcp-tasks
    cargo build --release -p mcp-task-layer-benches --example line_relay
    UPSTREAM="node .../server-everything/dist/index.js stdio" ECHO_ARG=message \
        python3 benches/gateway_upstream_cpu.py 5000

It reads `perf stat -e task-clock` of each process (of all its threads)
over N calls, and the upstream's context switches from /proc: voluntary
(it waited for input) and involuntary (a process it woke ran first).
Without UPSTREAM the upstream is tests/gateway/upstream.py under
MCP_TASKS_PYTHON. JSON_RELAY=1 adds path `json` (benches/examples/json_relay.rs).
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_lat import paths  # noqa: E402
from gateway_stdio import Peer  # noqa: E402


def switches(pid):
    voluntary = involuntary = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    involuntary += int(line.split()[1])
    return voluntary, involuntary


def task_clock(pid):
    """A running `perf stat` of `pid`; its result in ms when stopped."""
    perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "task-clock", "-p", str(pid)],
                            stderr=subprocess.PIPE, text=True)

    def stop():
        perf.send_signal(signal.SIGINT)
        return float(perf.communicate()[1].strip().splitlines()[-1].split(",")[0])
    return stop


def measure(name, argv, n, echo):
    peer = Peer(argv)
    peer.initialize()
    for _ in range(300):
        peer.call("tools/call", echo)
    front = peer.p.pid
    if name == "direct":
        upstream = front
    else:
        with open(f"/proc/{front}/task/{front}/children") as f:
            upstream = int(f.read().split()[0])
    stops = [task_clock(front)] + ([task_clock(upstream)] if upstream != front else [])
    time.sleep(0.3)  # perf attached
    before = switches(upstream)
    t = time.perf_counter()
    for _ in range(n):
        peer.call("tools/call", echo)
    wall = (time.perf_counter() - t) / n * 1e6
    after = switches(upstream)
    ms = [stop() for stop in stops]
    peer.close()
    up_ms = ms[-1]
    front_us = ms[0] * 1000 / n if upstream != front else 0.0
    vol, inv = ((a - b) / n for a, b in zip(after, before))
    # The 0.3 s before the calls is idle for both: task-clock counts none of it.
    print(f"{name:8s} {wall:7.1f} us a call; upstream CPU {up_ms * 1000 / n:6.1f} us "
          f"(switches: voluntary {vol:.2f}, involuntary {inv:.2f}); in front {front_us:5.1f} us")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    echo = {"name": "echo", "arguments": {os.environ.get("ECHO_ARG", "text"): "hi"}}
    cmds = paths()
    if os.environ.get("JSON_RELAY"):
        # benches/examples/json_relay.rs, as in gateway_paired.py.
        relay = cmds["relay"][0]
        cmds["json"] = [os.path.join(os.path.dirname(relay), "json_relay"), "--"] + cmds["direct"]
    for name, argv in cmds.items():
        measure(name, argv, n, echo)


if __name__ == "__main__":
    main()
