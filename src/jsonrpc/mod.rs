//! Minimal JSON-RPC 2.0 envelopes, as MCP uses them.
//!
//! The layer works on messages, not on HTTP: a transport decodes bytes into a
//! [`JsonRpcRequest`], hands in whatever it knows about the caller through the
//! request's [`Extensions`], and encodes the [`JsonRpcResponse`] it gets back.

use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;
use http::Extensions;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::json::{compact, parse_trusted};

mod facts;
mod params;
mod plain;
mod refusal;
mod scan;
mod special;
mod text;

pub use params::Params;
pub(crate) use params::StrParam;
pub use refusal::IdentityRefusal;
#[cfg(feature = "gateway")]
pub(crate) use scan::{answer as scan_answer, members as scan_members};

/// Error codes used by MCP and by this crate.
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available in this protocol era.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (also: unknown, expired or foreign task ids).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A 2026-07-28 HTTP header disagrees with the request body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The requested protocol version is not supported.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A JSON-RPC request id: a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => f.write_str(s),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        RequestId::String(s)
    }
}

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Additional structured information.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl JsonRpcError {
    /// An error with a code and a message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        JsonRpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attach structured `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32700`: the bytes were not JSON.
    pub fn parse_error(detail: impl fmt::Display) -> Self {
        Self::new(code::PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// `-32600`: the JSON was not a valid request.
    pub fn invalid_request(detail: impl fmt::Display) -> Self {
        Self::new(code::INVALID_REQUEST, format!("Invalid request: {detail}"))
    }

    /// `-32601`: the method is unknown.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// `-32602`: the parameters are wrong.
    pub fn invalid_params(detail: impl fmt::Display) -> Self {
        Self::new(code::INVALID_PARAMS, format!("Invalid params: {detail}"))
    }

    /// `-32603`: something failed on the server.
    pub fn internal(detail: impl fmt::Display) -> Self {
        Self::new(code::INTERNAL_ERROR, format!("Internal error: {detail}"))
    }

    /// `-32021`: the request lacks a client capability; `required` is the
    /// `requiredCapabilities` object put in `data`.
    pub fn missing_capability(required: Value) -> Self {
        Self::new(
            code::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
        )
        .with_data(serde_json::json!({ "requiredCapabilities": required }))
    }

    /// `-32022`: the request's protocol version is not one of `supported`.
    pub fn unsupported_protocol_version(requested: &str, supported: &[String]) -> Self {
        Self::new(
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(serde_json::json!({ "supported": supported, "requested": requested }))
    }
}

impl fmt::Display for JsonRpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for JsonRpcError {}

/// A JSON-RPC request or notification (a request without `id`).
///
/// `extensions` carries typed values between the transport, the layer and the
/// inner service (the caller's [`TaskOwner`](crate::TaskOwner), a
/// [`TaskResumeContext`](crate::TaskResumeContext), a cancellation token, ...).
/// It is never serialized.
#[derive(Clone, Debug, Default)]
pub struct JsonRpcRequest {
    /// The request id; `None` for a notification.
    pub id: Option<RequestId>,
    /// The method name.
    pub method: String,
    /// The parameters, if any: as the text that arrived, or a value (see
    /// [`Params`]).
    pub params: Option<Params>,
    /// Typed values that travel with the request and are never serialized.
    pub extensions: Extensions,
}

impl JsonRpcRequest {
    /// A request with an id.
    pub fn new(
        id: impl Into<RequestId>,
        method: impl Into<String>,
        params: impl Into<Params>,
    ) -> Self {
        JsonRpcRequest {
            id: Some(id.into()),
            method: method.into(),
            params: Some(params.into()),
            extensions: Extensions::new(),
        }
    }

    /// A notification (no id, no response expected).
    pub fn notification(method: impl Into<String>, params: Option<Value>) -> Self {
        JsonRpcRequest {
            id: None,
            method: method.into(),
            params: params.map(Params::from),
            extensions: Extensions::new(),
        }
    }

    /// Decode one request from bytes, with the exact JSON-RPC error when it
    /// cannot be: `-32700` for bytes that are not JSON, `-32600` for JSON that
    /// is not a request object.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, JsonRpcError> {
        if let Some(request) = Self::decode_plain(&Bytes::copy_from_slice(bytes)) {
            return Ok(request);
        }
        let value: Value = serde_json::from_slice(bytes).map_err(JsonRpcError::parse_error)?;
        Self::from_value(value)
    }

    /// Decode one request from a JSON value (`-32600` when it is not one).
    pub fn from_value(value: Value) -> Result<Self, JsonRpcError> {
        let Value::Object(mut obj) = value else {
            return Err(JsonRpcError::invalid_request(
                "expected a single JSON-RPC request object",
            ));
        };
        match obj.get("jsonrpc") {
            Some(Value::String(v)) if v == "2.0" => {}
            _ => return Err(JsonRpcError::invalid_request("\"jsonrpc\" must be \"2.0\"")),
        }
        let method = match obj.remove("method") {
            Some(Value::String(m)) => m,
            Some(_) => return Err(JsonRpcError::invalid_request("\"method\" must be a string")),
            None => return Err(JsonRpcError::invalid_request("missing \"method\"")),
        };
        let id = match obj.remove("id") {
            None => None,
            Some(Value::String(s)) => Some(RequestId::String(s)),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(n) => Some(RequestId::Number(n)),
                None => {
                    return Err(JsonRpcError::invalid_request(
                        "\"id\" must be a string or an integer",
                    ))
                }
            },
            Some(_) => {
                return Err(JsonRpcError::invalid_request(
                    "\"id\" must be a string or an integer",
                ))
            }
        };
        let params = match obj.remove("params") {
            None => None,
            Some(p @ Value::Object(_)) => Some(Params::from(p)),
            Some(_) => {
                return Err(JsonRpcError::invalid_request(
                    "\"params\" must be an object",
                ))
            }
        };
        Ok(JsonRpcRequest {
            id,
            method,
            params,
            extensions: Extensions::new(),
        })
    }

    /// The `params` object, if `params` is one.
    pub fn params_object(&self) -> Option<&Map<String, Value>> {
        self.params.as_ref().and_then(Params::as_object)
    }

    /// `params._meta`, if present and an object.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.params_object()?.get("_meta")?.as_object()
    }

    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`, if a
    /// string: the version a 2026-07-28 request names (2025-11-25 requests
    /// have none). Read without building the params' `Value` when the
    /// request was decoded from bytes.
    pub fn protocol_version(&self) -> Option<&str> {
        self.params.as_ref()?.protocol_version()
    }

    /// `_meta`'s protocol version (if a string) and whether it declares the
    /// tasks extension (only counted with a version), in one look.
    pub(crate) fn era_facts(&self) -> (Option<&str>, bool) {
        self.params
            .as_ref()
            .map_or((None, false), Params::era_facts)
    }

    /// A member of `params` the layer reads as a string.
    pub(crate) fn str_param(&self, key: &str) -> StrParam<'_> {
        self.params
            .as_ref()
            .map_or(StrParam::Absent, |p| p.str_param(key))
    }
}

impl Serialize for JsonRpcRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("jsonrpc", "2.0")?;
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        map.serialize_entry("method", &self.method)?;
        if let Some(params) = &self.params {
            map.serialize_entry("params", params)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for JsonRpcRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        JsonRpcRequest::from_value(value).map_err(|e| D::Error::custom(e.message))
    }
}

/// A JSON-RPC response: a result or an error for one request id.
///
/// The result is a [`Value`], or JSON text serialized already (see
/// [`JsonRpcResponse::raw_result`]): the layer answers `tasks/get` and task
/// creation that way, straight from the stored result text, so a transport
/// copies those bytes out instead of building and serializing a `Value`.
/// [`result_value`](JsonRpcResponse::result_value) reads either form (text
/// is parsed on first use, once); [`to_vec`](JsonRpcResponse::to_vec)
/// writes the wire form, copying text as it is.
#[derive(Clone)]
pub struct JsonRpcResponse {
    /// The id of the request this answers; `None` serializes as `null`
    /// (only for requests whose id could not be read).
    pub id: Option<RequestId>,
    payload: Payload,
    /// Set by [`JsonRpcResponse::refused`]; not on the wire.
    refusal: Option<IdentityRefusal>,
}

/// A result as JSON text, valid by construction (a `RawValue`, or the
/// crate's own writer).
#[derive(Clone)]
struct TextResult {
    /// The result's text; when `framed`, inside the whole wire form.
    buf: String,
    /// Where the result lies in `buf` (all of it unless framed).
    at: Range<usize>,
    /// `Some(id)`: `buf` is the wire form of the response with this id,
    /// `{"jsonrpc":"2.0","id":…,"result":…}`.
    framed: Option<Option<RequestId>>,
}

impl TextResult {
    /// The result's text alone.
    fn new(json: String) -> Self {
        TextResult {
            at: 0..json.len(),
            buf: json,
            framed: None,
        }
    }

    /// The result's text.
    fn get(&self) -> &str {
        self.buf.get(self.at.clone()).unwrap_or_default()
    }
}

#[derive(Clone)]
enum Payload {
    Value(Value),
    /// JSON text, valid by construction (a `RawValue`, or the crate's own
    /// writer), and its parse once someone asks for a `Value`.
    Text(TextResult, OnceLock<Value>),
    Error(JsonRpcError),
}

impl JsonRpcResponse {
    /// A successful response.
    pub fn result(id: Option<RequestId>, result: Value) -> Self {
        JsonRpcResponse {
            id,
            payload: Payload::Value(result),
            refusal: None,
        }
    }

    /// A successful response whose result is JSON text serialized already;
    /// transports write it out byte for byte. Text with line breaks between
    /// its tokens is written again, compact (a message on an SSE stream
    /// must fit one `data:` line).
    ///
    /// ```
    /// use mcp_task_layer::{JsonRpcResponse, RequestId};
    /// use serde_json::value::RawValue;
    ///
    /// let text = RawValue::from_string(r#"{"content":[]}"#.to_owned()).unwrap();
    /// let resp = JsonRpcResponse::raw_result(Some(RequestId::from(1)), text);
    /// assert_eq!(resp.result_text(), Some(r#"{"content":[]}"#));
    /// assert_eq!(resp.result_value().unwrap()["content"], serde_json::json!([]));
    /// assert_eq!(
    ///     resp.to_vec(),
    ///     br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.to_vec()
    /// );
    /// ```
    pub fn raw_result(id: Option<RequestId>, result: Box<RawValue>) -> Self {
        Self::trusted_text(id, Box::<str>::from(compact(result)).into())
    }

    /// A result written by this crate's own JSON writer (valid JSON).
    pub(crate) fn trusted_text(id: Option<RequestId>, json: String) -> Self {
        JsonRpcResponse {
            id,
            payload: Payload::Text(TextResult::new(json), OnceLock::new()),
            refusal: None,
        }
    }

    /// An error response.
    pub fn error(id: Option<RequestId>, error: JsonRpcError) -> Self {
        JsonRpcResponse {
            id,
            payload: Payload::Error(error),
            refusal: None,
        }
    }

    /// The result, if this is a success (a text result is parsed on the
    /// first call).
    pub fn result_value(&self) -> Option<&Value> {
        match &self.payload {
            Payload::Value(v) => Some(v),
            Payload::Text(json, parsed) => Some(parsed.get_or_init(|| parse_trusted(json.get()))),
            Payload::Error(_) => None,
        }
    }

    /// The result as JSON text, if this success carries it serialized.
    pub fn result_text(&self) -> Option<&str> {
        match &self.payload {
            Payload::Text(json, _) => Some(json.get()),
            _ => None,
        }
    }

    /// The error, if this is a failure.
    pub fn error_value(&self) -> Option<&JsonRpcError> {
        match &self.payload {
            Payload::Error(e) => Some(e),
            _ => None,
        }
    }

    /// Whether this is an error response.
    pub fn is_error(&self) -> bool {
        matches!(self.payload, Payload::Error(_))
    }

    /// The result value or the error, by value.
    pub fn into_payload(self) -> Result<Value, JsonRpcError> {
        match self.payload {
            Payload::Value(v) => Ok(v),
            Payload::Text(json, parsed) => Ok(parsed
                .into_inner()
                .unwrap_or_else(|| parse_trusted(json.get()))),
            Payload::Error(e) => Err(e),
        }
    }

    /// The result value or the error, to change in place (a text result
    /// becomes a `Value` first).
    pub fn payload_mut(&mut self) -> Result<&mut Value, &mut JsonRpcError> {
        if let Payload::Text(json, parsed) = &mut self.payload {
            let value = parsed.take().unwrap_or_else(|| parse_trusted(json.get()));
            self.payload = Payload::Value(value);
        }
        match &mut self.payload {
            Payload::Value(v) => Ok(v),
            Payload::Error(e) => Err(e),
            Payload::Text(..) => unreachable!("replaced above"),
        }
    }
}

impl fmt::Debug for JsonRpcResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("JsonRpcResponse");
        d.field("id", &self.id);
        match &self.payload {
            Payload::Value(v) => d.field("result", v),
            Payload::Text(json, _) => d.field("result", &format_args!("{}", json.get())),
            Payload::Error(e) => d.field("error", e),
        };
        d.finish()
    }
}

/// Responses are equal when their ids and their results (as values) or
/// errors are, whichever form a result is in.
impl PartialEq for JsonRpcResponse {
    fn eq(&self, other: &Self) -> bool {
        if self.id != other.id {
            return false;
        }
        match (&self.payload, &other.payload) {
            (Payload::Error(a), Payload::Error(b)) => a == b,
            (Payload::Text(a, _), Payload::Text(b, _)) if a.get() == b.get() => true,
            (Payload::Error(_), _) | (_, Payload::Error(_)) => false,
            _ => self.result_value() == other.result_value(),
        }
    }
}

impl Serialize for JsonRpcResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("jsonrpc", "2.0")?;
        map.serialize_entry("id", &self.id)?;
        match &self.payload {
            Payload::Value(result) => map.serialize_entry("result", result)?,
            Payload::Text(json, _) => {
                let raw: &RawValue =
                    serde_json::from_str(json.get()).map_err(serde::ser::Error::custom)?;
                map.serialize_entry("result", raw)?
            }
            Payload::Error(error) => map.serialize_entry("error", error)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for JsonRpcResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            jsonrpc: String,
            #[serde(default)]
            id: Option<RequestId>,
            #[serde(default)]
            result: Option<Value>,
            #[serde(default)]
            error: Option<JsonRpcError>,
        }
        let raw = Raw::deserialize(deserializer)?;
        if raw.jsonrpc != "2.0" {
            return Err(D::Error::custom("\"jsonrpc\" must be \"2.0\""));
        }
        let payload = match (raw.result, raw.error) {
            (Some(r), None) => Payload::Value(r),
            (None, Some(e)) => Payload::Error(e),
            _ => {
                return Err(D::Error::custom(
                    "a response has exactly one of \"result\" and \"error\"",
                ))
            }
        };
        Ok(JsonRpcResponse {
            id: raw.id,
            payload,
            refusal: None,
        })
    }
}
