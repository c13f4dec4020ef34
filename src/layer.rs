//! [`TaskLayer`]: configuration and the [`Layer`] impl.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use tower_layer::Layer;

use crate::jsonrpc::JsonRpcRequest;
use crate::runtime::{Config, OwnerFn, Shared};
use crate::service::TaskService;
use crate::store::{MemoryStore, TaskStore};
use crate::{TaskEvent, TaskOwner};

/// How a tool's calls become tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskPolicy {
    /// Never a task: the call always runs synchronously (2025-11-25
    /// `taskSupport: "forbidden"`).
    Sync,
    /// Always a task when the client can take one (2025-11-25
    /// `taskSupport: "required"`); a 2026-07-28 client that did not declare
    /// the tasks extension gets `-32021`.
    ///
    /// MRTR rounds the handler answers within the layer's
    /// [task window](TaskLayer::with_task_window) (by default: before the
    /// handler first waits on anything) still go back as plain MRTR results;
    /// the task is created after them.
    Task,
    /// Run the call; answer synchronously if it finishes `within` the
    /// budget, otherwise hand back a task and keep running (2025-11-25
    /// `taskSupport: "optional"`).
    Auto {
        /// How long the caller waits for a synchronous answer.
        within: Duration,
    },
}

/// What happens to a `working` task whose runner died (its lease ran out),
/// for stores that can find such tasks ([`TaskStore::orphans`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// End it `failed` with `-32603` saying the server stopped (default).
    #[default]
    Fail,
    /// Run the handler again from the top with its stored request and
    /// answers, on this replica.
    Rerun,
}

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
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for TaskLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLayer")
            .field("store", &self.shared.store)
            .field("config", &self.shared.cfg)
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
        Self::from_config(Arc::new(store), Config::default())
    }

    fn from_config(store: Arc<dyn TaskStore>, cfg: Config) -> Self {
        let (events, _) = broadcast::channel(1024);
        TaskLayer {
            shared: Arc::new(Shared::new(store, cfg, events)),
        }
    }

    fn map_config(self, f: impl FnOnce(&mut Config)) -> Self {
        let mut cfg = self.shared.cfg.clone();
        f(&mut cfg);
        Self::from_config(Arc::clone(&self.shared.store), cfg)
    }

    /// The policy for one tool.
    pub fn with_tool_policy(self, tool: impl Into<String>, policy: TaskPolicy) -> Self {
        let tool = tool.into();
        self.map_config(|c| {
            Arc::make_mut(&mut c.policies).insert(tool, policy);
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
        self.map_config(|c| Arc::make_mut(&mut c.policies).extend(add))
    }

    /// The policy for tools without one of their own (default `Sync`).
    pub fn with_default_policy(self, policy: TaskPolicy) -> Self {
        self.map_config(|c| c.default_policy = policy)
    }

    /// The TTL of new tasks; `None` is unlimited (default one hour). It is
    /// capped by the [maximum](Self::with_max_ttl).
    pub fn with_default_ttl(self, ttl: Option<Duration>) -> Self {
        self.map_config(|c| c.default_ttl = ttl)
    }

    /// The longest TTL any task gets, whatever a 2025-11-25 client asks
    /// for; `None` allows unlimited tasks (default one day).
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
    pub fn with_limits(self, limits: crate::Limits) -> Self {
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

    /// How often expired tasks are reaped (default every second).
    pub fn with_reap_interval(self, interval: Duration) -> Self {
        self.map_config(|c| c.reap_interval = interval)
    }

    /// How the caller's owner key is read from a request. By default it is
    /// the [`TaskOwner`] in the request extensions.
    pub fn with_owner_extractor<F>(self, extract: F) -> Self
    where
        F: Fn(&JsonRpcRequest) -> Option<String> + Send + Sync + 'static,
    {
        let f: OwnerFn = Arc::new(extract);
        self.map_config(|c| c.owner = f)
    }

    /// Task events (one per successful status change) from every service of
    /// this layer: the writes of this replica, not of others sharing its
    /// store (their changes reach subscriptions through
    /// [`TaskStore::changes`](crate::TaskStore::changes)). Lagging receivers
    /// lose the oldest events.
    pub fn subscribe(&self) -> broadcast::Receiver<TaskEvent> {
        self.shared.events.subscribe()
    }

    /// The store the layer keeps tasks in.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.shared.store
    }
}

impl<S> Layer<S> for TaskLayer {
    type Service = TaskService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TaskService::new(inner, Arc::clone(&self.shared))
    }
}

pub(crate) fn default_owner(req: &JsonRpcRequest) -> Option<String> {
    req.extensions.get::<TaskOwner>().map(|o| o.0.clone())
}
