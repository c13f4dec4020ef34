//! One `POST`: read, validate, call the service, answer.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::BoxError;
use pin_project_lite::pin_project;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use super::answer::{other, Response};
use super::body::{drain, read_body, BodyError, ReqBody};
use super::guard::{admit, AllowedOrigins};
use super::headers::check_headers;
use super::peer::{accept_answer, StreamPeer};
use super::plain_get::{answer_plain_get, Plain};
use super::response::{
    body_timed_out, outcome_response, refuse_identity, respond, respond_owned, respond_without_id,
    service_failed,
};
use super::seen::SeenHeaders;
use super::sse::serve_with_peer;
use crate::jsonrpc::{IdentityRefusal, JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::peer::Peer;
use crate::pending::{read_incoming, Incoming, PendingRequests};
use crate::runtime::Engine;

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
    /// The task layer's engine when the service is a [`TaskService`](crate::TaskService)
    /// and the endpoint answers `tasks/get` itself
    /// ([`McpEndpoint::with_direct_tasks_get`](super::McpEndpoint::with_direct_tasks_get)).
    pub(super) direct: Option<Arc<Engine>>,
}

/// Every `POST` to the endpoint's path.
///
/// In two steps, each its own future: reading and checking the request
/// ([`admit_request`]) is over, and its state (the request head, the body
/// being read) gone, before the service is called ([`call`]), so that the
/// one boxed future of a request holds either, never both. Kept small, it
/// is allocated from the allocator's per-thread cache (glibc: up to 1,032
/// bytes) instead of its general path (~500 instructions more per request).
pub(super) fn handle<S, B: ReqBody>(
    state: Arc<EndpointState<S>>,
    parts: Parts,
    body: B,
) -> impl Future<Output = Result<Response, Infallible>> + Send
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    let admitting = admit_request(Arc::clone(&state), parts, body);
    Steps::Admitting {
        admitting,
        then: Some(move |admitted| call(state, admitted)),
    }
}

pin_project! {
    /// A request's future: admitting it, then calling the service with it,
    /// the second made only once the first is done (and dropped).
    #[project = StepsProj]
    enum Steps<A, F, C> {
        Admitting { #[pin] admitting: A, then: Option<F> },
        Calling { #[pin] calling: C },
    }
}

impl<A, F, C> Future for Steps<A, F, C>
where
    A: Future<Output = Result<Admitted, Response>>,
    F: FnOnce(Admitted) -> C,
    C: Future<Output = Response>,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let calling = match self.as_mut().project() {
                StepsProj::Calling { calling } => return calling.poll(cx).map(Ok),
                StepsProj::Admitting { admitting, then } => {
                    match (ready!(admitting.poll(cx)), then.take()) {
                        (Ok(admitted), Some(then)) => then(admitted),
                        (Err(refused), _) => return Poll::Ready(Ok(refused)),
                        // `then` is taken only here, as the step ends.
                        (Ok(_), None) => return Poll::Pending,
                    }
                }
            };
            self.set(Steps::Calling { calling });
        }
    }
}

/// A request read whole and admitted by every check of the edge.
struct Admitted {
    request: JsonRpcRequest,
    /// Its `Accept` lists `text/event-stream`.
    accepts_event_stream: bool,
    /// The request's header map, emptied: the JSON answer's headers are
    /// written into it (see [`respond_owned`]).
    reply_headers: HeaderMap,
}

/// Read and check one request: the answer if it is refused (or was a
/// client's answer to a server request, or a `tasks/get` the endpoint
/// answers itself). An `async` block, not an `async
/// fn`, whose arguments would be kept twice in the future.
#[allow(clippy::manual_async_fn)]
fn admit_request<S, B: ReqBody>(
    state: Arc<EndpointState<S>>,
    mut parts: Parts,
    body: B,
) -> impl Future<Output = Result<Admitted, Response>> + Send
where
    S: Send + Sync + 'static,
{
    async move {
        let headers = SeenHeaders::read(&parts.headers);
        let declared = headers.declared_length();
        if let Err((status, error)) = admit(&headers, &state.origins) {
            debug!(%status, %error, "refused a request before reading its body");
            drain(&parts, declared, body, state.body_limit).await;
            return Err(respond_without_id(status, error));
        }
        // Who is calling is settled before anything of the body is read.
        let mut identity = Extensions::new();
        if let Some(identify) = &state.identity {
            if let Err(refusal) = identify(&parts, &mut identity) {
                debug!(?refusal, "refused a request for its caller's identity");
                drain(&parts, declared, body, state.body_limit).await;
                return Err(refuse_identity(refusal));
            }
        }
        // In a block: the body's future borrows the head, which is emptied below.
        let read = {
            let mut read = std::pin::pin!(read_body(&parts, declared, body, state.body_limit));
            // Most bodies have arrived with their head: read at once, and a timer
            // is started (the deadline counted from here) only if one has not.
            match std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
                Poll::Ready(read) => read,
                // Boxed: the timer is rare, and would make every request's future larger.
                Poll::Pending => {
                    match Box::pin(tokio::time::timeout(state.body_timeout, read)).await {
                        Ok(read) => read,
                        Err(_) => {
                            debug!("a request body did not arrive in time: 408");
                            return Err(body_timed_out(state.body_timeout));
                        }
                    }
                }
            }
        };
        let bytes = match read {
            Ok(bytes) => bytes,
            Err(BodyError::TooLarge) => {
                let error = JsonRpcError::invalid_request(format!(
                    "the request body exceeds the limit of {} bytes",
                    state.body_limit
                ));
                return Err(respond(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &JsonRpcResponse::error(None, error),
                ));
            }
            Err(BodyError::Unreadable) => {
                let error = JsonRpcError::invalid_request("the request body could not be read");
                return Err(respond(
                    StatusCode::BAD_REQUEST,
                    &JsonRpcResponse::error(None, error),
                ));
            }
        };
        // A `tasks/get` in a compact shape the SDKs write, answered by the
        // layer without decoding it (see `plain_get`).
        let mut direct = state.direct.as_ref();
        if let Some(engine) = direct {
            match answer_plain_get(engine, &headers, &bytes, &identity) {
                Plain::Answered(status, response) => {
                    return Err(respond_owned(status, response, emptied(&mut parts)));
                }
                // No second try without the service: it would wait too.
                Plain::Service => direct = None,
                Plain::Decode => {}
            }
        }
        let mut request = match read_incoming(&bytes) {
            Incoming::Request(request) => request,
            Incoming::Answer(value) => return Err(accept_answer(&state.pending, value)),
            Incoming::Refused(response) => return Err(respond(StatusCode::BAD_REQUEST, &response)),
        };
        if let Err(error) = check_headers(&headers, &request) {
            debug!(method = %request.method, %error, "rejected a request whose headers disagree with its body");
            return Err(match request.id {
                Some(id) => respond(
                    StatusCode::BAD_REQUEST,
                    &JsonRpcResponse::error(Some(id), error),
                ),
                None => respond_without_id(StatusCode::BAD_REQUEST, error),
            });
        }
        request.extensions.extend(identity);
        let accepts_event_stream = headers.accepts_event_stream;
        // As `call` would answer it through the service, with no call: the
        // request's future never reaches the calling step.
        if let (Some(engine), Some(id)) = (direct, &request.id) {
            if request.method == "tasks/get" {
                if let Some(response) = engine.tasks_get_now(&request) {
                    let modern = request.protocol_version().is_some();
                    let id = id.clone();
                    let (status, response) =
                        outcome_response(id, Ok::<_, Infallible>(response), modern);
                    return Err(respond_owned(status, response, emptied(&mut parts)));
                }
            }
        }
        Ok(Admitted {
            request,
            accepts_event_stream,
            reply_headers: emptied(&mut parts),
        })
    }
}

/// The request's header map, emptied, for the answer's headers. Emptied,
/// the map keeps its room: the answer's headers go in it, and hyper, once
/// it has written them, parses the connection's next request head into it
/// (hyper keeps the map of the answer it wrote for that). A new map for
/// the answer instead cost two allocations here and two more in hyper,
/// growing it to the next request's headers, on every request.
fn emptied(parts: &mut Parts) -> HeaderMap {
    let mut headers = std::mem::take(&mut parts.headers);
    headers.clear();
    headers
}

/// Call the service with an admitted request and answer with its outcome.
// An `async fn` would keep its arguments twice in its future.
#[allow(clippy::manual_async_fn)]
fn call<S>(
    state: Arc<EndpointState<S>>,
    admitted: Admitted,
) -> impl Future<Output = Response> + Send
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    async move {
        let Admitted {
            mut request,
            accepts_event_stream,
            reply_headers,
        } = admitted;
        let modern = request.protocol_version().is_some();
        let Some(id) = request.id.clone() else {
            // Boxed: notifications are rare, and the call's future is large.
            return match Box::pin(state.service.clone().oneshot(request)).await {
                Ok(_) => other(StatusCode::ACCEPTED.into_response()),
                Err(e) => {
                    let e: BoxError = e.into();
                    warn!(error = %e, "the MCP service failed on a notification");
                    respond_without_id(StatusCode::INTERNAL_SERVER_ERROR, service_failed())
                }
            };
        };
        // No peer for `tasks/get`: neither era sends the client anything while
        // answering one (see "Server→client messages" on `McpEndpoint`).
        if !accepts_event_stream || request.method == "tasks/get" {
            // What `oneshot` does, without its state: that holds the
            // service and the request, then the call's future, and moved
            // the (large) future between them five times a request.
            let mut service = state.service.clone();
            let ready = std::future::poll_fn(|cx| service.poll_ready(cx).map_err(Into::into));
            let outcome: Result<_, BoxError> = match ready.await {
                Ok(()) => service.call(request).await.map_err(Into::into),
                Err(e) => Err(e),
            };
            let (status, response) = outcome_response(id, outcome, modern);
            return respond_owned(status, response, reply_headers);
        }
        let peer = Arc::new(StreamPeer::new(Arc::clone(&state.pending)));
        let shared: Arc<StreamPeer> = Arc::clone(&peer);
        request.extensions.insert(Peer(shared));
        // Boxed before the peer's future takes it: that future is part of
        // every request's.
        let call = Box::pin(state.service.clone().oneshot(request));
        serve_with_peer(call, peer, id, modern, reply_headers).await
    }
}
