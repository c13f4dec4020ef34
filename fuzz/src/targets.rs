//! The bodies of the fuzz targets, written once and used twice: by
//! cargo-fuzz (`fuzz/fuzz_targets/*.rs`) and by the corpus replay of the
//! main crate (`tests/fuzz_corpus.rs` includes this file with `#[path]`).
//! Each body asserts its properties: a failed assertion is a crash to the
//! fuzzer and a failed test to CI.
//!
//! - [`jsonrpc_request`]: bytes → [`JsonRpcRequest::from_slice`]. Never a
//!   panic; `-32700` exactly when the bytes are not JSON, `-32600` when they
//!   are JSON but not a request; an accepted request mirrors the object it
//!   came from and survives a serialize/decode round trip.
//! - [`tasks_update`]: bytes → the `params` of a 2026-07-28 `tasks/update`
//!   and of a `tools/call`, sent through a [`TaskLayer`] (fresh for every
//!   input, small [`Limits`]) over a tiny in-memory server, on one
//!   current-thread tokio runtime per process (paused time). A string `"@task"` as
//!   `taskId` stands for the id of a task that waits for input; params
//!   without `_meta` get the 2026-07-28 `_meta` declaring the tasks
//!   extension. Never a panic (spawned tasks included); every response has
//!   the request's id and is a result or one of the expected JSON-RPC
//!   errors; another owner's update gets the very error an unknown id gets
//!   and changes nothing; a refused update changes nothing; once the layer
//!   is dropped, nothing it spawned on the runtime outlives it.
#![allow(unreachable_pub, dead_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use mcp_task_layer::{
    JsonRpcError, JsonRpcRequest, JsonRpcResponse, Limits, MemoryStore, Params, RequestId,
    TaskLayer, TaskOwner, TaskPolicy,
};
use serde_json::{json, Value};
use tokio::runtime::Runtime;
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

// ----- jsonrpc_request -----

/// Target `jsonrpc_request`: decode bytes as one JSON-RPC request.
pub fn jsonrpc_request(data: &[u8]) {
    let parsed = serde_json::from_slice::<Value>(data);
    let typed = serde_json::from_slice::<JsonRpcRequest>(data);
    match JsonRpcRequest::from_slice(data) {
        Ok(req) => {
            let value = parsed.expect("from_slice accepted bytes that are not JSON");
            let obj = value
                .as_object()
                .expect("a request was decoded from a non-object");
            assert_eq!(obj.get("jsonrpc"), Some(&json!("2.0")));
            assert_eq!(
                obj.get("method").and_then(Value::as_str),
                Some(req.method.as_str())
            );
            assert_eq!(obj.get("params"), req.params.as_ref().map(Params::as_value));
            assert!(req.params.as_ref().is_none_or(|p| p.as_value().is_object()));
            match (&req.id, obj.get("id")) {
                (None, None) => {}
                (Some(RequestId::Number(n)), Some(v)) => assert_eq!(v.as_i64(), Some(*n)),
                (Some(RequestId::String(s)), Some(v)) => assert_eq!(v.as_str(), Some(s.as_str())),
                (id, v) => panic!("id {id:?} decoded from {v:?}"),
            }
            assert!(
                typed.is_ok(),
                "Deserialize disagrees with from_slice: {typed:?}"
            );
            // Serialize and decode again: the same request.
            let bytes = serde_json::to_vec(&req).expect("a request serializes");
            let again = JsonRpcRequest::from_slice(&bytes).expect("a serialized request decodes");
            assert_eq!(again.id, req.id);
            assert_eq!(again.method, req.method);
            assert!(
                same_json(
                    again.params.as_ref().map(Params::as_value),
                    req.params.as_ref().map(Params::as_value)
                ),
                "params changed in a round trip"
            );
        }
        Err(e) => {
            let expected = if parsed.is_ok() { -32600 } else { -32700 };
            assert_eq!(e.code, expected, "{e:?}");
            assert!(!e.message.is_empty());
            assert!(
                typed.is_err(),
                "Deserialize accepted what from_slice refused"
            );
            // The error response a transport would send round-trips.
            let resp = JsonRpcResponse::error(None, e);
            let text = serde_json::to_string(&resp).expect("an error response serializes");
            let back: JsonRpcResponse =
                serde_json::from_str(&text).expect("an error response decodes");
            assert_eq!(back, resp);
        }
    }
}

/// JSON equality, floats within a rounding error (serde_json parses floats
/// to the nearest or next-to-nearest double unless `float_roundtrip`).
fn same_json(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_value(a, b),
        _ => false,
    }
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()) || x.abs().max(y.abs()) < 1e-300
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

// ----- tasks_update -----

/// In a fuzzed `taskId`, stands for the id of the task waiting for input.
pub const TASK_PLACEHOLDER: &str = "@task";
/// A well-formed task id that no task has.
const UNKNOWN_TASK: &str = "ffffffffffffffffffffffffffffffff";
const OWNER: &str = "fuzz";
const INTRUDER: &str = "intruder";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Panics anywhere in the process, spawned tasks included (tokio catches
/// those, so the target would not see them otherwise).
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
        // Paused time: the clock jumps to the next timer whenever the
        // runtime is idle, so the 1 ms the tools "work" cost no real time.
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a tokio runtime")
    })
}

/// Small bounds, so that fuzzed inputs reach them.
pub fn fuzz_limits() -> Limits {
    Limits {
        max_input_responses: 8,
        max_input_responses_bytes: 4_096,
        max_input_depth: 8,
        max_arguments_bytes: 4_096,
        max_result_bytes: 2_048,
        max_accumulated_responses: 16,
        ..Limits::default()
    }
}

/// Target `tasks_update`: bytes → `tasks/update` and `tools/call` params.
pub fn tasks_update(data: &[u8]) {
    // Bytes that are not JSON still make params: a string, which a
    // transport would never hand over but a caller of the layer can.
    let params = serde_json::from_slice::<Value>(data)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(data).into_owned()));
    let rt = runtime();
    rt.block_on(async {
        drive(params).await;
        // The layer is gone: let every handler, runner and reaper it
        // started run out (paused time, so no real wait).
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
    assert_eq!(
        rt.metrics().num_alive_tasks(),
        0,
        "tokio tasks outlived the layer that spawned them"
    );
    assert_eq!(
        PANICS.load(Ordering::SeqCst),
        0,
        "something panicked (see the panic message above)"
    );
}

type Svc = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

struct Caller {
    svc: Svc,
    next: i64,
}

impl Caller {
    /// Send one request as `owner`; check the response's envelope.
    async fn send(&mut self, owner: &str, method: &str, params: Value) -> JsonRpcResponse {
        self.next += 1;
        let id = RequestId::Number(self.next);
        let mut req = JsonRpcRequest::new(id.clone(), method, Value::Null);
        req.params = Some(params.into());
        req.extensions.insert(TaskOwner::new(owner));
        let resp = self
            .svc
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| match e {});
        assert_eq!(
            resp.id,
            Some(id),
            "{method}: a response carries its request's id"
        );
        let wire = serde_json::to_value(&resp).expect("a response serializes");
        assert_eq!(wire["jsonrpc"], "2.0");
        assert!(
            wire.get("result").is_some() != wire.get("error").is_some(),
            "{method}: exactly one of result and error: {wire}"
        );
        if let Some(e) = resp.error_value() {
            assert!(
                !e.message.is_empty(),
                "{method}: an error without a message"
            );
        }
        resp
    }

    async fn get(&mut self, task: &str, modern: bool) -> JsonRpcResponse {
        let mut params = json!({ "taskId": task });
        if modern {
            params["_meta"] = modern_meta();
        }
        self.send(OWNER, "tasks/get", params).await
    }

    async fn get_ok(&mut self, task: &str) -> Value {
        match self.get(task, true).await.into_payload() {
            Ok(v) => v,
            Err(e) => panic!("tasks/get of live task {task}: {e:?}"),
        }
    }
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": {}, "extensions": { TASKS: {} } },
    })
}

/// The fuzzed params with the placeholder task id replaced, and the
/// 2026-07-28 `_meta` added when they have none.
fn prepare(params: &Value, task: &str) -> Value {
    let mut params = params.clone();
    if let Some(obj) = params.as_object_mut() {
        if obj.get("taskId").and_then(Value::as_str) == Some(TASK_PLACEHOLDER) {
            obj.insert("taskId".into(), Value::String(task.to_owned()));
        }
        if !obj.contains_key("_meta") {
            obj.insert("_meta".into(), modern_meta());
        }
    }
    params
}

async fn drive(params: Value) {
    let layer = TaskLayer::new(MemoryStore::new())
        .with_default_policy(TaskPolicy::Task)
        .with_tool_policy("echo", TaskPolicy::Sync)
        .with_limits(fuzz_limits());
    let svc = ServiceBuilder::new()
        .layer(layer)
        .service(tower::service_fn(inner));
    let mut c = Caller {
        svc: BoxCloneSyncService::new(svc),
        next: 0,
    };

    // A task waiting for input: what the fuzzed tasks/update aims at.
    let created = c
        .send(
            OWNER,
            "tools/call",
            json!({ "name": "ask", "arguments": {}, "_meta": modern_meta() }),
        )
        .await;
    let task = created
        .result_value()
        .and_then(|v| v.get("taskId"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("ask did not become a task: {created:?}"))
        .to_owned();
    let mut before = Value::Null;
    for _ in 0..1_000 {
        before = c.get_ok(&task).await;
        if before["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(before["status"], "input_required", "{before}");

    // Another owner's update: the very error an unknown id gets, and
    // nothing changes.
    let foreign = c
        .send(INTRUDER, "tasks/update", prepare(&params, &task))
        .await;
    let unknown = c
        .send(OWNER, "tasks/update", prepare(&params, UNKNOWN_TASK))
        .await;
    assert!(
        foreign.error_value().is_some(),
        "another owner's update was accepted: {foreign:?}"
    );
    assert_eq!(
        foreign.into_payload(),
        unknown.into_payload(),
        "a foreign task id answers differently from an unknown one"
    );
    assert_eq!(
        c.get_ok(&task).await,
        before,
        "another owner's update changed the task"
    );

    // The owner's update.
    let update = c.send(OWNER, "tasks/update", prepare(&params, &task)).await;
    let after = c.get_ok(&task).await;
    match update.into_payload() {
        Err(e) => {
            assert!(
                matches!(e.code, -32602 | -32021 | -32601),
                "tasks/update: unexpected error {e:?}"
            );
            assert_eq!(after, before, "a refused tasks/update changed the task");
        }
        Ok(v) => {
            assert_eq!(v, json!({ "resultType": "complete" }), "tasks/update ack");
            let status = after["status"].as_str().unwrap_or_default();
            assert!(
                matches!(
                    status,
                    "input_required" | "working" | "completed" | "failed"
                ),
                "{after}"
            );
            if status == "input_required" && after["inputRequests"] == before["inputRequests"] {
                assert_eq!(
                    after, before,
                    "an update that answered nothing changed the task"
                );
            }
        }
    }

    // The same params as a tools/call.
    let call = c.send(OWNER, "tools/call", prepare(&params, &task)).await;
    match call.into_payload() {
        Err(e) => assert!(
            matches!(e.code, -32602 | -32021 | -32601),
            "tools/call: unexpected error {e:?}"
        ),
        Ok(v) => {
            let (id, modern) = match (v.get("taskId"), v.get("task")) {
                (Some(id), _) => (id, true),
                (None, Some(task)) => (&task["taskId"], false),
                (None, None) => return,
            };
            let id = id.as_str().expect("a task id is a string");
            assert!(
                id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
                "task id {id}"
            );
            let got = c.get(id, modern).await;
            assert!(
                got.result_value().is_some(),
                "a new task is not visible to its owner: {got:?}"
            );
        }
    }
}

/// The tiny in-memory MCP server behind the layer:
/// - `echo {text}` answers at once (a `Sync` tool);
/// - every other tool works 1 ms first (so that it becomes a task);
/// - `ask` asks `name` until
///   `inputResponses.name.content.name` is a string;
/// - `spin` answers `requestState` alone, forever;
/// - `big {n}` answers a text of `n` bytes (at most 64 KiB);
/// - `fail` answers JSON-RPC error -32050; anything else is `-32602`.
async fn inner(req: JsonRpcRequest) -> Result<JsonRpcResponse, Infallible> {
    let id = req.id.clone();
    if req.method != "tools/call" {
        return Ok(JsonRpcResponse::error(
            id,
            JsonRpcError::method_not_found(&req.method),
        ));
    }
    let params = req.params.map_or(Value::Null, Params::into_value);
    let name = params["name"].as_str().unwrap_or_default();
    let text =
        |s: String| json!({ "resultType": "complete", "content": [{ "type": "text", "text": s }] });
    if name != "echo" {
        // Work a little (paused time), so that the layer's task window ends
        // first and the call becomes a task.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let result = match name {
        "echo" => text(
            params["arguments"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        ),
        "ask" => match params["inputResponses"]["name"]["content"]["name"].as_str() {
            Some(who) => text(format!("Hello, {who}!")),
            None => json!({
                "resultType": "input_required",
                "inputRequests": { "name": { "method": "elicitation/create", "params": {
                    "mode": "form",
                    "message": "Your name?",
                    "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } }
                } } },
                "requestState": "asked",
            }),
        },
        "spin" => json!({ "resultType": "input_required", "requestState": "again" }),
        "big" => {
            let n = params["arguments"]["n"].as_u64().unwrap_or(0).min(1 << 16);
            text("x".repeat(usize::try_from(n).unwrap_or(0)))
        }
        "fail" => {
            return Ok(JsonRpcResponse::error(
                id,
                JsonRpcError::new(-32050, "the tool failed"),
            ))
        }
        other => {
            return Ok(JsonRpcResponse::error(
                id,
                JsonRpcError::invalid_params(format!("unknown tool {other:?}")),
            ))
        }
    };
    Ok(JsonRpcResponse::result(id, result))
}

/// Every seed file of a target, for the replay test: `(path, bytes)`.
pub fn corpus(target: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = if dir.ends_with("fuzz") {
        dir.join("corpus").join(target)
    } else {
        dir.join("fuzz").join("corpus").join(target)
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}
