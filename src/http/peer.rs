//! The server→client peer of one request, and the endpoint-wide map of
//! its requests waiting for the client's answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::response::respond_without_id;
use crate::hex::push_hex;
use crate::jsonrpc::{JsonRpcError, JsonRpcResponse, RequestId};
use crate::peer::ClientPeer;
use crate::store::BoxFuture;

/// How many server→client messages one response stream buffers before
/// [`ClientPeer::request`] and [`ClientPeer::notify`] wait for the client
/// to read.
pub(super) const OUTGOING_CAPACITY: usize = 64;

/// The client's answer to a server→client request: its `result` or its
/// `error`.
type ClientAnswer = Result<Value, JsonRpcError>;

/// Server→client requests waiting for the client's answer, by id.
#[derive(Default)]
pub(super) struct PendingRequests(Mutex<HashMap<String, oneshot::Sender<ClientAnswer>>>);

impl PendingRequests {
    fn map(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<ClientAnswer>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a pending request when its future ends, however it ends.
struct ForgetOnDrop {
    pending: Arc<PendingRequests>,
    id: String,
}

impl Drop for ForgetOnDrop {
    fn drop(&mut self) {
        self.pending.map().remove(&self.id);
    }
}

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
            let id = new_request_id()
                .map_err(|e| JsonRpcError::internal(format!("cannot draw a request id: {e}")))?;
            let (answer, answered) = oneshot::channel();
            pending.map().insert(id.clone(), answer);
            let _forget = ForgetOnDrop {
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

fn stream_closed() -> JsonRpcError {
    JsonRpcError::internal("the response stream to the client closed before it answered")
}

/// `"srv-"` and 128 bits from the operating system's CSPRNG, in hex.
fn new_request_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    let mut id = String::with_capacity(4 + 32);
    id.push_str("srv-");
    push_hex(&mut id, &bytes);
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
pub(super) fn is_response(value: &Value) -> bool {
    value.as_object().is_some_and(|o| {
        !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
    })
}

/// Hand the client's answer to the request waiting for it: 202, or 400 when
/// no request waits for it.
pub(super) fn accept_answer(pending: &PendingRequests, value: Value) -> Response {
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
