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
//! `--store redis://HOST:PORT/DB` (`--features axum,redis`; `?prefix=NAME`
//! to share one database). A task
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
//! A worker fleet (PostgreSQL or SQLite): `--role front` serves HTTP and
//! runs no task handler (tasks are queued in the store); `--role worker`
//! serves nothing, claims queued tasks and runs them (`--concurrency N`,
//! default 16), and prints `worker ready` once it claims; `--role all`
//! (the default) runs handlers where calls arrive, as a single server.
//! SIGTERM or Ctrl-C drains: running handlers get `--drain-secs` (default
//! 10) to finish, then their tasks are handed back by `--recovery`
//! (`rerun`: another worker starts them at once; `fail`: failed now).
//! `--run-log PATH` appends a line per handler run (`TOOL TASK_ID`) and per
//! handler stopped by its cancellation (`cancelled TASK_ID`), for tests
//! that count runs across processes.
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
//! another caller cannot see them. A real server verifies the token in an
//! auth layer and binds tasks to the verified subject, never to a raw secret.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::Extensions;
use mcp_task_layer::jsonrpc::code;
use mcp_task_layer::protocol::META_PROTOCOL_VERSION;
use mcp_task_layer::{
    CancellationToken, Execution, JsonRpcError, JsonRpcRequest, JsonRpcResponse, McpEndpoint,
    Recovery, TaskHandle, TaskId, TaskLayer, TaskOwner, TaskPolicy, TaskStore,
};
use serde_json::{json, Map, Value};
use tower::ServiceBuilder;

const SERVER_NAME: &str = "mcp-task-layer-demo";
/// Protocol versions this server speaks: the stateless 2026-07-28 wire, and
/// `initialize` for 2025-11-25 clients (whose tasks `TaskLayer` serves too).
const SUPPORTED_VERSIONS: [&str; 2] = ["2026-07-28", "2025-11-25"];

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let (port, store_url) = (args.port, args.store);
    // `sqlite:` needs `--features sqlite`, `postgres://` `--features postgres`,
    // `redis://` `--features redis`.
    let store = match mcp_task_layer::store::connect(&store_url).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("cannot open the task store: {e}");
            std::process::exit(1);
        }
    };
    let store = match &args.seal_key_file {
        Some(path) => sealed(store, path),
        None => store,
    };

    let tasks = TaskLayer::new(store)
        .with_tool_policies([
            ("greet", TaskPolicy::Sync),
            (
                "slow_compute",
                TaskPolicy::Auto {
                    within: Duration::from_millis(100),
                },
            ),
            ("failing_job", TaskPolicy::Task),
            ("protocol_error_job", TaskPolicy::Task),
            ("confirm_delete", TaskPolicy::Task),
            ("multi_input", TaskPolicy::Task),
            ("test_tool_with_task", TaskPolicy::Task),
            ("progress_job", TaskPolicy::Task),
        ])
        .with_poll_interval(Duration::from_millis(250))
        .with_lease_ttl(args.lease_ttl)
        .with_recovery(args.recovery)
        .with_execution(match args.role {
            Role::All => Execution::Inline,
            Role::Front | Role::Worker => Execution::Queued,
        });
    if let Some(path) = &args.run_log {
        open_run_log(path);
    }
    if args.role == Role::Worker {
        let worker = tasks
            .worker(tower::service_fn(mcp_server))
            .with_concurrency(args.concurrency);
        println!("worker ready");
        let report = worker.run(shutdown_signal(), args.drain).await;
        eprintln!("worker drained: {report:?}");
        return;
    }
    let service = ServiceBuilder::new()
        .layer(tasks.clone())
        .service_fn(mcp_server);
    // Recover what a crash left behind now, not at the first request.
    service.start_background_work();
    if args.stdio {
        serve_stdio(service).await;
        return;
    }
    let app = McpEndpoint::new(service)
        .with_identity(bearer_identity)
        .into_router("/mcp");

    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    let port = listener.local_addr().map_or(port, |a| a.port());
    println!("listening on http://127.0.0.1:{port}/mcp");
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
    {
        eprintln!("server error: {e}");
        std::process::exit(1);
    }
    // In-flight requests have their answers; now the handlers still running.
    let report = tasks.drain(args.drain).await;
    eprintln!("drained: {report:?}");
}

/// Ctrl-C, or SIGTERM (what a deploy sends).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
                return;
            }
            Err(e) => eprintln!("cannot listen for SIGTERM: {e}"),
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// `--run-log`: one line per handler run, for tests counting runs across
/// processes.
static RUN_LOG: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

fn open_run_log(path: &str) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    match file {
        Ok(file) => {
            let _ = RUN_LOG.set(std::sync::Mutex::new(file));
        }
        Err(e) => {
            eprintln!("cannot open the run log {path}: {e}");
            std::process::exit(1);
        }
    }
}

fn log_run(req: &JsonRpcRequest, tool: &str) {
    use std::io::Write;
    let Some(log) = RUN_LOG.get() else { return };
    let task = req.extensions.get::<TaskId>().map_or_else(
        || {
            req.extensions
                .get::<TaskHandle>()
                .and_then(TaskHandle::id)
                .unwrap_or("-")
                .to_owned()
        },
        |t| t.0.clone(),
    );
    if let Ok(mut file) = log.lock() {
        let _ = writeln!(file, "{tool} {task}");
    }
}

/// MCP on stdin/stdout until stdin closes (`--stdio`).
#[cfg(feature = "stdio")]
async fn serve_stdio<S>(service: S)
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    // One process, one client: every task of the process is its own.
    let transport =
        mcp_task_layer::StdioTransport::new(service).with_owner(TaskOwner::new("stdio"));
    if let Err(e) = transport.serve_stdio().await {
        eprintln!("stdio error: {e}");
        std::process::exit(1);
    }
}

#[cfg(not(feature = "stdio"))]
async fn serve_stdio<S>(_service: S) {
    eprintln!("--stdio needs the `stdio` feature (--features axum,stdio)");
    std::process::exit(2);
}

/// `store` with its tasks' private fields sealed under the keys in the
/// file at `path` (`--seal-key-file`).
#[cfg(feature = "seal")]
fn sealed(store: std::sync::Arc<dyn TaskStore>, path: &str) -> std::sync::Arc<dyn TaskStore> {
    use mcp_task_layer::store::{SealKeyRing, SealedStore};
    match SealKeyRing::from_file(path) {
        Ok(ring) => std::sync::Arc::new(SealedStore::new(store, ring)),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

#[cfg(not(feature = "seal"))]
fn sealed(_: std::sync::Arc<dyn TaskStore>, _: &str) -> std::sync::Arc<dyn TaskStore> {
    eprintln!("--seal-key-file needs the `seal` feature (--features axum,seal)");
    std::process::exit(2);
}

/// Where this process runs task handlers (`--role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    All,
    Front,
    Worker,
}

/// The command line.
struct Args {
    role: Role,
    concurrency: usize,
    drain: Duration,
    run_log: Option<String>,
    stdio: bool,
    port: u16,
    store: String,
    lease_ttl: Duration,
    recovery: Recovery,
    seal_key_file: Option<String>,
}

const USAGE: &str =
    "usage: server [--stdio | --port PORT] [--store memory|sqlite:PATH|postgres://...|redis://...] \
                     [--lease-ttl SECONDS] [--recovery fail|rerun] [--seal-key-file PATH] \
                     [--role all|front|worker] [--concurrency N] [--drain-secs SECONDS] [--run-log PATH]";

/// `--stdio` (MCP on stdin/stdout, no port), `--port PORT` (default 3001), `--store URL` (default `memory`),
/// `--lease-ttl SECONDS` (default 30: how long a task whose server died
/// stays `working` before it is recovered) and `--recovery fail|rerun`
/// (default `fail`), `--seal-key-file PATH` (seal tasks at rest with the
/// keys in PATH), `--role all|front|worker` (default `all`),
/// `--concurrency N` (a worker's handlers at once, default 16),
/// `--drain-secs SECONDS` (default 10), `--run-log PATH`, each also as
/// `--flag=value`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        role: Role::All,
        concurrency: 16,
        drain: Duration::from_secs(10),
        run_log: None,
        stdio: false,
        port: 3001,
        store: "memory".to_owned(),
        lease_ttl: Duration::from_secs(30),
        recovery: Recovery::Fail,
        seal_key_file: None,
    };
    while let Some(arg) = args.next() {
        if arg == "--stdio" {
            out.stdio = true;
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        if ![
            "--port",
            "--store",
            "--lease-ttl",
            "--recovery",
            "--seal-key-file",
            "--role",
            "--concurrency",
            "--drain-secs",
            "--run-log",
        ]
        .contains(&flag.as_str())
        {
            return Err(format!("unknown argument {arg:?}"));
        }
        let value = match inline {
            Some(value) => value,
            None => args.next().ok_or(format!("{flag} needs a value"))?,
        };
        match flag.as_str() {
            "--port" => {
                out.port = value
                    .parse()
                    .map_err(|_| format!("invalid port {value:?}"))?;
            }
            "--lease-ttl" => {
                out.lease_ttl = value
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .filter(|d| !d.is_zero())
                    .ok_or(format!("invalid lease TTL {value:?} (seconds)"))?;
            }
            "--recovery" => {
                out.recovery = match value.as_str() {
                    "fail" => Recovery::Fail,
                    "rerun" => Recovery::Rerun,
                    _ => return Err(format!("invalid recovery {value:?}: fail or rerun")),
                };
            }
            "--seal-key-file" => out.seal_key_file = Some(value),
            "--role" => {
                out.role = match value.as_str() {
                    "all" => Role::All,
                    "front" => Role::Front,
                    "worker" => Role::Worker,
                    _ => return Err(format!("invalid role {value:?}: all, front or worker")),
                };
            }
            "--concurrency" => {
                out.concurrency = value
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or(format!("invalid concurrency {value:?}"))?;
            }
            "--drain-secs" => {
                out.drain = value
                    .parse::<f64>()
                    .ok()
                    .and_then(|s| Duration::try_from_secs_f64(s).ok())
                    .ok_or(format!("invalid drain deadline {value:?} (seconds)"))?;
            }
            "--run-log" => out.run_log = Some(value),
            _ => out.store = value,
        }
    }
    Ok(out)
}

/// Demo identity: `Authorization: Bearer <token>` makes `<token>` the owner
/// of the caller's tasks. Unverified; see the module docs.
fn bearer_identity(parts: &Parts, extensions: &mut Extensions) {
    let token = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    if let Some(token) = token {
        extensions.insert(TaskOwner::new(format!("bearer:{token}")));
    }
}

// ----- the MCP server: no task logic below this line -----

async fn mcp_server(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let id = req.id.clone();
    // 2026-07-28 requests carry their version in `_meta`; that era has no
    // `initialize` or `ping`.
    let modern = req
        .meta()
        .is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
    let outcome = match check_version(&req) {
        Err(e) => Err(e),
        Ok(()) => match req.method.as_str() {
            "server/discover" => Ok(discover()),
            "initialize" if !modern => Ok(initialize()),
            "ping" if !modern => Ok(json!({ "resultType": "complete" })),
            "tools/list" => Ok(tools_list()),
            "tools/call" => {
                let out = call_tool(&req).await;
                if matches!(&out, Err(e) if e.message.ends_with(": cancelled")) {
                    log_run(&req, "cancelled");
                }
                out
            }
            method => Err(JsonRpcError::method_not_found(method)),
        },
    };
    Ok(match outcome {
        Ok(result) => JsonRpcResponse::result(id, result),
        Err(error) => JsonRpcResponse::error(id, error),
    })
}

/// `-32022` for a 2026-07-28-style request in a version this server lacks.
fn check_version(req: &JsonRpcRequest) -> Result<(), JsonRpcError> {
    let requested = req.meta().and_then(|m| m.get(META_PROTOCOL_VERSION));
    match requested {
        Some(Value::String(v)) if SUPPORTED_VERSIONS.contains(&v.as_str()) => Ok(()),
        None => Ok(()),
        Some(other) => Err(JsonRpcError::new(
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({
            "supported": SUPPORTED_VERSIONS,
            "requested": other.as_str().map_or_else(|| other.to_string(), str::to_owned),
        }))),
    }
}

fn server_info() -> Value {
    json!({ "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION") })
}

fn discover() -> Value {
    // TaskLayer adds `capabilities.extensions["io.modelcontextprotocol/tasks"]`.
    json!({
        "resultType": "complete",
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": { "tools": {} },
        "instructions": "Demo server: tools that run as durable tasks.",
        "cacheScope": "public",
        "ttlMs": 0,
        "_meta": { "io.modelcontextprotocol/serverInfo": server_info() }
    })
}

fn initialize() -> Value {
    json!({
        "resultType": "complete",
        "protocolVersion": "2025-11-25",
        "capabilities": { "tools": {} },
        "serverInfo": server_info()
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
    json!({ "resultType": "complete", "content": [{ "type": "text", "text": text.into() }] })
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

async fn call_tool(req: &JsonRpcRequest) -> Result<Value, JsonRpcError> {
    let params = req.params_object();
    let name = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| JsonRpcError::invalid_params("missing tool name"))?;
    log_run(req, name);
    let empty = Map::new();
    let args = params
        .and_then(|p| p.get("arguments"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let arg = |key: &str| args.get(key).and_then(Value::as_str);
    // Every answer so far: from the client's retry of a plain MRTR result,
    // or accumulated by TaskLayer when it resumes a task.
    let answers = params
        .and_then(|p| p.get("inputResponses"))
        .and_then(Value::as_object);
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
