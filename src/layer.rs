//! [`TaskLayer`]: configuration and the [`Layer`] impl.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tower_layer::Layer;

use crate::config::{Config, Execution, OwnerFn, Recovery, TaskPolicy};
use crate::jsonrpc::JsonRpcRequest;
use crate::limits::Limits;
use crate::runtime::{DrainReport, Engine, Operator, TaskEvent, TaskWorker};
use crate::service::TaskService;
use crate::store::{MemoryStore, TaskStore};

/// A [`Layer`] that gives the wrapped MCP server durable, asynchronous tasks.
///
/// All the [`TaskService`]s a layer makes share one store, one set of
/// running tasks and one event channel; cloning the layer shares them too.
///
/// ```
/// use std::time::Duration;
/// use mcp_task_layer::{MemoryStore, TaskLayer, TaskPolicy};
///
/// let layer = TaskLayer::new(MemoryStore::new())
///     .with_tool_policy("slow_compute", TaskPolicy::Auto { within: Duration::from_millis(200) })
///     .with_tool_policy("build_report", TaskPolicy::Task)
///     .with_default_ttl(Some(Duration::from_secs(600)));
/// # let _ = layer;
/// ```
#[derive(Clone)]
#[must_use]
pub struct TaskLayer {
    engine: Arc<Engine>,
}

impl fmt::Debug for TaskLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLayer")
            .field("store", &self.engine.store)
            .field("config", &self.engine.cfg)
            .finish_non_exhaustive()
    }
}

impl Default for TaskLayer {
    fn default() -> Self {
        TaskLayer::new(MemoryStore::new())
    }
}

impl TaskLayer {
    /// A layer over `store` with the default settings: tools are `Sync`
    /// unless configured, tasks live one hour (at most a day), clients are
    /// told to poll every second, and a cancelled handler gets five seconds
    /// to stop before it is aborted.
    pub fn new(store: impl TaskStore) -> Self {
        let (events, _) = broadcast::channel(1024);
        TaskLayer {
            engine: Engine::new(Arc::new(store), Config::default(), events),
        }
    }

    /// The layer with its configuration changed. The event channel is
    /// kept, so a [`subscribe`](Self::subscribe) receiver taken earlier in
    /// the builder chain still hears this layer's tasks.
    fn map_config(self, f: impl FnOnce(&mut Config)) -> Self {
        let mut cfg = self.engine.cfg.clone();
        f(&mut cfg);
        let events = self.engine.events().clone();
        TaskLayer {
            engine: Engine::new(Arc::clone(&self.engine.store), cfg, events),
        }
    }

    /// The policy for one tool.
    pub fn with_tool_policy(self, tool: impl Into<String>, policy: TaskPolicy) -> Self {
        let tool = tool.into();
        self.map_config(|c| {
            Arc::make_mut(&mut c.policies).by_tool.insert(tool, policy);
        })
    }

    /// Policies for many tools at once.
    pub fn with_tool_policies<I, K>(self, policies: I) -> Self
    where
        I: IntoIterator<Item = (K, TaskPolicy)>,
        K: Into<String>,
    {
        let add: HashMap<String, TaskPolicy> =
            policies.into_iter().map(|(k, v)| (k.into(), v)).collect();
        self.map_config(|c| Arc::make_mut(&mut c.policies).by_tool.extend(add))
    }

    /// The policy for tools without one of their own (default `Sync`).
    pub fn with_default_policy(self, policy: TaskPolicy) -> Self {
        self.map_config(|c| Arc::make_mut(&mut c.policies).default = policy)
    }

    /// The TTL of new tasks; `None` is unlimited (default one hour). It is
    /// capped by the [maximum](Self::with_max_ttl).
    pub fn with_default_ttl(self, ttl: Option<Duration>) -> Self {
        self.map_config(|c| c.default_ttl = ttl)
    }

    /// The longest TTL any task gets, whatever a 2025-11-25 client asks
    /// for; `None` allows unlimited tasks (default one day). No task gets
    /// less than one second, however little a client asks for: the
    /// answers show the TTL a task really has.
    pub fn with_max_ttl(self, ttl: Option<Duration>) -> Self {
        self.map_config(|c| c.max_ttl = ttl)
    }

    /// The polling interval suggested to clients (default one second).
    pub fn with_poll_interval(self, interval: Duration) -> Self {
        self.map_config(|c| c.poll_interval = interval)
    }

    /// How long a cancelled handler may run on after its cancellation token
    /// is tripped before the layer aborts it (default five seconds).
    pub fn with_cancel_grace(self, grace: Duration) -> Self {
        self.map_config(|c| c.cancel_grace = grace)
    }

    /// How long a [`TaskPolicy::Task`] call may run before the task is
    /// created (default zero: until the handler first waits). MRTR rounds
    /// answered within it go back to the client as plain MRTR results.
    pub fn with_task_window(self, window: Duration) -> Self {
        self.map_config(|c| c.task_window = window)
    }

    /// Bounds on client input and stored data (see [`Limits`](crate::Limits)).
    pub fn with_limits(self, limits: Limits) -> Self {
        self.map_config(|c| c.limits = limits)
    }

    /// How many tasks a 2025-11-25 `tasks/list` page holds (default 50).
    pub fn with_list_page_size(self, size: usize) -> Self {
        self.map_config(|c| c.list_page_size = size.max(1))
    }

    /// How long a runner's lease holds without renewal (default 30 s; the
    /// runner renews it every third of that). A shorter lease detects dead
    /// runners and cross-replica cancels sooner, at the cost of more
    /// writes.
    pub fn with_lease_ttl(self, ttl: Duration) -> Self {
        self.map_config(|c| c.lease_ttl = ttl)
    }

    /// What to do with tasks whose runner died (default [`Recovery::Fail`]).
    pub fn with_recovery(self, recovery: Recovery) -> Self {
        self.map_config(|c| c.recovery = recovery)
    }

    /// Where task handlers run (default [`Execution::Inline`]). With
    /// [`Execution::Queued`], this layer's services run none: a
    /// [`TaskWorker`](crate::TaskWorker) made by [`worker`](Self::worker)
    /// here or in another process over the same store runs them.
    pub fn with_execution(self, execution: Execution) -> Self {
        self.map_config(|c| c.execution = execution)
    }

    /// A worker that runs this layer's queued tasks (and those of every
    /// layer on the same store) with `inner`, the same MCP server the
    /// layer wraps. See [`TaskWorker`].
    pub fn worker<S>(&self, inner: S) -> TaskWorker<S>
    where
        S: tower_service::Service<JsonRpcRequest, Response = crate::JsonRpcResponse>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
        S::Error: Send + 'static,
    {
        TaskWorker::new(Arc::clone(&self.engine), inner)
    }

    /// Drain the handlers this layer runs inline, for a graceful shutdown:
    /// let them finish for up to `deadline`, then hand their tasks back by
    /// the recovery policy ([`Recovery::Rerun`]: runnable again at once,
    /// so another replica re-runs it without waiting for the lease;
    /// [`Recovery::Fail`]: failed with a message that says the server shut
    /// down). Tasks waiting for input and finished ones are untouched.
    /// Call it once the transport stopped taking requests (in-flight ones
    /// still get their answers). With [`Execution::Queued`] it does
    /// nothing: workers drain their own runs.
    pub async fn drain(&self, deadline: Duration) -> DrainReport {
        self.engine.drain(deadline).await
    }

    /// The protocol versions a 2026-07-28-style request may name in its
    /// `_meta` (default `["2026-07-28"]`). Any other gets `-32022`
    /// (HTTP 400) with the supported list, on every method the layer
    /// serves, before a task exists. 2025-11-25 requests carry no
    /// per-request version; their version is the session's.
    pub fn with_supported_versions<I, V>(self, versions: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        let versions: Arc<[String]> = versions.into_iter().map(Into::into).collect();
        self.map_config(|c| c.supported_versions = versions)
    }

    /// How often expired tasks are reaped (default every second).
    pub fn with_reap_interval(self, interval: Duration) -> Self {
        self.map_config(|c| c.reap_interval = interval)
    }

    /// How the caller's owner key is read from a request. By default it is
    /// the [`TaskOwner`](crate::TaskOwner) in the request extensions.
    pub fn with_owner_extractor<F>(self, extract: F) -> Self
    where
        F: Fn(&JsonRpcRequest) -> Option<String> + Send + Sync + 'static,
    {
        let f: OwnerFn = Arc::new(extract);
        self.map_config(|c| c.owner = Some(f))
    }

    /// Whether a `tools/call` that may become a task is refused when the
    /// request has no owner (default `false`).
    ///
    /// Turn it on for a server on a network: there, a caller without an
    /// identity is anyone, and every such caller shares one owner key, so
    /// each can read, cancel and answer any ownerless task whose id it
    /// learns (ids are 128 random bits, so it must learn one; it cannot
    /// list them, as `tasks/list` is offered only to callers with an
    /// identity). With the option on, such a call (of a `Task` tool, or an
    /// `Auto` one, which may become a task) gets `-32600` ("Invalid
    /// request: a task needs an identified caller") before its handler
    /// runs, marked as an [`IdentityRefusal::Missing`](crate::IdentityRefusal)
    /// (so that [`McpEndpoint`](crate::McpEndpoint) answers it with HTTP
    /// 401 and `WWW-Authenticate`); calls that never become a task pass as
    /// before. Leave it off
    /// for a single-user server, such as one on stdio, whose one client
    /// has no identity to give.
    pub fn with_identity_required(self, required: bool) -> Self {
        self.map_config(|c| c.identity_required = required)
    }

    /// Task events (one per successful status change) from every service of
    /// this layer: the writes of this replica, not of others sharing its
    /// store (their changes reach subscriptions through
    /// [`TaskStore::changes`](crate::TaskStore::changes)). Lagging receivers
    /// lose the oldest events.
    pub fn subscribe(&self) -> broadcast::Receiver<TaskEvent> {
        self.engine.events().subscribe()
    }

    /// The store the layer keeps tasks in.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.engine.store
    }

    /// An operator's handle on every task of this layer's store (see
    /// [`Operator`]): its cancels trip the token of a handler this layer
    /// runs at once, as `tasks/cancel` does. No MCP request reaches it.
    /// Take it from the finished layer: each `with_*` setter makes a new
    /// engine, and an operator taken before it stops this layer's handlers
    /// only through the store.
    pub fn operator(&self) -> Operator {
        Operator::of(Arc::clone(&self.engine))
    }
}

impl<S> Layer<S> for TaskLayer {
    type Service = TaskService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TaskService::new(inner, Arc::clone(&self.engine))
    }
}
