#!/usr/bin/env python3
"""No tracked file of code, tests, scripts or assets over 600 lines
(DEVELOPERS.md: one concept per file). Prose (*.md), data (*.json) and
lock files are not counted. Prints each file over the bound and exits 1
if there is one."""

import subprocess
import sys

LIMIT = 600
SKIP = (".md", ".json", ".lock", ".txt")

files = subprocess.run(["git", "ls-files", "-z"], check=True, capture_output=True).stdout
over = []
for name in files.decode().split("\0"):
    if not name or name.endswith(SKIP):
        continue
    try:
        with open(name, "rb") as f:
            data = f.read()
    except (IsADirectoryError, FileNotFoundError):
        continue
    if b"\0" in data:
        continue  # binary
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    if lines > LIMIT:
        over.append((lines, name))
for lines, name in sorted(over, reverse=True):
    print(f"{name}: {lines} lines (over {LIMIT})")
if over:
    sys.exit(1)
print(f"no tracked file over {LIMIT} lines")
