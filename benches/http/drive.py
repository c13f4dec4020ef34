#!/usr/bin/env python3
"""Send N copies of one MCP request over one keep-alive HTTP connection.

Used by benches/http_callgrind.sh, between its callgrind_control calls:

    python3 benches/http/drive.py PORT N get TASK_ID
    python3 benches/http/drive.py PORT N greet
    python3 benches/http/drive.py PORT 1 call TOOL   # prints the taskId
    SPLIT=1 python3 benches/http/drive.py ...        # head and body in two writes
"""
import http.client
import json
import os
import socket
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
    # The head and the body in one write, as wrk (benches/http.sh) and most
    # clients send them: `http.client` writes them apart, and then whether
    # the body had arrived when the server first read it changed from
    # request to request (a body deadline timer started, or not).
    head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    message = head.encode() + body
    # SPLIT=1: the head, then the body, in two writes (as this script sent
    # them before issue 32's seventh pass, with `Accept-Encoding` too).
    split = os.environ.get("SPLIT") == "1"
    if split:
        head = head[:-2] + "Accept-Encoding: identity\r\n\r\n"
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answer = b""
    for _ in range(n):
        if split:
            sock.sendall(head.encode())
            sock.sendall(body)
        else:
            sock.sendall(message)
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        answer = resp.read()
        if resp.status != 200:
            sys.exit(f"HTTP {resp.status}: {answer!r}")
    sock.close()
    if kind == "call":
        print(json.loads(answer)["result"]["taskId"])


if __name__ == "__main__":
    main()
