//! Shared test fixtures: a scripted MCP server and a client-side harness.
#![allow(dead_code, unreachable_pub)]

pub mod faults;
pub mod features;
pub mod fed;
pub mod peer;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod process;
#[cfg(feature = "redis")]
pub mod redis_db;
#[cfg(feature = "http-client")]
pub mod remote;
#[cfg(feature = "axum")]
pub mod wire;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_task_layer::{
    CancellationToken, JsonRpcRequest, JsonRpcResponse, Params, TaskEvent, TaskLayer, TaskOwner,
    TaskPolicy, TaskResumeContext, TaskStatus,
};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

pub const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Whether this is CI (`CI=true`), where a test must not skip for want of
/// a server.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A test server's URL from the environment variable `var`, or `None`
/// (after a note) when it is not set outside CI; under CI a missing URL
/// fails the test. `how` says what sets it.
pub fn server_url(var: &str, engine: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            assert!(
                !ci(),
                "CI=true but {var} is not set: .ci/run must start {engine} ({how})"
            );
            eprintln!("note: skipping a {engine} test: {var} is not set ({how})");
            None
        }
    }
}

/// `_meta` of a 2026-07-28 request, declaring the tasks extension or not.
pub fn meta(tasks: bool) -> Value {
    let mut caps = json!({ "elicitation": {}, "sampling": {} });
    if tasks {
        caps["extensions"] = json!({ TASKS: {} });
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

/// A tool's last request: params, the resume context, whether a token came.
pub type LastCall = (Value, Option<TaskResumeContext>, bool);

/// What the scripted server saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// Invocations per tool.
    pub calls: Mutex<HashMap<String, usize>>,
    /// The last request per tool: params and whether the layer attached a
    /// resume context / token.
    pub last: Mutex<HashMap<String, LastCall>>,
    pub cancelled_handlers: AtomicUsize,
    /// Handler futures dropped before they finished (aborted).
    pub aborted_handlers: Arc<AtomicUsize>,
}

/// Counts a drop that happens before `disarm`.
struct AbortGuard(Option<Arc<AtomicUsize>>);

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Seen {
    pub fn calls(&self, tool: &str) -> usize {
        self.calls.lock().unwrap().get(tool).copied().unwrap_or(0)
    }
    pub fn last(&self, tool: &str) -> LastCall {
        self.last
            .lock()
            .unwrap()
            .get(tool)
            .cloned()
            .expect("tool was called")
    }
}

fn text(s: impl Into<String>) -> Value {
    json!({ "resultType": "complete", "content": [{ "type": "text", "text": s.into() }], "isError": false })
}

fn elicit(message: &str, field: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": { field: { "type": "string" } }, "required": [field] }
        }
    })
}

fn answer<'a>(params: &'a Value, key: &str, field: &str) -> Option<&'a str> {
    params
        .get("inputResponses")?
        .get(key)?
        .get("content")?
        .get(field)?
        .as_str()
}

/// The scripted MCP server. Tools:
/// - `echo {text}`: answers at once.
/// - `slow {ms}`: sleeps (tokio time), stops early on cancellation.
/// - `hang`: never finishes unless cancelled; ignores cancellation if `stubborn`.
/// - `ask`: works 1 ms, asks `name`, then greets; `ask_now` asks at once.
///
/// Every asking tool but `ask_now` works 1 ms first, so it becomes a task
/// before it asks.
/// - `ask2`: asks `a` and `b` at once, then joins them.
/// - `reask`: asks `a`; after the first answer asks `a` again (same inner key), then finishes.
/// - `state`: answers with requestState only, twice, then finishes.
/// - `boom`: JSON-RPC error -32050 with data.
/// - `tool_error`: `isError: true` result.
/// - `sample`: asks for sampling/createMessage.
/// - `roots`: asks for roots/list (never declared by the tests' meta).
pub fn server(seen: Arc<Seen>) -> BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible> {
    BoxCloneSyncService::new(tower::service_fn(move |req: JsonRpcRequest| {
        let seen = Arc::clone(&seen);
        async move {
            let id = req.id.clone();
            if req.method != "tools/call" {
                let result = match req.method.as_str() {
                    "server/discover" => json!({
                        "resultType": "complete",
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": { "tools": {}, "tasks": { "list": {} } },
                        "serverInfo": { "name": "fixture", "version": "1" }
                    }),
                    "ping" => json!({ "resultType": "complete" }),
                    "initialize" => json!({
                        "protocolVersion": "2025-11-25",
                        "capabilities": { "tools": {} },
                        "serverInfo": { "name": "fixture", "version": "1" }
                    }),
                    "tools/list" => json!({ "tools": [
                        { "name": "echo", "inputSchema": { "type": "object" } },
                        { "name": "slow", "inputSchema": { "type": "object" }, "execution": { "taskSupport": "forbidden" } },
                        { "name": "ask", "inputSchema": { "type": "object" } },
                    ] }),
                    _ => {
                        return Ok(JsonRpcResponse::error(
                            id,
                            mcp_task_layer::JsonRpcError::method_not_found(&req.method),
                        ))
                    }
                };
                return Ok(JsonRpcResponse::result(id, result));
            }
            let params = req.params.clone().map_or(Value::Null, Params::into_value);
            let tool = params["name"].as_str().unwrap_or_default().to_owned();
            *seen.calls.lock().unwrap().entry(tool.clone()).or_default() += 1;
            let token = req.extensions.get::<CancellationToken>().cloned();
            seen.last.lock().unwrap().insert(
                tool.clone(),
                (
                    params.clone(),
                    req.extensions.get::<TaskResumeContext>().cloned(),
                    token.is_some(),
                ),
            );
            let token = token.unwrap_or_default();
            if matches!(
                tool.as_str(),
                "ask" | "ask2" | "reask" | "sample" | "roots" | "state"
            ) {
                // Some work before asking, so these become tasks first and
                // ask inside the task. `ask_now` asks at once (plain MRTR).
                let ms = params["arguments"]["delay_ms"].as_u64().unwrap_or(1);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let result = match tool.as_str() {
                "echo" => text(params["arguments"]["text"].as_str().unwrap_or("")),
                "slow" => {
                    let ms = params["arguments"]["ms"].as_u64().unwrap_or(1000);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(ms)) => text(format!("slept {ms}")),
                        () = token.cancelled() => {
                            seen.cancelled_handlers.fetch_add(1, Ordering::SeqCst);
                            text("stopped")
                        }
                    }
                }
                "hang" => {
                    let mut guard = AbortGuard(Some(Arc::clone(&seen.aborted_handlers)));
                    if params["arguments"]["stubborn"] == json!(true) {
                        std::future::pending::<()>().await;
                    }
                    token.cancelled().await;
                    guard.0 = None;
                    seen.cancelled_handlers.fetch_add(1, Ordering::SeqCst);
                    text("stopped")
                }
                "ask" | "ask_now" => match answer(&params, "name", "name") {
                    Some(name) => text(format!("Hello, {name}!")),
                    None => json!({
                        "resultType": "input_required",
                        "inputRequests": { "name": elicit("Your name?", "name") },
                        "requestState": "asked-name"
                    }),
                },
                "ask2" => match (answer(&params, "a", "v"), answer(&params, "b", "v")) {
                    (Some(a), Some(b)) => text(format!("{a}+{b}")),
                    _ => json!({
                        "resultType": "input_required",
                        "inputRequests": { "a": elicit("A?", "v"), "b": elicit("B?", "v") }
                    }),
                },
                "reask" => {
                    let state = params["requestState"].as_str().unwrap_or("0");
                    match (state, answer(&params, "a", "v")) {
                        ("0", None) => json!({
                            "resultType": "input_required",
                            "inputRequests": { "a": elicit("first", "v") },
                            "requestState": "1"
                        }),
                        ("1", Some(first)) => json!({
                            "resultType": "input_required",
                            "inputRequests": { "a": elicit(&format!("again after {first}"), "v") },
                            "requestState": "2"
                        }),
                        (_, Some(last)) => text(format!("last={last}")),
                        _ => {
                            json!({ "resultType": "input_required", "inputRequests": { "a": elicit("?", "v") } })
                        }
                    }
                }
                "state" => match params["requestState"].as_str() {
                    None => json!({ "resultType": "input_required", "requestState": "s1" }),
                    Some("s1") => json!({ "resultType": "input_required", "requestState": "s2" }),
                    Some(s) => text(format!("done after {s}")),
                },
                "boom" => {
                    return Ok(JsonRpcResponse::error(
                        id,
                        mcp_task_layer::JsonRpcError::new(-32050, "upstream exploded")
                            .with_data(json!({ "retry": false })),
                    ))
                }
                "tool_error" => json!({
                    "resultType": "complete",
                    "content": [{ "type": "text", "text": "bad input" }],
                    "isError": true
                }),
                "sample" => match params.get("inputResponses").and_then(|r| r.get("llm")) {
                    Some(_) => text("sampled"),
                    None => json!({
                        "resultType": "input_required",
                        "inputRequests": { "llm": { "method": "sampling/createMessage", "params": { "messages": [], "maxTokens": 5 } } }
                    }),
                },
                "roots" => json!({
                    "resultType": "input_required",
                    "inputRequests": { "r": { "method": "roots/list" } }
                }),
                other => {
                    return Ok(JsonRpcResponse::error(
                        id,
                        mcp_task_layer::JsonRpcError::invalid_params(format!(
                            "unknown tool {other}"
                        )),
                    ))
                }
            };
            Ok(JsonRpcResponse::result(id, result))
        }
    }))
}

/// Every tool of [`server`] as a task (`slow` as `Auto` with 100 ms).
pub fn layer() -> TaskLayer {
    layer_on(mcp_task_layer::MemoryStore::new())
}

/// [`layer`] over a given store.
pub fn layer_on(store: impl mcp_task_layer::TaskStore) -> TaskLayer {
    TaskLayer::new(store)
        .with_default_policy(TaskPolicy::Task)
        .with_tool_policy("echo", TaskPolicy::Sync)
        .with_tool_policy(
            "slow",
            TaskPolicy::Auto {
                within: Duration::from_millis(100),
            },
        )
}

/// A client of a layered [`server`].
pub struct Client {
    pub svc: BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>,
    pub seen: Arc<Seen>,
    pub events: broadcast::Receiver<TaskEvent>,
    pub owner: Option<String>,
    next: Arc<AtomicUsize>,
}

impl Client {
    pub fn new(layer: TaskLayer) -> Self {
        let seen = Arc::new(Seen::default());
        let events = layer.subscribe();
        let svc = BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(layer)
                .service(server(Arc::clone(&seen))),
        );
        Client {
            svc,
            seen,
            events,
            owner: None,
            next: Arc::new(AtomicUsize::new(1)),
        }
    }

    /// The same server, seen as another owner.
    pub fn as_owner(&self, owner: &str) -> Self {
        Client {
            svc: self.svc.clone(),
            seen: Arc::clone(&self.seen),
            events: self.events.resubscribe(),
            owner: Some(owner.to_owned()),
            next: Arc::clone(&self.next),
        }
    }

    pub async fn send(&self, method: &str, params: Value) -> JsonRpcResponse {
        let id = self.next.fetch_add(1, Ordering::SeqCst) as i64;
        let mut req = JsonRpcRequest::new(id, method, params);
        if let Some(owner) = &self.owner {
            req.extensions.insert(TaskOwner::new(owner.clone()));
        }
        let resp = self.svc.clone().oneshot(req).await.unwrap();
        assert_eq!(
            resp.id,
            Some(id.into()),
            "a response carries its request's id"
        );
        resp
    }

    /// Send with the 2026-07-28 `_meta` merged into `params`.
    pub async fn send26(&self, method: &str, mut params: Value, tasks: bool) -> JsonRpcResponse {
        params["_meta"] = meta(tasks);
        self.send(method, params).await
    }

    pub async fn call(&self, tool: &str, args: Value) -> JsonRpcResponse {
        self.send26(
            "tools/call",
            json!({ "name": tool, "arguments": args }),
            true,
        )
        .await
    }

    /// Call a tool that must become a task; its id.
    pub async fn start(&self, tool: &str, args: Value) -> String {
        let resp = self.call(tool, args).await;
        let r = ok(&resp);
        assert_eq!(r["resultType"], "task", "{tool} must become a task: {r}");
        r["taskId"].as_str().unwrap().to_owned()
    }

    pub async fn get(&self, task: &str) -> JsonRpcResponse {
        self.send26("tasks/get", json!({ "taskId": task }), true)
            .await
    }

    pub async fn get_ok(&self, task: &str) -> Value {
        ok(&self.get(task).await).clone()
    }

    pub async fn update(&self, task: &str, responses: Value) -> JsonRpcResponse {
        self.send26(
            "tasks/update",
            json!({ "taskId": task, "inputResponses": responses }),
            true,
        )
        .await
    }

    pub async fn cancel(&self, task: &str) -> JsonRpcResponse {
        self.send26("tasks/cancel", json!({ "taskId": task }), true)
            .await
    }

    /// Wait (on layer events, never on wall time) until the task has
    /// `status`; its `tasks/get` body then.
    pub async fn wait_for(&mut self, task: &str, status: TaskStatus) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
        loop {
            let body = self.get_ok(task).await;
            if body["status"] == status.as_str() {
                return body;
            }
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(e)) => panic!("event channel closed: {e}"),
                Err(_) => panic!("task {task} never reached {status}; last: {body}"),
            }
        }
    }
}

pub fn ok(resp: &JsonRpcResponse) -> &Value {
    match (resp.result_value(), resp.error_value()) {
        (Some(v), _) => v,
        (None, e) => panic!("expected a result, got error {e:?}"),
    }
}

pub fn err(resp: &JsonRpcResponse) -> &mcp_task_layer::JsonRpcError {
    match (resp.error_value(), resp.result_value()) {
        (Some(e), _) => e,
        (None, v) => panic!("expected an error, got result {v:?}"),
    }
}

pub fn accept(field: &str, value: &str) -> Value {
    json!({ "action": "accept", "content": { field: value } })
}

/// A running worker: the sender stops it, the handle gives its drain
/// report.
pub type Worker = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<mcp_task_layer::DrainReport>,
);

/// A worker of `layer` over `inner` (such as [`server`]) with
/// `concurrency` slots, that never looks unwoken within a test (an hour's
/// poll), to be set further before [`run_worker`].
pub fn worker_of<S>(
    layer: &TaskLayer,
    inner: S,
    concurrency: usize,
) -> mcp_task_layer::TaskWorker<S>
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    layer
        .worker(inner)
        .with_concurrency(concurrency)
        .with_poll_interval(Duration::from_secs(3600))
}

/// Run `worker` until the returned sender stops it; it drains with a
/// deadline of `deadline`.
pub fn run_worker<S>(worker: mcp_task_layer::TaskWorker<S>, deadline: Duration) -> Worker
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let done = tokio::spawn(worker.run(
        async {
            let _ = stopped.await;
        },
        deadline,
    ));
    (stop, done)
}

/// [`worker_of`] run by [`run_worker`].
pub fn start_worker<S>(
    layer: &TaskLayer,
    inner: S,
    concurrency: usize,
    deadline: Duration,
) -> Worker
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    run_worker(worker_of(layer, inner, concurrency), deadline)
}

/// See each of `ids` end `completed` through `front`, then stop `worker`:
/// it drains with nothing to hand back.
pub async fn finish(
    front: &mut Client,
    ids: impl IntoIterator<Item = impl AsRef<str>>,
    (stop, done): Worker,
) {
    for id in ids {
        front.wait_for(id.as_ref(), TaskStatus::Completed).await;
    }
    let _ = stop.send(());
    assert_eq!(done.await.unwrap(), mcp_task_layer::DrainReport::default());
}

/// Poll `cond` every 10 ms of (paused, auto-advancing) tokio time, for at
/// most 60 s of it.
pub async fn eventually(mut cond: impl FnMut() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
