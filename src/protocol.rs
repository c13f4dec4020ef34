//! Wire types of MCP tasks, for both protocol eras.
//!
//! The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`) puts the
//! whole task, result included, in [`DetailedTask`]. The 2025-11-25
//! experimental tasks use the flat [`Task`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jsonrpc::JsonRpcError;

pub use crate::names::{
    META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, META_RELATED_TASK, PROTOCOL_2025_11_25,
    PROTOCOL_2026_07_28, TASKS_EXTENSION,
};

/// The five task states. `completed`, `failed` and `cancelled` are terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Work is in progress.
    Working,
    /// Work is paused until the client answers the outstanding requests.
    InputRequired,
    /// Work finished with a result.
    Completed,
    /// Work finished with a JSON-RPC error.
    Failed,
    /// Work was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Whether the status never changes again.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The wire name (`"input_required"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// The status a wire name (`"working"`, ...) stands for.
    pub fn from_wire(name: &str) -> Option<Self> {
        Some(match name {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => return None,
        })
    }

    /// Whether the state machine allows `self → next`.
    pub const fn can_become(self, next: TaskStatus) -> bool {
        match self {
            TaskStatus::Working => !matches!(next, TaskStatus::Working),
            TaskStatus::InputRequired => !matches!(next, TaskStatus::InputRequired),
            _ => false,
        }
    }

    /// Classify a polled status. `poll_hint` is the server's interval in
    /// milliseconds, passed through verbatim.
    pub const fn poll_decision(self, poll_hint: Option<u64>) -> TaskPollDecision {
        match self {
            TaskStatus::Working => TaskPollDecision::InProgress { poll_hint },
            TaskStatus::InputRequired => TaskPollDecision::InputRequired,
            status => TaskPollDecision::Terminal { status },
        }
    }
}

/// The classification of a polled task, derived purely from its status: the
/// single decision every task poller consumes so the branch logic cannot
/// drift.
///
/// Produced by [`Task::poll_decision`](crate::Task::poll_decision),
/// [`DetailedTask::poll_decision`](crate::DetailedTask::poll_decision) and
/// [`TaskStatus::poll_decision`]. It answers the one question a poll loop asks
/// each tick: stop, ask the user, or sleep and poll again? It does no I/O and
/// is replay-deterministic, so it is safe inside a memoized durable step.
///
/// It derives neither `Serialize` nor `Deserialize`: it is an in-process
/// classifier, never a wire type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskPollDecision {
    /// The task reached `completed`, `failed` or `cancelled` and will not
    /// change again: stop polling. The result is fetched separately.
    Terminal {
        /// The terminal status that ended the task.
        status: TaskStatus,
    },
    /// The task is `working`: sleep and poll again. Feed `poll_hint` to
    /// [`resolve_poll_interval`](crate::client::resolve_poll_interval) to get the sleep.
    InProgress {
        /// The raw server-reported interval in milliseconds, verbatim
        /// (`None` when the server suggested none).
        poll_hint: Option<u64>,
    },
    /// The task is blocked on input (`input_required`): route to whoever
    /// answers input requests rather than spinning.
    InputRequired,
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A server-to-client request embedded in a task or an MRTR result:
/// `{method, params}` without `jsonrpc` or `id`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The request parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
}

impl InputRequest {
    /// A request for `method` with `params`.
    pub fn new(method: impl Into<String>, params: Map<String, Value>) -> Self {
        InputRequest {
            method: method.into(),
            params: Some(params),
        }
    }

    /// The client capability (`elicitation`, `sampling`, `roots`) that this
    /// request needs, or `None` for a method no capability allows.
    pub fn required_capability(&self) -> Option<&'static str> {
        match self.method.as_str() {
            "elicitation/create" => Some("elicitation"),
            "sampling/createMessage" => Some("sampling"),
            "roots/list" => Some("roots"),
            _ => None,
        }
    }
}

/// Outstanding requests by key.
pub type InputRequests = BTreeMap<String, InputRequest>;

/// Answers by key: ElicitResult, CreateMessageResult or ListRootsResult
/// objects.
pub type InputResponses = BTreeMap<String, Value>;

/// Fields every 2026-07-28 task carries, whatever its status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskMetadata {
    /// Server-generated task id.
    pub task_id: String,
    /// Human-readable note on the current status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub last_updated_at: String,
    /// Lifetime from `createdAt` in milliseconds; `None` (null) is unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
}

impl TaskMetadata {
    /// Metadata with the required fields; the rest is unset.
    pub fn new(
        task_id: impl Into<String>,
        created_at: impl Into<String>,
        last_updated_at: impl Into<String>,
        ttl_ms: Option<u64>,
    ) -> Self {
        TaskMetadata {
            task_id: task_id.into(),
            status_message: None,
            created_at: created_at.into(),
            last_updated_at: last_updated_at.into(),
            ttl_ms,
            poll_interval_ms: None,
        }
    }

    /// Set the suggested polling interval.
    #[must_use]
    pub fn with_poll_interval_ms(mut self, ms: Option<u64>) -> Self {
        self.poll_interval_ms = ms;
        self
    }

    /// Set the status message.
    #[must_use]
    pub fn with_status_message(mut self, message: Option<String>) -> Self {
        self.status_message = message;
        self
    }
}

/// Complete status-specific task state returned by `tasks/get` and
/// `notifications/tasks` (2026-07-28).
///
/// The internally tagged representation guarantees that required payloads
/// match their status: `input_required` has `inputRequests`, `completed` has
/// `result`, and `failed` has `error`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DetailedTask {
    /// Work is currently in progress.
    Working {
        /// Shared task fields.
        #[serde(flatten)]
        metadata: TaskMetadata,
    },
    /// Work is paused until the client fulfils the outstanding requests.
    InputRequired {
        /// Shared task fields.
        #[serde(flatten)]
        metadata: TaskMetadata,
        /// All currently outstanding server-to-client requests.
        #[serde(rename = "inputRequests")]
        input_requests: BTreeMap<String, InputRequest>,
    },
    /// Work completed successfully. Tool results with `isError: true` still
    /// use this variant.
    Completed {
        /// Shared task fields.
        #[serde(flatten)]
        metadata: TaskMetadata,
        /// The exact object the original synchronous request would return.
        result: Map<String, Value>,
    },
    /// Execution failed with a JSON-RPC error.
    Failed {
        /// Shared task fields.
        #[serde(flatten)]
        metadata: TaskMetadata,
        /// Structured JSON-RPC execution error.
        error: JsonRpcError,
    },
    /// Work was cancelled before completion.
    Cancelled {
        /// Shared task fields.
        #[serde(flatten)]
        metadata: TaskMetadata,
    },
}

impl DetailedTask {
    /// Construct a working task.
    pub fn working(metadata: TaskMetadata) -> DetailedTask {
        DetailedTask::Working { metadata }
    }

    /// Construct an input-required task.
    pub fn input_required(
        metadata: TaskMetadata,
        input_requests: BTreeMap<String, InputRequest>,
    ) -> DetailedTask {
        DetailedTask::InputRequired {
            metadata,
            input_requests,
        }
    }

    /// Construct a completed task from an object-valued synchronous result.
    pub fn completed(metadata: TaskMetadata, result: Map<String, Value>) -> DetailedTask {
        DetailedTask::Completed { metadata, result }
    }

    /// Construct a failed task from a structured JSON-RPC error.
    pub fn failed(metadata: TaskMetadata, error: JsonRpcError) -> DetailedTask {
        DetailedTask::Failed { metadata, error }
    }

    /// Construct a cancelled task.
    pub fn cancelled(metadata: TaskMetadata) -> DetailedTask {
        DetailedTask::Cancelled { metadata }
    }

    /// Current task status.
    pub fn status(&self) -> TaskStatus {
        match self {
            DetailedTask::Working { .. } => TaskStatus::Working,
            DetailedTask::InputRequired { .. } => TaskStatus::InputRequired,
            DetailedTask::Completed { .. } => TaskStatus::Completed,
            DetailedTask::Failed { .. } => TaskStatus::Failed,
            DetailedTask::Cancelled { .. } => TaskStatus::Cancelled,
        }
    }

    /// Server-generated identifier of the task this describes.
    pub fn task_id(&self) -> &str {
        &self.metadata().task_id
    }

    /// Shared task metadata.
    pub fn metadata(&self) -> &TaskMetadata {
        match self {
            DetailedTask::Working { metadata }
            | DetailedTask::InputRequired { metadata, .. }
            | DetailedTask::Completed { metadata, .. }
            | DetailedTask::Failed { metadata, .. }
            | DetailedTask::Cancelled { metadata } => metadata,
        }
    }

    /// Outstanding requests when the task is input-required.
    pub fn input_requests(&self) -> Option<&BTreeMap<String, InputRequest>> {
        match self {
            DetailedTask::InputRequired { input_requests, .. } => Some(input_requests),
            _ => None,
        }
    }

    /// Completed result object.
    pub fn result(&self) -> Option<&Map<String, Value>> {
        match self {
            DetailedTask::Completed { result, .. } => Some(result),
            _ => None,
        }
    }

    /// Failed JSON-RPC error.
    pub fn error(&self) -> Option<&JsonRpcError> {
        match self {
            DetailedTask::Failed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Classify this polled task: stop, ask for input, or poll again.
    pub fn poll_decision(&self) -> TaskPollDecision {
        self.status()
            .poll_decision(self.metadata().poll_interval_ms)
    }
}

/// A 2025-11-25 task: the flat shape of `tasks/get`, `tasks/list`,
/// `tasks/cancel` and `notifications/tasks/status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Task {
    /// Server-generated task id.
    pub task_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Human-readable note on the current status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// RFC 3339 time of the last change.
    pub last_updated_at: String,
    /// Lifetime in milliseconds; `None` (null) is unlimited.
    pub ttl: Option<u64>,
    /// Suggested polling interval in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<u64>,
}

impl Task {
    /// Classify this polled task: stop, ask for input, or poll again.
    pub fn poll_decision(&self) -> TaskPollDecision {
        self.status.poll_decision(self.poll_interval)
    }
}
