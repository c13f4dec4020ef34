#!/usr/bin/env python3
"""Send N copies of one MCP request over one keep-alive HTTP connection.

Used by benches/http_callgrind.sh, between its callgrind_control calls:

    python3 benches/http/drive.py PORT N get TASK_ID
    python3 benches/http/drive.py PORT N greet
    python3 benches/http/drive.py PORT 1 call TOOL   # prints the taskId
"""
import http.client
import json
import sys

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}


def request(kind, arg):
    if kind == "get":
        method, name, params = "tasks/get", arg, {"taskId": arg}
    elif kind == "greet":
        method, name, params = "tools/call", "greet", {"name": "greet", "arguments": {"name": "bench"}}
    else:
        method, name, params = "tools/call", arg, {"name": arg, "arguments": {}}
    params["_meta"] = META
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    return body, headers


def main():
    port, n, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    arg = sys.argv[4] if len(sys.argv) > 4 else None
    body, headers = request(kind, arg)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    answer = b""
    for _ in range(n):
        conn.request("POST", "/mcp", body, headers)
        resp = conn.getresponse()
        answer = resp.read()
        if resp.status != 200:
            sys.exit(f"HTTP {resp.status}: {answer!r}")
    if kind == "call":
        print(json.loads(answer)["result"]["taskId"])


if __name__ == "__main__":
    main()
