//! The [`ClientPeer`] of the stream: server→client messages go to the one
//! output, the client's answers come back on the input.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::peer::ClientPeer;
use crate::pending::{outgoing_message, stream_closed, ClientAnswer, PendingRequests};
use crate::store::BoxFuture;

/// Every request of the stream shares one peer.
pub(super) struct StdioPeer {
    pub(super) outgoing: mpsc::Sender<Vec<u8>>,
    pub(super) pending: Arc<PendingRequests>,
    /// Fires when the input has ended (no answer can come back) or the
    /// output is broken.
    pub(super) closed: CancellationToken,
    /// The capabilities of the stream's 2025-11-25 `initialize`, once read.
    pub(super) declared: Arc<OnceLock<Value>>,
}

impl ClientPeer for StdioPeer {
    fn request(&self, method: String, params: Value) -> BoxFuture<'static, ClientAnswer> {
        let outgoing = self.outgoing.clone();
        let pending = Arc::clone(&self.pending);
        let closed = self.closed.clone();
        Box::pin(async move {
            if closed.is_cancelled() {
                return Err(stream_closed());
            }
            let mut waiting = pending.register()?;
            let message = outgoing_message(Some(waiting.id().to_owned()), method, params);
            let sent = tokio::select! {
                biased;
                () = closed.cancelled() => false,
                sent = outgoing.send(encode(&message)) => sent.is_ok(),
            };
            if !sent {
                return Err(stream_closed());
            }
            tokio::select! {
                biased;
                answer = waiting.answered() => answer,
                () = closed.cancelled() => Err(stream_closed()),
            }
        })
    }

    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()> {
        // Queued at once, so notifications keep the order they were sent in.
        let message = encode(&outgoing_message(None, method, params));
        if let Err(e) = self.outgoing.try_send(message) {
            let reason = match e {
                mpsc::error::TrySendError::Full(_) => "the client reads too slowly",
                mpsc::error::TrySendError::Closed(_) => "the output has closed",
            };
            debug!(reason, "dropped a notification to the client");
        }
        Box::pin(std::future::ready(()))
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        let closed = self.closed.clone();
        Box::pin(async move { closed.cancelled().await })
    }

    fn outlives_request(&self) -> bool {
        true
    }

    fn cancels_by_dropping(&self) -> bool {
        true
    }

    fn declared_capabilities(&self) -> Option<Value> {
        self.declared.get().cloned()
    }
}

/// Compact JSON: never a line break inside.
pub(super) fn encode(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec())
}
