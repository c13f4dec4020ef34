#!/usr/bin/env python3
"""Two builds of `mcp-tasks` against each other and a direct call, in
alternating rounds of one run, every process on the last core (issue 29):

    MCP_TASKS_PYTHON=... python3 benches/gateway_ab.py OLD_BINARY NEW_BINARY ROUNDS

Each round runs `gateway_lat.run` (50 calls to warm up, 1,000 timed) on
the direct path, then each build with `--policy echo=sync`; the last
line gives the medians of the rounds.
"""

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_lat import ROOT, run  # noqa: E402


def main():
    old, new, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    up = [os.environ["MCP_TASKS_PYTHON"], os.path.join(ROOT, "tests/gateway/upstream.py")]
    paths = {"direct": up}
    for name, binary in (("old", old), ("new", new)):
        paths[name] = [binary, "gateway", "--stdio", "--policy", "echo=sync", "--"] + up
    times = {name: [] for name in paths}
    for r in range(rounds):
        line = []
        for name, argv in paths.items():
            t = run(argv, 1000)
            times[name].append(t)
            line.append(f"{name} {t:.0f} us")
        print(f"round {r + 1}: " + "  ".join(line), flush=True)
    direct = statistics.median(times["direct"])
    print("median: " + "  ".join(
        f"{name} {statistics.median(v):.0f} us ({statistics.median(v) / direct - 1:+.0%})"
        for name, v in times.items()))


if __name__ == "__main__":
    main()
