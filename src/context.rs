//! Values the layer and the transport put in a request's extensions.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::protocol::InputResponses;

/// The caller's identity, as the transport established it.
///
/// Put it in [`JsonRpcRequest::extensions`](crate::JsonRpcRequest::extensions)
/// and the layer binds every task the request creates to it; a task of
/// another owner then reads exactly like an unknown one. Use a stable,
/// non-secret key (a user id, or a hash of a token), never the secret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskOwner(pub String);

impl TaskOwner {
    /// An owner key.
    pub fn new(key: impl Into<String>) -> Self {
        TaskOwner(key.into())
    }
}

/// The id of the task an inner `tools/call` runs for. The layer inserts it
/// into the extensions of every call it re-invokes for a task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskId(pub String);

/// What a resumed task needs to run its handler again.
///
/// The client answers a task through `tasks/update` (or on the 2025-11-25
/// `tasks/result` stream), not by retrying `tools/call`, so the server
/// re-invokes the handler itself and must supply what the client would
/// otherwise have resent. The layer puts it in the extensions of every
/// re-invocation, beside the task's [`CancellationToken`], [`TaskId`] and
/// [`TaskHandle`](crate::TaskHandle).
///
/// The handler runs from the top rather than continuing where it stopped, so
/// the arguments are the original ones, unmodified, and `input_responses`
/// accumulates across every round rather than holding only the latest answer.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskResumeContext {
    /// Tool to re-invoke.
    pub tool_name: String,
    /// The original call arguments, unchanged.
    pub arguments: Value,
    /// Every answer accumulated so far, keyed as the requests were issued.
    pub input_responses: InputResponses,
    /// Cancellation and expiry signal for the resumed execution, when the
    /// store attached one.
    pub cancellation_token: Option<CancellationToken>,
}

impl TaskResumeContext {
    /// Create the context needed to resume a task handler.
    ///
    /// `cancellation_token` starts as `None`; attach the task's token with
    /// [`with_cancellation_token`](Self::with_cancellation_token).
    ///
    /// ```
    /// use mcp_task_layer::TaskResumeContext;
    ///
    /// let resume = TaskResumeContext::new(
    ///     "build_report",
    ///     serde_json::json!({"format": "pdf"}),
    ///     Default::default(),
    /// );
    /// assert_eq!(resume.tool_name, "build_report");
    /// assert!(resume.cancellation_token.is_none());
    /// ```
    pub fn new(
        tool_name: impl Into<String>,
        arguments: Value,
        input_responses: InputResponses,
    ) -> Self {
        TaskResumeContext {
            tool_name: tool_name.into(),
            arguments,
            input_responses,
            cancellation_token: None,
        }
    }

    /// Attach the cancellation and expiry signal for the replayed execution.
    #[must_use]
    pub fn with_cancellation_token(mut self, token: CancellationToken) -> Self {
        self.cancellation_token = Some(token);
        self
    }
}
