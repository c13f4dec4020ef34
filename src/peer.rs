//! The way back to the client: server→client requests and notifications.
//!
//! The 2025-11-25 era has no `tasks/update`: a task that needs input sends
//! real JSON-RPC requests (`elicitation/create`, ...) to the client, usually
//! on the stream of an open `tasks/result` call, and the client answers them
//! with JSON-RPC responses. A transport that can carry such traffic puts a
//! [`Peer`] in the extensions of each request it hands to the service; the
//! layer uses it while that request is being answered.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::jsonrpc::JsonRpcError;
use crate::store::BoxFuture;

/// What a transport offers to send messages to the client.
pub trait ClientPeer: Send + Sync + 'static {
    /// Send a server→client request and wait for the client's answer: its
    /// `result`, or its JSON-RPC error. The transport chooses the request id.
    fn request(
        &self,
        method: String,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, JsonRpcError>>;

    /// Send a notification; best effort. The future may wait while the
    /// client reads slowly (a transport's backpressure) and resolves once
    /// the notification is queued or dropped: await it to keep the order
    /// of notifications, spawn it not to wait.
    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()>;

    /// Resolves when the client can no longer be reached (the stream
    /// closed). The default never resolves.
    fn closed(&self) -> BoxFuture<'static, ()> {
        Box::pin(std::future::pending())
    }

    /// Whether messages still reach the client after the request that
    /// carried this peer is answered (stdio: one stream for the whole
    /// connection), so that a service may keep the peer for notifications
    /// that belong to no request. The default says no (an HTTP response
    /// stream ends with its request).
    fn outlives_request(&self) -> bool {
        false
    }

    /// Whether the transport itself answers the client's
    /// `notifications/cancelled` for a request that carried this peer, by
    /// dropping that request's future (stdio), so that the service never
    /// sees the notification and need not watch for it. The default says
    /// no (over HTTP the notification comes on a request of its own).
    fn cancels_by_dropping(&self) -> bool {
        false
    }

    /// The `capabilities` the client declared in its 2025-11-25
    /// `initialize`, where the transport keeps the session (stdio: one
    /// stream, one client); `None` where it does not know them. A service
    /// that relays a server→client request checks them first: a client is
    /// never sent a request of a capability it did not declare.
    fn declared_capabilities(&self) -> Option<Value> {
        None
    }
}

/// A [`ClientPeer`] in request extensions.
#[derive(Clone)]
pub struct Peer(pub Arc<dyn ClientPeer>);

impl Peer {
    /// Wrap a peer.
    pub fn new(peer: impl ClientPeer) -> Self {
        Peer(Arc::new(peer))
    }
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Peer(..)")
    }
}

impl std::ops::Deref for Peer {
    type Target = dyn ClientPeer;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}
