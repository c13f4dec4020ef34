#!/usr/bin/env python3
"""The code a request runs, from a callgrind dump made with
`--dump-instr=yes` (and `--cache-sim=yes` for the misses):
`benches/http_callgrind.sh` with `CACHE=1` calls it on each dump.

    python3 benches/http/footprint.py DUMP REQUESTS [TOP]

It prints, per request: instructions, first-level instruction-cache misses
(`I1mr`, when simulated), and the footprint: the distinct 64-byte lines of
code executed at least once every two requests, in all and by crate (the
first path segment of each function's name). A request whose footprint
exceeds the first-level instruction cache (64 KiB on this host: 1,024
lines) misses on its own code every time, whatever its instruction count
(BENCHMARKS.md, issue 32's tenth pass). With TOP, the TOP functions with
the most such lines follow.
"""

import collections
import re
import sys


def names_of(table, text):
    """A compressed name, `(N) name` the first time and `(N)` after."""
    m = re.match(r"\((\d+)\)(?: (.*))?", text)
    if not m:
        return text
    if m.group(2):
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), text)


def read(path):
    """Instructions by function and 64-byte line, misses by function."""
    fns, objs = {}, {}
    events = []
    cur, skip, addr = None, False, 0
    lines = collections.defaultdict(collections.Counter)
    costs = collections.defaultdict(lambda: collections.Counter())
    for raw in open(path):
        text = raw.rstrip("\n")
        if text.startswith("events:"):
            events = text.split()[1:]
        elif text.startswith("fn="):
            cur = names_of(fns, text[3:])
        elif text.startswith("cfn="):
            names_of(fns, text[4:])
        elif text.startswith(("ob=", "cob=")):
            names_of(objs, text.split("=", 1)[1])
        elif text.startswith("calls="):
            skip = True  # the next cost line is the call's, not this function's
        elif text and (text[0].isdigit() or text[0] in "+-*"):
            parts = text.split()
            a = parts[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] == "+":
                addr += int(a[1:])
            elif a[0] == "-":
                addr -= int(a[1:])
            elif a != "*":
                addr = int(a, 16)
            if skip:
                skip = False
                continue
            # positions: instr line, then the events
            values = [0 if v == "*" else int(v) for v in parts[2:]]
            for event, v in zip(events, values):
                costs[cur][event] += v
            if values:
                lines[cur][addr >> 6] += values[0]
    return lines, costs


def crate_of(function):
    name = function.lstrip("<")
    return re.split(r"::| as ", name)[0] if "::" in name else "(other)"


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    lines, costs = read(path)
    hot_all = collections.Counter()
    for counter in lines.values():
        hot_all.update(counter)
    hot = {ln for ln, ir in hot_all.items() if ir >= n / 2}
    total = collections.Counter()
    for c in costs.values():
        total.update(c)
    per_fn = []
    by_crate = collections.Counter()
    for f, counter in lines.items():
        h = sum(1 for ln, ir in counter.items() if ir >= n / 2)
        per_fn.append((h, f))
        by_crate[crate_of(f)] += h
    misses = f", I1 misses {total['I1mr'] / n:.0f}" if "I1mr" in total else ""
    print(
        f"  per request: instructions {total['Ir'] / n:.0f}{misses}, "
        f"footprint {len(hot)} lines ({len(hot) * 64 / 1024:.1f} KiB)"
    )
    print("  by crate: " + ", ".join(f"{c} {x}" for c, x in by_crate.most_common(8)))
    for h, f in sorted(per_fn, reverse=True)[:top]:
        print(f"  {h:5d} lines  {f[:120]}")


if __name__ == "__main__":
    main()
