//! Between this crate's JSON-RPC values and rmcp's typed messages, through
//! serde: rmcp's own (de)serialization decides what each method's params
//! and results look like, so the handler sees what rmcp's transports would
//! give it.

use std::sync::Arc;

use rmcp::model::{ClientRequest, ErrorCode, ErrorData, NumberOrString, ServerResult};
use serde_json::{Map, Value};

use crate::json::write_json_str;
use crate::jsonrpc::{JsonRpcError, JsonRpcResponse, Params, RequestId};

/// rmcp's id for a request id of ours.
pub(super) fn rmcp_id(id: &RequestId) -> NumberOrString {
    match id {
        RequestId::Number(n) => NumberOrString::Number(*n),
        RequestId::String(s) => NumberOrString::String(Arc::from(s.as_str())),
    }
}

/// `method` and `params` as rmcp's `ClientRequest`: an unknown method
/// becomes its `CustomRequest`, known ones with malformed params `-32602`.
///
/// Params that arrived as text are read from it, without a `Value` between.
pub(super) fn client_request(
    method: String,
    params: Option<Params>,
) -> Result<ClientRequest, JsonRpcError> {
    let invalid = |e: serde_json::Error| {
        // A position in the message built here means nothing to the client.
        let text = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let detail = text.strip_suffix(suffix.as_str()).unwrap_or(&text);
        JsonRpcError::invalid_params(format!("invalid params: {detail}"))
    };
    if let Some(text) = params.as_ref().and_then(Params::text) {
        let mut message = String::with_capacity(text.len() + method.len() + 24);
        message.push_str("{\"method\":");
        write_json_str(&mut message, &method);
        message.push_str(",\"params\":");
        message.push_str(text);
        message.push('}');
        return serde_json::from_str(&message).map_err(invalid);
    }
    let mut message = Map::with_capacity(2);
    message.insert("method".into(), Value::String(method));
    if let Some(params) = params {
        message.insert("params".into(), params.into_value());
    }
    serde_json::from_value(Value::Object(message)).map_err(invalid)
}

/// The handler's answer as our response: the result as rmcp serializes it
/// (an MRTR `InputRequiredResult` keeps its `resultType: "input_required"`,
/// which the layer reads), or the error with its code, message and data.
pub(super) fn response(
    id: Option<RequestId>,
    answer: Result<ServerResult, ErrorData>,
) -> JsonRpcResponse {
    match answer {
        Ok(result) => match serde_json::to_value(&result) {
            Ok(value) => JsonRpcResponse::result(id, value),
            Err(_) => JsonRpcResponse::error(
                id,
                JsonRpcError::internal("the handler's result could not be serialized"),
            ),
        },
        Err(error) => JsonRpcResponse::error(id, json_rpc_error(error)),
    }
}

/// rmcp's error as ours.
pub(super) fn json_rpc_error(error: ErrorData) -> JsonRpcError {
    let e = JsonRpcError::new(i64::from(error.code.0), error.message.into_owned());
    match error.data {
        Some(data) => e.with_data(data),
        None => e,
    }
}

/// Our error as rmcp's (a client's answer to a server→client request).
pub(super) fn error_data(error: JsonRpcError) -> ErrorData {
    // Codes outside i32 cannot come from a JSON-RPC peer; keep them internal.
    let code = i32::try_from(error.code).unwrap_or(ErrorCode::INTERNAL_ERROR.0);
    ErrorData::new(ErrorCode(code), error.message, error.data)
}
