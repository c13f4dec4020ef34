//! What the upstream sends for one call, and the table a call leaves when
//! it ends: below both `call.rs` and `calls.rs`.

use serde_json::Value;

/// What the upstream sent for one call.
#[derive(Debug)]
pub(crate) enum CallEvent {
    /// A question (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`) with the upstream's request id.
    Ask {
        id: Value,
        method: String,
        params: Value,
    },
    /// `notifications/progress` params.
    Progress(Value),
    /// Another notification (a log message).
    Note { method: String, params: Value },
}

/// The table of calls in flight, as a call sees it.
pub(crate) trait Registry: Send + Sync + 'static {
    /// Call `id` on link `serial` ended.
    fn unregister(&self, serial: u64, id: u64);

    /// How long a call waits for the client's answers: parked, or for a
    /// question relayed on the client's own stream.
    fn answer_wait(&self) -> std::time::Duration;
}

/// The `progressToken` the gateway puts on upstream call `id` is this and
/// the id's digits.
pub(crate) const TOKEN_PREFIX: &str = "mcp-tasks-";

/// The upstream call id of a `progressToken` the gateway made.
pub(crate) fn call_of_token(token: &Value) -> Option<u64> {
    token.as_str()?.strip_prefix(TOKEN_PREFIX)?.parse().ok()
}
