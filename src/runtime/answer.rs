//! What a handler's answer means for its task: a result, an error, a round
//! of input requests, or new `requestState` alone. Pure: no I/O.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::json::{json_size, JsonText};
use crate::jsonrpc::{JsonRpcError, JsonRpcResponse};
use crate::protocol::InputRequest;

/// A handler's answer, classified.
pub(crate) enum HandlerAnswer {
    /// The result object as stored, and whether it is a tool error.
    Result(JsonText, bool),
    Error(JsonRpcError),
    Input {
        requests: BTreeMap<String, InputRequest>,
        state: Option<String>,
    },
    StateOnly(String),
}

impl HandlerAnswer {
    /// A result or error too large to store fails the task instead.
    pub(crate) fn bounded(self, max_bytes: usize) -> Self {
        let size = match &self {
            HandlerAnswer::Result(r, _) => r.get().len(),
            HandlerAnswer::Error(e) => e.message.len() + e.data.as_ref().map_or(0, json_size),
            HandlerAnswer::Input { requests, .. } => requests
                .values()
                .map(|r| {
                    r.method.len()
                        + r.params
                            .as_ref()
                            .map_or(0, |p| p.iter().map(|(k, v)| k.len() + json_size(v)).sum())
                })
                .sum(),
            HandlerAnswer::StateOnly(s) => s.len(),
        };
        if size > max_bytes {
            HandlerAnswer::Error(JsonRpcError::internal(format!(
                "the tool's answer is larger than {max_bytes} bytes and cannot be stored"
            )))
        } else {
            self
        }
    }

    pub(crate) fn from_output<E>(out: Result<JsonRpcResponse, E>) -> Self {
        let value = match out {
            Err(_) => {
                return HandlerAnswer::Error(JsonRpcError::internal("the tool's service failed"))
            }
            Ok(resp) => match resp.into_payload() {
                Err(e) => return HandlerAnswer::Error(e),
                Ok(v) => v,
            },
        };
        let Value::Object(mut result) = value else {
            return HandlerAnswer::Error(JsonRpcError::internal(
                "the tool returned a non-object result",
            ));
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            let tool_error = result.get("isError") == Some(&Value::Bool(true));
            return HandlerAnswer::Result(JsonText::from(result), tool_error);
        }
        let state = match result.remove("requestState") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let requests = match result.remove("inputRequests") {
            None | Some(Value::Null) => Default::default(),
            Some(v) => match serde_json::from_value::<BTreeMap<String, InputRequest>>(v) {
                Ok(r) => r,
                Err(_) => {
                    return HandlerAnswer::Error(JsonRpcError::internal(
                        "the tool returned malformed inputRequests",
                    ))
                }
            },
        };
        match (requests.is_empty(), state) {
            (false, state) => HandlerAnswer::Input { requests, state },
            (true, Some(state)) => HandlerAnswer::StateOnly(state),
            (true, None) => HandlerAnswer::Error(JsonRpcError::internal(
                "the tool asked for input without inputRequests or requestState",
            )),
        }
    }
}

/// Whether a response is an MRTR `input_required` result.
pub(crate) fn is_mrtr(resp: &JsonRpcResponse) -> bool {
    resp.result_value()
        .is_some_and(|v| v.get("resultType").and_then(Value::as_str) == Some("input_required"))
}
