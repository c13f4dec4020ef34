"""A plain MCP server (no task support) to put behind `mcp-tasks gateway` in tests.

    python tests/gateway/upstream.py              # stdio
    python tests/gateway/upstream.py --http 8931  # Streamable HTTP on http://127.0.0.1:8931/mcp
    python tests/gateway/upstream.py --http 8931 --resumable  # ... keeping SSE events to resume

Written with the Python `mcp` package, version pinned in requirements.txt
(2.x, where FastMCP is called `MCPServer`; the 1.x `FastMCP` class is used
when that is what is installed, but there `protocol_error_job` comes back as
isError: FastMCP 1.x turns every tool exception into a tool error, checked
with mcp 1.30.0). Every tool runs synchronously inside its
`tools/call`; questions go to the client as `elicitation/create`,
`sampling/createMessage` and `roots/list` requests sent while the call is
open, and progress as `notifications/progress` when the call has a
`progressToken`.

Tools: the fixtures of the conformance `tasks-*` scenarios (greet,
slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input,
test_tool_with_task) and, for the gateway's own tests, long, ask_sampling,
ask_roots, nudge_roots (asks for roots and answers without waiting), pid, echo, hop (closes its
SSE stream) and announce (a notification outside any call; the resource memo://note, subscribable
with mcp 2.x).

UPSTREAM_EVENTS=FILE makes the tools append one line per event to FILE:
`started <tool>` when a tool starts, `finished <tool>` when it returns,
`cancelled <label>` when `slow_compute` (its label) or `long` (`long`) is
cancelled by `notifications/cancelled`, `announced <kind>`, `subscribed <uri>`,
`unsubscribed <uri>`, `roots changed` (the upstream then also sends a log
message, outside any call), and `roots answered` or `roots refused` when
nudge_roots's question gets its answer.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import warnings
from typing import Any

from pydantic import BaseModel

try:  # mcp 2.x
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as _Server
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    def protocol_error(code: int, message: str) -> Exception:
        return MCPError(code, message)

    MCP_MAJOR = 2
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as _Server
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.shared.exceptions import McpError
    from mcp.types import ErrorData

    def protocol_error(code: int, message: str) -> Exception:
        return McpError(ErrorData(code=code, message=message))

    MCP_MAJOR = 1

from mcp.types import CallToolResult, SamplingMessage, TextContent

# mcp 2.x marks sampling and roots deprecated (2026-07-28); they are what this server is for.
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28")

mcp = _Server("mcp-task-layer-test-upstream", log_level="WARNING")


def event(line: str) -> None:
    """Append one line to $UPSTREAM_EVENTS (if set), visible to other processes at once."""
    path = os.environ.get("UPSTREAM_EVENTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def started(tool: str) -> None:
    event(f"started {tool}")


def finished(tool: str) -> None:
    event(f"finished {tool}")


def asked_progress(ctx: Context) -> None:
    """Say which `progressToken` the call came with (an event, `progress None` without)."""
    meta = ctx.request_context.meta or {}
    get = meta.get if isinstance(meta, dict) else lambda k: getattr(meta, k, None)
    event(f"progress {get('progress_token') or get('progressToken')}")


def related(ctx: Context) -> dict[str, Any]:
    """related_request_id for a server->client request, so that over Streamable HTTP
    it goes out on the POST's SSE stream of this call."""
    return {"related_request_id": ctx.request_id}


# --- conformance fixtures (shared/conformance.md §2) ---------------------------


@mcp.tool(description="Say hello. Quick and synchronous.", structured_output=False)
async def greet(name: str, ctx: Context) -> str:
    started("greet")
    asked_progress(ctx)
    finished("greet")
    return f"Hello, {name}!"


@mcp.tool(
    description="Sleep `seconds` (progress once a second), then return a text naming `label`.",
    structured_output=False,
)
async def slow_compute(seconds: float, ctx: Context, label: str = "(no label)") -> str:
    started("slow_compute")
    try:
        n = max(1, math.ceil(seconds))
        left = float(seconds)
        k = 0
        while left > 0:
            step = min(1.0, left)
            await asyncio.sleep(step)
            left -= step
            k += 1
            await ctx.report_progress(k, n, f"{label}: {k} of {n} s")
    except BaseException as e:
        if is_cancellation(e):
            event(f"cancelled {label}")
        raise
    finished("slow_compute")
    # The texts of examples/server.rs, so that tests/ts-sdk passes through
    # the gateway unchanged.
    return f"computed {label} in {seconds:g}s"


@mcp.tool(description="Fail with a tool error (isError) after about 1 s.", structured_output=False)
async def failing_job() -> CallToolResult:
    started("failing_job")
    await asyncio.sleep(1)
    finished("failing_job")
    return CallToolResult(
        content=[TextContent(type="text", text="failing_job failed, as it always does")],
        isError=True,
    )


@mcp.tool(description="Fail with a JSON-RPC error (not isError) after about 1 s.", structured_output=False)
async def protocol_error_job() -> str:
    started("protocol_error_job")
    await asyncio.sleep(1)
    finished("protocol_error_job")
    raise protocol_error(-32603, "Internal error: protocol_error_job hit a (simulated) protocol failure")


class Confirm(BaseModel):
    confirm: bool


class Name(BaseModel):
    name: str


class UserName(BaseModel):
    # The conformance harness answers this question with {"name": ...}.
    name: str


@mcp.tool(description="Ask (one elicitation, boolean `confirm`) before deleting `filename`.", structured_output=False)
async def confirm_delete(filename: str, ctx: Context) -> str:
    started("confirm_delete")
    try:
        answer = await ctx.elicit(f"Delete {filename}?", Confirm)
    except BaseException as e:
        if is_cancellation(e):
            event(f"cancelled confirm_delete {filename}")
        raise
    finished("confirm_delete")
    if answer.action == "accept" and answer.data.confirm:
        return f"Deleted {filename}."
    return f"Kept {filename}."


@mcp.tool(description="Work `seconds`, then ask for a name (one elicitation) and greet.", structured_output=False)
async def late_question(ctx: Context, seconds: float = 1) -> str:
    started("late_question")
    await asyncio.sleep(seconds)
    answer = await ctx.elicit("Your name?", UserName)
    if answer.action != "accept":
        return "No name."
    return f"Hello, {answer.data.name}!"


@mcp.tool(description="Ask two elicitations at once (`name`, then `confirm`).", structured_output=False)
async def multi_input(ctx: Context) -> str:
    started("multi_input")
    name, confirm = await asyncio.gather(
        ctx.elicit("Your name?", Name),
        ctx.elicit("Proceed?", Confirm),
    )
    finished("multi_input")
    n = name.data.name if name.action == "accept" else "friend"
    c = "true" if confirm.action == "accept" and confirm.data.confirm else "false"
    return f"Thanks, {n}; proceed: {c}."


@mcp.tool(description="Ask for `user_name`, work about 1 s, then greet.", structured_output=False)
async def test_tool_with_task(ctx: Context) -> str:
    started("test_tool_with_task")
    answer = await ctx.elicit("What is your name?", UserName)
    user_name = answer.data.name if answer.action == "accept" else "stranger"
    await asyncio.sleep(1)
    finished("test_tool_with_task")
    return f"Hello, {user_name}! Your task is done."


# --- the gateway's own tests ---------------------------------------------------


@mcp.prompt(description="Ask whether to be formal, then greet: a question during `prompts/get`.")
async def greeting(ctx: Context) -> str:
    started("greeting")
    answer = await ctx.elicit("Formal?", Confirm)
    finished("greeting")
    return "Good day." if answer.action == "accept" and answer.data.confirm else "Hi!"


@mcp.tool(
    description="Work `seconds` in `steps` equal steps, reporting progress `k` of `steps` (message `step k`).",
    structured_output=False,
)
async def long(ctx: Context, seconds: float = 3, steps: int = 3) -> str:
    started("long")
    asked_progress(ctx)
    steps = max(1, steps)
    try:
        for k in range(1, steps + 1):
            await asyncio.sleep(seconds / steps)
            await ctx.report_progress(k, steps, f"step {k}")
    except BaseException as e:
        if is_cancellation(e):
            event("cancelled long")
        raise
    finished("long")
    return f"done after {steps} steps"


@mcp.tool(description="Ask the client to sample a reply to `prompt`; return its text.", structured_output=False)
async def ask_sampling(prompt: str, ctx: Context) -> str:
    started("ask_sampling")
    result = await ctx.request_context.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        **related(ctx),
    )
    finished("ask_sampling")
    content = result.content
    if isinstance(content, list):
        content = content[0] if content else None
    return getattr(content, "text", None) or str(content)


@mcp.tool(description="Ask the client for its roots (roots/list); return their uris, one a line.", structured_output=False)
async def ask_roots(ctx: Context) -> str:
    started("ask_roots")
    session = ctx.request_context.session
    if MCP_MAJOR >= 2:
        # session.list_roots() takes no related_request_id, so over Streamable HTTP it
        # would go out on the GET stream; this puts it on the call's POST stream.
        from mcp.shared.message import ServerMessageMetadata
        from mcp.types import ListRootsRequest, ListRootsResult

        metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
        result = await session.send_request(ListRootsRequest(), ListRootsResult, metadata=metadata)
    else:
        result = await session.list_roots()
    finished("ask_roots")
    return "\n".join(str(root.uri) for root in result.roots)


# Questions asked and not waited for (a reference keeps each task alive).
UNAWAITED: set[Any] = set()


@mcp.tool(
    description="Ask for the client's roots without waiting for the answer (as server-everything "
    "does on its own), then return `done` after `wait` seconds.",
    structured_output=False,
)
async def nudge_roots(ctx: Context, wait: float = 0.2) -> str:
    session = ctx.request_context.session
    task = asyncio.ensure_future(session.list_roots())
    UNAWAITED.add(task)
    def answered(t: Any) -> None:
        UNAWAITED.discard(t)
        event("roots refused" if t.cancelled() or t.exception() is not None else "roots answered")

    task.add_done_callback(answered)
    # With `wait` 0 the question and the answer leave back to back.
    await asyncio.sleep(wait)
    return "done"


@mcp.tool(
    description="Ask for a name after `seconds`, whether or not the call is cancelled meanwhile "
    "(a handler that ignores cancellation); events say whether the question was answered.",
    structured_output=False,
)
async def stubborn_question(ctx: Context, seconds: float = 1) -> str:
    started("stubborn_question")
    # The session, not the call's context: the context has no way back
    # once its call is cancelled, and a handler that ignores the cancel may
    # still hold its session.
    session = ctx.request_context.session
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

    async def ask() -> None:
        await asyncio.sleep(seconds)
        try:
            answer = await session.elicit("The stubborn call's question", schema)
            event(f"stubborn answered {answer.action}")
        except Exception:
            event("stubborn refused")

    task = asyncio.ensure_future(ask())
    UNAWAITED.add(task)
    task.add_done_callback(UNAWAITED.discard)
    await asyncio.shield(task)
    return "done"


@mcp.tool(description="This server's process id.", structured_output=False)
async def pid() -> str:
    return str(os.getpid())


@mcp.tool(description="Return `text`.", structured_output=False)
async def echo(text: str) -> str:
    return text


# --- notifications outside any call ---------------------------------------------


@mcp.resource("memo://note", description="A note that `announce` says changed.")
def note() -> str:
    return "a note"


@mcp.tool(
    description="Send a notification that belongs to no call: `kind` is `tools` (after adding a tool "
    "named `name`), `prompts`, `resources`, or `updated` (resources/updated for `uri`).",
    structured_output=False,
)
async def announce(kind: str, ctx: Context, name: str = "", uri: str = "") -> str:
    session = ctx.request_context.session
    if kind == "tools":
        async def added(text: str) -> str:
            return text

        mcp.add_tool(added, name=name, description="Added by `announce`.", structured_output=False)
        await session.send_tool_list_changed()
    elif kind == "prompts":
        await session.send_prompt_list_changed()
    elif kind == "resources":
        await session.send_resource_list_changed()
    elif kind == "updated":
        await session.send_resource_updated(uri)
    else:
        raise ToolError(f"unknown kind {kind!r}")
    event(f"announced {kind}")
    return "sent"


async def on_subscribe(ctx: Any, params: Any) -> Any:
    event(f"subscribed {params.uri}")
    return EmptyResult()


async def on_unsubscribe(ctx: Any, params: Any) -> Any:
    event(f"unsubscribed {params.uri}")
    return EmptyResult()


if MCP_MAJOR >= 2:
    from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

    mcp._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
    mcp._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)

    async def on_roots_changed(ctx: Any, params: Any) -> None:
        event("roots changed")
        # A log message that belongs to no call.
        await ctx.session.send_log_message(level="info", data="roots changed", logger="upstream")

    from mcp.types import NotificationParams

    mcp._lowlevel_server.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, on_roots_changed
    )


def is_cancellation(e: BaseException) -> bool:
    """asyncio's CancelledError, or whatever anyio's backend cancels with."""
    if isinstance(e, asyncio.CancelledError):
        return True
    try:
        import anyio

        return isinstance(e, anyio.get_cancelled_exc_class())
    except Exception:
        return False


@mcp.tool(
    description="Close this call's SSE stream (a server run with --resumable keeps its events), "
    "then answer after `seconds`: the client must resume with Last-Event-ID to hear it.",
    structured_output=False,
)
async def hop(ctx: Context, seconds: float = 0.3) -> str:
    started("hop")
    await ctx.close_sse_stream()
    await asyncio.sleep(seconds)
    finished("hop")
    return "landed"


def memory_events() -> Any:
    """An in-memory event store (mcp 2.x): every event of every stream, replayable after its id."""
    from mcp.server.streamable_http import EventMessage, EventStore

    class MemoryEvents(EventStore):
        def __init__(self) -> None:
            self.events: list[tuple[str, str, Any]] = []

        async def store_event(self, stream_id: str, message: Any) -> str:
            event_id = str(len(self.events) + 1)
            self.events.append((event_id, stream_id, message))
            return event_id

        async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
            at = next((i for i, (e, _, _) in enumerate(self.events) if e == last_event_id), None)
            if at is None:
                return None
            stream = self.events[at][1]
            for event_id, stream_id, message in self.events[at + 1 :]:
                if stream_id == stream and message is not None:
                    await send_callback(EventMessage(message, event_id))
            return stream

    return MemoryEvents()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--resumable", action="store_true", help="keep SSE events for Last-Event-ID (mcp 2.x)")
    args = parser.parse_args()
    if args.http is None:
        mcp.run("stdio")
    elif MCP_MAJOR >= 2:
        extra: dict[str, Any] = {}
        if args.resumable:
            extra = {"event_store": memory_events(), "retry_interval": 50}
        mcp.run("streamable-http", host="127.0.0.1", port=args.http, streamable_http_path="/mcp", **extra)
    else:
        mcp.settings.host = "127.0.0.1"
        mcp.settings.port = args.http
        mcp.settings.streamable_http_path = "/mcp"
        mcp.run("streamable-http")


if __name__ == "__main__":
    sys.exit(main())
