#!/usr/bin/env python3
"""tasks/get over real OS pipes: start the release example server with
--stdio, create one task, wait until it has completed, then write N
2026-07-28 tasks/get lines (in batches of 64 in flight) and read the N
response lines; print requests/s. Needs the binary built first:

    cargo build --release --features axum,stdio --example server
    python3 benches/stdio_pipes.py [N]   # default 200000
"""
import json, os, subprocess, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
BATCH = 64
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
target = os.environ.get('CARGO_TARGET_DIR', os.path.join(root, 'target'))
binary = os.path.join(target, 'release', 'examples', 'server')
meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': {'name': 'bench', 'version': '1'},
    'io.modelcontextprotocol/clientCapabilities': {'extensions': {'io.modelcontextprotocol/tasks': {}}},
}
server = subprocess.Popen([binary, '--stdio'], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

def send(message):
    server.stdin.write((json.dumps(message, separators=(',', ':')) + '\n').encode())
    server.stdin.flush()

send({'jsonrpc': '2.0', 'id': 0, 'method': 'tools/call',
      'params': {'name': 'slow_compute', 'arguments': {'seconds': 0.2}, 'task': {}, '_meta': meta}})
task = json.loads(server.stdout.readline())['result']['taskId']
get = (json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'tasks/get',
                   'params': {'taskId': task, '_meta': meta}}, separators=(',', ':')) + '\n').encode()
while True:  # until the task has completed (about 0.2 s)
    server.stdin.write(get)
    server.stdin.flush()
    if b'"completed"' in server.stdout.readline():
        break
batch = get * BATCH
start = time.perf_counter()
for _ in range(N // BATCH):
    server.stdin.write(batch)
    server.stdin.flush()
    for _ in range(BATCH):
        server.stdout.readline()
elapsed = time.perf_counter() - start
server.stdin.close()
server.wait(timeout=10)
done = (N // BATCH) * BATCH
print(f'{done} tasks/get in {elapsed:.2f} s: {done / elapsed:,.0f} requests/s')
