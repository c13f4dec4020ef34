//! [`TaskService`]: dispatch by method.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::ServiceExt;
use tower_service::Service;

use crate::advertise::Edit;
use crate::config::TaskPolicy;
use crate::era::{missing_tasks_capability, wants_task_notifications, RequestEra};
use crate::future::ResponseFuture;
use crate::jsonrpc::{IdentityRefusal, JsonRpcRequest, JsonRpcResponse};
use crate::runtime::handlers::{KeptCall, TaskCandidate};
use crate::runtime::Engine;
use crate::store::Era;

/// The middleware made by [`TaskLayer`](crate::TaskLayer).
///
/// It handles `tools/call` (deciding whether a call becomes a task) and
/// `tasks/*` itself, advertises the tasks extension in `server/discover`
/// results, and lets every other request through to the inner service
/// untouched. Protocol failures are JSON-RPC error *responses*; `Error` is
/// the inner service's own error type.
///
/// The name is `TaskService` rather than tower's usual `Task<S>` because
/// "task" is this crate's domain noun; stored tasks are
/// [`TaskRecord`](crate::store::TaskRecord)s.
pub struct TaskService<S> {
    inner: S,
    engine: Arc<Engine>,
}

impl<S: Clone> Clone for TaskService<S> {
    fn clone(&self) -> Self {
        TaskService {
            inner: self.inner.clone(),
            engine: Arc::clone(&self.engine),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for TaskService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> TaskService<S> {
    pub(crate) fn new(inner: S, engine: Arc<Engine>) -> Self {
        TaskService { inner, engine }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwrap the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The engine the layer's services share.
    #[cfg(feature = "axum")]
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
}

impl<S> TaskService<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    /// Start the layer's background work now instead of at the first task
    /// request: the reaper, the search for orphaned tasks (with their
    /// recovery, for which this service is kept when the policy is
    /// [`Recovery::Rerun`](crate::Recovery::Rerun)) and, for stores that
    /// publish changes, the listener that brings other replicas' changes to
    /// this one's handlers and subscribers.
    ///
    /// A server with a durable store calls this once at start-up, inside
    /// the tokio runtime, so that tasks left behind by a crash are recovered
    /// without waiting for traffic. Calling it again does nothing; outside
    /// a tokio runtime it does nothing either.
    pub fn start_background_work(&self) {
        self.engine.register_invoker(&self.inner);
        self.engine.ensure_background();
    }
}

impl<S> Service<JsonRpcRequest> for TaskService<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = JsonRpcResponse;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: JsonRpcRequest) -> Self::Future {
        match req.method.as_str() {
            "tools/call" => self.tools_call(req),
            "tasks/get" | "tasks/update" | "tasks/cancel" | "tasks/result" | "tasks/list" => {
                self.tasks(req)
            }
            "subscriptions/listen" if wants_task_notifications(&req) => self.listen(req),
            "server/discover" if RequestEra::of(&req).modern => {
                ResponseFuture::capabilities(self.inner.call(req), Edit::Discover)
            }
            "initialize" if !RequestEra::of(&req).modern => {
                // `tasks/list` is served only to callers with an identity.
                let list = self.engine.owner_of(&req).is_some();
                ResponseFuture::capabilities(self.inner.call(req), Edit::Initialize { list })
            }
            "tools/list" if !RequestEra::of(&req).modern => {
                let edit = Edit::ToolsList(self.engine.cfg.policies.clone());
                ResponseFuture::capabilities(self.inner.call(req), edit)
            }
            _ => ResponseFuture::passthrough(self.inner.call(req)),
        }
    }
}

fn answer<F, E>(resp: JsonRpcResponse) -> ResponseFuture<F, E>
where
    E: Send + 'static,
{
    ResponseFuture::ready(resp)
}

impl<S> TaskService<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    fn tools_call(&mut self, req: JsonRpcRequest) -> ResponseFuture<S::Future, S::Error> {
        if req.id.is_none() {
            // A notification gets no answer, so a task made of it could
            // never be addressed: the inner server handles it as it is.
            return ResponseFuture::passthrough(self.inner.call(req));
        }
        let era = match RequestEra::admitted(&req, &self.engine.cfg.supported_versions) {
            Ok(era) => era,
            Err(e) => return answer(JsonRpcResponse::error(req.id, e)),
        };
        let name = req.str_param("name").as_str().unwrap_or_default();
        let policy = self.engine.cfg.policy(name);
        match era.wants_task(&req, name, policy) {
            Ok(true) => {}
            Ok(false) => return ResponseFuture::passthrough(self.inner.call(req)),
            Err(e) => return answer(JsonRpcResponse::error(req.id, e)),
        }
        let owner = self.engine.owner_of(&req);
        if let Err(e) = self.engine.check_identity(owner.as_deref()) {
            // Over HTTP: 401 with a `WWW-Authenticate` challenge.
            return answer(JsonRpcResponse::refused(
                req.id,
                IdentityRefusal::Missing,
                e,
            ));
        }
        // The copy a task would store, made once: its length is the size
        // the limit is about.
        let kept = match KeptCall::of(&req, &self.engine.cfg.limits) {
            Ok(kept) => kept,
            Err(e) => return answer(JsonRpcResponse::error(req.id, e)),
        };
        self.engine.ensure_background();
        self.engine.register_invoker(&self.inner);
        let era = era.store_era();
        let Ok(reservation) = self.engine.reserve_slot(owner.as_deref()) else {
            return self.tools_call_after_recount(req, kept, owner, era, policy);
        };
        let call = TaskCandidate::from_request(&req, kept, owner, era, reservation);
        let engine = Arc::clone(&self.engine);
        if engine.queued() {
            return ResponseFuture::intercepted(Box::pin(engine.queue_call(call, policy)));
        }
        let mut req = req;
        req.extensions.insert(call.token.clone());
        req.extensions.insert(call.handle.clone());
        // The runner needs a service of its own to re-invoke the handler
        // later; the ready one serves this call (see tower-service's "Be
        // careful when cloning inner services").
        let clone = self.inner.clone();
        let fut = self.inner.call(req);
        ResponseFuture::intercepted(Box::pin(engine.tools_call(clone, call, policy, fut)))
    }

    /// A `tools/call` whose owner seems to have no slot left: the
    /// replica re-reads the owner's tasks it tracks (some may have ended on
    /// another replica) before it refuses.
    fn tools_call_after_recount(
        &mut self,
        req: JsonRpcRequest,
        kept: KeptCall,
        owner: Option<String>,
        era: Era,
        policy: TaskPolicy,
    ) -> ResponseFuture<S::Future, S::Error> {
        let engine = Arc::clone(&self.engine);
        let inner = self.inner.clone();
        ResponseFuture::intercepted(Box::pin(async move {
            let reservation = match engine.reserve_slot_after_recount(owner.as_deref()).await {
                Ok(reservation) => reservation,
                Err(e) => return Ok(JsonRpcResponse::error(req.id, e)),
            };
            let call = TaskCandidate::from_request(&req, kept, owner, era, reservation);
            if engine.queued() {
                return engine.queue_call(call, policy).await;
            }
            let mut req = req;
            req.extensions.insert(call.token.clone());
            req.extensions.insert(call.handle.clone());
            let fut = inner.clone().oneshot(req);
            engine.tools_call(inner, call, policy, fut).await
        }))
    }

    fn tasks(&mut self, req: JsonRpcRequest) -> ResponseFuture<S::Future, S::Error> {
        let era = match RequestEra::admit_tasks(&req, &self.engine.cfg.supported_versions) {
            Ok(era) => era,
            Err(e) => return answer(JsonRpcResponse::error(req.id, e)),
        };
        self.engine.ensure_background();
        if req.method == "tasks/get" {
            // A store that answers without waiting: answered here, with no
            // future to allocate and no shared state to clone.
            if let Some(resp) = self.engine.tasks_get_ready(&req, era) {
                return answer(resp);
            }
        }
        let engine = Arc::clone(&self.engine);
        match req.method.as_str() {
            "tasks/get" => ResponseFuture::intercepted(Box::pin(async move {
                Ok(engine.tasks_get(req, era).await)
            })),
            // Only 2025-11-25 requests get here with these two.
            "tasks/result" => {
                let svc = self.inner.clone();
                ResponseFuture::intercepted(Box::pin(async move {
                    Ok(engine.tasks_result(svc, req).await)
                }))
            }
            "tasks/list" => {
                ResponseFuture::intercepted(Box::pin(
                    async move { Ok(engine.tasks_list(req).await) },
                ))
            }
            // And only 2026-07-28 ones with this one.
            "tasks/update" => {
                let svc = self.inner.clone();
                ResponseFuture::intercepted(Box::pin(async move {
                    Ok(engine.tasks_update(svc, req).await)
                }))
            }
            _ => ResponseFuture::intercepted(Box::pin(async move {
                Ok(engine.tasks_cancel(req, era).await)
            })),
        }
    }

    fn listen(&mut self, req: JsonRpcRequest) -> ResponseFuture<S::Future, S::Error> {
        match RequestEra::admitted(&req, &self.engine.cfg.supported_versions) {
            Err(e) => return answer(JsonRpcResponse::error(req.id, e)),
            // R55.
            Ok(era) if !era.tasks_declared => {
                return answer(JsonRpcResponse::error(req.id, missing_tasks_capability()))
            }
            Ok(_) => {}
        }
        let engine = Arc::clone(&self.engine);
        engine.ensure_background();
        ResponseFuture::intercepted(Box::pin(async move { Ok(engine.listen(req).await) }))
    }
}
