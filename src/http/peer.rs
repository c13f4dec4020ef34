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
/// [`ClientPeer::request`] and [`ClientPeer::notify`] wait for the client
/// to read.
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
        // Queued at once when there is room, so notifications keep the order
        // they were sent in. A full queue waits for the client to read, not
        // drops: the last message of a stream (a task's final state) must
        // arrive; the wait ends when the stream does.
        let message = match self
            .outgoing
            .try_send(outgoing_message(None, method, params))
        {
            Ok(()) => return Box::pin(std::future::ready(())),
            Err(mpsc::error::TrySendError::Full(message)) => message,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                debug!("dropped a notification to the client: the response stream has ended");
                return Box::pin(std::future::ready(()));
            }
        };
        let outgoing = self.outgoing.clone();
        Box::pin(async move {
            if outgoing.send(message).await.is_err() {
                debug!("dropped a notification to the client: the response stream has ended");
            }
        })
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
