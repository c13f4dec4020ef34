#!/usr/bin/env python3
"""The gateway's instructions per synchronous tool call over stdio (issue
29), under callgrind: a run of N calls and a run of none, each from start
to exit; their difference over N is what one call costs, start-up and
shutdown cancelled out.

    cargo build --release -p mcp-tasks
    MCP_TASKS_PYTHON=... python3 benches/gateway_callgrind.py 1000 [OUT_DIR]

The callgrind files stay in OUT_DIR (default a temporary folder) for
`callgrind_annotate --inclusive=yes`.
"""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_cpu import CLIENT  # noqa: E402
from gateway_lat import paths  # noqa: E402


def total(out_file):
    out = subprocess.run(["callgrind_annotate", out_file], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", out)
    return int(m.group(1).replace(",", ""))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    client = os.path.join(work, "client.py")
    with open(client, "w") as f:
        f.write(CLIENT)
    gateway = paths()["gateway"]
    counts = {}
    for calls in (n, 0):
        out = os.path.join(work, f"callgrind.{calls}")
        subprocess.run([sys.executable, client, str(calls), "valgrind", "--tool=callgrind",
                        f"--callgrind-out-file={out}"] + gateway,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        counts[calls] = total(out)
    print(f"gateway: {(counts[n] - counts[0]) / n:,.0f} instructions per call "
          f"({n} calls; files in {work})")


if __name__ == "__main__":
    main()
