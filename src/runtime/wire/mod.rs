//! What clients see of a task, per era: free functions of a record.

use serde_json::json;

use crate::jsonrpc::{JsonRpcResponse, RequestId};
use crate::protocol::TaskMetadata;
use crate::store::{Era, TaskRecord, TaskView};

pub(crate) mod legacy;
pub(crate) mod modern;
mod timestamp;

/// The fields both eras show of every task.
pub(crate) fn metadata_of(r: &TaskView<'_>) -> TaskMetadata {
    TaskMetadata::new(
        r.id.to_owned(),
        timestamp::rfc3339(r.created_at_ms),
        timestamp::rfc3339(r.updated_at_ms),
        r.ttl_ms,
    )
    .with_poll_interval_ms(r.poll_interval_ms)
    .with_status_message(r.status_message.map(str::to_owned))
}

/// The answer to the `tools/call` that made the task, as JSON text.
pub(crate) fn create_result(r: &TaskRecord) -> String {
    match r.era {
        Era::Legacy => {
            serde_json::to_string(&json!({ "task": legacy::task(r) })).unwrap_or_default()
        }
        _ => modern::detailed_json(r, Some("task")),
    }
}

/// The `tasks/get` result of a task, as JSON text.
pub(crate) fn get_result(r: &TaskView<'_>, era: Era) -> String {
    match era {
        Era::Legacy => serde_json::to_string(&legacy::task_of(r)).unwrap_or_default(),
        _ => modern::detailed_json_of(r, Some("complete")),
    }
}

/// The response to a `tasks/get` of `id`: [`get_result`], a 2026-07-28
/// one written in place inside the response's wire form (see
/// [`JsonRpcResponse::framed_text`]).
pub(crate) fn get_response(id: Option<RequestId>, r: &TaskView<'_>, era: Era) -> JsonRpcResponse {
    match era {
        Era::Legacy => JsonRpcResponse::trusted_text(id, get_result(r, era)),
        _ => JsonRpcResponse::framed_text(id, modern::detailed_capacity(r), |out| {
            modern::write_detailed(out, r, Some("complete"));
        }),
    }
}
