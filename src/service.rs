//! [`TaskService`]: dispatch by method.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_service::Service;

use crate::future::{Edit, ResponseFuture};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::layer::TaskPolicy;
use crate::runtime::{missing_tasks_capability, KeptCall, RequestEra, Shared, ToolCall};
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
    shared: Arc<Shared>,
}

impl<S: Clone> Clone for TaskService<S> {
    fn clone(&self) -> Self {
        TaskService {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
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
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        TaskService { inner, shared }
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
        self.shared.register_invoker(&self.inner);
        self.shared.ensure_reaper();
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
            "subscriptions/listen" if wants_task_notifications(&req) => {
                let era = RequestEra::of(&req);
                if !era.tasks_declared {
                    // R55.
                    return answer(JsonRpcResponse::error(req.id, missing_tasks_capability()));
                }
                let shared = Arc::clone(&self.shared);
                shared.ensure_reaper();
                ResponseFuture::intercepted(Box::pin(async move { Ok(shared.listen(req).await) }))
            }
            "server/discover" if RequestEra::of(&req).modern => {
                ResponseFuture::capabilities(self.inner.call(req), Edit::Discover)
            }
            "initialize" if !RequestEra::of(&req).modern => {
                ResponseFuture::capabilities(self.inner.call(req), Edit::Initialize)
            }
            "tools/list" if !RequestEra::of(&req).modern => {
                let edit = Edit::ToolsList(Arc::clone(&self.shared));
                ResponseFuture::capabilities(self.inner.call(req), edit)
            }
            _ => ResponseFuture::passthrough(self.inner.call(req)),
        }
    }
}

/// A 2026-07-28 `subscriptions/listen` that asks for task notifications;
/// other subscriptions are the inner server's.
fn wants_task_notifications(req: &JsonRpcRequest) -> bool {
    RequestEra::of(req).modern
        && req
            .params_object()
            .and_then(|p| p.get("notifications"))
            .is_some_and(|n| n.get("taskIds").is_some())
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
        let era = RequestEra::of(&req);
        let name = req
            .params_object()
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        let policy = self.shared.cfg.policy(name);
        let as_task = if era.modern {
            match (policy, era.tasks_declared) {
                (TaskPolicy::Sync, _) | (TaskPolicy::Auto { .. }, false) => false,
                (TaskPolicy::Task, false) => {
                    return answer(JsonRpcResponse::error(req.id, missing_tasks_capability()))
                }
                (_, true) => true,
            }
        } else {
            // 2025-11-25: the client asks for a task with `params.task`;
            // the policy is the tool's `execution.taskSupport`.
            let requested = req
                .params_object()
                .and_then(|p| p.get("task"))
                .is_some_and(|t| t.is_object());
            match (policy, requested) {
                (TaskPolicy::Sync, true) => {
                    let e = JsonRpcError::method_not_found("tools/call");
                    let message = format!("Tool {name:?} does not support task-augmented calls");
                    return answer(JsonRpcResponse::error(
                        req.id,
                        JsonRpcError { message, ..e },
                    ));
                }
                (TaskPolicy::Task, false) => {
                    let e = JsonRpcError::method_not_found("tools/call");
                    let message = format!("Tool {name:?} must be called as a task");
                    return answer(JsonRpcResponse::error(
                        req.id,
                        JsonRpcError { message, ..e },
                    ));
                }
                (_, requested) => requested,
            }
        };
        if !as_task {
            return ResponseFuture::passthrough(self.inner.call(req));
        }
        // The copy a task would store, made once: its length is the size
        // the limit is about.
        let kept = match KeptCall::of(&req) {
            Ok(kept) => kept,
            Err(e) => return answer(JsonRpcResponse::error(req.id, e)),
        };
        if let Err(e) = self.shared.cfg.limits.check_arguments(kept.size) {
            return answer(JsonRpcResponse::error(req.id, e));
        }
        self.shared.ensure_reaper();
        self.shared.register_invoker(&self.inner);
        let owner = self.shared.owner_of(&req);
        if let Some(e) = self.shared.owner_at_capacity(owner.as_deref()) {
            return answer(JsonRpcResponse::error(req.id, e));
        }
        let era = if era.modern { Era::Modern } else { Era::Legacy };
        let call = ToolCall::from_request(&req, kept, owner, era);
        let mut req = req;
        req.extensions.insert(call.token.clone());
        // The runner needs a service of its own to re-invoke the handler
        // later; the ready one serves this call (see tower-service's "Be
        // careful when cloning inner services").
        let clone = self.inner.clone();
        let fut = self.inner.call(req);
        let shared = Arc::clone(&self.shared);
        ResponseFuture::intercepted(Box::pin(shared.tools_call(clone, call, policy, fut)))
    }

    fn tasks(&mut self, req: JsonRpcRequest) -> ResponseFuture<S::Future, S::Error> {
        let era = RequestEra::of(&req);
        if era.modern {
            match req.method.as_str() {
                // Removed in 2026-07-28 (R10, R11).
                "tasks/result" | "tasks/list" => {
                    return answer(JsonRpcResponse::error(
                        req.id.clone(),
                        JsonRpcError::method_not_found(&req.method),
                    ))
                }
                _ if !era.tasks_declared => {
                    return answer(JsonRpcResponse::error(req.id, missing_tasks_capability()))
                }
                _ => {}
            }
        } else if req.method == "tasks/update" {
            // `tasks/update` does not exist in 2025-11-25 (R76).
            return answer(JsonRpcResponse::error(
                req.id.clone(),
                JsonRpcError::method_not_found(&req.method),
            ));
        }
        self.shared.ensure_reaper();
        let era = if era.modern { Era::Modern } else { Era::Legacy };
        let req = if req.method == "tasks/get" {
            // A store that answers without waiting: answered here, with no
            // future to allocate and no shared state to clone.
            match self.shared.tasks_get_ready(req, era) {
                Ok(resp) => return answer(resp),
                Err(req) => req,
            }
        } else {
            req
        };
        let shared = Arc::clone(&self.shared);
        match req.method.as_str() {
            "tasks/get" => ResponseFuture::intercepted(Box::pin(async move {
                Ok(shared.tasks_get(req, era).await)
            })),
            // Only 2025-11-25 requests get here with these two.
            "tasks/result" => {
                let svc = self.inner.clone();
                ResponseFuture::intercepted(Box::pin(async move {
                    Ok(shared.tasks_result(svc, req).await)
                }))
            }
            "tasks/list" => {
                ResponseFuture::intercepted(Box::pin(
                    async move { Ok(shared.tasks_list(req).await) },
                ))
            }
            // And only 2026-07-28 ones with this one.
            "tasks/update" => {
                let svc = self.inner.clone();
                ResponseFuture::intercepted(Box::pin(async move {
                    Ok(shared.tasks_update(svc, req).await)
                }))
            }
            _ => ResponseFuture::intercepted(Box::pin(async move {
                Ok(shared.tasks_cancel(req, era).await)
            })),
        }
    }
}
