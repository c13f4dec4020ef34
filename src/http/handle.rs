//! One `POST`: read, validate, call the service, answer.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{Extensions, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::BoxError;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use super::body::{drain, read_body, BodyError};
use super::guard::{admit, AllowedOrigins};
use super::headers::check_headers;
use super::peer::{accept_answer, StreamPeer};
use super::response::{
    body_timed_out, outcome_response, refuse_identity, respond, respond_without_id, service_failed,
};
use super::seen::SeenHeaders;
use super::sse::serve_with_peer;
use crate::jsonrpc::{IdentityRefusal, JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::peer::Peer;
use crate::pending::{read_incoming, Incoming, PendingRequests};

/// The hook of [`McpEndpoint::with_identity`](super::McpEndpoint::with_identity)
/// and [`with_authentication`](super::McpEndpoint::with_authentication).
pub(super) type IdentityFn =
    Arc<dyn Fn(&Parts, &mut Extensions) -> Result<(), IdentityRefusal> + Send + Sync>;

/// What every request of one endpoint shares.
pub(super) struct EndpointState<S> {
    pub(super) service: S,
    pub(super) identity: Option<IdentityFn>,
    pub(super) body_limit: usize,
    /// How long the whole body may take to arrive, from the handler's start.
    pub(super) body_timeout: Duration,
    pub(super) origins: AllowedOrigins,
    /// Server→client requests of every response stream, by id.
    pub(super) pending: Arc<PendingRequests>,
}

/// Every `POST` to the endpoint's path.
pub(super) async fn handle<S>(state: &EndpointState<S>, request: Request) -> Response
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let headers = SeenHeaders::read(&parts.headers);
    let declared = headers.declared_length();
    if let Err((status, error)) = admit(&headers, &state.origins) {
        debug!(%status, %error, "refused a request before reading its body");
        drain(&parts, declared, body, state.body_limit).await;
        return respond_without_id(status, error);
    }
    // Who is calling is settled before anything of the body is read.
    let mut identity = Extensions::new();
    if let Some(identify) = &state.identity {
        if let Err(refusal) = identify(&parts, &mut identity) {
            debug!(?refusal, "refused a request for its caller's identity");
            drain(&parts, declared, body, state.body_limit).await;
            return refuse_identity(refusal);
        }
    }
    let mut read = std::pin::pin!(read_body(&parts, declared, body, state.body_limit));
    // Most bodies have arrived with their head: read at once, and a timer
    // is started (the deadline counted from here) only if one has not.
    let read = match std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
        Poll::Ready(read) => read,
        Poll::Pending => match tokio::time::timeout(state.body_timeout, read).await {
            Ok(read) => read,
            Err(_) => {
                debug!("a request body did not arrive in time: 408");
                return body_timed_out(state.body_timeout);
            }
        },
    };
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => {
            let error = JsonRpcError::invalid_request(format!(
                "the request body exceeds the limit of {} bytes",
                state.body_limit
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
    let mut request = match read_incoming(&bytes) {
        Incoming::Request(request) => request,
        Incoming::Answer(value) => return accept_answer(&state.pending, value),
        Incoming::Refused(response) => return respond(StatusCode::BAD_REQUEST, &response),
    };
    let modern = request.protocol_version().is_some();
    if let Err(error) = check_headers(&headers, &request) {
        debug!(method = %request.method, %error, "rejected a request whose headers disagree with its body");
        return match request.id {
            Some(id) => respond(
                StatusCode::BAD_REQUEST,
                &JsonRpcResponse::error(Some(id), error),
            ),
            None => respond_without_id(StatusCode::BAD_REQUEST, error),
        };
    }
    request.extensions.extend(identity);
    let Some(id) = request.id.clone() else {
        return match state.service.clone().oneshot(request).await {
            Ok(_) => StatusCode::ACCEPTED.into_response(),
            Err(e) => {
                let e: BoxError = e.into();
                warn!(error = %e, "the MCP service failed on a notification");
                respond_without_id(StatusCode::INTERNAL_SERVER_ERROR, service_failed())
            }
        };
    };
    // No peer for `tasks/get`: neither era sends the client anything while
    // answering one (see "Server→client messages" on `McpEndpoint`).
    if !headers.accepts_event_stream || request.method == "tasks/get" {
        let outcome = state.service.clone().oneshot(request).await;
        let (status, response) = outcome_response(id, outcome, modern);
        return respond(status, &response);
    }
    let peer = Arc::new(StreamPeer::new(Arc::clone(&state.pending)));
    let shared: Arc<StreamPeer> = Arc::clone(&peer);
    request.extensions.insert(Peer(shared));
    let call = state.service.clone().oneshot(request);
    serve_with_peer(call, peer, id, modern).await
}
