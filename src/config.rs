//! The layer's configuration: how tools become tasks ([`TaskPolicy`]), what
//! happens to orphaned tasks ([`Recovery`]), whose a request is (the owner
//! extractor), and every setting [`TaskLayer`](crate::TaskLayer)'s builder
//! writes.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::ms;
use crate::context::TaskOwner;
use crate::jsonrpc::JsonRpcRequest;
use crate::limits::Limits;
use crate::protocol::PROTOCOL_2026_07_28;

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
    /// [task window](crate::TaskLayer::with_task_window) (by default: before the
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
/// for stores that can find such tasks ([`TaskStore::orphans`](crate::TaskStore::orphans)),
/// or whose runner shut down before it finished.
///
/// A property of the task: the layer that creates a task writes its own
/// policy into the record ([`TaskRecord::recovery`](crate::store::TaskRecord::recovery)),
/// and every replica that later recovers it (a reaper, a worker's claim, a
/// drain's hand-back) applies that one, whatever its own setting. A fleet
/// whose processes disagree (or a rolling deploy that changes the policy)
/// treats each task as the layer that accepted it said. A record without
/// the field (written before it existed) gets the recovering replica's own
/// policy, as it did then. Stored as `"fail"` or `"rerun"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Recovery {
    /// End it `failed` with `-32603` saying the server stopped (default).
    #[default]
    Fail,
    /// Run the handler again from the top with its stored request and
    /// answers, on this replica.
    Rerun,
}

/// Where a task's handler runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Execution {
    /// On the replica that accepted the call or the last answer (default).
    #[default]
    Inline,
    /// On whichever [`TaskWorker`](crate::TaskWorker) claims it: every run
    /// of a task (its first and every resume) is written to the store as
    /// runnable, and the accepting replica runs no task handler. `Sync`
    /// tools and passthrough stay on the accepting replica; an `Auto` call
    /// is answered synchronously if a worker finishes it within the
    /// window. A `Task` tool's call is queued at once: no MRTR round is
    /// answered before its task exists.
    Queued,
}

/// Reads the caller's owner key from a request.
pub(crate) type OwnerFn = Arc<dyn Fn(&JsonRpcRequest) -> Option<String> + Send + Sync>;

/// The owner of a request by default: the [`TaskOwner`] in its extensions.
pub(crate) fn default_owner(req: &JsonRpcRequest) -> Option<String> {
    req.extensions.get::<TaskOwner>().map(|o| o.0.clone())
}

/// Each tool's [`TaskPolicy`], and the one for tools without their own.
#[derive(Clone, Debug)]
pub(crate) struct ToolPolicies {
    pub(crate) by_tool: HashMap<String, TaskPolicy, crate::hashing::Chosen>,
    pub(crate) default: TaskPolicy,
}

impl ToolPolicies {
    pub(crate) fn of(&self, tool: &str) -> TaskPolicy {
        self.by_tool.get(tool).copied().unwrap_or(self.default)
    }
}

/// The shortest TTL a task gets, in milliseconds, whatever a 2025-11-25
/// client asks for: a task must outlive the answer that names it.
pub(crate) const MIN_TASK_TTL_MS: u64 = 1_000;

/// Everything the builder sets.
#[derive(Clone)]
pub(crate) struct Config {
    /// Shared: a passed-through `tools/list` keeps a pointer, not a copy.
    pub(crate) policies: Arc<ToolPolicies>,
    pub(crate) default_ttl: Option<Duration>,
    pub(crate) max_ttl: Option<Duration>,
    pub(crate) poll_interval: Duration,
    pub(crate) cancel_grace: Duration,
    pub(crate) task_window: Duration,
    pub(crate) reap_interval: Duration,
    pub(crate) list_page_size: usize,
    pub(crate) limits: Limits,
    /// The layer's own owner extractor
    /// ([`TaskLayer::with_owner_extractor`](crate::TaskLayer::with_owner_extractor)),
    /// or `None`: [`default_owner`].
    pub(crate) owner: Option<OwnerFn>,
    pub(crate) lease_ttl: Duration,
    pub(crate) recovery: Recovery,
    pub(crate) execution: Execution,
    /// The 2026-07-28-style protocol versions the layer serves; any other
    /// named in a request's `_meta` gets `-32022`.
    pub(crate) supported_versions: Arc<[String]>,
    /// Whether a `tools/call` that may become a task needs an owner.
    pub(crate) identity_required: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            policies: Arc::new(ToolPolicies {
                by_tool: HashMap::default(),
                default: TaskPolicy::Sync,
            }),
            default_ttl: Some(Duration::from_secs(3600)),
            max_ttl: Some(Duration::from_secs(86_400)),
            poll_interval: Duration::from_secs(1),
            cancel_grace: Duration::from_secs(5),
            task_window: Duration::ZERO,
            reap_interval: Duration::from_secs(1),
            list_page_size: 50,
            limits: Limits::default(),
            owner: None,
            lease_ttl: Duration::from_secs(30),
            recovery: Recovery::Fail,
            execution: Execution::Inline,
            supported_versions: Arc::from([PROTOCOL_2026_07_28.to_owned()]),
            identity_required: false,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("policies", &self.policies.by_tool)
            .field("default_policy", &self.policies.default)
            .field("default_ttl", &self.default_ttl)
            .field("max_ttl", &self.max_ttl)
            .field("poll_interval", &self.poll_interval)
            .field("cancel_grace", &self.cancel_grace)
            .field("task_window", &self.task_window)
            .field("reap_interval", &self.reap_interval)
            .field("recovery", &self.recovery)
            .field("execution", &self.execution)
            .field("supported_versions", &self.supported_versions)
            .field("identity_required", &self.identity_required)
            .finish_non_exhaustive()
    }
}

impl Config {
    pub(crate) fn policy(&self, tool: &str) -> TaskPolicy {
        self.policies.of(tool)
    }

    /// The TTL a new task gets when `requested` is asked for: at most the
    /// maximum, at least [`MIN_TASK_TTL_MS`].
    pub(crate) fn ttl_ms(&self, requested: Option<u64>) -> Option<u64> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let wanted = requested.or(self.default_ttl.map(ms));
        let ttl = match (wanted, self.max_ttl.map(ms)) {
            (Some(w), Some(max)) => Some(w.min(max)),
            (None, Some(max)) => Some(max),
            (w, None) => w,
        };
        ttl.map(|t| t.max(MIN_TASK_TTL_MS))
    }

    /// How long a lease runs from now, in milliseconds.
    pub(crate) fn lease_ms(&self) -> i64 {
        ms(self.lease_ttl)
    }

    /// How often a runner renews its lease, and how often a waiter without
    /// a change feed re-reads: a third of the lease.
    pub(crate) fn heartbeat_period(&self) -> Duration {
        (self.lease_ttl / 3).max(Duration::from_millis(10))
    }
}
