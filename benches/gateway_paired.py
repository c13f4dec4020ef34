#!/usr/bin/env python3
"""A synchronous tool call's latency over stdio (issue 29), paired: the
direct upstream, a bare line relay and `mcp-tasks gateway --stdio` run
side by side for the whole run, and each timed step makes one call on
each path, in an order that rotates from step to step.

    cargo build --release -p mcp-tasks
    cargo build --release -p mcp-task-layer-benches --example line_relay
    MCP_TASKS_PYTHON=... python3 benches/gateway_paired.py 5000
    PIN=1 MCP_TASKS_PYTHON=... python3 benches/gateway_paired.py 5000

benches/gateway_lat.py times rounds of 1,000 calls one path after
another; on a host whose speed drifts by tens of percent from one second
to the next, the drift between rounds is larger than the difference it
is after. Here every path sees the same moments of the host: a slow
second slows one call of each. The figures are the median of each
path's calls and the median of the per-step ratios (gateway / direct),
with the ratio's quartiles. GATEWAY=PATH[:PATH...] compares other builds
of the gateway as well (paths `other`, or `other1`, `other2`, ...);
UPSTREAM=COMMAND with ECHO_ARG=NAME puts another upstream's echo tool
behind all of them. JSON_RELAY=1 adds path `json`, a relay that parses
every message and rewrites ids (benches/examples/json_relay.rs, built as
line_relay is): the least a proxy of many clients does.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_lat import paths  # noqa: E402
from gateway_stdio import Peer  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    if os.environ.get("PIN"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    cmds = paths()
    if os.environ.get("JSON_RELAY"):
        # benches/examples/json_relay.rs: a relay that parses every message
        # and rewrites ids, the least a proxy of many clients does.
        relay = cmds["relay"][0]
        cmds["json"] = [os.path.join(os.path.dirname(relay), "json_relay"), "--"] + cmds["direct"]
    others = [g for g in os.environ.get("GATEWAY", "").split(":") if g]
    for i, other in enumerate(others):
        cmds[f"other{i + 1}" if len(others) > 1 else "other"] = [other] + cmds["gateway"][1:]
    peers = {k: Peer(argv) for k, argv in cmds.items()}
    for peer in peers.values():
        peer.initialize()
    names = list(peers)
    # tests/gateway/upstream.py's echo takes `text`; server-everything's
    # (UPSTREAM="node .../index.js stdio" ECHO_ARG=message) `message`.
    echo = {"name": "echo", "arguments": {os.environ.get("ECHO_ARG", "text"): "hi"}}
    for peer in peers.values():
        for _ in range(100):
            peer.call("tools/call", echo)
    times = {k: [] for k in names}
    for step in range(n):
        turn = step % len(names)
        for k in names[turn:] + names[:turn]:
            t = time.perf_counter()
            answer = peers[k].call("tools/call", echo)
            times[k].append(time.perf_counter() - t)
            assert "result" in answer, answer
    for peer in peers.values():
        peer.close()
    direct = times["direct"]
    print(f"{n} steps, one call on each path a step")
    for k in names:
        med = statistics.median(times[k]) * 1e6
        line = f"{k:8} median {med:6.0f} us"
        if k != "direct":
            ratios = sorted(a / b for a, b in zip(times[k], direct))
            q1, q2, q3 = statistics.quantiles(ratios, n=4)
            line += f"  vs direct: median ratio {q2:.3f} (quartiles {q1:.3f}-{q3:.3f})"
            line += f", ratio of medians {med / (statistics.median(direct) * 1e6):.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
