#!/usr/bin/env python3
"""The module rules of src/ (ARCHITECTURE.md), checked in CI.

Nodes are file modules; an edge is a `use` or a `crate::`/`super::` path
from one module's code (tests left out) to another's. The same edges are
then read a second time with every folder counted as one module (an edge
from src/a/x.rs to src/b.rs is an edge a -> b), and a circle between
top-level modules fails too. A module's facade
re-export of its own submodule (`pub use child::X;`) is not an edge. Fails
when the graph has a circle, a file is over 600 lines, or the state machine
(runtime/transition.rs) reaches the engine, store I/O or tokio."""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else 'src'
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3]
            parts = rel.split('/')
            if parts[-1] in ('mod', 'lib'):
                parts = parts[:-1]
            files[tuple(parts)] = p
def resolve(mod, path):
    # path: list of segments after crate:: or relative
    best = None
    for i in range(len(path), -1, -1):
        if tuple(path[:i]) in files:
            return tuple(path[:i])
    return ()
edges = set()
for mod, p in files.items():
    src = open(p).read()
    # drop #[cfg(test)] mod tests { ... } blocks crudely: cut from '#[cfg(test)]\nmod tests' to end
    m = re.search(r'#\[cfg\(test\)\]\s*mod tests', src)
    if m: src = src[:m.start()]
    src = re.sub(r'//[^\n]*', '', src)
    # A facade re-export of one's own submodule (`pub use child::X;`) is how
    # Rust modules publish their items, not a dependency: left out.
    def facade(m4):
        body = m4.group(0)
        tgt = re.match(r'pub(?:\([a-z]+\))?\s+use\s+(self::)?([a-z_][a-z0-9_]*)', body)
        if tgt and tuple(list(mod) + [tgt.group(2)]) in files:
            return ''
        return body
    src = re.sub(r'pub(?:\([a-z]+\))?\s+use\s+[^;]*;', facade, src, flags=re.S)
    is_dir_mod = p.endswith('mod.rs') or p.endswith('lib.rs')
    here = list(mod) if is_dir_mod else list(mod)  # module path
    for use in re.findall(r'\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)', src):
        head, rest = use
        segs = [s for s in rest.split('::') if s]
        if head == 'crate':
            target = segs
        elif head == 'super':
            base = list(mod)[:-1]
            while segs and segs[0] == 'super':
                base = base[:-1]; segs = segs[1:]
            target = base + segs
        else:
            target = list(mod) + segs
        t = resolve(mod, target)
        if t != mod:
            edges.add((mod, t))
    # child-relative uses: `use child::X` / `pub use child::{..}` in a mod.rs or lib.rs
    for m3 in re.finditer(r'\buse\s+([a-z_][a-z0-9_]*)((?:::[A-Za-z_0-9]+)*)(::\{([^;]*)\})?;', src, re.S):
        first, rest, _, inner = m3.groups()
        if first in ('crate', 'super', 'self', 'std', 'core', 'alloc'):
            continue
        child = list(mod) + [first]
        if tuple(child) not in files:
            continue
        segs = child + [s for s in rest.split('::') if s]
        if inner:
            for item in inner.split(','):
                item = item.strip().split(' as ')[0]
                isegs = [x for x in item.split('::') if x and x != 'self']
                t = resolve(mod, segs + isegs)
                if t != mod: edges.add((mod, t))
        else:
            t = resolve(mod, segs)
            if t != mod: edges.add((mod, t))
    # braces: use crate::a::{b, c::d}
    for m2 in re.finditer(r'use\s+(crate|super)((?:::[A-Za-z_0-9]+)*)::\{([^;]*)\};', src, re.S):
        head, rest, inner = m2.groups()
        base = [s for s in rest.split('::') if s]
        if head == 'super':
            b = list(mod)[:-1]
            while base and base[0] == 'super':
                b = b[:-1]; base = base[1:]
            base = b + base
        for item in re.split(r',(?![^{]*\})', inner):
            item = item.strip().split(' as ')[0].strip()
            if not item or item.startswith('{'): continue
            segs = [s for s in re.split(r'::', item.split('{')[0]) if s]
            if segs and segs[0] == 'self': segs = segs[1:]
            t = resolve(mod, base + segs)
            if t != mod:
                edges.add((mod, t))
name = lambda m: '/'.join(m) or 'lib'
# Tarjan
import itertools
graph = {m: set() for m in files}
for a, b in edges:
    graph[a].add(b)
index = {}; low = {}; stack = []; on = set(); sccs = []; c = itertools.count()
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = next(c); stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in graph:
    if v not in index: strong(v)
print(f'{len(files)} modules, {len(edges)} edges')
cyc = [s for s in sccs if len(s) > 1]
for s in cyc:
    print('CYCLE:', ', '.join(sorted(name(m) for m in s)))
    for a, b in sorted(edges):
        if a in s and b in s: print('   ', name(a), '->', name(b))
if not cyc: print('no import cycles')
bad = bool(cyc)

def circles(nodes, arcs):
    """Strongly connected components of more than one node."""
    g = {n: set() for n in nodes}
    for a, b in arcs:
        g[a].add(b)
    idx = {}; lo = {}; st = []; ons = set(); out = []; k = itertools.count()
    def visit(v):
        idx[v] = lo[v] = next(k); st.append(v); ons.add(v)
        for w in g[v]:
            if w not in idx:
                visit(w); lo[v] = min(lo[v], lo[w])
            elif w in ons:
                lo[v] = min(lo[v], idx[w])
        if lo[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); ons.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    for v in g:
        if v not in idx: visit(v)
    return out

# Folders as one module: src/jsonrpc/params.rs importing crate::protocol is
# the edge jsonrpc -> protocol. lib.rs (the root) is left out: it declares
# every module.
top = lambda m: m[0] if m else None
top_nodes = {top(m) for m in files if m}
top_edges = {(top(a), top(b)) for a, b in edges if a and b and top(a) != top(b)}
top_cyc = circles(top_nodes, top_edges)
for s in top_cyc:
    print('FOLDER CYCLE:', ', '.join(sorted(s)))
    for a, b in sorted(edges):
        if a and b and top(a) in s and top(b) in s and top(a) != top(b):
            print('   ', name(a), '->', name(b))
if not top_cyc: print(f'no import cycles between {len(top_nodes)} top-level modules')
bad = bad or bool(top_cyc)
for m, p in sorted(files.items()):
    n = sum(1 for _ in open(p))
    if n > 600:
        print('OVER 600 LINES:', p, n); bad = True
pure = ('runtime', 'transition')
if pure in files:
    allowed = {('runtime', 'answer'), ('json',), ('jsonrpc',), ('protocol',), ('store',)}
    for a, b in sorted(edges):
        if a == pure and b not in allowed:
            print('STATE MACHINE IMPORTS', name(b)); bad = True
    text = open(files[pure]).read()
    for word in ('tokio', '.await', 'async ', 'TaskStore', 'Engine'):
        if word in text.split('#[cfg(test)]')[0]:
            print('STATE MACHINE USES', word); bad = True
sys.exit(1 if bad else 0)
