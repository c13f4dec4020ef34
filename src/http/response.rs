//! The JSON answers the endpoint writes, and the HTTP status of each.

use axum::http::header::{CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::BoxError;
use serde_json::json;
use tracing::warn;

use super::answer::{Answer, Response};
use crate::jsonrpc::{code, IdentityRefusal, JsonRpcError, JsonRpcResponse, RequestId};

/// The HTTP status and the response to send for the service's outcome,
/// always with the request's own `id`.
pub(super) fn outcome_response<E: Into<BoxError>>(
    id: RequestId,
    outcome: Result<JsonRpcResponse, E>,
    modern: bool,
) -> (StatusCode, JsonRpcResponse) {
    match outcome {
        Ok(mut response) => {
            response.id = Some(id);
            (status_of(&response, modern), response)
        }
        Err(e) => {
            let e: BoxError = e.into();
            warn!(error = %e, "the MCP service failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                JsonRpcResponse::error(Some(id), service_failed()),
            )
        }
    }
}

pub(super) fn service_failed() -> JsonRpcError {
    JsonRpcError::internal("the server failed to handle the request")
}

/// The HTTP status for a response of the inner service.
fn status_of(response: &JsonRpcResponse, modern: bool) -> StatusCode {
    if let Some(refusal) = response.identity_refusal() {
        return refusal_status(refusal);
    }
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
    json_response_in(status, body, HeaderMap::new())
}

/// A JSON answer whose headers are written into `headers`, which must be
/// empty.
fn json_response_in(status: StatusCode, body: Vec<u8>, headers: HeaderMap) -> Response {
    debug_assert!(headers.is_empty(), "an answer starts with no headers");
    // Built by hand: the same response as `(status, [header], body)
    // .into_response()`, without the extra header map, and its body not
    // boxed (see `Answer`).
    let mut response = Response::new(Answer::Whole(Some(body)));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    // `append`, not `insert` (the same in an empty map): hyper appends
    // each header of a request it parses, so that code runs anyway, and
    // `insert`'s own was 8 lines (64 B) more code a request runs
    // (issue 32, BENCHMARKS.md's eleventh pass).
    response
        .headers_mut()
        .append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// [`respond`] by value: the service's answer, its buffer kept as the
/// body when it was written in place (`JsonRpcResponse::into_vec`), its
/// headers written into `headers` (empty; an emptied map keeps its room).
pub(super) fn respond_owned(
    status: StatusCode,
    response: JsonRpcResponse,
    headers: HeaderMap,
) -> Response {
    let refusal = response.identity_refusal();
    let mut http = json_response_in(status, response.into_vec(), headers);
    if let Some(refusal) = refusal {
        challenge(&mut http, refusal);
    }
    http
}

pub(super) fn respond(status: StatusCode, response: &JsonRpcResponse) -> Response {
    let mut http = json_response(status, response.to_vec());
    if let Some(refusal) = response.identity_refusal() {
        challenge(&mut http, refusal);
    }
    http
}

/// A request refused by the identity hook, before its body was read: HTTP
/// 401 or 403 with the challenge, and the error without an `id` member.
pub(super) fn refuse_identity(refusal: IdentityRefusal) -> Response {
    let mut http = respond_without_id(refusal_status(refusal), refusal.error());
    challenge(&mut http, refusal);
    http
}

/// 401 for missing or invalid credentials, 403 for a caller known but not
/// allowed, as the MCP authorization spec has it.
fn refusal_status(refusal: IdentityRefusal) -> StatusCode {
    match refusal {
        IdentityRefusal::Forbidden => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    }
}

/// The `WWW-Authenticate` challenge (RFC 6750 section 3) of a refusal.
fn challenge(http: &mut Response, refusal: IdentityRefusal) {
    let value = match refusal {
        IdentityRefusal::Missing => r#"Bearer realm="mcp""#,
        IdentityRefusal::Invalid => r#"Bearer realm="mcp", error="invalid_token""#,
        _ => r#"Bearer realm="mcp", error="insufficient_scope""#,
    };
    http.headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static(value));
}

/// An error response without an `id` member, for a notification that was
/// not accepted.
pub(super) fn respond_without_id(status: StatusCode, error: JsonRpcError) -> Response {
    let body = json!({ "jsonrpc": "2.0", "error": error });
    json_response(status, body.to_string().into_bytes())
}

/// HTTP 408 for a body that did not arrive whole in time; the connection
/// closes after it (the rest of the body is not read).
pub(super) fn body_timed_out(timeout: std::time::Duration) -> Response {
    let error = JsonRpcError::invalid_request(format!(
        "the request body did not arrive within {timeout:?}"
    ));
    let mut http = respond_without_id(StatusCode::REQUEST_TIMEOUT, error);
    http.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    http
}
