"""Smoke test of tests/gateway/upstream.py with the Python SDK's ClientSession over stdio.

    $MCP_TASKS_PYTHON tests/gateway/smoke_client.py [COMMAND ARGS...]

COMMAND defaults to this Python running tests/gateway/upstream.py. Calls
greet, long (progress callback), confirm_delete (elicitation callback),
ask_sampling (sampling callback), ask_roots (roots callback), failing_job,
protocol_error_job, and cancels slow_compute; prints what it sees and exits
non-zero on the first surprise. (.ci/python.sh's ensure_python_mcp sets
MCP_TASKS_PYTHON.)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types

HERE = Path(__file__).resolve().parent


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        raise SystemExit(1)


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


async def on_sampling(context, params):
    prompt = params.messages[0].content.text
    return types.CreateMessageResult.model_validate(
        {"role": "assistant", "content": {"type": "text", "text": f"sampled: {prompt}"}, "model": "smoke"}
    )


async def on_elicitation(context, params):
    props = (getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", None))["properties"]
    content = {k: (True if v.get("type") == "boolean" else "Alice") for k, v in props.items()}
    return types.ElicitResult.model_validate({"action": "accept", "content": content})


async def on_roots(context):
    return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///tmp/smoke", "name": "smoke"}]})


async def main(command: list[str]) -> None:
    events = Path(tempfile.mkstemp(prefix="upstream-events-")[1])
    env = dict(os.environ, UPSTREAM_EVENTS=str(events))
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read,
            write,
            sampling_callback=on_sampling,
            elicitation_callback=on_elicitation,
            list_roots_callback=on_roots,
        ) as session:
            init = await session.initialize()
            version = getattr(init, "protocol_version", None) or getattr(init, "protocolVersion", None)
            print(f"initialized: protocol {version}", flush=True)
            tools = {t.name for t in (await session.list_tools()).tools}
            check({"greet", "long", "confirm_delete", "ask_sampling", "slow_compute"} <= tools, f"tools {sorted(tools)}")

            r = await session.call_tool("greet", {"name": "World"})
            check(text_of(r) == "Hello, World!", f"greet -> {text_of(r)!r}")

            progress: list[tuple] = []

            async def on_progress(p, total, message):
                progress.append((p, total, message))

            t0 = time.monotonic()
            r = await session.call_tool("long", {"seconds": 1.5, "steps": 3}, progress_callback=on_progress)
            dt = time.monotonic() - t0
            check(text_of(r) == "done after 3 steps", f"long -> {text_of(r)!r} in {dt:.1f} s")
            check(progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")], f"long progress {progress}")

            r = await session.call_tool("confirm_delete", {"filename": "a.txt"})
            check(text_of(r) == "Deleted a.txt.", f"confirm_delete -> {text_of(r)!r}")

            r = await session.call_tool("multi_input", {})
            check(text_of(r) == "Thanks, Alice; proceed: true.", f"multi_input -> {text_of(r)!r}")

            r = await session.call_tool("ask_sampling", {"prompt": "2+2?"})
            check(text_of(r) == "sampled: 2+2?", f"ask_sampling -> {text_of(r)!r}")

            r = await session.call_tool("ask_roots", {})
            check(text_of(r) == "file:///tmp/smoke", f"ask_roots -> {text_of(r)!r}")

            r = await session.call_tool("failing_job", {})
            check(is_error(r), f"failing_job -> isError, {text_of(r)!r}")

            try:
                r = await session.call_tool("protocol_error_job", {})
                check(False, f"protocol_error_job -> a result {r!r}")
            except Exception as e:  # McpError (1.x) / MCPError (2.x)
                check("protocol_error_job" in str(e), f"protocol_error_job -> JSON-RPC error {e!r}")

            # Cancel: the SDK sends notifications/cancelled when the caller's scope is cancelled.
            with anyio.move_on_after(1.5):
                await session.call_tool("slow_compute", {"seconds": 10, "label": "smoke"})
            await anyio.sleep(0.5)
            lines = events.read_text().splitlines()
            check("cancelled smoke" in lines, "slow_compute cancelled upstream (events file)")
            check(lines.count("started confirm_delete") == 1, "confirm_delete ran once")

            r = await session.call_tool("pid", {})
            check(text_of(r).isdigit(), f"pid -> {text_of(r)}")
    events.unlink()
    print("smoke: all ok", flush=True)


if __name__ == "__main__":
    cmd = sys.argv[1:] or [sys.executable, str(HERE / "upstream.py")]
    anyio.run(main, cmd)
