//! A Streamable HTTP endpoint for any JSON-RPC service (feature `axum`):
//! see [`McpEndpoint`].
//!
//! One file per step of a request: `guard` refuses foreign origins and
//! bodies not declared JSON, `body` reads it, `headers` checks the
//! 2026-07-28 headers against the body, `handle` calls the service,
//! `response` writes a JSON answer, and `sse` streams the answer instead
//! when the service talks back to the client through the `peer`.
//! `plain_get` recognises a `tasks/get` in the compact shapes the SDKs
//! write, for an endpoint
//! that answers it from the layer's store
//! ([`McpEndpoint::with_direct_tasks_get`]).

mod answer;
mod body;
mod deadline;
mod guard;
mod handle;
mod headers;
mod peer;
mod plain_get;
mod response;
mod seen;
mod serve;
mod service;
mod sse;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::http::Extensions;
use axum::{BoxError, Router};
use tower_service::Service;

use crate::jsonrpc::{IdentityRefusal, JsonRpcRequest, JsonRpcResponse};
use crate::runtime::Engine;
use crate::service::TaskService;
// Named by the docs of `McpEndpoint` only.
#[cfg(doc)]
use crate::peer::{ClientPeer, Peer};

#[cfg(feature = "dashboard")]
pub(crate) use self::guard::origin_admitted;
pub(crate) use self::guard::AllowedOrigins;
use self::handle::{EndpointState, IdentityFn};
pub use self::serve::{serve, Serve, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT};
pub use self::service::McpService;

/// The default request body limit of [`McpEndpoint`]: 4 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// How long a request body may take to arrive whole by default: 30 s
/// ([`McpEndpoint::with_body_timeout`]).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

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
/// | `POST` with an `Origin` header that is not [allowed](#security) (by default: any that is not a loopback page), or with several | HTTP 403, `-32600`, no `id` member; the body is not parsed |
/// | `POST` whose `Content-Type` is not `application/json` (parameters such as `charset` allowed), or that has none | HTTP 415, `-32600`, no `id` member; the body is not parsed |
/// | `POST` refused by the [identity hook](McpEndpoint::with_authentication) | HTTP 401 (missing or invalid credentials) or 403 (a caller known but not allowed) with `WWW-Authenticate: Bearer realm="mcp"` (and `error="invalid_token"` or `error="insufficient_scope"`), `-32600`, no `id` member; the body is not parsed |
/// | `POST` with a JSON-RPC request | the inner service's response, HTTP 200 (but see the error table below); an SSE stream if the service sent messages to the client first |
/// | `POST` with a notification (no `id`) | the inner service is called, its answer dropped; HTTP 202, empty body |
/// | `POST` with a JSON-RPC response (`result` or `error`, an `id`, no `method`) to a pending server→client request | HTTP 202, empty body; the answer goes to the waiting [`ClientPeer::request`] |
/// | `POST` with a JSON-RPC response to no pending request (unknown, already answered, or its stream has closed), or a malformed one | HTTP 400, `-32600`, no `id` member |
/// | body over the [limit](McpEndpoint::with_body_limit) (default [`DEFAULT_BODY_LIMIT`]) | HTTP 413, `-32600`, `"id": null`, once the rest of the body is read and dropped (up to 4 times the limit, for up to 5 s), so that a client that writes its whole body before it reads sees it too |
/// | body not arrived whole within the [body timeout](McpEndpoint::with_body_timeout) (default 30 s) of the end of the headers | HTTP 408, `-32600`, no `id` member; the connection closes |
/// | body that is not JSON | HTTP 400, `-32700`, `"id": null` |
/// | JSON that is not one request object (an array, a string, no `method`, ...) | HTTP 400, `-32600`, the request's `id` if it can be read, else `null` |
/// | 2026-07-28 request whose headers disagree with the body (below) | HTTP 400, `-32020`, the request's `id` |
/// | any other method (`GET`, `DELETE`, ...) | HTTP 405 |
///
/// The first three are checked in this order, before anything else, and the
/// body of a refused request is read and dropped as that of a body over
/// the limit is. There are no sessions: the endpoint never sends
/// `Mcp-Session-Id`, and a client's `GET` for a standalone SSE stream gets
/// 405, which Streamable HTTP clients take as "no such stream".
///
/// ## Server→client messages
///
/// When a request (not a notification) is `POST`ed with an `Accept` header
/// that lists `text/event-stream`, the endpoint puts a [`Peer`] in the
/// request's extensions, except in a `tasks/get`'s: no era has the server
/// send the client anything while it answers one (a task's input requests
/// travel on a 2025-11-25 `tasks/result` stream, or in the 2026-07-28 task
/// itself), and it is the request a polling client sends most. The service (for example
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
/// - [`ClientPeer::notify`] queues the notification at once while fewer
///   than 64 messages wait for the client; past that its future waits
///   until the client has read enough (backpressure, so that a slow reader
///   still gets every message, the last one included), or until the
///   stream ends, when the notification is dropped. Awaited one after the
///   other, notifications arrive in the order they were sent.
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
/// | a response marked [refused for its caller's identity](JsonRpcResponse::refused) (a [`TaskLayer`](crate::TaskLayer) [requiring an identity](crate::TaskLayer::with_identity_required) marks its refusal so) | 401 or 403 with `WWW-Authenticate`, as in the table above, the request's `id` |
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
/// itself in an HTTP layer in front of the router, or in the hook:
/// [`with_authentication`](McpEndpoint::with_authentication)'s hook may
/// refuse the caller with an [`IdentityRefusal`], answered with HTTP 401 or
/// 403 and a `WWW-Authenticate: Bearer` challenge before the body is read.
/// JSON-RPC errors (HTTP 200, or 400 as above) stay for everything about
/// the request itself.
///
/// # Security
///
/// A web page can make its visitor's browser `POST` to any address,
/// `localhost` included, without asking the server first when the body is
/// `text/plain` or a form (a CORS "simple request"); and through DNS
/// rebinding, a name of the attacker's can come to point at the server.
/// Streamable HTTP servers must therefore validate `Origin`, and the
/// endpoint refuses before it reads a body:
///
/// - A request whose `Origin` header is not allowed: HTTP 403. By default
///   the allowed origins are loopback pages: scheme `http` or `https`, host
///   `localhost`, `127.0.0.1` or `[::1]`, any port. A rebound name still
///   sends the attacker's origin, and a page that hides its origin sends
///   `Origin: null`, so both are refused. Requests without `Origin` are
///   served: clients other than browsers do not send one, and browsers
///   send one with every `POST`. A server used by browser clients of known
///   sites lists them with
///   [`with_allowed_origins`](McpEndpoint::with_allowed_origins) instead;
///   [`with_any_origin`](McpEndpoint::with_any_origin) turns the check off,
///   for a server that authenticates every request and is not reachable
///   through a private address.
/// - A body whose `Content-Type` is not `application/json`: HTTP 415. No
///   browser sends that type to another origin without a CORS preflight,
///   which this endpoint does not answer.
///
/// The `Host` header is not checked. Bind a local server to `127.0.0.1`,
/// not to every interface, and authenticate callers in a layer in front of
/// the router.
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
/// // Serve it with `mcp_task_layer::serve(listener, app)` (deadlines for
/// // slow clients) or `axum::serve(listener, app)`; here one request goes
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
    body_timeout: Duration,
    origins: AllowedOrigins,
    direct: Option<Arc<Engine>>,
}

impl<S> fmt::Debug for McpEndpoint<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpEndpoint")
            .field("service", &std::any::type_name::<S>())
            .field("identity", &self.identity.is_some())
            .field("body_limit", &self.body_limit)
            .field("body_timeout", &self.body_timeout)
            .field("origins", &self.origins)
            .field("direct_tasks_get", &self.direct.is_some())
            .finish()
    }
}

impl<S> McpEndpoint<S> {
    /// An endpoint for `service` with the default body limit, no identity
    /// hook, and browser pages served from loopback origins only.
    pub fn new(service: S) -> Self {
        McpEndpoint {
            service,
            identity: None,
            body_limit: DEFAULT_BODY_LIMIT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            origins: AllowedOrigins::Loopback,
            direct: None,
        }
    }

    /// Copy the caller's identity from the HTTP request into the JSON-RPC
    /// request. `identify` gets the HTTP request's parts (headers, and the
    /// extensions your auth layers set) and the extensions of the
    /// [`JsonRpcRequest`] about to be handed to the service; insert what it
    /// needs there, typically a [`TaskOwner`](crate::TaskOwner). It runs for
    /// every `POST` whose `Origin` and `Content-Type` passed, before its body
    /// is read (what it inserts is handed on with requests and
    /// notifications). A second call replaces the first hook.
    pub fn with_identity<F>(mut self, identify: F) -> Self
    where
        F: Fn(&Parts, &mut Extensions) + Send + Sync + 'static,
    {
        self.identity = Some(Arc::new(move |parts, extensions| {
            identify(parts, extensions);
            Ok(())
        }));
        self
    }

    /// As [`with_identity`](Self::with_identity), for a hook that may
    /// also refuse the caller: `Err(`[`IdentityRefusal`]`)` answers HTTP 401
    /// (no credentials where the server requires them, or credentials that
    /// are not valid) or 403 (a caller known but not allowed) with a
    /// `WWW-Authenticate: Bearer` challenge, as the MCP authorization spec
    /// has it, and the body is not read (see [Caller identity](#caller-identity)).
    /// A second call replaces the first hook, whichever method set it.
    ///
    /// ```
    /// use mcp_task_layer::{IdentityRefusal, JsonRpcRequest, JsonRpcResponse, McpEndpoint, TaskOwner};
    ///
    /// let server = tower::service_fn(|req: JsonRpcRequest| async move {
    ///     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(req.id, serde_json::json!({})))
    /// });
    /// let app = McpEndpoint::new(server)
    ///     .with_authentication(|parts, extensions| {
    ///         let header = parts.headers.get("authorization").ok_or(IdentityRefusal::Missing)?;
    ///         // A real server verifies the token and reads its subject.
    ///         let token = header
    ///             .to_str()
    ///             .ok()
    ///             .and_then(|v| v.strip_prefix("Bearer "))
    ///             .ok_or(IdentityRefusal::Invalid)?;
    ///         if token == "guest" {
    ///             return Err(IdentityRefusal::Forbidden);
    ///         }
    ///         extensions.insert(TaskOwner::new(token));
    ///         Ok(())
    ///     })
    ///     .into_router("/mcp");
    /// # drop(app);
    /// ```
    pub fn with_authentication<F>(mut self, identify: F) -> Self
    where
        F: Fn(&Parts, &mut Extensions) -> Result<(), IdentityRefusal> + Send + Sync + 'static,
    {
        self.identity = Some(Arc::new(identify));
        self
    }

    /// The largest request body accepted, in bytes (default
    /// [`DEFAULT_BODY_LIMIT`]). A larger body gets HTTP 413 with a `-32600`
    /// error and `"id": null`. Nothing beyond the limit is kept: the rest is
    /// read and dropped, up to 4 times the limit in all and for at most
    /// 5 s, so that a client that writes its whole body before it reads
    /// (Python's `urllib`, for one) gets the answer instead of a broken
    /// connection. A body declared larger than that is not read, and the
    /// connection closes after the answer; so does one that goes on longer.
    /// A client that sent `Expect: 100-continue` gets the answer before it
    /// sends anything.
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How long a request body may take to arrive whole, counted from the
    /// end of its headers, not between bytes (default
    /// [`DEFAULT_BODY_TIMEOUT`]). A body still incomplete then gets HTTP
    /// 408 with a `-32600` error and no `id` member, the connection closes,
    /// and nothing of the request reaches the service. The head's own
    /// deadline is the server's: see [`serve`].
    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Serve browser pages of exactly these origins, instead of the
    /// loopback pages served by default (see [Security](#security)); a
    /// request with any other `Origin` gets HTTP 403. Write each origin as a
    /// browser sends it, `scheme://host` with the port only if it is not the
    /// scheme's default: `"https://app.example.com"`,
    /// `"http://localhost:5173"`. Case and a trailing `/` do not matter. An
    /// empty list serves no browser page at all; requests without `Origin`
    /// are always served.
    pub fn with_allowed_origins<I, O>(mut self, origins: I) -> Self
    where
        I: IntoIterator<Item = O>,
        O: AsRef<str>,
    {
        self.origins = AllowedOrigins::list(origins);
        self
    }

    /// Serve a request whatever its `Origin`. Only for a server that
    /// authenticates every request by a credential a browser does not send
    /// by itself (a bearer token, not a cookie), and that no attacker's name
    /// can be made to point at (not on loopback or a private network).
    pub fn with_any_origin(mut self) -> Self {
        self.origins = AllowedOrigins::Any;
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
        Router::new().route_service(path, McpService::new(self.into_state(), None))
    }

    /// The endpoint as a service of HTTP requests serving `POST path`,
    /// without a router: other HTTP methods on `path` get 405, other paths
    /// 404. It answers exactly as [`into_router`](Self::into_router)'s
    /// router does, for less work per request (no route table, no path
    /// parameters): for a server whose only HTTP route is the endpoint.
    ///
    /// ```no_run
    /// use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, McpEndpoint};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let server = tower::service_fn(|req: JsonRpcRequest| async move {
    ///     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(req.id, serde_json::json!({})))
    /// });
    /// let app = McpEndpoint::new(server).into_service("/mcp");
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await.unwrap();
    /// // Or `axum::serve(listener, axum::ServiceExt::into_make_service(app))`,
    /// // without the deadlines for slow clients of `serve`.
    /// mcp_task_layer::serve(listener, app).await.unwrap();
    /// # }
    /// ```
    pub fn into_service(self, path: &str) -> McpService<S>
    where
        S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
    {
        McpService::new(self.into_state(), Some(path))
    }

    /// Serve the endpoint on `listener` at `path`, with no router: it
    /// answers as [`serve`]`(listener, self.into_service(path))` does, whose
    /// deadlines for slow clients the returned [`Serve`] sets, for less
    /// work per request: each request goes from hyper straight to the
    /// endpoint, its body read as hyper gives it and a JSON answer handed
    /// back as it is written, without axum's boxed `Body` or a `oneshot`
    /// in between.
    pub fn serve(self, listener: tokio::net::TcpListener, path: &str) -> Serve<McpService<S>>
    where
        S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
    {
        // Each request straight from hyper to the endpoint: its body not
        // boxed, no `oneshot`, a JSON answer's body not boxed (the same
        // answers as through `McpService`'s `Service` impl).
        serve(listener, self.into_service(path)).with_connect(|stream, app, deadlines, stop| {
            Box::pin(serve::connection(stream, deadlines, stop, move |request| {
                app.serve_hyper(request)
            }))
        })
    }

    fn into_state(self) -> EndpointState<S> {
        EndpointState {
            service: self.service,
            identity: self.identity,
            body_limit: self.body_limit,
            body_timeout: self.body_timeout,
            origins: self.origins,
            pending: Arc::default(),
            direct: self.direct,
        }
    }
}

impl<S> McpEndpoint<TaskService<S>> {
    /// Answer `tasks/get` in the endpoint, from the [`TaskLayer`](crate::TaskLayer)'s
    /// store, instead of calling the service with it: the same answers,
    /// byte for byte, with every check of the request as before (`Origin`,
    /// `Content-Type`, the identity hook, the body limit and timeout, the
    /// 2026-07-28 headers, the protocol version and the task's owner), for
    /// less work per request. Only for an endpoint whose service is the
    /// layer's [`TaskService`] itself, so that nothing between the two
    /// could change a request. A `tasks/get` the store cannot answer
    /// without waiting (a database's), a sealed record's and a
    /// notification go to the service as before. What changes for a
    /// `tasks/get` answered in the endpoint: it does not wait for the
    /// service's [`poll_ready`](Service::poll_ready), which the layer does
    /// not need for it, so the inner service's middleware (a concurrency
    /// or rate limit, load shedding) does not bound it, and a `poll_ready`
    /// that fails (a `Buffer` whose worker is gone) does not make it a 500.
    pub fn with_direct_tasks_get(mut self) -> Self {
        self.direct = Some(std::sync::Arc::clone(self.service.engine()));
        self
    }
}
