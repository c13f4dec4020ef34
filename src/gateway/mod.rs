//! `Proxy`: the inner service of an MCP gateway (feature `gateway`). It is
//! an MCP client to an existing server, the upstream, and a
//! `tower::Service<JsonRpcRequest>` to everyone else; a [`TaskLayer`]
//! around it ([`Proxy::task_layer`]) gives every client durable tasks in
//! front of an upstream that has none.
//!
//! - `tools/list` is the upstream's list (refreshed when it says it
//!   changed); `initialize` and `server/discover` say what the upstream
//!   said of itself; everything else that is not a tool call (resources,
//!   prompts, completion, logging) is forwarded as it is.
//! - A `tools/call` is the upstream's call, with the gateway's
//!   `progressToken`: its progress becomes the task's `statusMessage`. A
//!   question the upstream asks during the call (`elicitation/create`,
//!   `sampling/createMessage`, `roots/list`) becomes an MRTR
//!   `input_required` answer whose `requestState` names the waiting
//!   upstream request: in a task, the task's `inputRequests`, answered
//!   with `tasks/update`; the answers go back to the upstream as the
//!   responses to its questions and **the same upstream call goes on**.
//! - `tasks/cancel`, an expired wait and a client gone send
//!   `notifications/cancelled` to the upstream.
//!
//! - What the upstream says outside any call (list changes, resource
//!   updates) reaches the clients listening for it: a 2026-07-28
//!   `subscriptions/listen` stream, or the client of a stdio connection.
//!
//! `call.rs` drives one upstream call, `calls.rs` keeps the calls in flight
//! and parked, `sink.rs` reports progress, `reply.rs` shapes answers for
//! each protocol era, `notices.rs` and `listen.rs` carry notifications
//! outside calls.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

mod call;
mod calls;
mod cancels;
mod config;
mod events;
mod listen;
mod notices;
mod outbound;
mod reply;
mod sink;

use call::{Step, UpstreamCall};
use calls::Calls;
use cancels::{Cancels, Watched};
pub use config::ProxyConfig;
use listen::Listeners;
use notices::Notices;
use outbound::Outbound;
use sink::RunSink;

use crate::config::{Recovery, TaskPolicy};
use crate::context::{TaskOwner, TaskResumeContext};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::layer::TaskLayer;
use crate::peer::Peer;
use crate::protocol::TaskStatus;
use crate::runtime::TaskHandle;
use crate::store::TaskStore;
use crate::upstream::link::Link;
pub use crate::upstream::UpstreamTarget;
use crate::upstream::{Lease, Upstream};

/// The gateway's inner service: the upstream MCP server as a
/// `tower::Service<JsonRpcRequest>`. Clones share the upstream.
#[derive(Clone, Debug)]
pub struct Proxy {
    shared: Arc<Shared>,
}

struct Shared {
    cfg: ProxyConfig,
    upstream: Arc<Upstream>,
    calls: Arc<Calls>,
    cancels: Arc<Cancels>,
    listeners: Arc<Listeners>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("upstream", &self.upstream)
            .field("in_flight", &self.calls.in_flight())
            .field("parked", &self.calls.parked())
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// Connect to `target` (in the background, and again whenever the
    /// connection ends, with backoff). Needs a tokio runtime.
    pub fn start(target: UpstreamTarget, cfg: ProxyConfig) -> Self {
        let notices = Notices::default();
        let calls = Calls::new(cfg.park, notices.clone());
        let upstream = Upstream::start(
            target,
            cfg.keepalive,
            cfg.processes,
            Arc::clone(&calls) as _,
        );
        let (upstream_ref, connect_wait) = (Arc::clone(&upstream), cfg.connect_wait);
        Proxy {
            shared: Arc::new(Shared {
                cfg,
                upstream,
                calls,
                cancels: Arc::default(),
                listeners: Arc::new(Listeners::new(notices, upstream_ref, connect_wait)),
            }),
        }
    }

    /// A [`TaskLayer`] on `store` with this gateway's tool policies and
    /// recovery (`Rerun` when a tool is marked re-runnable: the gateway
    /// itself fails the others), watched by the gateway so that a task
    /// that ends while its upstream call waits for answers cancels that
    /// call. Further settings can be chained on it.
    pub fn task_layer(&self, store: impl TaskStore) -> TaskLayer {
        let cfg = &self.shared.cfg;
        let layer = TaskLayer::new(store)
            .with_tool_policies(cfg.policies.iter().map(|(k, v)| (k.clone(), *v)))
            .with_default_policy(cfg.default_policy)
            .with_recovery(if cfg.rerun.is_empty() {
                Recovery::Fail
            } else {
                Recovery::Rerun
            });
        let mut events = layer.subscribe();
        let calls = Arc::downgrade(&self.shared.calls);
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event)
                        if event.status.is_terminal() || event.status == TaskStatus::Cancelled =>
                    {
                        let Some(calls) = calls.upgrade() else { return };
                        calls.task_ended(&event.task_id);
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                }
            }
        });
        layer
    }

    /// Wait until the upstream is up (at most the connect wait), or say why
    /// it is not.
    pub async fn ready(&self) -> Result<(), JsonRpcError> {
        self.shared
            .upstream
            .session(self.shared.cfg.connect_wait)
            .await
            .map(drop)
    }

    /// Upstream calls in flight now (waiting ones included), and how many
    /// of them wait for answers.
    pub fn calls_in_flight(&self) -> (usize, usize) {
        (self.shared.calls.in_flight(), self.shared.calls.parked())
    }

    /// The clients' requests in flight that a `notifications/cancelled`
    /// could cancel now.
    pub fn cancellable_requests(&self) -> usize {
        self.shared.cancels.len()
    }
}

impl tower_service::Service<JsonRpcRequest> for Proxy {
    type Response = JsonRpcResponse;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<JsonRpcResponse, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: JsonRpcRequest) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move { Ok(shared.handle(req).await) })
    }
}

impl Shared {
    async fn handle(self: Arc<Self>, req: JsonRpcRequest) -> JsonRpcResponse {
        let id = req.id.clone();
        let modern = req.protocol_version().is_some();
        if id.is_none() {
            // The client's notifications are about its own session with
            // the gateway (`initialized`), except a cancel of one of its
            // requests in flight, which reaches the upstream call, and a
            // change of its roots, which every upstream connection hears
            // (it carries no data: the upstream asks again, during a call,
            // and the gateway asks the client of that call).
            if req.method == "notifications/roots/list_changed" {
                self.upstream.notify_all(&req.method, &json!({}));
            } else if req.method == "notifications/cancelled" {
                let cancelled = req
                    .params_object()
                    .and_then(|p| p.get("requestId"))
                    .and_then(|v| serde_json::from_value(v.clone()).ok());
                if let Some(cancelled) = cancelled {
                    let owner = req.extensions.get::<TaskOwner>().map(|o| o.0.clone());
                    self.cancels.cancel(owner, cancelled);
                }
            }
            return JsonRpcResponse::result(None, json!({}));
        }
        let outcome = match reply::check_version(&req) {
            Err(e) => Err(e),
            Ok(()) => match req.method.as_str() {
                "initialize" if !modern => self.info().await.map(|i| {
                    self.listeners.open_session(&req);
                    Reply::Value(reply::initialize(&req, &i))
                }),
                "subscriptions/listen" if modern => {
                    self.listeners.listen(&req).await.map(Reply::Value)
                }
                "resources/unsubscribe" if !modern => {
                    // This client lets go; the upstream keeps a resource
                    // another client still listens to.
                    self.listeners.note_subscription(&req);
                    if self.listeners.still_wanted(&req) {
                        Ok(Reply::Value(json!({})))
                    } else {
                        self.forward(&req).await
                    }
                }
                "resources/subscribe" if !modern => {
                    let out = self.forward(&req).await;
                    if out.is_ok() {
                        self.listeners.note_subscription(&req);
                    }
                    out
                }
                "server/discover" => self.info().await.map(|i| Reply::Value(reply::discover(&i))),
                "ping" if !modern => Ok(Reply::Value(json!({}))),
                "tools/list" => self
                    .info()
                    .await
                    .map(|_| Reply::Value(reply::tools(&self.upstream.tools()))),
                "tools/call" => self.tools_call(&req).await,
                _ => self.forward(&req).await,
            },
        };
        match outcome {
            Ok(Reply::Value(result)) => JsonRpcResponse::result(id, reply::shaped(result, modern)),
            // The upstream's result as it wrote it, not parsed and written
            // again (a 2026-07-28 client's gains `resultType`).
            Ok(Reply::Raw(raw)) => match reply::shaped_raw(raw, modern) {
                Ok(raw) => JsonRpcResponse::trusted_text(id, raw.into_string()),
                Err(value) => JsonRpcResponse::result(id, reply::shaped(value, modern)),
            },
            Err(error) => JsonRpcResponse::error(id, error),
        }
    }

    async fn info(&self) -> Result<Arc<crate::upstream::session::ServerInfo>, JsonRpcError> {
        self.upstream.info(self.cfg.connect_wait).await
    }

    /// Anything but a tool call: the upstream's answer as it is (its
    /// questions relayed to a 2025-11-25 client's stream, refused for
    /// others).
    /// A request that is no tool call, to the upstream. A question the
    /// upstream asks meanwhile goes to a 2025-11-25 client on its stream
    /// (the sink relays it); a 2026-07-28 client gets it as an MRTR round
    /// (`input_required` with a `requestState` naming the waiting upstream
    /// call, which its retry continues); with no one to ask, it is refused.
    async fn forward(self: &Arc<Self>, req: &JsonRpcRequest) -> Result<Reply, JsonRpcError> {
        // A 2026-07-28 client's retry carries MRTR members: the gateway's.
        let modern = req.protocol_version().is_some();
        let (params, sink) = upstream_params(req, None, modern)?;
        let owner = req.extensions.get::<TaskOwner>().map(|o| o.0.clone());
        let watched = self.watch(req);
        let mut call = match params.request_state.as_deref() {
            Some(state) => {
                let Some(mut call) = self.calls.unpark(state, owner.as_deref(), &req.method) else {
                    return Err(JsonRpcError::invalid_params(
                        "requestState names no upstream request waiting here: it ended, \
                         expired, or the gateway restarted since it asked",
                    ));
                };
                self.calls.resumed(&call);
                if answers_missing(&mut call, req) {
                    let questions = call.questions();
                    return self.park(call, owner, None, &req.method, &req.method, questions);
                }
                call
            }
            None => {
                let lease = self.upstream.forwarded(self.cfg.connect_wait).await?;
                let link = Arc::clone(&lease.link);
                self.start_call(&link, Some(lease), &req.method, &params, &sink)
            }
        };
        loop {
            match call.step(&sink, watched.as_ref().map(|w| &w.token)).await {
                Step::Done(out) => return out.map(Reply::Raw),
                Step::Asked(questions) if modern => {
                    return self.park(call, owner, None, &req.method, &req.method, questions);
                }
                Step::Asked(_) => {
                    // Nobody to ask: every question is refused.
                    call.refuse_questions();
                }
            }
        }
    }

    async fn tools_call(self: &Arc<Self>, req: &JsonRpcRequest) -> Result<Reply, JsonRpcError> {
        let handle = req.extensions.get::<TaskHandle>().cloned();
        // A task's run is cancelled through the task; a synchronous call
        // by the client's `notifications/cancelled`.
        let task_token = req.extensions.get::<CancellationToken>().cloned();
        let watched = match task_token {
            Some(_) => None,
            None => self.watch(req),
        };
        let token = task_token.or_else(|| watched.as_ref().map(|w| w.token.clone()));
        let owner = req.extensions.get::<TaskOwner>().map(|o| o.0.clone());
        let name = req
            .params
            .as_ref()
            .and_then(|p| p.str_param("name").as_str())
            .unwrap_or_default()
            .to_owned();
        let rerun = self.cfg.rerun.contains(&name);
        let (fresh, sink) = upstream_params(req, handle.clone(), true)?;
        let state = fresh.request_state.clone();
        let mut call =
            match state
                .as_deref()
                .map(|s| self.calls.unpark(s, owner.as_deref(), &req.method))
            {
                Some(Some(mut call)) => {
                    // Over stdio: once no other call is active on its process.
                    tokio::select! {
                        () = call.resume_lane() => {}
                        () = cancelled(token.as_ref()) => {
                            return Err(JsonRpcError::internal("the call was cancelled"));
                        }
                    }
                    self.calls.resumed(&call);
                    if answers_missing(&mut call, req) {
                        // Answers still missing: the same questions again.
                        let questions = call.questions();
                        return self.park(call, owner, handle, &req.method, &name, questions);
                    }
                    call
                }
                Some(None) if !rerun => return Err(JsonRpcError::invalid_params(
                    "requestState names no upstream call waiting here: it ended, expired, or the \
                     gateway restarted since it asked",
                )),
                None if req.extensions.get::<TaskResumeContext>().is_some() && !rerun => {
                    // The layer runs a task again whose upstream call was lost
                    // with the gateway that made it.
                    return Err(JsonRpcError::internal(
                    "the gateway stopped while this task's upstream call was in flight, and the \
                     tool is not marked re-runnable",
                ));
                }
                _ => {
                    let lease = self.upstream.lease(self.cfg.connect_wait).await?;
                    let link = Arc::clone(&lease.link);
                    self.start_call(&link, Some(lease), "tools/call", &fresh, &sink)
                }
            };
        match call.step(&sink, token.as_ref()).await {
            Step::Done(out) => out.map(Reply::Raw),
            Step::Asked(questions) => {
                if let Some(h) = &handle {
                    if h.id().is_none() && matches!(self.cfg.policy(&name), TaskPolicy::Auto { .. })
                    {
                        // Asked within the `auto` budget by a client that
                        // can take a task: it becomes one now, and the
                        // question is its first input request.
                        h.start_task_now();
                    }
                }
                self.park(call, owner, handle, &req.method, &name, questions)
            }
        }
    }

    /// Watch the client's request for its `notifications/cancelled`;
    /// `None` for a notification, and where the transport drops the
    /// request's future on that notification itself (stdio), which drops
    /// the upstream call and so cancels it.
    fn watch(&self, req: &JsonRpcRequest) -> Option<Watched> {
        if req
            .extensions
            .get::<Peer>()
            .is_some_and(|peer| peer.cancels_by_dropping())
        {
            return None;
        }
        let owner = req.extensions.get::<TaskOwner>().map(|o| o.0.clone());
        Some(self.cancels.watch(owner, req.id.clone()?))
    }

    /// A new upstream call, registered so that what the upstream sends for
    /// it reaches it; with the gateway's `progressToken` when `sink` has
    /// somewhere to put its progress.
    fn start_call(
        &self,
        link: &Arc<Link>,
        lease: Option<Lease>,
        method: &str,
        params: &Outbound,
        sink: &RunSink,
    ) -> UpstreamCall {
        let id = link.next_id();
        let events = self.calls.register(link.serial, id);
        UpstreamCall::start(
            Arc::clone(&self.calls) as _,
            events,
            link,
            lease,
            id,
            params.message(id, method, sink.takes_progress()),
        )
    }

    /// Park `call` and answer with its questions as an MRTR round.
    fn park(
        &self,
        call: UpstreamCall,
        owner: Option<String>,
        handle: Option<TaskHandle>,
        method: &str,
        name: &str,
        questions: Map<String, Value>,
    ) -> Result<Reply, JsonRpcError> {
        let key = reply::state_key()?;
        self.calls.park(call, owner, handle, key.clone(), method)?;
        tracing::debug!(
            tool = name,
            questions = questions.len(),
            "upstream call waits for answers"
        );
        Ok(Reply::Value(json!({
            "resultType": "input_required",
            "inputRequests": questions,
            "requestState": key,
        })))
    }
}

/// A result for the client: made here, or the upstream's as it wrote it.
enum Reply {
    Value(Value),
    Raw(crate::upstream::link::ResultText),
}

/// The params to send upstream for `req` (see [`Outbound`]: without the
/// 2026-07-28 `_meta` keys and the client's `progressToken`, kept in the
/// sink; without the MRTR members when `mrtr`, see [`Outbound::of`]), and
/// the sink that reports this run.
fn upstream_params(
    req: &JsonRpcRequest,
    handle: Option<TaskHandle>,
    mrtr: bool,
) -> Result<(Outbound, RunSink), JsonRpcError> {
    let (params, client) = Outbound::of(req, mrtr)?;
    let modern = req.protocol_version().is_some();
    let peer = req.extensions.get::<Peer>().cloned();
    let caps = if modern {
        Some(client.caps.unwrap_or_else(|| json!({})))
    } else {
        // A 2025-11-25 client's, where its transport keeps them (stdio).
        peer.as_ref().and_then(|p| p.declared_capabilities())
    };
    let sink = RunSink {
        relay: handle.is_none() && !modern,
        handle,
        peer,
        client_token: client.token,
        caps,
        outbox: Default::default(),
    };
    Ok((params, sink))
}

/// Give the resumed `call` the answers of the client's retry `req`
/// (`inputResponses`); whether some it asked for are still missing.
fn answers_missing(call: &mut UpstreamCall, req: &JsonRpcRequest) -> bool {
    let answers = req
        .params_object()
        .and_then(|p| p.get("inputResponses"))
        .and_then(Value::as_object);
    call.answer(answers)
}

/// Completes when `token` is cancelled; never without one.
async fn cancelled(token: Option<&CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}
