#!/usr/bin/env python3
"""The gateway's cost over stdio, side by side in one run (issue #29).

Latency: ROUNDS alternating rounds of N sequential `tools/call echo`, each
sent and answered before the next, straight to tests/gateway/upstream.py
(the Python mcp SDK over stdio) and through `mcp-tasks gateway --stdio` in
front of the same upstream: as a 2025-11-25 client (the layer passes the
call through) and as a 2026-07-28 client declaring the tasks extension
(an `auto:1000` tool: the layer runs the call within its window and answers
synchronously). Prints each round's median per call and the medians' ratio.

Memory: IDLE tasks waiting for input (`confirm_delete`, each parked in the
gateway with its upstream request open), the gateway's and the upstream
processes' resident memory before and after, per idle task.

    cargo build --release -p mcp-tasks
    MCP_TASKS_PYTHON=... python3 benches/gateway_stdio.py [N] [ROUNDS] [IDLE]   # default 500 5 1000
"""
import json, os, statistics, subprocess, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
IDLE = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
target = os.environ.get('CARGO_TARGET_DIR', os.path.join(root, 'target'))
gateway = os.path.join(target, 'release', 'mcp-tasks')
python = os.environ['MCP_TASKS_PYTHON']
upstream = [python, os.path.join(root, 'tests', 'gateway', 'upstream.py')]
meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': {'name': 'bench', 'version': '1'},
    'io.modelcontextprotocol/clientCapabilities': {
        'elicitation': {}, 'extensions': {'io.modelcontextprotocol/tasks': {}}},
}


class Peer:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.next = 0

    def send(self, method, params, notify=False):
        msg = {'jsonrpc': '2.0', 'method': method, 'params': params}
        if not notify:
            self.next += 1
            msg['id'] = self.next
        self.p.stdin.write((json.dumps(msg, separators=(',', ':')) + '\n').encode())
        self.p.stdin.flush()
        return None if notify else self.next

    def answer(self, rid):
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get('id') == rid and 'method' not in msg:
                return msg

    def call(self, method, params):
        return self.answer(self.send(method, params))

    def initialize(self):
        r = self.call('initialize', {'protocolVersion': '2025-11-25', 'capabilities': {},
                                     'clientInfo': {'name': 'bench', 'version': '1'}})
        assert 'result' in r, r
        self.send('notifications/initialized', {}, notify=True)

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(5)
        except subprocess.TimeoutExpired:
            self.p.kill()


def rss_kb(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def children(pid):
    out = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True, text=True).stdout
    return [int(c) for c in out.split()]


def round_of(peer, modern):
    params = {'name': 'echo', 'arguments': {'text': 'hello'}}
    if modern:
        params['_meta'] = meta
    times = []
    for _ in range(N):
        t0 = time.perf_counter()
        r = peer.call('tools/call', params)
        times.append(time.perf_counter() - t0)
        assert r['result']['content'][0]['text'] == 'hello', r
    return statistics.median(times) * 1e6


def latency():
    direct = Peer(upstream)
    direct.initialize()
    gw = Peer([gateway, 'gateway', '--stdio', '--policy', 'echo=auto:1000', '--'] + upstream)
    gw.initialize()
    for peer, modern in ((direct, False), (gw, False), (gw, True)):
        round_of(peer, modern)  # warm up
    rows = []
    for r in range(ROUNDS):
        d = round_of(direct, False)
        g25 = round_of(gw, False)
        g26 = round_of(gw, True)
        rows.append((d, g25, g26))
        print(f'round {r + 1}: direct {d:.0f} us, gateway 2025 {g25:.0f} us ({g25 / d:.3f}), '
              f'gateway 2026 auto {g26:.0f} us ({g26 / d:.3f})', flush=True)
    d = statistics.median(x[0] for x in rows)
    g25 = statistics.median(x[1] for x in rows)
    g26 = statistics.median(x[2] for x in rows)
    print(f'median of {ROUNDS} rounds x {N} calls: direct {d:.0f} us; through the gateway '
          f'{g25:.0f} us (+{(g25 / d - 1) * 100:.1f}%) as 2025, {g26:.0f} us '
          f'(+{(g26 / d - 1) * 100:.1f}%) as 2026 with an auto:1000 tool')
    direct.close()
    gw.close()


def memory():
    gw = Peer([gateway, 'gateway', '--stdio', '--policy', 'confirm_delete=task', '--'] + upstream)
    gw.initialize()
    gw.call('tools/call', {'name': 'echo', 'arguments': {'text': 'x'}})
    before = rss_kb(gw.p.pid)
    ups_before = sum(rss_kb(c) for c in children(gw.p.pid))
    # One after another, as idle tasks pile up: each waits for input
    # before the next is made.
    for i in range(IDLE):
        r = gw.call('tools/call', {'name': 'confirm_delete', 'arguments': {'filename': f'f{i}'},
                                   '_meta': meta})
        t = r['result']['taskId']
        while gw.call('tasks/get', {'taskId': t, '_meta': meta})['result']['status'] != 'input_required':
            time.sleep(0.001)
    after = rss_kb(gw.p.pid)
    ups = children(gw.p.pid)
    ups_after = sum(rss_kb(c) for c in ups)
    print(f'{IDLE} idle tasks (input_required, upstream call parked): gateway RSS {before} -> {after} kB '
          f'= {(after - before) * 1024 / IDLE:.0f} bytes a task; {len(ups)} upstream processes, '
          f'{ups_before} -> {ups_after} kB = {(ups_after - ups_before) * 1024 / IDLE:.0f} bytes a task')
    gw.close()


if __name__ == '__main__':
    latency()
    memory()
