//! The JSON answers the endpoint writes, and the HTTP status of each.

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use axum::BoxError;
use serde_json::json;
use tracing::warn;

use crate::jsonrpc::{code, JsonRpcError, JsonRpcResponse, RequestId};

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
    // Built by hand: the same response as `(status, [header], body)
    // .into_response()`, without the extra header map and body boxing.
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) fn respond(status: StatusCode, response: &JsonRpcResponse) -> Response {
    json_response(status, response.to_vec())
}

/// An error response without an `id` member, for a notification that was
/// not accepted.
pub(super) fn respond_without_id(status: StatusCode, error: JsonRpcError) -> Response {
    let body = json!({ "jsonrpc": "2.0", "error": error });
    json_response(status, body.to_string().into_bytes())
}
