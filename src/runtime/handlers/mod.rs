//! One file per MCP method the layer serves. Each handler returns a
//! [`Reply`] or the [`JsonRpcError`] to answer with; [`respond`] turns
//! either into the response.

use serde_json::{json, Value};

use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId, StrParam};

mod call;
mod cancel;
#[cfg(feature = "axum")]
mod direct;
mod get;
mod list;
mod listen;
mod result;
mod update;

pub(crate) use call::{KeptCall, TaskCandidate};
#[cfg(feature = "axum")]
pub(crate) use direct::PlainAnswer;

/// A handler's successful answer.
pub(crate) enum Reply {
    /// `{"resultType": "complete"}`.
    Ack,
    /// A result built as a value.
    Value(Value),
    /// A result written as JSON text by the layer itself.
    Text(String),
}

/// The response for a handler's outcome.
pub(crate) fn respond(
    id: Option<RequestId>,
    outcome: Result<Reply, JsonRpcError>,
) -> JsonRpcResponse {
    match outcome {
        Ok(Reply::Ack) => JsonRpcResponse::result(id, json!({ "resultType": "complete" })),
        Ok(Reply::Value(v)) => JsonRpcResponse::result(id, v),
        Ok(Reply::Text(text)) => JsonRpcResponse::trusted_text(id, text),
        Err(e) => JsonRpcResponse::error(id, e),
    }
}

/// Read `params.taskId` as a string.
fn task_id_param(req: &JsonRpcRequest) -> Result<&str, JsonRpcError> {
    match req.str_param("taskId") {
        StrParam::Str(id) => Ok(id),
        StrParam::Other => Err(JsonRpcError::invalid_params("\"taskId\" must be a string")),
        StrParam::Absent => Err(JsonRpcError::invalid_params("missing \"taskId\"")),
    }
}
