//! [`TaskClient`]: call tools on a task-capable server and drive whatever
//! comes back to its end.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tower::ServiceExt;
use tower_service::Service;

use super::input::{HandlerPeer, InputHandler};
use super::{resolve_poll_interval, TaskPollDecision, DEFAULT_POLL_INTERVAL, MIN_POLL_INTERVAL};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::peer::Peer;
use crate::protocol::{
    DetailedTask, InputRequest, Task, TaskStatus, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION,
    PROTOCOL_2026_07_28, TASKS_EXTENSION,
};
use crate::store::BoxError;

/// Which protocol era the client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEra {
    /// 2026-07-28: per-request `_meta`, `tasks/get` with inline results,
    /// `tasks/update` for input.
    Modern,
    /// 2025-11-25: `params.task`, `tasks/result`, input as server→client
    /// requests on the `tasks/result` stream.
    Legacy,
}

/// Why a call did not produce a result.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with a JSON-RPC error.
    Rpc(JsonRpcError),
    /// The task ended `failed` with this error.
    Failed(JsonRpcError),
    /// The task ended `cancelled`.
    Cancelled,
    /// The server needs input and no [`InputHandler`] is set.
    NoInputHandler,
    /// The server's answer did not follow the protocol.
    Protocol(String),
    /// The transport (the service) failed.
    Service(BoxError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Rpc(e) => write!(f, "the server answered with an error: {e}"),
            ClientError::Failed(e) => write!(f, "the task failed: {e}"),
            ClientError::Cancelled => f.write_str("the task was cancelled"),
            ClientError::NoInputHandler => {
                f.write_str("the server asked for input and no input handler is set")
            }
            ClientError::Protocol(m) => write!(f, "protocol violation: {m}"),
            ClientError::Service(e) => write!(f, "transport failure: {e}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Rpc(e) | ClientError::Failed(e) => Some(e),
            ClientError::Service(e) => Some(&**e),
            _ => None,
        }
    }
}

/// What starting a tool call gave.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Started {
    /// The server answered synchronously with this result.
    Result(Map<String, Value>),
    /// The server made a task; wait for it with [`TaskClient::wait`].
    Task {
        /// The task id: persist it to resume after a restart.
        task_id: String,
        /// The server's suggested polling interval, in milliseconds.
        poll_interval_ms: Option<u64>,
    },
}

/// Most MRTR rounds a single `tools/call` may take before the client gives
/// up on a server that keeps asking.
const MAX_MRTR_ROUNDS: usize = 32;

/// A task-aware caller over any `Service<JsonRpcRequest>`: an in-process
/// stack, or a transport client.
///
/// [`call_tool`](Self::call_tool) returns the final result whatever the
/// server chose: a synchronous result, MRTR rounds, or a task that it polls,
/// answers and waits for. The steps are public too, for callers that persist
/// task ids and poll from durable workflows: [`start_tool`](Self::start_tool),
/// [`poll`](Self::poll), [`answer`](Self::answer), [`wait`](Self::wait),
/// [`cancel`](Self::cancel).
///
/// Polling sleeps the caller's override if set, else the server's
/// `pollIntervalMs` for *that* task, else a default that backs off while
/// nothing changes; never below a floor.
pub struct TaskClient<S> {
    svc: S,
    era: ClientEra,
    capabilities: Value,
    input: Option<Arc<dyn InputHandler>>,
    poll_override: Option<Duration>,
    poll_floor: Duration,
    max_backoff: Duration,
    legacy_ttl: Option<u64>,
    next_id: Arc<AtomicI64>,
}

impl<S: Clone> Clone for TaskClient<S> {
    fn clone(&self) -> Self {
        TaskClient {
            svc: self.svc.clone(),
            era: self.era,
            capabilities: self.capabilities.clone(),
            input: self.input.clone(),
            poll_override: self.poll_override,
            poll_floor: self.poll_floor,
            max_backoff: self.max_backoff,
            legacy_ttl: self.legacy_ttl,
            next_id: Arc::clone(&self.next_id),
        }
    }
}

impl<S> fmt::Debug for TaskClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskClient")
            .field("era", &self.era)
            .field("input_handler", &self.input.is_some())
            .field("poll_override", &self.poll_override)
            .field("poll_floor", &self.poll_floor)
            .finish_non_exhaustive()
    }
}

impl<S> TaskClient<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    /// A 2026-07-28 client declaring the tasks extension (and elicitation,
    /// sampling and roots once an input handler is set).
    pub fn new(svc: S) -> Self {
        TaskClient {
            svc,
            era: ClientEra::Modern,
            capabilities: json!({ "extensions": { TASKS_EXTENSION: {} } }),
            input: None,
            poll_override: None,
            poll_floor: MIN_POLL_INTERVAL,
            max_backoff: Duration::from_secs(10),
            legacy_ttl: None,
            next_id: Arc::new(AtomicI64::new(1)),
        }
    }

    /// Speak `era`.
    #[must_use]
    pub fn with_era(mut self, era: ClientEra) -> Self {
        self.era = era;
        self
    }

    /// Answer input requests with `handler`; declares the elicitation,
    /// sampling and roots capabilities.
    #[must_use]
    pub fn with_input_handler(mut self, handler: impl InputHandler) -> Self {
        self.input = Some(Arc::new(handler));
        for cap in ["elicitation", "sampling", "roots"] {
            self.capabilities[cap] = json!({});
        }
        self
    }

    /// Declare a client capability on every 2026-07-28 request (for
    /// example `elicitation` when answering input yourself through
    /// [`answer`](Self::answer)).
    #[must_use]
    pub fn with_capability(mut self, name: &str, value: Value) -> Self {
        self.capabilities[name] = value;
        self
    }

    /// Poll every `interval`, whatever the server suggests.
    #[must_use]
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_override = Some(interval);
        self
    }

    /// Never poll faster than `floor` (default 50 ms).
    #[must_use]
    pub fn with_poll_floor(mut self, floor: Duration) -> Self {
        self.poll_floor = floor;
        self
    }

    /// The longest sleep the backoff reaches when the server gives no hint
    /// (default 10 s).
    #[must_use]
    pub fn with_max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = max;
        self
    }

    /// The `ttl` asked for in 2025-11-25 task-augmented calls.
    #[must_use]
    pub fn with_legacy_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.legacy_ttl = ttl.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self
    }

    async fn send(
        &self,
        method: &str,
        params: Value,
        peer: Option<Peer>,
    ) -> Result<Value, ClientError> {
        self.request(method, params, peer).await
    }

    /// The request as a `'static` future that borrows nothing from `self`.
    fn request(
        &self,
        method: &str,
        mut params: Value,
        peer: Option<Peer>,
    ) -> impl std::future::Future<Output = Result<Value, ClientError>> + Send + 'static {
        if self.era == ClientEra::Modern {
            params["_meta"] = json!({
                META_PROTOCOL_VERSION: PROTOCOL_2026_07_28,
                META_CLIENT_CAPABILITIES: self.capabilities,
            });
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut req = JsonRpcRequest::new(id, method, params);
        if let Some(peer) = peer {
            req.extensions.insert(peer);
        }
        let svc = self.svc.clone();
        async move {
            let resp = svc
                .oneshot(req)
                .await
                .map_err(|e| ClientError::Service(e.into()))?;
            resp.into_payload().map_err(ClientError::Rpc)
        }
    }

    fn handler(&self) -> Result<&Arc<dyn InputHandler>, ClientError> {
        self.input.as_ref().ok_or(ClientError::NoInputHandler)
    }

    /// Answer every request of an `inputRequests` map with the handler.
    async fn answer_all(
        &self,
        requests: &Map<String, Value>,
    ) -> Result<Map<String, Value>, ClientError> {
        let handler = self.handler()?;
        let mut answers = Map::new();
        for (key, request) in requests {
            let request: InputRequest = serde_json::from_value(request.clone())
                .map_err(|e| ClientError::Protocol(format!("bad input request {key:?}: {e}")))?;
            let answer = handler.answer(request).await.map_err(ClientError::Rpc)?;
            answers.insert(key.clone(), answer);
        }
        Ok(answers)
    }

    /// Call a tool and return its final result, whatever shape the server
    /// chose: a result, MRTR rounds, or a task driven to its end.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<Map<String, Value>, ClientError> {
        match self.start_tool(name, arguments).await? {
            Started::Result(result) => Ok(result),
            Started::Task { task_id, .. } => self.wait(&task_id).await,
        }
    }

    /// Send `tools/call` (answering MRTR rounds on the way) and return the
    /// synchronous result or the created task.
    pub async fn start_tool(&self, name: &str, arguments: Value) -> Result<Started, ClientError> {
        let mut params = json!({ "name": name, "arguments": arguments });
        if self.era == ClientEra::Legacy {
            params["task"] = match self.legacy_ttl {
                Some(ttl) => json!({ "ttl": ttl }),
                None => json!({}),
            };
        }
        for _ in 0..MAX_MRTR_ROUNDS {
            let result = match self.send("tools/call", params.clone(), None).await {
                // 2025-11-25: a tool whose `taskSupport` is `forbidden`
                // refuses `task` with -32601; call it plainly.
                Err(ClientError::Rpc(e))
                    if e.code == crate::jsonrpc::code::METHOD_NOT_FOUND
                        && params.get("task").is_some() =>
                {
                    if let Some(p) = params.as_object_mut() {
                        p.remove("task");
                    }
                    continue;
                }
                other => other?,
            };
            let Value::Object(mut result) = result else {
                return Err(ClientError::Protocol(
                    "a tools/call result must be an object".into(),
                ));
            };
            if self.era == ClientEra::Legacy {
                return match result.remove("task") {
                    Some(task) => {
                        let task: Task = serde_json::from_value(task)
                            .map_err(|e| ClientError::Protocol(format!("bad task: {e}")))?;
                        Ok(Started::Task {
                            task_id: task.task_id,
                            poll_interval_ms: task.poll_interval,
                        })
                    }
                    None => Ok(Started::Result(result)),
                };
            }
            match result.get("resultType").and_then(Value::as_str) {
                Some("task") => {
                    let task_id = result
                        .get("taskId")
                        .and_then(Value::as_str)
                        .ok_or_else(|| ClientError::Protocol("a task without taskId".into()))?
                        .to_owned();
                    let poll_interval_ms = result.get("pollIntervalMs").and_then(Value::as_u64);
                    return Ok(Started::Task {
                        task_id,
                        poll_interval_ms,
                    });
                }
                Some("input_required") => {
                    // MRTR: answer this round and retry with the answers and
                    // the exact requestState.
                    let answers = match result.get("inputRequests") {
                        Some(Value::Object(requests)) => self.answer_all(requests).await?,
                        _ => Map::new(),
                    };
                    params["inputResponses"] = Value::Object(answers);
                    match result.remove("requestState") {
                        Some(state) => params["requestState"] = state,
                        None => {
                            if let Some(p) = params.as_object_mut() {
                                p.remove("requestState");
                            }
                        }
                    }
                }
                _ => return Ok(Started::Result(result)),
            }
        }
        Err(ClientError::Protocol(
            "the server kept asking for input".into(),
        ))
    }

    /// One poll: the task's state and what to do next. 2025-11-25 tasks
    /// come back as a [`DetailedTask`] without payloads.
    pub async fn poll(
        &self,
        task_id: &str,
    ) -> Result<(DetailedTask, TaskPollDecision), ClientError> {
        let body = self
            .send("tasks/get", json!({ "taskId": task_id }), None)
            .await?;
        let task = match self.era {
            ClientEra::Modern => serde_json::from_value::<DetailedTask>(body)
                .map_err(|e| ClientError::Protocol(format!("bad tasks/get result: {e}")))?,
            ClientEra::Legacy => {
                let t: Task = serde_json::from_value(body)
                    .map_err(|e| ClientError::Protocol(format!("bad tasks/get result: {e}")))?;
                legacy_as_detailed(t)
            }
        };
        let decision = task.poll_decision();
        Ok((task, decision))
    }

    /// Answer a 2026-07-28 task's outstanding requests (`tasks/update`).
    pub async fn answer(
        &self,
        task_id: &str,
        responses: Map<String, Value>,
    ) -> Result<(), ClientError> {
        self.send(
            "tasks/update",
            json!({ "taskId": task_id, "inputResponses": responses }),
            None,
        )
        .await
        .map(drop)
    }

    /// Ask the server to cancel a task.
    pub async fn cancel(&self, task_id: &str) -> Result<(), ClientError> {
        self.send("tasks/cancel", json!({ "taskId": task_id }), None)
            .await
            .map(drop)
    }

    /// Drive a task to its end and return its result: poll politely,
    /// answer input requests, and map `failed`/`cancelled` to errors. Works
    /// for a task id stored before a restart.
    ///
    /// Dropping the returned future before it finishes sends `tasks/cancel`
    /// for the task (from a spawned task).
    pub async fn wait(&self, task_id: &str) -> Result<Map<String, Value>, ClientError> {
        let mut guard = CancelOnDrop {
            client: Some(self.clone()),
            task_id: task_id.to_owned(),
        };
        let out = self.wait_inner(task_id).await;
        guard.client = None;
        out
    }

    async fn wait_inner(&self, task_id: &str) -> Result<Map<String, Value>, ClientError> {
        let mut backoff: Option<Duration> = None;
        let mut last: Option<TaskStatus> = None;
        loop {
            let (task, decision) = self.poll(task_id).await?;
            if last != Some(task.status()) {
                backoff = None;
                last = Some(task.status());
            }
            match (decision, self.era) {
                (
                    TaskPollDecision::Terminal { .. } | TaskPollDecision::InputRequired,
                    ClientEra::Legacy,
                ) => {
                    return self.legacy_result(task_id).await;
                }
                (TaskPollDecision::Terminal { status }, _) => {
                    return match task {
                        DetailedTask::Completed { result, .. } => Ok(result),
                        DetailedTask::Failed { error, .. } => Err(ClientError::Failed(error)),
                        _ if status == TaskStatus::Cancelled => Err(ClientError::Cancelled),
                        _ => Err(ClientError::Protocol(format!(
                            "unexpected terminal status {status}"
                        ))),
                    };
                }
                (TaskPollDecision::InputRequired, _) => {
                    let requests = task.input_requests().cloned().unwrap_or_default();
                    let requests: Map<String, Value> = requests
                        .into_iter()
                        .map(|(k, v)| (k, serde_json::to_value(v).unwrap_or_default()))
                        .collect();
                    let answers = self.answer_all(&requests).await?;
                    self.answer(task_id, answers).await?;
                }
                (TaskPollDecision::InProgress { poll_hint }, _) => {
                    let wait = match (self.poll_override, poll_hint) {
                        (None, None) => {
                            // No hint: back off while nothing changes.
                            let next = backoff.map_or(DEFAULT_POLL_INTERVAL, |b| b.mul_f64(1.5));
                            let next = next.min(self.max_backoff);
                            backoff = Some(next);
                            next.max(self.poll_floor)
                        }
                        _ => resolve_poll_interval(
                            self.poll_override,
                            poll_hint,
                            DEFAULT_POLL_INTERVAL,
                            self.poll_floor,
                        ),
                    };
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// 2025-11-25: `tasks/result` blocks until the task ends; the input
    /// handler answers the requests sent on its stream.
    async fn legacy_result(&self, task_id: &str) -> Result<Map<String, Value>, ClientError> {
        let peer = self
            .input
            .as_ref()
            .map(|h| Peer::new(HandlerPeer(Arc::clone(h))));
        match self
            .send("tasks/result", json!({ "taskId": task_id }), peer)
            .await
        {
            Ok(Value::Object(result)) => Ok(result),
            Ok(_) => Err(ClientError::Protocol(
                "a tasks/result result must be an object".into(),
            )),
            Err(ClientError::Rpc(e)) => {
                // The task's own failure, or a cancelled task without result.
                match self.poll(task_id).await {
                    Ok((t, _)) if t.status() == TaskStatus::Cancelled => {
                        Err(ClientError::Cancelled)
                    }
                    Ok((t, _)) if t.status() == TaskStatus::Failed => Err(ClientError::Failed(e)),
                    _ => Err(ClientError::Rpc(e)),
                }
            }
            Err(e) => Err(e),
        }
    }
}

fn legacy_as_detailed(t: Task) -> DetailedTask {
    let metadata =
        crate::protocol::TaskMetadata::new(t.task_id, t.created_at, t.last_updated_at, t.ttl)
            .with_poll_interval_ms(t.poll_interval)
            .with_status_message(t.status_message);
    match t.status {
        TaskStatus::Working => DetailedTask::working(metadata),
        TaskStatus::InputRequired => DetailedTask::input_required(metadata, Default::default()),
        TaskStatus::Completed => DetailedTask::completed(metadata, Map::new()),
        TaskStatus::Failed => {
            DetailedTask::failed(metadata, JsonRpcError::internal("the task failed"))
        }
        TaskStatus::Cancelled => DetailedTask::cancelled(metadata),
    }
}

/// Sends `tasks/cancel` if a [`TaskClient::wait`] future is dropped early.
struct CancelOnDrop<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    client: Option<TaskClient<S>>,
    task_id: String,
}

impl<S> Drop for CancelOnDrop<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    fn drop(&mut self) {
        if let (Some(client), Ok(handle)) =
            (self.client.take(), tokio::runtime::Handle::try_current())
        {
            let cancel = client.request("tasks/cancel", json!({ "taskId": self.task_id }), None);
            handle.spawn(async move {
                let _ = cancel.await;
            });
        }
    }
}
