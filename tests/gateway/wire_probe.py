"""Print the raw JSON-RPC lines an MCP server sends over stdio during one tools/call.

    python3 tests/gateway/wire_probe.py [--version V] [--cancel-after S] TOOL ARGS_JSON -- COMMAND [ARGS...]

No SDK: it writes `initialize` (protocol V, default 2025-11-25, declaring
elicitation, sampling and roots), `notifications/initialized`, then
`tools/call` TOOL with `_meta.progressToken` "probe-1" and prints every line
the server sends, answering elicitation/create (booleans true, strings
"Alice", numbers 1), sampling/createMessage and roots/list itself. With
--cancel-after it sends `notifications/cancelled` for the call after S
seconds and waits 2 s more. Used to write UPSTREAMS.md.
"""

import argparse
import asyncio
import json
import sys


def answer(msg):
    method = msg["method"]
    if method == "elicitation/create":
        props = msg["params"].get("requestedSchema", {}).get("properties", {})
        fill = {"boolean": True, "string": "Alice", "number": 1, "integer": 1}
        content = {k: fill.get(v.get("type"), "Alice") for k, v in props.items()}
        return {"action": "accept", "content": content}
    if method == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "sampled by probe"}, "model": "probe"}
    if method == "roots/list":
        return {"roots": [{"uri": "file:///probe", "name": "probe"}]}
    if method == "ping":
        return {}
    return None


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--version", default="2025-11-25")
    p.add_argument("--cancel-after", type=float)
    p.add_argument("tool")
    p.add_argument("arguments")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    proc = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    def send(obj):
        line = json.dumps(obj)
        print(f"{loop.time() - t0:6.2f} >> {line}", flush=True)
        proc.stdin.write(line.encode() + b"\n")

    pending = {}

    async def reader():
        while line := await proc.stdout.readline():
            print(f"{loop.time() - t0:6.2f} << {line.decode().rstrip()}", flush=True)
            msg = json.loads(line)
            if "method" in msg and "id" in msg:
                result = answer(msg)
                if result is None:
                    send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not here"}})
                else:
                    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            elif "id" in msg and msg["id"] in pending:
                pending.pop(msg["id"]).set_result(msg)

    def request(id, method, params):
        pending[id] = loop.create_future()
        send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        return pending[id]

    task = asyncio.create_task(reader())
    caps = {"elicitation": {"form": {}}, "sampling": {}, "roots": {"listChanged": True}}
    init = await request(0, "initialize", {"protocolVersion": a.version, "capabilities": caps,
                                           "clientInfo": {"name": "wire-probe", "version": "0"}})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = request(1, "tools/call", {"name": a.tool, "arguments": json.loads(a.arguments),
                                     "_meta": {"progressToken": "probe-1"}})
    if a.cancel_after is not None:
        try:
            await asyncio.wait_for(asyncio.shield(call), a.cancel_after)
        except asyncio.TimeoutError:
            send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 1, "reason": "probe"}})
            await asyncio.sleep(2)
    else:
        await asyncio.wait_for(call, 120)
    proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 3)
    except asyncio.TimeoutError:
        proc.kill()
    task.cancel()


asyncio.run(main())
