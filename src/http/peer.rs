//! The server→client peer of one request; its waiting requests live in
//! the endpoint-wide [`PendingRequests`] (shared with the stdio transport).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::Value;
use tokio::sync::{mpsc, Notify};
use tracing::debug;

use super::answer::{other, Response};
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
///
/// The channel to the stream is made when the peer first sends (most
/// requests never do): until then the response waits on
/// [`opened`](Self::opened) next to the call, and a request that ends
/// without a message costs no channel.
pub(super) struct StreamPeer {
    pending: Arc<PendingRequests>,
    state: Mutex<Channel>,
    opened: Notify,
}

enum Channel {
    /// Nothing sent yet.
    Unopened,
    /// The response has not taken `messages` yet when it is `Some`.
    Open {
        outgoing: mpsc::Sender<Value>,
        messages: Option<mpsc::Receiver<Value>>,
    },
    /// The response has ended: nothing more can be sent.
    Ended,
}

impl StreamPeer {
    pub(super) fn new(pending: Arc<PendingRequests>) -> Self {
        StreamPeer {
            pending,
            state: Mutex::new(Channel::Unopened),
            opened: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, Channel> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sender of the stream's channel, made on first use; `None` once
    /// the response has ended.
    fn outgoing(&self) -> Option<mpsc::Sender<Value>> {
        let mut state = self.state();
        match &*state {
            Channel::Open { outgoing, .. } => Some(outgoing.clone()),
            Channel::Ended => None,
            Channel::Unopened => {
                let (outgoing, messages) = mpsc::channel(OUTGOING_CAPACITY);
                *state = Channel::Open {
                    outgoing: outgoing.clone(),
                    messages: Some(messages),
                };
                drop(state);
                // A permit is kept if the response is not waiting yet.
                self.opened.notify_one();
                Some(outgoing)
            }
        }
    }

    /// Resolves once the peer has sent something (or asked whether the
    /// stream is closed): then [`messages`](Self::messages) is `Some`.
    pub(super) async fn opened(&self) {
        self.opened.notified().await;
    }

    /// The stream's channel, for the response to read, once opened.
    pub(super) fn messages(&self) -> Option<mpsc::Receiver<Value>> {
        match &mut *self.state() {
            Channel::Open { messages, .. } => messages.take(),
            Channel::Unopened | Channel::Ended => None,
        }
    }

    /// The response is written: nothing more can be sent. Returns what the
    /// peer queued and the response has not taken, in order.
    pub(super) fn end(&self) -> Option<mpsc::Receiver<Value>> {
        match std::mem::replace(&mut *self.state(), Channel::Ended) {
            Channel::Open { messages, .. } => messages,
            Channel::Unopened | Channel::Ended => None,
        }
    }
}

impl ClientPeer for StreamPeer {
    fn request(&self, method: String, params: Value) -> BoxFuture<'static, ClientAnswer> {
        let outgoing = self.outgoing();
        let pending = Arc::clone(&self.pending);
        Box::pin(async move {
            let outgoing = outgoing.ok_or_else(stream_closed)?;
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
        let Some(outgoing) = self.outgoing() else {
            debug!("dropped a notification to the client: the response stream has ended");
            return Box::pin(std::future::ready(()));
        };
        // Queued at once when there is room, so notifications keep the order
        // they were sent in. A full queue waits for the client to read, not
        // drops: the last message of a stream (a task's final state) must
        // arrive; the wait ends when the stream does.
        let message = match outgoing.try_send(outgoing_message(None, method, params)) {
            Ok(()) => return Box::pin(std::future::ready(())),
            Err(mpsc::error::TrySendError::Full(message)) => message,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                debug!("dropped a notification to the client: the response stream has ended");
                return Box::pin(std::future::ready(()));
            }
        };
        Box::pin(async move {
            if outgoing.send(message).await.is_err() {
                debug!("dropped a notification to the client: the response stream has ended");
            }
        })
    }

    fn closed(&self) -> BoxFuture<'static, ()> {
        // Watching for the end opens the channel: its closing is the signal.
        let outgoing = self.outgoing();
        Box::pin(async move {
            if let Some(outgoing) = outgoing {
                outgoing.closed().await;
            }
        })
    }
}

/// Hand the client's answer to the request waiting for it: 202, or 400 when
/// no request waits for it.
pub(super) fn accept_answer(pending: &PendingRequests, value: Value) -> Response {
    match pending.accept(value) {
        Ok(()) => other(StatusCode::ACCEPTED.into_response()),
        Err(error) => respond_without_id(StatusCode::BAD_REQUEST, error),
    }
}
