#!/usr/bin/env python3
"""tasks/get over real OS pipes, against a bare line echo, in one run.

Start the release example server with --stdio, create one task, wait until
it has completed, then write N 2026-07-28 tasks/get lines (in batches of 64
in flight) and read the N response lines. Then the same N lines, the same
way, to benches/examples/line_echo.rs answering a fixed line as long as the
server's answer. ROUNDS times, alternating; print each rate, each round's
ratio and the median ratio. Needs both binaries built first:

    cargo build --release --features axum,stdio --example server
    cargo build --release -p mcp-task-layer-benches --example line_echo
    python3 benches/stdio_pipes.py [N] [ROUNDS]   # default 200000 3
"""
import json, os, statistics, subprocess, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
BATCH = 64
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
target = os.environ.get('CARGO_TARGET_DIR', os.path.join(root, 'target'))
examples = os.path.join(target, 'release', 'examples')
meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': {'name': 'bench', 'version': '1'},
    'io.modelcontextprotocol/clientCapabilities': {'extensions': {'io.modelcontextprotocol/tasks': {}}},
}


def line(message):
    return (json.dumps(message, separators=(',', ':')) + '\n').encode()


def completed_task(server):
    """A task of the server's, once completed, and the tasks/get line."""
    server.stdin.write(line({'jsonrpc': '2.0', 'id': 0, 'method': 'tools/call',
                             'params': {'name': 'slow_compute', 'arguments': {'seconds': 0.2},
                                        'task': {}, '_meta': meta}}))
    server.stdin.flush()
    task = json.loads(server.stdout.readline())['result']['taskId']
    get = line({'jsonrpc': '2.0', 'id': 1, 'method': 'tasks/get',
                'params': {'taskId': task, '_meta': meta}})
    while True:  # until the task has completed (about 0.2 s)
        server.stdin.write(get)
        server.stdin.flush()
        answer = server.stdout.readline()
        if b'"completed"' in answer:
            return get, len(answer)


def rate(process, get):
    batch = get * BATCH
    start = time.perf_counter()
    for _ in range(N // BATCH):
        process.stdin.write(batch)
        process.stdin.flush()
        for _ in range(BATCH):
            process.stdout.readline()
    return (N // BATCH) * BATCH / (time.perf_counter() - start)


server = subprocess.Popen([os.path.join(examples, 'server'), '--stdio'],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
get, answer_bytes = completed_task(server)
echo = subprocess.Popen([os.path.join(examples, 'line_echo'), '--bytes', str(answer_bytes)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
print(f'{N} tasks/get per run, {BATCH} in flight, answers of {answer_bytes} bytes')
ratios = []
for round in range(1, ROUNDS + 1):
    load = open('/proc/loadavg').read().split()[:3]
    s = rate(server, get)
    e = rate(echo, get)
    ratios.append(s / e)
    print(f'round {round} (load {" ".join(load)}): server {s:,.0f} req/s, '
          f'echo {e:,.0f} req/s, ratio {s / e:.3f}')
print(f'median ratio {statistics.median(ratios):.3f}')
for process in (server, echo):
    process.stdin.close()
    process.wait(timeout=10)
