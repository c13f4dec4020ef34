//! A Streamable HTTP endpoint for any JSON-RPC service (feature `axum`):
//! see [`McpEndpoint`].

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{BoxError, Router};
use bytes::BytesMut;
use serde_json::{json, Value};
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::protocol::META_PROTOCOL_VERSION;

/// The default request body limit of [`McpEndpoint`]: 4 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

type IdentityFn = Arc<dyn Fn(&Parts, &mut Extensions) + Send + Sync>;

/// Serves a JSON-RPC service over Streamable HTTP (JSON responses only).
///
/// It turns a `Service<JsonRpcRequest, Response = JsonRpcResponse>`
/// (typically a [`TaskLayer`](crate::TaskLayer) around your MCP server) into
/// an [`axum::Router`] that serves one path. It only speaks JSON: every
/// answer is a single `application/json` body, never a `text/event-stream`,
/// so a tasks-enabled server never has to hold a stream open.
///
/// # What the endpoint does
///
/// | Request | Answer |
/// |---|---|
/// | `POST` with a JSON-RPC request | the inner service's response, HTTP 200 (but see the error table below) |
/// | `POST` with a notification (no `id`) | the inner service is called, its answer dropped; HTTP 202, empty body |
/// | body over the [limit](McpEndpoint::with_body_limit) (default [`DEFAULT_BODY_LIMIT`]) | HTTP 413, `-32600`, `"id": null` |
/// | body that is not JSON | HTTP 400, `-32700`, `"id": null` |
/// | JSON that is not one request object (an array, a string, no `method`, ...) | HTTP 400, `-32600`, the request's `id` if it can be read, else `null` |
/// | 2026-07-28 request whose headers disagree with the body (below) | HTTP 400, `-32020`, the request's `id` |
/// | any other method (`GET`, `DELETE`, ...) | HTTP 405 |
///
/// The `Content-Type` and `Accept` headers are not enforced: any body is
/// read as JSON, and the answer is always JSON.
///
/// ## Errors from the inner service
///
/// The endpoint always answers with the request's own `id`, whatever the
/// inner service put there. It sets the HTTP status from the error code, as
/// the 2026-07-28 transport requires:
///
/// | JSON-RPC error | HTTP status |
/// |---|---|
/// | `-32020` header mismatch, `-32021` missing client capability, `-32022` unsupported protocol version | 400 |
/// | `-32601` method not found, on a 2026-07-28 request | 404 |
/// | any other error, and `-32601` on older requests | 200 |
/// | the service itself failed (its `Err`) | 500, `-32603` |
///
/// ## 2026-07-28 header validation
///
/// A request is a 2026-07-28 request when its body has
/// `params._meta["io.modelcontextprotocol/protocolVersion"]`. Such a request
/// must carry these headers, equal to the body (values are trimmed; the
/// `=?base64?…?=` form of `Mcp-Name` is decoded first):
///
/// | Header | Must equal |
/// |---|---|
/// | `MCP-Protocol-Version` | `params._meta["io.modelcontextprotocol/protocolVersion"]` |
/// | `Mcp-Method` | `method` |
/// | `Mcp-Name` | `params.name` for `tools/call` and `prompts/get`, `params.uri` for `resources/read`, `params.taskId` for `tasks/get`, `tasks/update` and `tasks/cancel` (only when the body has that string) |
///
/// A missing, repeated or unreadable header is a mismatch too. The answer is
/// HTTP 400 with `-32020` and the request's `id` (no `id` at all for a
/// notification). Earlier protocol versions have no such headers and are not
/// checked. `Mcp-Param-*` headers are not checked.
///
/// # Caller identity
///
/// The HTTP request's headers and extensions never reach the inner service.
/// Copy what it needs, such as the caller's [`TaskOwner`](crate::TaskOwner),
/// into [`JsonRpcRequest::extensions`] with
/// [`with_identity`](McpEndpoint::with_identity). Do the authentication
/// itself in an HTTP layer in front of the router, or in the hook.
///
/// # Security
///
/// The endpoint does not check the `Origin` header. A server reachable from
/// browsers (including one on `localhost`) should reject unexpected origins
/// in a layer in front of the router, to prevent DNS rebinding.
///
/// # Example
///
/// ```
/// use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, McpEndpoint, MemoryStore, TaskLayer, TaskOwner};
/// use serde_json::json;
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let server = service_fn(|req: JsonRpcRequest| async move {
///     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(
///         req.id,
///         json!({"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}),
///     ))
/// });
/// let service = ServiceBuilder::new()
///     .layer(TaskLayer::new(MemoryStore::new()))
///     .service(server);
///
/// let app = McpEndpoint::new(service)
///     .with_body_limit(1024 * 1024)
///     .with_identity(|parts, extensions| {
///         // A real server would take a verified subject from its auth layer.
///         if let Some(user) = parts.headers.get("x-user").and_then(|v| v.to_str().ok()) {
///             extensions.insert(TaskOwner::new(user));
///         }
///     })
///     .into_router("/mcp");
///
/// // Serve it with `axum::serve(listener, app)`; here one request goes
/// // straight through the router.
/// let request = axum::http::Request::post("/mcp")
///     .header("content-type", "application/json")
///     .body(axum::body::Body::from(
///         r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello"}}"#,
///     ))
///     .unwrap();
/// let response = app.oneshot(request).await.unwrap();
/// assert_eq!(response.status(), 200);
/// # }
/// ```
#[must_use]
pub struct McpEndpoint<S> {
    service: S,
    identity: Option<IdentityFn>,
    body_limit: usize,
}

impl<S> fmt::Debug for McpEndpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpEndpoint")
            .field("service", &std::any::type_name::<S>())
            .field("identity", &self.identity.is_some())
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

impl<S> McpEndpoint<S> {
    /// An endpoint for `service` with the default body limit and no
    /// identity hook.
    pub fn new(service: S) -> Self {
        McpEndpoint {
            service,
            identity: None,
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }

    /// Copy the caller's identity from the HTTP request into the JSON-RPC
    /// request. `identify` gets the HTTP request's parts (headers, and the
    /// extensions your auth layers set) and the extensions of the
    /// [`JsonRpcRequest`] about to be handed to the service; insert what it
    /// needs there, typically a [`TaskOwner`](crate::TaskOwner). It runs for
    /// every request and notification that passed validation. A second call
    /// replaces the first hook.
    pub fn with_identity<F>(mut self, identify: F) -> Self
    where
        F: Fn(&Parts, &mut Extensions) + Send + Sync + 'static,
    {
        self.identity = Some(Arc::new(identify));
        self
    }

    /// The largest request body accepted, in bytes (default
    /// [`DEFAULT_BODY_LIMIT`]). A larger body gets HTTP 413 with a `-32600`
    /// error and `"id": null`, without being read any further.
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// A router serving `POST path`; other HTTP methods on `path` get 405.
    ///
    /// The router can be [merged](Router::merge) or
    /// [nested](Router::nest) into a bigger application, and wrapped in HTTP
    /// layers (authentication, CORS, tracing).
    ///
    /// # Panics
    ///
    /// If `path` is not a valid axum route (for example, it does not start
    /// with `/`), as [`Router::route`] does.
    pub fn into_router(self, path: &str) -> Router
    where
        S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
    {
        let shared = Arc::new(Shared {
            service: self.service,
            identity: self.identity,
            body_limit: self.body_limit,
        });
        Router::new()
            .route(path, post(handle::<S>))
            .with_state(shared)
    }
}

struct Shared<S> {
    service: S,
    identity: Option<IdentityFn>,
    body_limit: usize,
}

async fn handle<S>(State(shared): State<Arc<Shared<S>>>, request: Request) -> Response
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let bytes = match read_body(&parts.headers, body, shared.body_limit).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => {
            let error = JsonRpcError::invalid_request(format!(
                "the request body exceeds the limit of {} bytes",
                shared.body_limit
            ));
            return respond(
                StatusCode::PAYLOAD_TOO_LARGE,
                &JsonRpcResponse::error(None, error),
            );
        }
        Err(BodyError::Unreadable) => {
            let error = JsonRpcError::invalid_request("the request body could not be read");
            return respond(
                StatusCode::BAD_REQUEST,
                &JsonRpcResponse::error(None, error),
            );
        }
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(e) => {
            let error = JsonRpcError::parse_error(e);
            return respond(
                StatusCode::BAD_REQUEST,
                &JsonRpcResponse::error(None, error),
            );
        }
    };
    let readable_id = readable_id(&value);
    let mut request = match JsonRpcRequest::from_value(value) {
        Ok(request) => request,
        Err(error) => {
            return respond(
                StatusCode::BAD_REQUEST,
                &JsonRpcResponse::error(readable_id, error),
            )
        }
    };
    let modern = protocol_version(&request).is_some();
    if let Err(error) = check_headers(&parts.headers, &request) {
        debug!(method = %request.method, %error, "rejected a request whose headers disagree with its body");
        return match request.id {
            Some(id) => respond(
                StatusCode::BAD_REQUEST,
                &JsonRpcResponse::error(Some(id), error),
            ),
            None => respond_without_id(StatusCode::BAD_REQUEST, error),
        };
    }
    if let Some(identify) = &shared.identity {
        identify(&parts, &mut request.extensions);
    }
    let id = request.id.clone();
    let outcome = shared.service.clone().oneshot(request).await;
    match (id, outcome) {
        (None, Ok(_)) => StatusCode::ACCEPTED.into_response(),
        (None, Err(e)) => {
            let e: BoxError = e.into();
            warn!(error = %e, "the MCP service failed on a notification");
            respond_without_id(StatusCode::INTERNAL_SERVER_ERROR, service_failed())
        }
        (Some(id), Ok(mut response)) => {
            response.id = Some(id);
            respond(status_of(&response, modern), &response)
        }
        (Some(id), Err(e)) => {
            let e: BoxError = e.into();
            warn!(error = %e, "the MCP service failed");
            respond(
                StatusCode::INTERNAL_SERVER_ERROR,
                &JsonRpcResponse::error(Some(id), service_failed()),
            )
        }
    }
}

fn service_failed() -> JsonRpcError {
    JsonRpcError::internal("the server failed to handle the request")
}

/// The HTTP status for a response of the inner service.
fn status_of(response: &JsonRpcResponse, modern: bool) -> StatusCode {
    match response.error_value().map(|e| e.code) {
        Some(
            code::HEADER_MISMATCH
            | code::MISSING_REQUIRED_CLIENT_CAPABILITY
            | code::UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        Some(code::METHOD_NOT_FOUND) if modern => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response()
}

fn respond(status: StatusCode, response: &JsonRpcResponse) -> Response {
    match serde_json::to_vec(response) {
        Ok(body) => json_response(status, body),
        Err(e) => {
            warn!(error = %e, "cannot encode a JSON-RPC response");
            let fallback = JsonRpcResponse::error(response.id.clone(), service_failed());
            let body = serde_json::to_vec(&fallback).unwrap_or_default();
            json_response(StatusCode::INTERNAL_SERVER_ERROR, body)
        }
    }
}

/// An error response without an `id` member, for a notification that was
/// not accepted.
fn respond_without_id(status: StatusCode, error: JsonRpcError) -> Response {
    let body = json!({ "jsonrpc": "2.0", "error": error });
    json_response(status, body.to_string().into_bytes())
}

enum BodyError {
    TooLarge,
    Unreadable,
}

/// Read the whole body, stopping as soon as it is known to exceed `limit`.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(limit).unwrap_or(u64::MAX)) {
        return Err(BodyError::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(frame) = frame else {
            return Err(BodyError::Unreadable);
        };
        if let Ok(data) = frame.into_data() {
            if data.len() > limit - buf.len() {
                return Err(BodyError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// The `id` of a message that is not a valid request, if it is usable.
fn readable_id(value: &Value) -> Option<RequestId> {
    match value.get("id")? {
        Value::String(s) => Some(RequestId::String(s.clone())),
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        _ => None,
    }
}

fn protocol_version(request: &JsonRpcRequest) -> Option<&str> {
    request.meta()?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// The body value `Mcp-Name` must mirror, for the methods that have one.
fn routed_name(request: &JsonRpcRequest) -> Option<&str> {
    let key = match request.method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    request.params_object()?.get(key)?.as_str()
}

fn mismatch(detail: &str) -> JsonRpcError {
    JsonRpcError::new(code::HEADER_MISMATCH, format!("Header mismatch: {detail}"))
}

/// The one value of header `name`, trimmed.
fn single_header<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
    display: &str,
) -> Result<&'h str, JsonRpcError> {
    let mut values = headers.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(if headers.contains_key(name) {
            mismatch(&format!("the {display} header is repeated"))
        } else {
            mismatch(&format!("the {display} header is missing"))
        });
    };
    value
        .to_str()
        .map(str::trim)
        .map_err(|_| mismatch(&format!("the {display} header is not visible ASCII")))
}

/// Check the 2026-07-28 headers against the body.
fn check_headers(headers: &HeaderMap, request: &JsonRpcRequest) -> Result<(), JsonRpcError> {
    let Some(version) = protocol_version(request) else {
        return Ok(());
    };
    if single_header(headers, &MCP_PROTOCOL_VERSION, "MCP-Protocol-Version")? != version {
        return Err(mismatch(
            "the MCP-Protocol-Version header differs from _meta's protocolVersion",
        ));
    }
    if single_header(headers, &MCP_METHOD, "Mcp-Method")? != request.method {
        return Err(mismatch("the Mcp-Method header differs from the method"));
    }
    if let Some(expected) = routed_name(request) {
        let raw = single_header(headers, &MCP_NAME, "Mcp-Name")?;
        let name = decode_header_value(raw)
            .ok_or_else(|| mismatch("the Mcp-Name header has a malformed base64 value"))?;
        if name != expected {
            return Err(mismatch("the Mcp-Name header differs from the body"));
        }
    }
    Ok(())
}

/// A header value as sent: plain, or `=?base64?…?=` over UTF-8 bytes.
fn decode_header_value(raw: &str) -> Option<Cow<'_, str>> {
    match raw
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = decode_base64(encoded)?;
            String::from_utf8(bytes).ok().map(Cow::Owned)
        }
        None => Some(Cow::Borrowed(raw)),
    }
}

/// Standard-alphabet base64, padding optional.
fn decode_base64(encoded: &str) -> Option<Vec<u8>> {
    let unpadded = encoded
        .strip_suffix("==")
        .or_else(|| encoded.strip_suffix('='))
        .unwrap_or(encoded);
    if unpadded.len() % 4 == 1 || (unpadded.len() != encoded.len() && encoded.len() % 4 != 0) {
        return None;
    }
    let mut out = Vec::with_capacity(unpadded.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in unpadded.bytes() {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_header_values() {
        assert_eq!(
            decode_header_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=").as_deref(),
            Some("=?base64?literal?=")
        );
        assert_eq!(
            decode_header_value("=?base64?w6lsw6g=?=").as_deref(),
            Some("élè")
        );
        assert_eq!(
            decode_header_value("=?base64?w6lsw6g?=").as_deref(),
            Some("élè")
        );
        assert_eq!(decode_header_value("greet").as_deref(), Some("greet"));
        assert_eq!(decode_header_value("=?base64?***?="), None);
        assert_eq!(decode_header_value("=?base64?QQ=?="), None);
        assert_eq!(decode_header_value("=?base64?Q?="), None);
        assert_eq!(decode_header_value("=?base64?/w==?="), None, "not UTF-8");
        assert_eq!(decode_base64("").as_deref(), Some(&[][..]));
        assert_eq!(decode_base64("AAEC").as_deref(), Some(&[0u8, 1, 2][..]));
    }

    #[test]
    fn only_usable_ids_are_read() {
        assert_eq!(readable_id(&json!({"id": 7})), Some(RequestId::Number(7)));
        assert_eq!(readable_id(&json!({"id": "x"})), Some(RequestId::from("x")));
        assert_eq!(readable_id(&json!({"id": 1.5})), None);
        assert_eq!(readable_id(&json!({"id": null})), None);
        assert_eq!(readable_id(&json!([{"id": 1}])), None);
    }
}
