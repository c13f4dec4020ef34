//! What every transport with a [`Peer`](crate::Peer) shares: the server→client
//! requests waiting for the client's answer, by id, and the shapes of the
//! messages that go out and come back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tracing::debug;

use crate::hex::push_hex;
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};

/// The client's answer to a server→client request: its `result` or its
/// `error`.
pub(crate) type ClientAnswer = Result<Value, JsonRpcError>;

/// Server→client requests waiting for the client's answer, by id.
#[derive(Default)]
pub(crate) struct PendingRequests {
    waiting: Mutex<HashMap<String, oneshot::Sender<ClientAnswer>>>,
}

impl PendingRequests {
    fn map(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<ClientAnswer>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register a new server→client request under a fresh id; the caller
    /// sends the request (built with [`outgoing_message`]) and then waits on
    /// [`Waiting::answered`].
    pub(crate) fn register(self: &Arc<Self>) -> Result<Waiting, JsonRpcError> {
        let id = new_request_id()
            .map_err(|e| JsonRpcError::internal(format!("cannot draw a request id: {e}")))?;
        let (answer, answered) = oneshot::channel();
        self.map().insert(id.clone(), answer);
        Ok(Waiting {
            answered,
            forget: ForgetOnDrop {
                pending: Arc::clone(self),
                id,
            },
        })
    }

    /// Hand the client's answer (a JSON-RPC response) to the request waiting
    /// for it; `-32600` when it is malformed or no request waits for it.
    pub(crate) fn accept(&self, value: Value) -> Result<(), JsonRpcError> {
        let answer = serde_json::from_value::<JsonRpcResponse>(value).map_err(|e| {
            JsonRpcError::invalid_request(format!("malformed JSON-RPC response: {e}"))
        })?;
        let waiting = match &answer.id {
            Some(RequestId::String(id)) => self.map().remove(id),
            _ => None,
        };
        let Some(waiting) = waiting else {
            debug!(id = ?answer.id, "an answer to no pending request");
            return Err(JsonRpcError::invalid_request(
                "no pending server request has this id",
            ));
        };
        // If the request gave up at this very moment, the answer is dropped.
        let _ = waiting.send(answer.into_payload());
        Ok(())
    }

    /// Forget every waiting request: each resolves to a `-32603` error (the
    /// client can no longer answer).
    #[cfg(feature = "stdio")]
    pub(crate) fn close_all(&self) {
        self.map().clear();
    }
}

/// One registered server→client request; forgotten when dropped.
pub(crate) struct Waiting {
    answered: oneshot::Receiver<ClientAnswer>,
    forget: ForgetOnDrop,
}

impl Waiting {
    /// The id the request must be sent with.
    pub(crate) fn id(&self) -> &str {
        &self.forget.id
    }

    /// The client's answer; `-32603` if the request was forgotten first.
    pub(crate) async fn answered(&mut self) -> ClientAnswer {
        (&mut self.answered)
            .await
            .unwrap_or_else(|_| Err(stream_closed()))
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

/// The error of a server→client request whose stream to the client closed
/// before the client answered.
pub(crate) fn stream_closed() -> JsonRpcError {
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

/// A server→client request (with `id`) or notification (without).
pub(crate) fn outgoing_message(id: Option<String>, method: String, params: Value) -> Value {
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

/// One message a transport read from the client.
pub(crate) enum Incoming {
    /// A request or notification for the service.
    Request(JsonRpcRequest),
    /// The client's answer to a server→client request.
    Answer(Value),
    /// Not a message the server can take: the error to answer with (its id
    /// `null` unless the message's id could be read).
    Refused(JsonRpcResponse),
}

/// Read one message: the common request straight into a
/// [`JsonRpcRequest`] ([`JsonRpcRequest::decode_plain`]), anything else
/// through a `Value`, which gives the precise error.
pub(crate) fn read_incoming(bytes: &Bytes) -> Incoming {
    if let Some(request) = JsonRpcRequest::decode_plain(bytes) {
        return Incoming::Request(request);
    }
    // Invalid UTF-8 is not JSON: serde rejects it like any other syntax error.
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(value) => value,
        Err(e) => {
            return Incoming::Refused(JsonRpcResponse::error(None, JsonRpcError::parse_error(e)))
        }
    };
    if is_response(&value) {
        return Incoming::Answer(value);
    }
    let readable = readable_id(&value);
    match JsonRpcRequest::from_value(value) {
        Ok(request) => Incoming::Request(request),
        Err(error) => Incoming::Refused(JsonRpcResponse::error(readable, error)),
    }
}

/// A JSON-RPC response rather than a request: `result` or `error`, no
/// `method`.
fn is_response(value: &Value) -> bool {
    value.as_object().is_some_and(|o| {
        !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
    })
}

/// The `id` of a message that is not a valid request, if it is usable.
fn readable_id(value: &Value) -> Option<RequestId> {
    match value.get("id")? {
        Value::String(s) => Some(RequestId::String(s.clone())),
        Value::Number(n) => n.as_i64().map(RequestId::Number),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_usable_ids_are_read() {
        assert_eq!(readable_id(&json!({"id": 7})), Some(RequestId::Number(7)));
        assert_eq!(readable_id(&json!({"id": "x"})), Some(RequestId::from("x")));
        assert_eq!(readable_id(&json!({"id": 1.5})), None);
        assert_eq!(readable_id(&json!({"id": null})), None);
        assert_eq!(readable_id(&json!([{"id": 1}])), None);
    }

    #[cfg(feature = "stdio")]
    #[tokio::test]
    async fn an_answer_reaches_its_request_once_and_close_all_ends_the_rest() {
        let pending = Arc::new(PendingRequests::default());
        let mut first = pending.register().unwrap();
        let mut second = pending.register().unwrap();
        let id = first.id().to_owned();
        assert!(id.starts_with("srv-") && id.len() == 36);
        pending
            .accept(json!({"jsonrpc": "2.0", "id": id, "result": {"ok": true}}))
            .unwrap();
        assert_eq!(first.answered().await.unwrap(), json!({"ok": true}));
        let again = json!({"jsonrpc": "2.0", "id": id, "result": {}});
        assert_eq!(pending.accept(again).unwrap_err().code, -32600);
        pending.close_all();
        assert_eq!(second.answered().await.unwrap_err().code, -32603);
    }
}
