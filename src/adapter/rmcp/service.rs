//! [`RmcpService`]: the `tower::Service` that calls an rmcp handler.

use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use rmcp::model::{ClientRequest, ErrorData, GetMeta, ProtocolVersion};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, ServerHandler, Service as _};
use tokio_util::sync::CancellationToken;

use super::convert::{client_request, method_not_found, response, rmcp_id};
use super::peer;
use crate::context::{TaskId, TaskOwner, TaskResumeContext};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::runtime::TaskHandle;
use crate::store::BoxFuture;

/// An rmcp `ServerHandler` (the official Rust MCP SDK, 3.x) as the inner
/// service of a [`TaskLayer`](crate::TaskLayer).
///
/// The handler is unchanged: its tools, prompts, resources and completions
/// answer as under rmcp's own transports (rmcp's own dispatch calls them),
/// and a tool that returns rmcp's `InputRequiredResult` inside a task makes
/// the task `input_required`; the layer calls it again with the accumulated
/// `inputResponses` and the `requestState`, which the tool reads with rmcp's
/// `InputResponses` and `RequestState` extractors.
///
/// What the handler's `RequestContext` holds:
///
/// - `ct`: a child of the task's [`CancellationToken`] when the layer runs
///   the call for a task (so `tasks/cancel` reaches it), else a fresh token;
/// - `extensions`: the layer's and the transport's values, each under its
///   own type: [`CancellationToken`] and [`TaskHandle`](crate::TaskHandle)
///   on every run of a task (or of a call that may become one),
///   [`TaskResumeContext`] and [`TaskId`] on a resume, [`TaskOwner`], the
///   transport's [`Peer`](crate::Peer); and the whole request extensions
///   as an `http::Extensions`. rmcp's `Extensions` extractor reads them
///   (its `Extension<T>` refuses a call without a `T`);
/// - `meta`: the request's `_meta`;
/// - `peer`: a session on the protocol version the call names in `_meta`;
///   without one, 2026-07-28 for a task's run (which may then answer
///   `input_required`) and 2025-11-25 otherwise. `initialize` needs no
///   handshake before it: every call stands alone, as the layer's are.
///   Requests the handler sends through it (an elicitation during a
///   2025-11-25 call) reach the client through the transport's
///   [`Peer`](crate::Peer) when the call has one, and fail with rmcp's
///   transport-closed error when it has none (a task's run, a bare
///   service); rmcp itself refuses them on 2026-07-28, whose calls ask with
///   `InputRequiredResult` instead.
///
/// JSON-RPC notifications (no id) are not handed to the handler: rmcp
/// offers no way to build their context outside its own loop.
///
/// ```
/// use mcp_task_layer::{MemoryStore, RmcpService, TaskLayer};
/// use rmcp::ServerHandler;
/// use tower::ServiceBuilder;
///
/// #[derive(Clone)]
/// struct MyServer;
/// impl ServerHandler for MyServer {}
///
/// let service = ServiceBuilder::new()
///     .layer(TaskLayer::new(MemoryStore::new()))
///     .service(RmcpService::new(MyServer));
/// # let _ = service;
/// ```
pub struct RmcpService<H> {
    handler: Arc<H>,
    closed: Arc<OnceLock<ClosedPeers>>,
}

/// The peers of calls with no way to the client, made on the first call
/// (rmcp needs a runtime to make one).
struct ClosedPeers {
    legacy: Peer<RoleServer>,
    modern: Peer<RoleServer>,
}

impl<H: ServerHandler> RmcpService<H> {
    /// Serve `handler`.
    pub fn new(handler: H) -> Self {
        Self::from_arc(Arc::new(handler))
    }

    /// Serve a shared handler.
    pub fn from_arc(handler: Arc<H>) -> Self {
        RmcpService {
            handler,
            closed: Arc::default(),
        }
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }
}

impl<H> Clone for RmcpService<H> {
    fn clone(&self) -> Self {
        RmcpService {
            handler: Arc::clone(&self.handler),
            closed: Arc::clone(&self.closed),
        }
    }
}

impl<H> fmt::Debug for RmcpService<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RmcpService")
            .field("handler", &std::any::type_name::<H>())
            .finish_non_exhaustive()
    }
}

impl<H: ServerHandler> tower_service::Service<JsonRpcRequest> for RmcpService<H> {
    type Response = JsonRpcResponse;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<JsonRpcResponse, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: JsonRpcRequest) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.answer(req).await) })
    }
}

impl<H: ServerHandler> RmcpService<H> {
    async fn answer(self, req: JsonRpcRequest) -> JsonRpcResponse {
        let JsonRpcRequest {
            id,
            method,
            params,
            extensions,
        } = req;
        let Some(request_id) = id.as_ref().map(rmcp_id) else {
            // A notification: nobody reads the answer.
            return JsonRpcResponse::error(None, JsonRpcError::method_not_found(&method));
        };
        let mut request = match client_request(method, params) {
            Ok(request) => request,
            Err(e) => return JsonRpcResponse::error(id, e),
        };
        // rmcp names only the method in its `-32601`; ours says what it is.
        let method = request.method().to_owned();
        let meta = std::mem::take(request.get_meta_mut());
        let task_token = extensions.get::<CancellationToken>().cloned();
        // The layer hands a token to every run that is, or may become, a task.
        let task_run = task_token.is_some();
        let version = meta.protocol_version().unwrap_or(if task_run {
            ProtocolVersion::V_2026_07_28
        } else {
            ProtocolVersion::V_2025_11_25
        });
        let client = extensions.get::<crate::Peer>().cloned();

        // Kept alive until the handler returns: its loop carries the
        // handler's messages to the client.
        let mut forwarding = None;
        let rmcp_peer = if matches!(request, ClientRequest::InitializeRequest(_)) {
            // rmcp's `initialize` records the client on the peer: its own.
            peer::closed(version)
        } else if let (Some(client), false) = (client, task_run) {
            let running = forwarding.insert(peer::forwarding(version, client));
            running.peer().clone()
        } else {
            self.closed_peer(&version)
        };

        let mut context = RequestContext::new(request_id, rmcp_peer);
        context.ct = task_token
            .as_ref()
            .map_or_else(CancellationToken::new, CancellationToken::child_token);
        context.meta = meta;
        copy_extensions(&extensions, &mut context.extensions);
        context.extensions.insert(extensions);

        let answer: Result<_, ErrorData> = self.handler.handle_request(request, context).await;
        drop(forwarding);
        response(id, answer.map_err(|e| method_not_found(e, &method)))
    }

    /// The shared closed peer of `version`'s era.
    fn closed_peer(&self, version: &ProtocolVersion) -> Peer<RoleServer> {
        let peers = self.closed.get_or_init(|| ClosedPeers {
            legacy: peer::closed(ProtocolVersion::V_2025_11_25),
            modern: peer::closed(ProtocolVersion::V_2026_07_28),
        });
        if version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() {
            peers.modern.clone()
        } else {
            peers.legacy.clone()
        }
    }
}

/// The values the layer and the transport put in a request's extensions,
/// each under its own type in rmcp's.
fn copy_extensions(from: &http::Extensions, to: &mut rmcp::model::Extensions) {
    fn copy<T: Clone + Send + Sync + 'static>(
        from: &http::Extensions,
        to: &mut rmcp::model::Extensions,
    ) {
        if let Some(value) = from.get::<T>() {
            to.insert(value.clone());
        }
    }
    copy::<TaskResumeContext>(from, to);
    copy::<CancellationToken>(from, to);
    copy::<TaskId>(from, to);
    copy::<TaskOwner>(from, to);
    copy::<TaskHandle>(from, to);
    copy::<crate::Peer>(from, to);
}
