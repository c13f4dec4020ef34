//! Between this crate's JSON-RPC values and rmcp's typed messages, through
//! serde: rmcp's own (de)serialization decides what each method's params
//! and results look like, so the handler sees what rmcp's transports would
//! give it.

use std::sync::Arc;

// Deprecated by rmcp (logging, `resources/subscribe`) yet still requests
// its `ClientRequest` reads.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, ClientRequest, CompleteRequest, CompleteRequestMethod,
    ConstString, DiscoverRequest, DiscoverRequestMethod, ErrorCode, ErrorData, GetPromptRequest,
    GetPromptRequestMethod, InitializeRequest, InitializeResultMethod, ListPromptsRequest,
    ListPromptsRequestMethod, ListResourceTemplatesRequest, ListResourceTemplatesRequestMethod,
    ListResourcesRequest, ListResourcesRequestMethod, ListToolsRequest, ListToolsRequestMethod,
    NumberOrString, PingRequest, PingRequestMethod, ReadResourceRequest, ReadResourceRequestMethod,
    ServerResult, SetLevelRequest, SetLevelRequestMethod, SubscribeRequest, SubscribeRequestMethod,
    SubscriptionsListenRequest, SubscriptionsListenRequestMethod, UnsubscribeRequest,
    UnsubscribeRequestMethod,
};
use serde::de::DeserializeOwned;
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
    let message = match params.as_ref().and_then(Params::text) {
        Some(text) => {
            let mut message = String::with_capacity(text.len() + method.len() + 24);
            message.push_str("{\"method\":");
            write_json_str(&mut message, &method);
            message.push_str(",\"params\":");
            message.push_str(text);
            message.push('}');
            Message::Text(message)
        }
        None => {
            let mut message = Map::with_capacity(2);
            message.insert("method".into(), Value::String(method));
            if let Some(params) = params {
                message.insert("params".into(), params.into_value());
            }
            Message::Value(Value::Object(message))
        }
    };
    let request: ClientRequest = message.parse().map_err(invalid)?;
    // rmcp's `ClientRequest` is untagged: a known method whose params do
    // not fit its variant falls through to `CustomRequest`, which the
    // handler would answer `-32601` for a method that exists.
    if let ClientRequest::CustomRequest(custom) = &request {
        if let Some(e) = known_method_error(&custom.method, &message) {
            return Err(invalid(e));
        }
    }
    Ok(request)
}

/// A request as text or as a `Value`, read into rmcp's types.
enum Message {
    Text(String),
    Value(Value),
}

impl Message {
    fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match self {
            Message::Text(text) => serde_json::from_str(text),
            Message::Value(value) => T::deserialize(value),
        }
    }
}

/// `-32602` for params serde refused.
fn invalid(e: serde_json::Error) -> JsonRpcError {
    // A position in the message built here means nothing to the client.
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let detail = text.strip_suffix(suffix.as_str()).unwrap_or(&text);
    JsonRpcError::invalid_params(detail)
}

/// Why `message` is not a request of `method`, when `method` is one of
/// rmcp's `ClientRequest` variants; `None` for other methods.
#[allow(deprecated)]
fn known_method_error(method: &str, message: &Message) -> Option<serde_json::Error> {
    macro_rules! known {
        ($($request:ty => $method:ty),* $(,)?) => {
            $(
                if method == <$method as ConstString>::VALUE {
                    return message.parse::<$request>().err();
                }
            )*
        };
    }
    known!(
        PingRequest => PingRequestMethod,
        InitializeRequest => InitializeResultMethod,
        DiscoverRequest => DiscoverRequestMethod,
        CompleteRequest => CompleteRequestMethod,
        SetLevelRequest => SetLevelRequestMethod,
        GetPromptRequest => GetPromptRequestMethod,
        ListPromptsRequest => ListPromptsRequestMethod,
        ListResourcesRequest => ListResourcesRequestMethod,
        ListResourceTemplatesRequest => ListResourceTemplatesRequestMethod,
        ReadResourceRequest => ReadResourceRequestMethod,
        SubscriptionsListenRequest => SubscriptionsListenRequestMethod,
        SubscribeRequest => SubscribeRequestMethod,
        UnsubscribeRequest => UnsubscribeRequestMethod,
        CallToolRequest => CallToolRequestMethod,
        ListToolsRequest => ListToolsRequestMethod,
    );
    None
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

/// rmcp's `-32601` for `method` (whose message is the method's name) with
/// the message of the layer's own `-32601`s; any other error as it is.
pub(super) fn method_not_found(error: ErrorData, method: &str) -> ErrorData {
    if error.code == ErrorCode::METHOD_NOT_FOUND && error.message == method && error.data.is_none()
    {
        let ours = JsonRpcError::method_not_found(method);
        return ErrorData::new(error.code, ours.message, None);
    }
    error
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
