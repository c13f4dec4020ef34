//! One live connection to the upstream MCP server: request ids and the
//! answers waited for, the upstream's own requests and notifications handed
//! to an [`InboundSink`], and the end of the connection, which fails every
//! request still waiting.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::outbox::Outbox;
use crate::jsonrpc::JsonRpcError;

/// A message from the upstream that is not an answer to one of ours.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A server→client request (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`, `ping`): it must be answered with [`Link::respond`].
    Request {
        id: Value,
        method: String,
        params: Value,
        /// The gateway's request whose answer stream carried it (Streamable
        /// HTTP); `None` over stdio, where nothing says.
        related: Option<u64>,
    },
    /// A notification (`notifications/progress`, `.../list_changed`, ...).
    Notification {
        method: String,
        params: Value,
        /// As for requests.
        related: Option<u64>,
    },
}

/// Where a link hands what the upstream sends on its own.
pub(crate) trait InboundSink: Send + Sync + 'static {
    /// One message from the upstream on `link`.
    fn inbound(&self, link: &Arc<Link>, message: Inbound);

    /// Link `serial` is over (after every request waiting on it failed).
    fn link_closed(&self, serial: u64) {
        let _ = serial;
    }

    /// The upstream's tools changed, and the gateway has listed them anew.
    fn tools_changed(&self) {}
}

/// An answer of the upstream: its `result` as it was written (parsed only
/// by whoever needs a value), or its error.
pub(crate) type Answer = Result<ResultText, JsonRpcError>;

/// The text of one JSON value the upstream sent, checked when it arrived
/// (by serde, or by the scan as serde checks it), without line breaks.
#[derive(Debug)]
pub(crate) struct ResultText(String);

impl ResultText {
    /// `text`, which the caller checked: as it is, or written again
    /// compact if it has line breaks (between tokens: strings escape
    /// them), so that it fits a line of stdio or an SSE `data:` line.
    fn checked(text: &str) -> Self {
        ResultText(crate::json::compacted(text).unwrap_or_else(|| text.to_owned()))
    }

    /// Text the gateway made of checked text, valid by construction.
    pub(crate) fn trusted(text: String) -> Self {
        ResultText(text)
    }

    /// The text.
    pub(crate) fn get(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

/// Who waits for the answer to one request, and the token that tells the
/// stream carrying that answer (Streamable HTTP) that it is no longer
/// wanted.
struct Waiter {
    tx: oneshot::Sender<Answer>,
    /// Made when a stream asks for it (Streamable HTTP), not for every
    /// request.
    abandoned: Option<CancellationToken>,
}

/// Forgets its request unless disarmed: a caller that drops the wait for an
/// answer leaves no entry behind, and no stream open for it.
struct ForgetOnDrop<'a> {
    link: &'a Link,
    id: u64,
    armed: bool,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.link.forget(self.id);
        }
    }
}

/// One message of the upstream, its `result` kept as text.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<Value>,
}

/// One connection: its writer, the requests waiting for an answer, and
/// whether it is over.
pub(crate) struct Link {
    /// Which connection of the upstream this is (1 for the first, one more
    /// for each restart).
    pub(crate) serial: u64,
    /// Each message of the upstream's says which of our requests it came
    /// with, if any (Streamable HTTP: the answer stream it came on); over
    /// stdio nothing does.
    pub(crate) says_request: bool,
    out: Outbox,
    waiting: Mutex<HashMap<u64, Waiter, crate::hashing::Own>>,
    next_id: AtomicU64,
    closed: CancellationToken,
    why: Mutex<Option<String>>,
    /// A call on it ended unanswered: its handler may still ask.
    tainted: AtomicBool,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("serial", &self.serial)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// A link whose messages go to `out`, one JSON text each (stdio).
    pub(crate) fn new(serial: u64, out: mpsc::Sender<Vec<u8>>) -> Arc<Self> {
        Self::make(serial, out, false)
    }

    /// A link whose upstream's messages say which request they came with
    /// (Streamable HTTP).
    pub(crate) fn says_request(serial: u64, out: mpsc::Sender<Vec<u8>>) -> Arc<Self> {
        Self::make(serial, out, true)
    }

    fn make(serial: u64, out: mpsc::Sender<Vec<u8>>, says_request: bool) -> Arc<Self> {
        Arc::new(Link {
            serial,
            says_request,
            out: Outbox::new(out),
            waiting: Mutex::default(),
            next_id: AtomicU64::new(1),
            closed: CancellationToken::new(),
            why: Mutex::default(),
            tainted: AtomicBool::new(false),
        })
    }

    /// A call on this connection ended without its answer: its handler
    /// may still run and ask, so a question that names no call is never
    /// taken for another call's.
    pub(crate) fn taint(&self) {
        self.tainted.store(true, Ordering::Release);
    }

    /// Whether a call on this connection ended without its answer.
    pub(crate) fn is_tainted(&self) -> bool {
        self.tainted.load(Ordering::Acquire)
    }

    /// A fresh request id on this link.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Send request `id` (from [`next_id`](Self::next_id)) and wait for its
    /// answer: the `result`, the upstream's JSON-RPC error, or an error
    /// saying the connection ended first.
    pub(crate) async fn request_with_id(&self, id: u64, method: &str, params: Value) -> Answer {
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.request_text(id, message.to_string()).await
    }

    /// [`request_with_id`](Self::request_with_id) of a request written
    /// already: `message` must be request `id`.
    pub(crate) async fn request_text(&self, id: u64, message: String) -> Answer {
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            if self.closed.is_cancelled() {
                return Err(self.gone());
            }
            let abandoned = None;
            waiting.insert(id, Waiter { tx, abandoned });
        }
        let mut forget = ForgetOnDrop {
            link: self,
            id,
            armed: true,
        };
        if !self.out.send(message.into_bytes()).await {
            return Err(self.gone());
        }
        let answer = rx.await;
        // Answered (or failed with the link): the entry is gone already.
        forget.armed = false;
        match answer {
            Ok(answer) => answer,
            Err(_) => Err(self.gone()),
        }
    }

    /// Send a request with a fresh id and wait for its answer, as a value.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Result<Value, JsonRpcError> {
        let raw = self.request_with_id(self.next_id(), method, params).await?;
        serde_json::from_str(raw.get())
            .map_err(|e| JsonRpcError::internal(format!("the upstream's {method} result: {e}")))
    }

    /// Whether request `id` still waits for its answer.
    pub(crate) fn waits_for(&self, id: u64) -> bool {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&id)
    }

    /// Stop waiting for request `id` (its caller went away): a stream still
    /// open for its answer is told to end.
    pub(crate) fn forget(&self, id: u64) {
        let gone = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        if let Some(token) = gone.and_then(|w| w.abandoned) {
            token.cancel();
        }
    }

    /// Fires when request `id`'s caller stops waiting for its answer (not
    /// when the answer comes); `None` if nobody waits for it now.
    pub(crate) fn abandoned(&self, id: u64) -> Option<CancellationToken> {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&id)
            .map(|w| {
                w.abandoned
                    .get_or_insert_with(CancellationToken::new)
                    .clone()
            })
    }

    /// Answer the upstream's request `id`: never dropped while the
    /// connection lives (the upstream waits for it).
    pub(crate) fn respond(&self, id: Value, answer: Result<Value, JsonRpcError>) {
        let message = match answer {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        };
        self.out
            .must(message.to_string().into_bytes(), &self.closed);
    }

    /// Send a notification (a cancel, `initialized`): never dropped while
    /// the connection lives.
    pub(crate) fn notify(&self, method: &str, params: Value) {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.out
            .must(message.to_string().into_bytes(), &self.closed);
    }

    /// Send a notification that carries no data (a change the upstream
    /// asks about again): dropped if the connection's queue is full.
    pub(crate) fn hint(&self, method: &str, params: Value) {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.out.hint(message.to_string().into_bytes());
    }

    /// Whether the connection is over.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Completes when the connection is over.
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Why the connection ended, once it has.
    pub(crate) fn why(&self) -> String {
        self.why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "the upstream connection closed".to_owned())
    }

    /// The connection is over because of `why`: every request still waiting
    /// fails with it.
    pub(crate) fn close(&self, why: String) {
        let waiters: Vec<oneshot::Sender<Answer>> = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let mut slot = self.why.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.is_none() {
                *slot = Some(why);
            }
            self.closed.cancel();
            waiting.drain().map(|(_, w)| w.tx).collect()
        };
        let error = self.gone();
        for w in waiters {
            let _ = w.send(Err(error.clone()));
        }
    }

    fn gone(&self) -> JsonRpcError {
        JsonRpcError::internal(format!("the upstream is unavailable: {}", self.why()))
    }

    /// Who waits for the answer to request `id`, no longer waiting.
    fn waiter(&self, id: u64) -> Option<oneshot::Sender<Answer>> {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
            .map(|w| w.tx)
    }

    /// One message the upstream sent: an answer to one of ours goes to its
    /// waiter, anything else to `sink`. Malformed messages are dropped.
    pub(crate) fn deliver(self: &Arc<Self>, bytes: &[u8], sink: &dyn InboundSink) {
        self.deliver_related(bytes, sink, None);
    }

    /// [`deliver`](Self::deliver) a message that came on the answer stream
    /// of request `related`.
    pub(crate) fn deliver_related(
        self: &Arc<Self>,
        bytes: &[u8],
        sink: &dyn InboundSink,
        related: Option<u64>,
    ) {
        // The common message, an answer with a result, read by hand: its
        // result's text kept as it is, with no tree and no serde visitor.
        if let Some((id, result)) = crate::jsonrpc::scan_answer(bytes) {
            let waiter = self.waiter(id);
            let text = bytes.get(result).and_then(|b| std::str::from_utf8(b).ok());
            if let (Some(waiter), Some(text)) = (waiter, text) {
                // Checked by the scan as serde would check it.
                let _ = waiter.send(Ok(ResultText::checked(text)));
            }
            return;
        }
        let Ok(message) = serde_json::from_slice::<Envelope>(bytes) else {
            tracing::debug!("the upstream sent a line that is not a JSON-RPC message");
            return;
        };
        let params = message.params.unwrap_or(Value::Object(Map::new()));
        match (message.method, message.id) {
            (Some(method), Some(id)) => {
                sink.inbound(
                    self,
                    Inbound::Request {
                        id,
                        method,
                        params,
                        related,
                    },
                );
            }
            (Some(method), None) => {
                sink.inbound(
                    self,
                    Inbound::Notification {
                        method,
                        params,
                        related,
                    },
                );
            }
            (None, Some(id)) => {
                let Some(id) = id.as_u64() else { return };
                let Some(waiter) = self.waiter(id) else {
                    return;
                };
                let answer = match (message.result, message.error) {
                    (Some(result), _) => Ok(ResultText::checked(result.get())),
                    (None, Some(error)) => {
                        Err(serde_json::from_value(error).unwrap_or_else(|_| {
                            JsonRpcError::internal("the upstream sent a malformed error")
                        }))
                    }
                    (None, None) => Err(JsonRpcError::internal(
                        "the upstream sent an answer with neither result nor error",
                    )),
                };
                let _ = waiter.send(answer);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nobody;
    impl InboundSink for Nobody {
        fn inbound(&self, _: &Arc<Link>, _: Inbound) {}
    }

    /// An answer read by hand or by serde reaches its caller as text
    /// without line breaks (written again compact when it had some), so
    /// it fits one line of stdio or one SSE `data:` line.
    #[tokio::test]
    async fn answers_arrive_compact_whichever_way_they_were_read() {
        let (tx, mut rx) = mpsc::channel(8);
        let link = Link::new(1, tx);
        for (line, want) in [
            (
                &br#"{"jsonrpc":"2.0","id":ID,"result":{"a":[1, 2]}}"#[..],
                r#"{"a":[1, 2]}"#,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"a\":\r[1,\r\n2]}}",
                r#"{"a":[1,2]}"#,
            ),
            // Not read by hand (a member the scan does not know): serde.
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":ID,\"x\":0,\"result\":{\"a\":\r[1]}}",
                r#"{"a":[1]}"#,
            ),
        ] {
            let id = link.next_id();
            let asking = Arc::clone(&link);
            let call = tokio::spawn(async move { asking.request_text(id, "{}".into()).await });
            rx.recv().await.unwrap();
            let line = String::from_utf8_lossy(line).replace("ID", &id.to_string());
            link.deliver(line.as_bytes(), &Nobody);
            let answer = call.await.unwrap().unwrap();
            assert_eq!(answer.get(), want);
        }
    }

    /// A caller that stops waiting (its future dropped: a timed-out ping,
    /// a dropped subscribe) leaves no entry behind, and the stream of its
    /// answer is told to end; an answered request's stream is not.
    #[tokio::test]
    async fn a_dropped_wait_is_forgotten_and_abandons_its_stream_an_answer_does_not() {
        let (tx, mut rx) = mpsc::channel(8);
        let link = Link::new(1, tx);
        let id = link.next_id();
        let asking = Arc::clone(&link);
        let call = tokio::spawn(async move { asking.request_text(id, "{}".into()).await });
        rx.recv().await.unwrap();
        let abandoned = link.abandoned(id).expect("a waiter");
        call.abort();
        assert!(call.await.is_err());
        assert!(!link.waits_for(id), "no entry left");
        assert!(abandoned.is_cancelled());

        let id = link.next_id();
        let asking = Arc::clone(&link);
        let call = tokio::spawn(async move { asking.request_text(id, "{}".into()).await });
        rx.recv().await.unwrap();
        let answered = link.abandoned(id).expect("a waiter");
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        link.deliver(line.as_bytes(), &Nobody);
        assert!(call.await.unwrap().is_ok());
        assert!(!answered.is_cancelled());
    }
}
