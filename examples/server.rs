//! A demo MCP server with durable tasks, over Streamable HTTP.
//!
//! ```text
//! cargo run --release --features axum --example server -- --port 3001
//! ```
//!
//! With `--stdio` (and `--features axum,stdio`) it speaks MCP on stdin and
//! stdout instead, as desktop and CLI hosts launch servers: no port, no
//! listening line, logs on stderr only, every task owned by the one client
//! of the process. It returns when stdin closes; with `--store sqlite:PATH`
//! the next launch finds the tasks again.
//!
//! ```text
//! cargo run --release --features axum,stdio --example server -- --stdio --store sqlite:tasks.db
//! ```
//!
//! Over HTTP it binds 127.0.0.1 only and prints `listening on http://127.0.0.1:PORT/mcp`
//! once it accepts connections (`--port 0` picks a free port). Set `RUST_LOG`
//! (for example `RUST_LOG=mcp_task_layer=info`) for logs on stderr.
//!
//! Tasks live in memory unless `--store` names a durable store:
//! `--store sqlite:tasks.db` (with `--features axum,sqlite`),
//! `--store postgres://user@host/db` (`--features axum,postgres`) or
//! `--store redis://host:6379/0` (`--features axum,redis`). A task
//! whose server died while it was `working` is recovered once its lease
//! (`--lease-ttl SECONDS`, default 30) has run out: failed, or re-run with
//! `--recovery rerun`. Tasks waiting for input, and finished ones, read back
//! unchanged after a restart.
//!
//! The inner MCP server below knows nothing about tasks: it answers
//! `tools/call` with a result, an error, or an MRTR `input_required` result,
//! and stops when the [`CancellationToken`] in the request extensions fires.
//! [`TaskLayer`] decides which calls become tasks and serves `tasks/*`;
//! [`McpEndpoint`] puts it on HTTP. Its tools are the fixtures of the
//! `tasks-*` scenarios of `@modelcontextprotocol/conformance`:
//!
//! | Tool | Policy | Does |
//! |---|---|---|
//! | `greet {name}` | sync | `Hello, {name}!` |
//! | `slow_compute {seconds, label}` | task if it takes over 100 ms | sleeps, cancellable |
//! | `failing_job {}` | task | a tool error (`isError`) after a second |
//! | `protocol_error_job {}` | task | a JSON-RPC error, so the task fails |
//! | `confirm_delete {filename}` | task | asks to confirm, then "deletes" |
//! | `multi_input {}` | task | asks two questions at once |
//! | `test_tool_with_task {}` | task | asks for a name first (plain MRTR), then runs as a task |
//! | `progress_job {steps}` | task | sets `statusMessage` to "step k of n" every 200 ms, then completes |
//!
//! A worker fleet (PostgreSQL, Redis or SQLite): `--role front` serves
//! HTTP and runs no task handler (tasks are queued in the store); `--role
//! worker` serves nothing, claims queued tasks and runs them
//! (`--concurrency N`, default 16), and prints `worker ready` once it
//! claims; `--role all` (the default) runs handlers where calls arrive, as
//! a single server. SIGTERM or Ctrl-C drains: running handlers get
//! `--drain-secs` (default 10) to finish, then their tasks are handed back
//! by `--recovery` (`rerun`: another worker starts them at once; `fail`:
//! failed now). `--run-log PATH` appends a line per handler run (`TOOL
//! TASK_ID`) and per handler stopped by its cancellation (`cancelled
//! TASK_ID`), for tests that count runs across processes.
//!
//! ```text
//! cargo run --release --features axum,postgres --example server -- --role front --store postgres://... --recovery rerun
//! cargo run --release --features axum,postgres --example server -- --role worker --store postgres://... --recovery rerun
//! ```
//!
//! With `--seal-key-file PATH` (and `--features axum,seal`) the store is
//! wrapped in a `SealedStore`: arguments, answers and results are encrypted
//! before they reach it. The file holds lines `KEY_ID:HEX` (an id of
//! letters, digits and dashes, 64 hex digits), the last the newest key.
//!
//! 2025-11-25 clients (such as `@modelcontextprotocol/sdk` 1.x, see
//! `tests/ts-sdk/`) start with `initialize` and get the legacy tasks from the
//! same layer: `params.task` on `tools/call`, `tasks/get`, `tasks/result`,
//! `tasks/list`, `tasks/cancel`. A question such as `confirm_delete`'s then
//! reaches the client as an `elicitation/create` request on the SSE stream
//! of its `tasks/result` call.
//!
//! Demo identity: a request with `Authorization: Bearer <token>` has its
//! tasks bound to that token, taken unverified as the caller's name, so
//! another caller cannot see them; an `Authorization` header that is not a
//! bearer token gets HTTP 401 with `WWW-Authenticate: Bearer realm="mcp",
//! error="invalid_token"`. A real server verifies the token in an
//! auth layer and binds tasks to the verified subject, never to a raw secret.

use std::convert::Infallible;
use std::time::Duration;

use mcp_task_layer::jsonrpc::code;
use mcp_task_layer::protocol::META_PROTOCOL_VERSION;
use mcp_task_layer::{
    CancellationToken, JsonRpcError, JsonRpcRequest, JsonRpcResponse, TaskHandle,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

mod support;

const SERVER_NAME: &str = "mcp-task-layer-demo";
/// Protocol versions this server speaks: the stateless 2026-07-28 wire, and
/// `initialize` for 2025-11-25 clients (whose tasks `TaskLayer` serves too).
const SUPPORTED_VERSIONS: [&str; 2] = ["2026-07-28", "2025-11-25"];

/// mimalloc, as `mcp-tasks` uses: glibc's malloc and free cost about 2.4k
/// of an HTTP `tasks/get`'s 27.2k instructions (BENCHMARKS.md, issue 32's
/// sixth pass). The library leaves the allocator to the binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    support::run("server", tower::service_fn(mcp_server)).await;
}

// ----- the MCP server: no task logic below this line -----

async fn mcp_server(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let id = req.id.clone();
    // 2026-07-28 requests carry their version in `_meta`; that era has no
    // `initialize` or `ping`.
    let modern = req.protocol_version().is_some();
    // A task's run without a version (a 2025-11-25 task) answers in
    // 2026-07-28 terms, as RmcpService's does: it may ask with
    // `input_required`, which TaskLayer turns into the 2025 questions.
    let task_run = req.extensions.get::<CancellationToken>().is_some();
    let outcome = match check_version(&req) {
        Err(e) => Err(e),
        Ok(()) => match req.method.as_str() {
            "server/discover" => Ok(discover()),
            "initialize" if !modern => Ok(initialize()),
            "ping" if !modern => Ok(json!({})),
            "tools/list" => Ok(tools_list()),
            "tools/call" => call_tool(&req).await,
            method => Err(JsonRpcError::method_not_found(method)),
        },
    };
    Ok(match outcome {
        Ok(mut result) => {
            if !modern && !task_run {
                to_2025(&mut result);
            }
            JsonRpcResponse::result(id, result)
        }
        Err(error) => JsonRpcResponse::error(id, error),
    })
}

/// A result as 2025-11-25 has it: no `resultType`, `cacheScope` or `ttlMs`
/// (members of 2026-07-28 results only).
fn to_2025(result: &mut Value) {
    if let Some(result) = result.as_object_mut() {
        if result.get("resultType").and_then(Value::as_str) == Some("complete") {
            result.remove("resultType");
        }
        result.remove("cacheScope");
        result.remove("ttlMs");
    }
}

/// `-32022` for a 2026-07-28-style request in a version this server lacks.
fn check_version(req: &JsonRpcRequest) -> Result<(), JsonRpcError> {
    let requested = match req.protocol_version() {
        Some(v) if SUPPORTED_VERSIONS.contains(&v) => return Ok(()),
        Some(v) => v.to_owned(),
        // Not a string, or absent (2025-11-25).
        None => match req.meta().and_then(|m| m.get(META_PROTOCOL_VERSION)) {
            Some(other) => other.to_string(),
            None => return Ok(()),
        },
    };
    Err(JsonRpcError::new(
        code::UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
    )
    .with_data(json!({ "supported": SUPPORTED_VERSIONS, "requested": requested })))
}

const INSTRUCTIONS: &str = "Demo server: tools that run as durable tasks.";

fn server_info() -> Value {
    json!({ "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION") })
}

fn discover() -> Value {
    // TaskLayer adds `capabilities.extensions["io.modelcontextprotocol/tasks"]`.
    json!({
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": { "tools": {} },
        "instructions": INSTRUCTIONS,
        "cacheScope": "public",
        "ttlMs": 0,
        "_meta": { "io.modelcontextprotocol/serverInfo": server_info() }
    })
}

fn initialize() -> Value {
    json!({
        "protocolVersion": "2025-11-25",
        "capabilities": { "tools": {} },
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS
    })
}

fn tools_list() -> Value {
    // For 2025-11-25 clients TaskLayer adds each tool's `execution.taskSupport`
    // from its policy; 2026-07-28 has no such field.
    let tool = |name: &str, description: &str, properties: Value| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": { "type": "object", "properties": properties }
        })
    };
    json!({
        "resultType": "complete",
        "tools": [
            tool("greet", "Says hello.", json!({ "name": { "type": "string" } })),
            tool(
                "slow_compute",
                "Sleeps for `seconds`; runs as a task when that takes a while.",
                json!({ "seconds": { "type": "number" }, "label": { "type": "string" } }),
            ),
            tool("failing_job", "Fails with a tool error after a second.", json!({})),
            tool("protocol_error_job", "Fails with a protocol error.", json!({})),
            tool(
                "confirm_delete",
                "Asks for confirmation, then deletes a (pretend) file.",
                json!({ "filename": { "type": "string" } }),
            ),
            tool("multi_input", "Asks two questions at once.", json!({})),
            tool(
                "test_tool_with_task",
                "Asks for a name, then greets as a task.",
                json!({}),
            ),
            tool(
                "progress_job",
                "Works through `steps` steps of 200 ms, saying which one it is on.",
                json!({ "steps": { "type": "integer" } }),
            ),
        ],
        "cacheScope": "public",
        "ttlMs": 0
    })
}

fn text(text: impl Into<String>) -> Value {
    json!({
        "resultType": "complete",
        "isError": false,
        "content": [{ "type": "text", "text": text.into() }]
    })
}

fn tool_error(text: impl Into<String>) -> Value {
    json!({
        "resultType": "complete",
        "isError": true,
        "content": [{ "type": "text", "text": text.into() }]
    })
}

/// A form elicitation asking for one property.
fn ask(message: &str, property: &str, kind: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": { property: { "type": kind } },
                "required": [property]
            }
        }
    })
}

fn input_required(requests: Map<String, Value>) -> Value {
    json!({ "resultType": "input_required", "inputRequests": requests })
}

/// What the client answered under `key`, if it answered.
enum Answer<'a> {
    Missing,
    Accepted(&'a Map<String, Value>),
    Refused,
}

fn answer<'a>(answers: Option<&'a Map<String, Value>>, key: &str) -> Answer<'a> {
    let Some(response) = answers.and_then(|a| a.get(key)) else {
        return Answer::Missing;
    };
    match (
        response.get("action").and_then(Value::as_str),
        response.get("content").and_then(Value::as_object),
    ) {
        (Some("accept"), Some(content)) => Answer::Accepted(content),
        _ => Answer::Refused,
    }
}

/// Sleep, unless the task is cancelled first.
async fn work(duration: Duration, cancel: &CancellationToken) -> Result<(), JsonRpcError> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = cancel.cancelled() => Err(JsonRpcError::internal("cancelled")),
    }
}

/// The members of a `tools/call` this server reads, read straight from the
/// request's text (no `Value` of the whole params: `_meta` is skipped).
///
/// `name` is required, as in rmcp's `CallToolRequestParams`, so that a
/// missing or ill-typed one gets serde's words from both example servers.
#[derive(Deserialize)]
struct ToolCall {
    name: String,
    #[serde(default)]
    arguments: Value,
    #[serde(default, rename = "inputResponses")]
    input_responses: Value,
}

async fn call_tool(req: &JsonRpcRequest) -> Result<Value, JsonRpcError> {
    let call: ToolCall = match &req.params {
        Some(params) => params.deserialize().map_err(|e| {
            // serde's words without their position, as RmcpService says them.
            let text = e.to_string();
            let at = format!(" at line {} column {}", e.line(), e.column());
            JsonRpcError::invalid_params(text.strip_suffix(at.as_str()).unwrap_or(&text))
        })?,
        None => return Err(JsonRpcError::invalid_params("missing field `params`")),
    };
    let name = call.name.as_str();
    let empty = Map::new();
    let args = call.arguments.as_object().unwrap_or(&empty);
    let arg = |key: &str| args.get(key).and_then(Value::as_str);
    // Every answer so far: from the client's retry of a plain MRTR result,
    // or accumulated by TaskLayer when it resumes a task.
    let answers = call.input_responses.as_object();
    // TaskLayer puts the task's token here; calls it lets through get none.
    let cancel = req
        .extensions
        .get::<CancellationToken>()
        .cloned()
        .unwrap_or_default();

    match name {
        "greet" => Ok(match arg("name") {
            Some(name) => text(format!("Hello, {name}!")),
            None => tool_error("greet needs a string `name`"),
        }),
        "slow_compute" => {
            let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
            let seconds = if seconds.is_finite() {
                seconds.clamp(0.0, 3600.0)
            } else {
                0.0
            };
            work(Duration::from_secs_f64(seconds), &cancel).await?;
            Ok(text(format!(
                "computed {} in {seconds}s",
                arg("label").unwrap_or("(no label)")
            )))
        }
        "failing_job" => {
            work(Duration::from_secs(1), &cancel).await?;
            Ok(tool_error("failing_job failed, as it always does"))
        }
        "protocol_error_job" => {
            work(Duration::from_millis(100), &cancel).await?;
            Err(JsonRpcError::internal(
                "protocol_error_job hit a (simulated) protocol failure",
            ))
        }
        "confirm_delete" => {
            let filename = arg("filename").unwrap_or("(unnamed)");
            // Look the file up first; the task exists by the time we ask.
            work(Duration::from_millis(50), &cancel).await?;
            Ok(match answer(answers, "confirm") {
                Answer::Missing => {
                    let mut requests = Map::new();
                    let question = format!("Delete {filename}?");
                    requests.insert("confirm".into(), ask(&question, "confirm", "boolean"));
                    input_required(requests)
                }
                Answer::Accepted(c) if c.get("confirm") == Some(&Value::Bool(true)) => {
                    text(format!("Deleted {filename}."))
                }
                _ => text(format!("Kept {filename}.")),
            })
        }
        "multi_input" => {
            work(Duration::from_millis(50), &cancel).await?;
            let name = answer(answers, "name");
            let confirm = answer(answers, "confirm");
            let mut requests = Map::new();
            if matches!(name, Answer::Missing) {
                requests.insert("name".into(), ask("Your name?", "name", "string"));
            }
            if matches!(confirm, Answer::Missing) {
                requests.insert("confirm".into(), ask("Proceed?", "confirm", "boolean"));
            }
            if !requests.is_empty() {
                return Ok(input_required(requests));
            }
            let name = match name {
                Answer::Accepted(c) => c.get("name").and_then(Value::as_str).unwrap_or("friend"),
                _ => "friend",
            };
            let proceed = matches!(confirm, Answer::Accepted(c) if c.get("confirm") == Some(&Value::Bool(true)));
            Ok(text(format!("Thanks, {name}; proceed: {proceed}.")))
        }
        "test_tool_with_task" => match answer(answers, "user_name") {
            // Ask at once, so the question goes back as a plain MRTR result
            // before any task exists.
            Answer::Missing => {
                let mut requests = Map::new();
                requests.insert("user_name".into(), ask("Your name?", "name", "string"));
                Ok(input_required(requests))
            }
            Answer::Accepted(c) => {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("friend");
                work(Duration::from_millis(200), &cancel).await?;
                Ok(text(format!("Hello, {name}! Your task is done.")))
            }
            Answer::Refused => Ok(text("No name given; nothing to do.")),
        },
        "progress_job" => {
            let steps = args
                .get("steps")
                .and_then(Value::as_u64)
                .unwrap_or(5)
                .clamp(1, 1000);
            // TaskLayer puts the task's handle here on every run of a task.
            let task = req.extensions.get::<TaskHandle>();
            for k in 1..=steps {
                if let Some(task) = task {
                    task.set_status_message(format!("step {k} of {steps}"));
                }
                work(Duration::from_millis(200), &cancel).await?;
            }
            Ok(text(format!("Finished {steps} steps.")))
        }
        other => Err(JsonRpcError::invalid_params(format!(
            "unknown tool {other:?}"
        ))),
    }
}
