//! The server→client peer of one request; its waiting requests live in
//! the endpoint-wide [`PendingRequests`] (shared with the stdio transport).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::debug;

use super::response::respond_without_id;
use crate::peer::ClientPeer;
use crate::pending::{outgoing_message, stream_closed, ClientAnswer, PendingRequests};
use crate::store::BoxFuture;

/// How many server→client messages one response stream buffers before
/// [`ClientPeer::request`] waits and [`ClientPeer::notify`] drops.
pub(super) const OUTGOING_CAPACITY: usize = 64;

/// The [`ClientPeer`] of one request: messages go to that request's
/// response stream.
pub(super) struct StreamPeer {
    pub(super) outgoing: mpsc::Sender<Value>,
    pub(super) pending: Arc<PendingRequests>,
}

impl ClientPeer for StreamPeer {
    fn request(&self, method: String, params: Value) -> BoxFuture<'static, ClientAnswer> {
        let outgoing = self.outgoing.clone();
        let pending = Arc::clone(&self.pending);
        Box::pin(async move {
            let mut waiting = pending.register()?;
            let message = outgoing_message(Some(waiting.id().to_owned()), method, params);
            if outgoing.send(message).await.is_err() {
                return Err(stream_closed());
            }
            tokio::select! {
                biased;
                answer = waiting.answered() => answer,
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

/// Hand the client's answer to the request waiting for it: 202, or 400 when
/// no request waits for it.
pub(super) fn accept_answer(pending: &PendingRequests, value: Value) -> Response {
    match pending.accept(value) {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(error) => respond_without_id(StatusCode::BAD_REQUEST, error),
    }
}
