//! Fixtures shared by the benches: 2026-07-28 requests, a trivial inner MCP
//! server, a current-thread runtime and timing helpers that keep request
//! construction out of the measured time.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcp_task_layer::store::{Era, TaskOutcome, TaskRecord};
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, TaskStatus};
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;

pub const TASKS: &str = "io.modelcontextprotocol/tasks";

/// `params._meta` of a 2026-07-28 request that declares the tasks extension
/// (and elicitation, so that handlers may ask for input).
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": { TASKS: {} }
        }
    })
}

/// `ping`: a method the layer does not intercept.
pub fn ping(id: i64) -> JsonRpcRequest {
    JsonRpcRequest::new(id, "ping", json!({ "_meta": meta() }))
}

/// `tools/call` of `tool` with a small argument object.
pub fn call(id: i64, tool: &str) -> JsonRpcRequest {
    JsonRpcRequest::new(
        id,
        "tools/call",
        json!({ "name": tool, "arguments": { "text": "hello" }, "_meta": meta() }),
    )
}

/// `tasks/get` of `task_id`.
pub fn get(id: i64, task_id: &str) -> JsonRpcRequest {
    JsonRpcRequest::new(
        id,
        "tasks/get",
        json!({ "taskId": task_id, "_meta": meta() }),
    )
}

/// `tasks/update` answering `key` of `task_id` with an accepted form.
pub fn update(id: i64, task_id: &str, key: &str) -> JsonRpcRequest {
    JsonRpcRequest::new(
        id,
        "tasks/update",
        json!({
            "taskId": task_id,
            "inputResponses": { key: { "action": "accept", "content": { "v": "yes" } } },
            "_meta": meta()
        }),
    )
}

/// A tool result of about 100 bytes once serialized.
pub fn result_100b() -> Map<String, Value> {
    let text = "x".repeat(48);
    match json!({
        "resultType": "complete",
        "content": [{ "type": "text", "text": text }],
        "isError": false
    }) {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// A form elicitation asking for one string property `v`.
pub fn elicit(message: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": { "v": { "type": "string" } } }
        }
    })
}

static GATE: tokio::sync::Notify = tokio::sync::Notify::const_new();
static GATE_OPEN: AtomicBool = AtomicBool::new(true);

/// Make the first invocation of `ask` wait (see [`inner`]).
pub fn close_gate() {
    GATE_OPEN.store(false, Ordering::SeqCst);
}

/// Let the waiting first invocations of `ask` ask their question.
pub fn open_gate() {
    GATE_OPEN.store(true, Ordering::SeqCst);
    GATE.notify_waiters();
}

/// The trivial inner MCP server: answers everything at once.
///
/// - `ping` → `{}`;
/// - `tools/call` of `ask` → asks `q` once the gate is open (see
///   [`close_gate`]), so that a `Task` tool becomes a task before it asks;
///   resumed with an answer to `q` it asks `r` at once: every resume is
///   exactly one more input round;
/// - `tools/call` of `hang` → never answers;
/// - any other `tools/call` → a ~100-byte result.
pub async fn inner(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let id = req.id;
    if req.method != "tools/call" {
        return Ok(JsonRpcResponse::result(id, Value::Object(Map::new())));
    }
    let params = req
        .params
        .map_or(Value::Null, mcp_task_layer::Params::into_value);
    let result = match params["name"].as_str() {
        Some("ask") => {
            let answered = params
                .get("inputResponses")
                .and_then(|r| r.get("q"))
                .is_some();
            if !answered {
                // Wait until the bench opens the gate: the task exists
                // before the first question.
                loop {
                    let opened = GATE.notified();
                    if GATE_OPEN.load(Ordering::SeqCst) {
                        break;
                    }
                    opened.await;
                }
            }
            let key = if answered { "r" } else { "q" };
            json!({
                "resultType": "input_required",
                "inputRequests": { key: elicit("Go on?") }
            })
        }
        Some("hang") => std::future::pending().await,
        _ => Value::Object(result_100b()),
    };
    Ok(JsonRpcResponse::result(id, result))
}

thread_local! {
    static SINK: std::cell::RefCell<Vec<JsonRpcRequest>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An inner MCP server that answers every request at once with an empty
/// result object and keeps the request instead of dropping it, so that
/// freeing the request's JSON stays out of the measured time (see
/// [`drop_kept`]). It measures nothing but dispatch.
pub async fn keep(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let id = req.id.clone();
    SINK.with(|s| s.borrow_mut().push(req));
    Ok(JsonRpcResponse::result(id, Value::Object(Map::new())))
}

/// Free the requests [`keep`] kept on this thread.
pub fn drop_kept() {
    SINK.with(|s| s.borrow_mut().clear());
}

/// A single-threaded runtime with timers: each bench measures the cost on
/// one core.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Run `iters` iterations of `run` inside one `block_on` and time them, with
/// the inputs made by `prepare` (untimed) in chunks of at most `chunk`.
pub fn timed<I, P, F>(rt: &Runtime, iters: u64, chunk: u64, mut prepare: P, mut run: F) -> Duration
where
    P: FnMut(u64) -> I,
    F: AsyncFnMut(I),
{
    rt.block_on(async {
        let mut total = Duration::ZERO;
        let mut done = 0;
        while done < iters {
            let n = chunk.min(iters - done);
            let inputs: Vec<I> = (done..done + n).map(&mut prepare).collect();
            let start = Instant::now();
            for input in inputs {
                run(input).await;
            }
            total += start.elapsed();
            done += n;
        }
        total
    })
}

/// A fast deterministic generator for task ids and access orders.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A 32-hex-digit id, like the layer's.
    pub fn task_id(&mut self) -> String {
        format!("{:016x}{:016x}", self.next_u64(), self.next_u64())
    }
}

/// Wall-clock milliseconds, as the layer's clock reads them.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A completed 2026-07-28 task with a ~100-byte result, as the layer leaves
/// it once the handler has answered (no owner, one hour TTL).
pub fn completed_record(id: String, now_ms: i64, ttl_ms: Option<u64>) -> TaskRecord {
    let mut r = TaskRecord::new(id, Era::Modern, "work", Value::Null, now_ms, ttl_ms);
    r.status = TaskStatus::Completed;
    r.poll_interval_ms = Some(1000);
    r.version = 2;
    r.outcome = Some(TaskOutcome::Result(result_100b().into()));
    // As a task that ran and ended is kept: one status change.
    r.history = vec![mcp_task_layer::store::StatusChange {
        status: TaskStatus::Completed,
        at_ms: now_ms,
    }];
    r
}

/// The `taskId` of a `tools/call` answer that made a task.
///
/// Read from the answer's text when it carries one, as a transport would
/// see it, without building a `Value`.
pub fn task_id_of(resp: &JsonRpcResponse) -> String {
    #[derive(serde::Deserialize)]
    struct Created<'a> {
        #[serde(rename = "resultType")]
        result_type: &'a str,
        #[serde(rename = "taskId")]
        task_id: &'a str,
    }
    if let Some(text) = resp.result_text() {
        // The layer writes `"resultType":"task","taskId":"…"` first; a
        // full parse (still checked in debug builds) would cost the bench
        // more than the layer's answer did.
        if let Some(id) = text
            .strip_prefix(r#"{"resultType":"task","taskId":""#)
            .and_then(|rest| rest.split('"').next())
        {
            debug_assert_eq!(
                serde_json::from_str::<Created<'_>>(text).unwrap().task_id,
                id
            );
            return id.to_owned();
        }
        let created: Created<'_> = serde_json::from_str(text).expect("a task");
        assert_eq!(created.result_type, "task", "not a task: {text}");
        return created.task_id.to_owned();
    }
    let v = resp.result_value().expect("a result");
    assert_eq!(v["resultType"], "task", "not a task: {v}");
    v["taskId"].as_str().expect("a taskId").to_owned()
}

/// The `status` of a `tasks/get` answer, read from its text without
/// parsing it (the bench's check should not cost more than the layer's
/// answer), or from its value.
pub fn status_of(resp: &JsonRpcResponse) -> String {
    #[derive(serde::Deserialize)]
    struct Status<'a> {
        status: &'a str,
    }
    match resp.result_text() {
        // The layer writes `status` before the result: its first
        // occurrence is the task's (a full parse is checked in debug builds).
        Some(text) => {
            let status = text
                .split_once(r#","status":""#)
                .and_then(|(_, rest)| rest.split('"').next())
                .expect("a status");
            debug_assert_eq!(
                serde_json::from_str::<Status<'_>>(text).unwrap().status,
                status
            );
            status.to_owned()
        }
        None => resp.result_value().expect("a result")["status"]
            .as_str()
            .expect("a status")
            .to_owned(),
    }
}

/// Resident memory of this process in KiB (`VmRSS` of /proc/self/status).
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Time `iters` calls of `req` (a `tools/call` that becomes a task whose
/// handler answers at once) on `svc`, in chunks of at most `chunk` (fewer
/// unfinished tasks than the per-owner cap), each chunk timed until the
/// runners have written its last task `completed` in `store`.
pub async fn time_creations<S>(
    svc: &mut S,
    store: &mcp_task_layer::MemoryStore,
    req: &JsonRpcRequest,
    iters: u64,
    chunk: u64,
) -> Duration
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse>,
    S::Error: std::fmt::Debug,
{
    use mcp_task_layer::TaskStore;
    use tower::ServiceExt;

    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let n = chunk.min(iters - done);
        let reqs: Vec<_> = (0..n).map(|_| req.clone()).collect();
        let start = Instant::now();
        let mut last = String::new();
        for r in reqs {
            last = task_id_of(&svc.ready().await.unwrap().call(r).await.unwrap());
        }
        // The runners run after the calls on this one thread, in
        // order: once the last task is written, all are.
        loop {
            let r = store.get(&last, now_ms()).await.unwrap().unwrap();
            if r.status == TaskStatus::Completed {
                break;
            }
            tokio::task::yield_now().await;
        }
        total += start.elapsed();
        done += n;
    }
    total
}

/// The layer with no cap on unfinished tasks per owner: benches that keep
/// many tasks waiting (or running) would otherwise meet the default cap.
pub fn uncapped(layer: mcp_task_layer::TaskLayer) -> mcp_task_layer::TaskLayer {
    layer.with_limits(mcp_task_layer::Limits {
        max_tasks_per_owner: usize::MAX,
        ..mcp_task_layer::Limits::default()
    })
}

/// Until `rx` reports `status` for task `id`.
pub async fn wait_for(
    rx: &mut tokio::sync::broadcast::Receiver<mcp_task_layer::TaskEvent>,
    id: &str,
    status: TaskStatus,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(ev) if ev.task_id == id && ev.status == status => return,
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => panic!("event channel closed"),
        }
    }
}

/// `n` tasks of the `ask` tool (a `Task` tool of `svc`'s layer over
/// `store`) waiting for the answer to `q`, made concurrently (each waits for
/// the task window's timer) while the handlers wait at the gate.
pub async fn tasks_waiting_for_input<S>(
    svc: &S,
    store: &mcp_task_layer::MemoryStore,
    n: u64,
) -> Vec<String>
where
    S: tower::Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: std::fmt::Debug,
{
    use mcp_task_layer::TaskStore;
    close_gate();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let mut svc = svc.clone();
            tokio::spawn(async move { svc.call(call(i as i64, "ask")).await.unwrap() })
        })
        .collect();
    let mut ids = Vec::with_capacity(handles.len());
    for h in handles {
        ids.push(task_id_of(&h.await.unwrap()));
    }
    open_gate();
    for id in &ids {
        while store.get(id, now_ms()).await.unwrap().unwrap().status != TaskStatus::InputRequired {
            tokio::task::yield_now().await;
        }
    }
    ids
}
