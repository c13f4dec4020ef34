//! A Streamable HTTP endpoint for any JSON-RPC service (feature `axum`):
//! see [`McpEndpoint`].

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{BoxError, Router};
use bytes::BytesMut;
use http_body::Frame;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::peer::{ClientPeer, Peer};
use crate::protocol::META_PROTOCOL_VERSION;
use crate::store::BoxFuture;

/// The default request body limit of [`McpEndpoint`]: 4 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// How many server→client messages one response stream buffers before
/// [`ClientPeer::request`] waits and [`ClientPeer::notify`] drops.
const OUTGOING_CAPACITY: usize = 64;

static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

type IdentityFn = Arc<dyn Fn(&Parts, &mut Extensions) + Send + Sync>;

/// Serves a JSON-RPC service over Streamable HTTP.
///
/// It turns a `Service<JsonRpcRequest, Response = JsonRpcResponse>`
/// (typically a [`TaskLayer`](crate::TaskLayer) around your MCP server) into
/// an [`axum::Router`] that serves one path. An answer is a single
/// `application/json` body unless the service talks back to the client
/// while it answers (see [Server→client messages](#serverclient-messages)):
/// then, and only then, the answer becomes a `text/event-stream`.
///
/// # What the endpoint does
///
/// | Request | Answer |
/// |---|---|
/// | `POST` with a JSON-RPC request | the inner service's response, HTTP 200 (but see the error table below); an SSE stream if the service sent messages to the client first |
/// | `POST` with a notification (no `id`) | the inner service is called, its answer dropped; HTTP 202, empty body |
/// | `POST` with a JSON-RPC response (`result` or `error`, an `id`, no `method`) to a pending server→client request | HTTP 202, empty body; the answer goes to the waiting [`ClientPeer::request`] |
/// | `POST` with a JSON-RPC response to no pending request (unknown, already answered, or its stream has closed), or a malformed one | HTTP 400, `-32600`, no `id` member |
/// | body over the [limit](McpEndpoint::with_body_limit) (default [`DEFAULT_BODY_LIMIT`]) | HTTP 413, `-32600`, `"id": null` |
/// | body that is not JSON | HTTP 400, `-32700`, `"id": null` |
/// | JSON that is not one request object (an array, a string, no `method`, ...) | HTTP 400, `-32600`, the request's `id` if it can be read, else `null` |
/// | 2026-07-28 request whose headers disagree with the body (below) | HTTP 400, `-32020`, the request's `id` |
/// | any other method (`GET`, `DELETE`, ...) | HTTP 405 |
///
/// The `Content-Type` header is not enforced: any body is read as JSON.
/// There are no sessions: the endpoint never sends `Mcp-Session-Id`, and a
/// client's `GET` for a standalone SSE stream gets 405, which Streamable HTTP
/// clients take as "no such stream".
///
/// ## Server→client messages
///
/// When a request (not a notification) is `POST`ed with an `Accept` header
/// that lists `text/event-stream`, the endpoint puts a [`Peer`] in the
/// request's extensions. The service (for example
/// [`TaskLayer`](crate::TaskLayer) serving a 2025-11-25 `tasks/result` that
/// needs the user's input) can use it to send requests and notifications to
/// the client while it works:
///
/// - If the service answers before it sends anything, the answer is plain
///   JSON, as without the peer.
/// - As soon as it sends a message, the HTTP response becomes
///   `text/event-stream` (HTTP 200): each message is one `event: message`
///   whose `data` is the JSON-RPC message, then the service's response comes
///   as the last event and the stream closes. Error responses travel on the
///   stream too, so they keep HTTP 200. Messages the service sent before it
///   answered always come before its response.
/// - A server→client request gets a fresh id: `"srv-"` and 128 random bits
///   from the operating system's CSPRNG, so only the client that saw the
///   request can answer it. The client `POST`s its JSON-RPC response to the
///   same path (see the table above); [`ClientPeer::request`] then resolves
///   to the response's `result`, or to its `error`.
/// - Pending requests are tracked endpoint-wide, by id, until answered. When
///   the response stream ends (the service answered, or the client went
///   away), the requests still waiting on it resolve to a `-32603` error and
///   are forgotten, and messages sent later are dropped silently.
/// - [`ClientPeer::notify`] is best effort and never waits: when the client
///   reads too slowly and 64 messages are waiting, the notification is
///   dropped.
///
/// If the client disconnects, the service's future is dropped, as it is
/// for a plain JSON answer.
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
            pending: Arc::default(),
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
    /// Server→client requests of every response stream, by id.
    pending: Arc<Pending>,
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
    if is_response(&value) {
        return accept_answer(&shared.pending, value);
    }
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
    let Some(id) = request.id.clone() else {
        return match shared.service.clone().oneshot(request).await {
            Ok(_) => StatusCode::ACCEPTED.into_response(),
            Err(e) => {
                let e: BoxError = e.into();
                warn!(error = %e, "the MCP service failed on a notification");
                respond_without_id(StatusCode::INTERNAL_SERVER_ERROR, service_failed())
            }
        };
    };
    if !accepts_event_stream(&parts.headers) {
        let outcome = shared.service.clone().oneshot(request).await;
        let (status, response) = finish(id, outcome, modern);
        return respond(status, &response);
    }
    let (outgoing, messages) = mpsc::channel(OUTGOING_CAPACITY);
    request.extensions.insert(Peer::new(StreamPeer {
        outgoing,
        pending: Arc::clone(&shared.pending),
    }));
    let call = shared.service.clone().oneshot(request);
    serve_with_peer(call, messages, id, modern).await
}

/// The HTTP status and the response to send for the service's outcome,
/// always with the request's own `id`.
fn finish<E: Into<BoxError>>(
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

/// Run `call` with a peer whose messages arrive on `messages`: plain JSON if
/// the call ends before the peer sends anything, an SSE stream otherwise.
async fn serve_with_peer<F, E>(
    call: F,
    mut messages: mpsc::Receiver<Value>,
    id: RequestId,
    modern: bool,
) -> Response
where
    F: Future<Output = Result<JsonRpcResponse, E>> + Send + 'static,
    E: Into<BoxError>,
{
    let mut call = Box::pin(call);
    let mut open = true;
    let first = loop {
        tokio::select! {
            biased;
            message = messages.recv(), if open => match message {
                Some(message) => break Ok(message),
                // Every sender is gone, the peer included: only the call is left.
                None => open = false,
            },
            outcome = &mut call => break Err(outcome),
        }
    };
    match first {
        Ok(message) => event_stream(EventStream {
            queued: VecDeque::from([message]),
            call: Some(call),
            messages,
            id,
            last: None,
        }),
        Err(outcome) => {
            // Whatever the peer sends from now on is dropped, but what it
            // sent before the answer still goes first.
            messages.close();
            let mut queued = VecDeque::new();
            while let Ok(message) = messages.try_recv() {
                queued.push_back(message);
            }
            let (status, response) = finish(id.clone(), outcome, modern);
            if queued.is_empty() {
                return respond(status, &response);
            }
            event_stream(EventStream::<F> {
                queued,
                call: None,
                messages,
                id,
                last: Some(sse_event(&response.to_vec())),
            })
        }
    }
}

fn event_stream(
    stream: impl HttpBody<Data = Bytes, Error = Infallible> + Send + 'static,
) -> Response {
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::new(stream),
    )
        .into_response()
}

/// The body of an SSE response: the queued messages, then whatever the peer
/// sends while the call runs, then the call's response; then the end.
struct EventStream<F> {
    queued: VecDeque<Value>,
    call: Option<Pin<Box<F>>>,
    messages: mpsc::Receiver<Value>,
    id: RequestId,
    /// The final event, once the call has answered.
    last: Option<Bytes>,
}

impl<F, E> HttpBody for EventStream<F>
where
    F: Future<Output = Result<JsonRpcResponse, E>>,
    E: Into<BoxError>,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let event = |message: &Value| {
            let json = serde_json::to_vec(message).unwrap_or_else(|e| {
                warn!(error = %e, "cannot encode a message for the event stream");
                json!({ "jsonrpc": "2.0", "error": service_failed() })
                    .to_string()
                    .into_bytes()
            });
            Poll::Ready(Some(Ok(Frame::data(sse_event(&json)))))
        };
        if let Some(message) = this.queued.pop_front() {
            return event(&message);
        }
        if let Some(call) = this.call.as_mut() {
            if let Poll::Ready(Some(message)) = this.messages.poll_recv(cx) {
                return event(&message);
            }
            let outcome = match call.as_mut().poll(cx) {
                Poll::Ready(outcome) => outcome,
                Poll::Pending => return Poll::Pending,
            };
            this.call = None;
            this.messages.close();
            let (_, response) = finish(this.id.clone(), outcome, false);
            this.last = Some(sse_event(&response.to_vec()));
        }
        if let Ok(message) = this.messages.try_recv() {
            return event(&message);
        }
        Poll::Ready(this.last.take().map(|last| Ok(Frame::data(last))))
    }
}

/// One SSE `message` event carrying a JSON-RPC message's compact JSON
/// (which never contains a line break, so one `data` line suffices).
fn sse_event(json: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(json.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(json);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// Whether an `Accept` header lists `text/event-stream`.
fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| {
            range
                .split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

// ----- server→client requests -----

type Answer = Result<Value, JsonRpcError>;

/// Server→client requests waiting for the client's answer, by id.
#[derive(Default)]
struct Pending(Mutex<HashMap<String, oneshot::Sender<Answer>>>);

impl Pending {
    fn map(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a pending request when its future ends, however it ends.
struct Forget {
    pending: Arc<Pending>,
    id: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.pending.map().remove(&self.id);
    }
}

/// The [`ClientPeer`] of one request: messages go to that request's
/// response stream.
struct StreamPeer {
    outgoing: mpsc::Sender<Value>,
    pending: Arc<Pending>,
}

impl ClientPeer for StreamPeer {
    fn request(&self, method: String, params: Value) -> BoxFuture<'static, Answer> {
        let outgoing = self.outgoing.clone();
        let pending = Arc::clone(&self.pending);
        Box::pin(async move {
            let id = new_request_id()
                .map_err(|e| JsonRpcError::internal(format!("cannot draw a request id: {e}")))?;
            let (answer, answered) = oneshot::channel();
            pending.map().insert(id.clone(), answer);
            let _forget = Forget {
                pending,
                id: id.clone(),
            };
            if outgoing
                .send(outgoing_message(Some(id), method, params))
                .await
                .is_err()
            {
                return Err(stream_closed());
            }
            tokio::select! {
                biased;
                answer = answered => answer.unwrap_or_else(|_| Err(stream_closed())),
                () = outgoing.closed() => Err(stream_closed()),
            }
        })
    }

    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()> {
        // Queued at once, so notifications keep the order they were sent in.
        if let Err(e) = self
            .outgoing
            .try_send(outgoing_message(None, method, params))
        {
            let reason = match e {
                mpsc::error::TrySendError::Full(_) => "the client reads too slowly",
                mpsc::error::TrySendError::Closed(_) => "the response stream has ended",
            };
            debug!(reason, "dropped a notification to the client");
        }
        Box::pin(std::future::ready(()))
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        let outgoing = self.outgoing.clone();
        Box::pin(async move { outgoing.closed().await })
    }
}

fn stream_closed() -> JsonRpcError {
    JsonRpcError::internal("the response stream to the client closed before it answered")
}

/// `"srv-"` and 128 bits from the operating system's CSPRNG, in hex.
fn new_request_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    let mut id = String::with_capacity(4 + 32);
    id.push_str("srv-");
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    Ok(id)
}

fn outgoing_message(id: Option<String>, method: String, params: Value) -> Value {
    let mut message = Map::new();
    message.insert("jsonrpc".into(), "2.0".into());
    if let Some(id) = id {
        message.insert("id".into(), Value::String(id));
    }
    message.insert("method".into(), Value::String(method));
    if !params.is_null() {
        message.insert("params".into(), params);
    }
    Value::Object(message)
}

/// A JSON-RPC response rather than a request: `result` or `error`, no
/// `method`.
fn is_response(value: &Value) -> bool {
    value.as_object().is_some_and(|o| {
        !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
    })
}

/// Hand the client's answer to the request waiting for it: 202, or 400 when
/// no request waits for it.
fn accept_answer(pending: &Pending, value: Value) -> Response {
    let answer = match serde_json::from_value::<JsonRpcResponse>(value) {
        Ok(answer) => answer,
        Err(e) => {
            let error = JsonRpcError::invalid_request(format!("malformed JSON-RPC response: {e}"));
            return respond_without_id(StatusCode::BAD_REQUEST, error);
        }
    };
    let waiting = match &answer.id {
        Some(RequestId::String(id)) => pending.map().remove(id),
        _ => None,
    };
    let Some(waiting) = waiting else {
        debug!(id = ?answer.id, "an answer to no pending request");
        let error = JsonRpcError::invalid_request("no pending server request has this id");
        return respond_without_id(StatusCode::BAD_REQUEST, error);
    };
    // If the request gave up at this very moment, the answer is dropped.
    let _ = waiting.send(answer.into_payload());
    StatusCode::ACCEPTED.into_response()
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
    json_response(status, response.to_vec())
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
