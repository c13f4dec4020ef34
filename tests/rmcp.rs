//! `RmcpService`: an ordinary rmcp server (the official Rust SDK, its
//! `#[tool_router]` macros) behind `TaskLayer`, unchanged. Its tools become
//! tasks, ask for input with rmcp's `InputRequiredResult` and are resumed
//! with every answer (R18, R35, R36), are cancelled through rmcp's
//! cancellation token (R41, R44, R21), survive a restart on SQLite, and
//! reach the client through the transport's peer on 2025-11-25 calls.
#![cfg(feature = "rmcp")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, MemoryStore, Peer, RmcpService,
    TaskHandle, TaskLayer, TaskPolicy, TaskResumeContext, TaskService, TaskStore,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{Extension, InputResponses};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitationSchema, Extensions, InputRequest, InputRequests,
    InputRequiredResult, ServerCapabilities, ServerConfig, ServerRequest,
};
use rmcp::schemars::JsonSchema;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tower::{Layer, ServiceExt};

mod common;

/// What the tools saw.
#[derive(Default)]
struct Seen {
    /// The `TaskResumeContext` of each run of `ask_twice`, in order.
    resumes: Mutex<Vec<Option<TaskResumeContext>>>,
    /// The cancellation token `wait`'s rmcp context gave it.
    wait_token: Mutex<Option<CancellationToken>>,
}

#[derive(Clone)]
struct Tools {
    seen: Arc<Seen>,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct Empty {}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn ask(key: &str) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: format!("{key}?"),
            requested_schema: ElicitationSchema::builder()
                .required_string("name")
                .build_unchecked(),
        },
    ))
}

fn asking(key: &str) -> CallToolResponse {
    let mut requests = InputRequests::new();
    requests.insert(key.to_owned(), ask(key));
    InputRequiredResult::new(Some(requests), Some(format!("asked {key}"))).into()
}

fn name_in(answers: Option<&rmcp::model::InputResponses>, key: &str) -> Option<String> {
    answers?.get(key)?["content"]["name"]
        .as_str()
        .map(str::to_owned)
}

#[tool_router]
impl Tools {
    fn new(seen: Arc<Seen>) -> Self {
        Tools {
            seen,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Asks for `first`, then `second`, then answers with both.")]
    async fn ask_twice(
        &self,
        InputResponses(answers): InputResponses,
        extensions: Extensions,
    ) -> Result<CallToolResponse, ErrorData> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let resume = extensions.get::<TaskResumeContext>().cloned();
        self.seen.resumes.lock().unwrap().push(resume);
        let Some(first) = name_in(answers.as_ref(), "first") else {
            return Ok(asking("first"));
        };
        let Some(second) = name_in(answers.as_ref(), "second") else {
            return Ok(asking("second"));
        };
        Ok(text(format!("{first} and {second}")).into())
    }

    #[tool(description = "Asks for a name at once (plain MRTR), then greets.")]
    async fn ask_now(
        &self,
        InputResponses(answers): InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(match name_in(answers.as_ref(), "name") {
            None => asking("name"),
            Some(name) => text(format!("Hello, {name}!")).into(),
        })
    }

    #[tool(description = "Waits until cancelled.")]
    async fn wait(
        &self,
        cancel: CancellationToken,
        // The layer's handle to the task; a first run has no `TaskId` yet
        // (the task may not exist), a resume has both.
        Extension(_task): Extension<TaskHandle>,
    ) -> Result<CallToolResult, ErrorData> {
        *self.seen.wait_token.lock().unwrap() = Some(cancel.clone());
        cancel.cancelled().await;
        Err(ErrorData::internal_error("cancelled", None))
    }

    #[tool(description = "Asks the client through the rmcp peer, during the call.")]
    async fn elicit(
        &self,
        Parameters(Empty {}): Parameters<Empty>,
        peer: rmcp::Peer<RoleServer>,
    ) -> CallToolResult {
        let InputRequest::Elicitation(request) = ask("name") else {
            unreachable!()
        };
        match peer
            .send_request(ServerRequest::ElicitRequest(request))
            .await
        {
            Ok(ClientResult::ElicitResult(answer)) => text(format!(
                "answered {}",
                answer.content.unwrap_or_default()["name"]
            )),
            Ok(_) => CallToolResult::error(vec![ContentBlock::text("unexpected answer")]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("no answer: {e}"))]),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

type Inner = RmcpService<Tools>;

fn layered(store: impl TaskStore, seen: &Arc<Seen>) -> TaskService<Inner> {
    TaskLayer::new(store)
        .with_default_policy(TaskPolicy::Task)
        .with_tool_policy("elicit", TaskPolicy::Sync)
        .layer(RmcpService::new(Tools::new(Arc::clone(seen))))
}

/// A 2026-07-28 request's answer; panics on an error.
async fn send(svc: &TaskService<Inner>, method: &str, mut params: Value) -> Value {
    params["_meta"] = common::meta(true);
    let resp = svc
        .clone()
        .oneshot(JsonRpcRequest::new(1, method, params))
        .await
        .unwrap();
    match resp.into_payload() {
        Ok(v) => v,
        Err(e) => panic!("{method} failed: {e:?}"),
    }
}

async fn start(svc: &TaskService<Inner>, tool: &str) -> String {
    let r = send(svc, "tools/call", json!({"name": tool, "arguments": {}})).await;
    assert_eq!(r["resultType"], "task", "{tool} becomes a task: {r}");
    r["taskId"].as_str().unwrap().to_owned()
}

/// Poll `tasks/get` (bounded) until the task has `status`.
async fn wait_for(svc: &TaskService<Inner>, task: &str, status: &str) -> Value {
    for _ in 0..1000 {
        let body = send(svc, "tasks/get", json!({"taskId": task})).await;
        if body["status"] == status {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("task {task} never reached {status}");
}

async fn answer(svc: &TaskService<Inner>, task: &str, key: &str, name: &str) {
    let ack = send(
        svc,
        "tasks/update",
        json!({"taskId": task, "inputResponses": {
            key: {"action": "accept", "content": {"name": name}}
        }}),
    )
    .await;
    assert_eq!(ack["resultType"], "complete");
}

/// R18, R35, R36: an rmcp tool's `InputRequiredResult` makes its task
/// `input_required`; on each resume the tool reads its `TaskResumeContext`
/// and rmcp's `InputResponses`, both with every answer so far.
#[tokio::test(start_paused = true)]
async fn an_rmcp_tool_is_resumed_with_every_accumulated_answer() {
    let seen = Arc::new(Seen::default());
    let svc = layered(MemoryStore::new(), &seen);
    let task = start(&svc, "ask_twice").await;

    let asked = wait_for(&svc, &task, "input_required").await;
    assert_eq!(
        asked["inputRequests"]["first"]["method"],
        "elicitation/create"
    );
    answer(&svc, &task, "first", "Ada").await;
    let asked = wait_for(&svc, &task, "input_required").await;
    let keys: Vec<_> = asked["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["second"], "an answered key is not asked again");
    answer(&svc, &task, "second", "Grace").await;
    let done = wait_for(&svc, &task, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Ada and Grace");

    let resumes = seen.resumes.lock().unwrap().clone();
    assert_eq!(resumes.len(), 3, "one run per round");
    assert!(resumes[0].is_none(), "the first run is no resume");
    let last = resumes[2].as_ref().expect("the last run is a resume");
    assert_eq!(last.tool_name, "ask_twice");
    let mut answered: Vec<_> = last.input_responses.keys().cloned().collect();
    answered.sort();
    assert_eq!(answered, ["first", "second"]);
    assert!(last.cancellation_token.is_some());
}

/// R41, R44, R21: `tasks/cancel` fires the rmcp handler's cancellation
/// token, and the task ends `cancelled`.
#[tokio::test(start_paused = true)]
async fn a_cancel_reaches_the_rmcp_handler() {
    let seen = Arc::new(Seen::default());
    let svc = layered(MemoryStore::new(), &seen);
    let task = start(&svc, "wait").await;
    let mut token = None;
    for _ in 0..1000 {
        token = seen.wait_token.lock().unwrap().clone();
        if token.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let token = token.expect("the handler runs");
    assert!(!token.is_cancelled());
    let ack = send(&svc, "tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(ack["resultType"], "complete");
    let body = wait_for(&svc, &task, "cancelled").await;
    assert!(body.get("result").is_none());
    assert!(token.is_cancelled(), "rmcp's ct fired");
}

/// Plain MRTR: a tool that asks at once answers `input_required` before any
/// task exists; the client's retry with the answer becomes the task, which
/// completes (R19).
#[tokio::test(start_paused = true)]
async fn plain_mrtr_passes_through() {
    let seen = Arc::new(Seen::default());
    let svc = layered(MemoryStore::new(), &seen);
    let r = send(
        &svc,
        "tools/call",
        json!({"name": "ask_now", "arguments": {}}),
    )
    .await;
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert_eq!(r["inputRequests"]["name"]["method"], "elicitation/create");
    assert_eq!(r["requestState"], "asked name");
    let r = send(
        &svc,
        "tools/call",
        json!({"name": "ask_now", "arguments": {},
               "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
               "requestState": "asked name"}),
    )
    .await;
    assert_eq!(r["resultType"], "task", "{r}");
    let done = wait_for(&svc, r["taskId"].as_str().unwrap(), "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
}

/// `tools/list` and `initialize` answer as under rmcp's own transports.
#[tokio::test]
async fn passthrough_methods_answer_as_rmcp_does() {
    let seen = Arc::new(Seen::default());
    let svc = layered(MemoryStore::new(), &seen);
    let list = send(&svc, "tools/list", json!({})).await;
    let mut names: Vec<_> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["ask_now", "ask_twice", "elicit", "wait"]);
    assert_eq!(list["tools"][0]["inputSchema"]["type"], "object");

    let init = svc
        .clone()
        .oneshot(JsonRpcRequest::new(
            7,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "legacy", "version": "1"}}),
        ))
        .await
        .unwrap();
    let init = init.into_payload().unwrap();
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
}

/// A client that accepts every elicitation with the name "Ada".
struct Accepting;

impl ClientPeer for Accepting {
    fn request(
        &self,
        method: String,
        params: Value,
    ) -> mcp_task_layer::store::BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(async move {
            assert_eq!(method, "elicitation/create");
            assert_eq!(params["message"], "name?");
            Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
        })
    }

    fn notify(
        &self,
        _method: String,
        _params: Value,
    ) -> mcp_task_layer::store::BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

/// A 2025-11-25 `tools/call` (no `_meta` version) of the sync `elicit`.
async fn legacy_elicit(svc: &TaskService<Inner>, peer: Option<Peer>) -> JsonRpcResponse {
    let mut req = JsonRpcRequest::new(3, "tools/call", json!({"name": "elicit", "arguments": {}}));
    if let Some(peer) = peer {
        req.extensions.insert(peer);
    }
    svc.clone().oneshot(req).await.unwrap()
}

/// During a plain 2025-11-25 call, a request the handler sends through its
/// rmcp peer reaches the client through the transport's `Peer`, and the
/// client's answer comes back; with no `Peer` it fails cleanly.
#[tokio::test]
async fn an_elicitation_through_the_rmcp_peer_reaches_the_client() {
    let seen = Arc::new(Seen::default());
    let svc = layered(MemoryStore::new(), &seen);

    let r = legacy_elicit(&svc, Some(Peer::new(Accepting))).await;
    let r = r.into_payload().unwrap();
    assert_eq!(r["content"][0]["text"], "answered \"Ada\"", "{r}");

    let r = legacy_elicit(&svc, None).await;
    let r = r.into_payload().unwrap();
    assert_eq!(r["isError"], true, "{r}");
    let message = r["content"][0]["text"].as_str().unwrap();
    assert!(message.starts_with("no answer: "), "{message}");
}

/// A restart on SQLite: an rmcp task waiting for input is resumed by a new
/// layer (and a new `RmcpService`) over the same file.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_sqlite_resumes_an_rmcp_task_waiting_for_input() {
    use mcp_task_layer::store::SqliteStore;

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
    let before = layered(store.clone(), &Arc::new(Seen::default()));
    let task = start(&before, "ask_twice").await;
    wait_for(&before, &task, "input_required").await;
    answer(&before, &task, "first", "Ada").await;
    let asked = wait_for(&before, &task, "input_required").await;
    assert!(asked["inputRequests"].get("second").is_some(), "{asked}");
    drop(before);
    store.close().await;
    drop(store);

    let seen = Arc::new(Seen::default());
    let after = layered(SqliteStore::connect(&url).await.unwrap(), &seen);
    assert_eq!(
        send(&after, "tasks/get", json!({"taskId": task})).await,
        asked,
        "the waiting task reads the same"
    );
    answer(&after, &task, "second", "Grace").await;
    let done = wait_for(&after, &task, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Ada and Grace");
    let resumes = seen.resumes.lock().unwrap().clone();
    let last = resumes.last().unwrap().as_ref().unwrap();
    assert_eq!(
        last.input_responses.len(),
        2,
        "both answers, across the restart"
    );
}
