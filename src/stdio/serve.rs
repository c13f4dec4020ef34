//! One stream: read lines, dispatch each message, answer as calls finish,
//! and wind down at the end of the input.

use bytes::Bytes;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tower::{BoxError, ServiceExt};
use tower_service::Service;
use tracing::{debug, warn};

use super::lines::{Line, LineReader};
use super::peer::StdioPeer;
use super::writer::write_lines;
use crate::context::TaskOwner;
use crate::hashing::Chosen;
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, RequestId};
use crate::peer::Peer;
use crate::pending::{read_incoming, Incoming, PendingRequests};

/// How many outgoing messages wait for the writer before senders wait
/// (responses) or drop (notifications).
const OUTGOING_CAPACITY: usize = 256;

/// The settings of one stream.
pub(super) struct Settings {
    pub(super) line_limit: usize,
    pub(super) max_in_flight: usize,
    pub(super) drain_deadline: Duration,
    pub(super) owner: Option<TaskOwner>,
}

/// What one input line is.
enum Message {
    /// A request with an id.
    Request(JsonRpcRequest),
    /// A notification other than `notifications/cancelled`.
    Notification(JsonRpcRequest),
    /// `notifications/cancelled` for this request id.
    Cancel(RequestId),
    /// A response to a server→client request.
    Answer(Value),
    /// Not a usable message: the error response, already encoded.
    Refused(Vec<u8>),
    /// A message that gets no answer (an unreadable cancel, ...).
    Ignored,
}

/// The requests in flight, by id, so `notifications/cancelled` can stop them.
#[derive(Default)]
struct InFlight {
    calls: Mutex<HashMap<RequestId, (u64, AbortHandle), Chosen>>,
}

impl InFlight {
    fn remove(&self, id: &RequestId, serial: u64) {
        // One hash: a request with the same id that came since (a
        // client reusing ids) is put back.
        let mut calls = self.map();
        if let Some(entry) = calls.remove_entry(id) {
            if entry.1 .0 != serial {
                calls.insert(entry.0, entry.1);
            }
        }
    }

    fn cancel(&self, id: &RequestId) -> bool {
        match self.map().remove(id) {
            Some((_, handle)) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, (u64, AbortHandle), Chosen>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Serve `service` on one input/output pair until the input ends.
pub(super) async fn serve<S, R, W>(
    service: S,
    settings: Settings,
    input: R,
    output: W,
) -> io::Result<()>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (outgoing, queue) = mpsc::channel(OUTGOING_CAPACITY);
    let stop_writer = CancellationToken::new();
    let broken = CancellationToken::new();
    let writer = write_lines(output, queue, stop_writer.clone(), broken.clone());
    let pending = Arc::new(PendingRequests::default());
    let closed = broken.child_token();
    let declared = Arc::new(OnceLock::new());
    let bound = settings.max_in_flight.max(1);
    let peer = Peer::new(StdioPeer {
        outgoing: outgoing.clone(),
        pending: Arc::clone(&pending),
        closed: closed.clone(),
        declared: Arc::clone(&declared),
    });
    let mut stream = Stream {
        service,
        owner: settings.owner,
        outgoing,
        peer,
        pending: Arc::clone(&pending),
        in_flight: Arc::default(),
        calls: JoinSet::new(),
        permits: Arc::new(Semaphore::new(bound)),
        bound,
        at_eof: Vec::new(),
        serial: 0,
        declared,
    };
    let mut lines = LineReader::new(input, settings.line_limit);
    let run = async {
        let read = stream.read_all(&mut lines, &broken).await;

        // The input has ended: nothing more can be answered by the client.
        closed.cancel();
        pending.close_all();
        let drained = tokio::time::timeout(settings.drain_deadline, async {
            // Those that waited for a permit: the calls holding permits
            // while waiting for the client's answers have failed now.
            for request in std::mem::take(&mut stream.at_eof) {
                let permit = stream.acquire().await;
                stream.spawn(request, permit);
            }
            while stream.calls.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            warn!(
                left = stream.calls.len(),
                "requests still running at the shutdown deadline are dropped"
            );
            stream.calls.abort_all();
            while stream.calls.join_next().await.is_some() {}
        }
        stop_writer.cancel();
        read
    };
    let (read, written) = tokio::join!(run, writer);
    read.and(written)
}

/// The state of one stream while it reads.
struct Stream<S> {
    service: S,
    owner: Option<TaskOwner>,
    outgoing: mpsc::Sender<Vec<u8>>,
    peer: Peer,
    pending: Arc<PendingRequests>,
    in_flight: Arc<InFlight>,
    calls: JoinSet<()>,
    permits: Arc<Semaphore>,
    /// How many requests run at once.
    bound: usize,
    /// Requests read before the end of the input that waited for a permit.
    at_eof: Vec<JsonRpcRequest>,
    serial: u64,
    /// What the stream's 2025-11-25 `initialize` declared (its peer says).
    declared: Arc<OnceLock<Value>>,
}

impl<S> Stream<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    /// Read and dispatch until the input ends or the output breaks.
    async fn read_all<R: AsyncBufRead + Unpin>(
        &mut self,
        lines: &mut LineReader<R>,
        broken: &CancellationToken,
    ) -> io::Result<()> {
        // A request read while every permit was taken, waiting for one.
        let mut parked: Option<Message> = None;
        // Made once: a wait made anew on each turn registers and
        // unregisters itself with the token every message.
        let broken = broken.cancelled();
        tokio::pin!(broken);
        loop {
            while self.calls.try_join_next().is_some() {}
            let message = match parked.take() {
                Some(message) => message,
                None => tokio::select! {
                    biased;
                    () = &mut broken => return Ok(()),
                    line = lines.next() => match line? {
                        Line::Eof => return Ok(()),
                        line => self.classify(line),
                    },
                },
            };
            let request = match self.dispatch(message).await {
                Some(request) => request,
                None => continue,
            };
            // At the bound: keep reading answers and cancellations (they may
            // be what frees a permit). The next request waits with this one;
            // past it a request is refused at once and a notification
            // dropped, so the reading never stops for a permit: a call that
            // holds one may be waiting for an answer behind them.
            let permit = loop {
                tokio::select! {
                    biased;
                    permit = self.acquire() => break permit,
                    () = &mut broken => return Ok(()),
                    line = lines.next() => match line? {
                        Line::Eof => {
                            // Started once the client's pending questions
                            // have failed (`serve`), not waited for here.
                            self.at_eof.push(request);
                            if let Some(message) = parked.take() {
                                let next = self.dispatch(message).await;
                                self.at_eof.extend(next);
                            }
                            return Ok(());
                        }
                        line => match self.classify(line) {
                            m @ (Message::Request(_) | Message::Notification(_))
                                if parked.is_none() =>
                            {
                                parked = Some(m);
                            }
                            Message::Request(request) => self.refuse_busy(request).await,
                            Message::Notification(n) => {
                                warn!(method = %n.method, "a notification past the in-flight bound; dropped");
                            }
                            other => {
                                let _ = self.dispatch(other).await;
                            }
                        },
                    },
                }
            };
            self.spawn(request, permit);
        }
    }

    /// Answer a request past the in-flight bound and the one waiting.
    async fn refuse_busy(&self, request: JsonRpcRequest) {
        let error = JsonRpcError::internal(format!(
            "too many requests in flight on this stream (at most {} run, one waits): \
             send it again once one has been answered",
            self.bound
        ));
        let response = JsonRpcResponse::error(request.id, error);
        let _ = self.outgoing.send(response.to_vec()).await;
    }

    async fn acquire(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .unwrap_or_else(|_| unreachable!("the semaphore is never closed"))
    }

    /// Handle what needs no permit; return the request or notification
    /// that does.
    async fn dispatch(&mut self, message: Message) -> Option<JsonRpcRequest> {
        match message {
            Message::Request(request) | Message::Notification(request) => return Some(request),
            Message::Cancel(id) => {
                let cancelled = self.in_flight.cancel(&id);
                debug!(%id, cancelled, "notifications/cancelled");
            }
            Message::Answer(value) => {
                if let Err(error) = self.pending.accept(value) {
                    debug!(%error, "ignored an answer from the client");
                }
            }
            Message::Refused(response) => {
                let _ = self.outgoing.send(response).await;
            }
            Message::Ignored => {}
        }
        None
    }

    fn classify(&self, line: Line) -> Message {
        let bytes = match line {
            Line::Text(bytes) => bytes,
            Line::TooLong => {
                let error = JsonRpcError::invalid_request("the line exceeds the size limit");
                return Message::Refused(JsonRpcResponse::error(None, error).to_vec());
            }
            Line::Eof => return Message::Ignored,
        };
        let mut request = match read_incoming(&Bytes::from(bytes)) {
            Incoming::Request(request) => request,
            Incoming::Answer(value) => return Message::Answer(value),
            Incoming::Refused(response) => return Message::Refused(response.to_vec()),
        };
        if request.id.is_none() && request.method == "notifications/cancelled" {
            let id = request
                .params
                .as_ref()
                .and_then(|p| match p.get("requestId")? {
                    Value::String(s) => Some(RequestId::String(s.clone())),
                    Value::Number(n) => n.as_i64().map(RequestId::Number),
                    _ => None,
                });
            return id.map_or(Message::Ignored, Message::Cancel);
        }
        if let Some(owner) = &self.owner {
            request.extensions.insert(owner.clone());
        }
        if request.id.is_none() {
            return Message::Notification(request);
        }
        if request.method == "initialize" {
            // The first one holds (a second is the service's to refuse).
            let caps = request
                .params
                .as_ref()
                .and_then(|p| p.get("capabilities"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default()));
            let _ = self.declared.set(caps);
        }
        request.extensions.insert(self.peer.clone());
        Message::Request(request)
    }

    /// Run one request; its response is queued when it finishes, unless it
    /// was cancelled first. A notification's answer is dropped.
    fn spawn(&mut self, request: JsonRpcRequest, permit: OwnedSemaphorePermit) {
        let Some(id) = request.id.clone() else {
            let call = self.service.clone().oneshot(request);
            self.calls.spawn(async move {
                if let Err(e) = call.await {
                    let e: BoxError = e.into();
                    warn!(error = %e, "the MCP service failed on a notification");
                }
                drop(permit);
            });
            return;
        };
        self.serial += 1;
        let serial = self.serial;
        let call = self.service.clone().oneshot(request);
        let outgoing = self.outgoing.clone();
        let in_flight = Arc::clone(&self.in_flight);
        let key = id.clone();
        // Held while spawning, so the call cannot remove itself before it
        // is registered.
        let mut calls = self.in_flight.map();
        let handle = self.calls.spawn(async move {
            let response = match call.await {
                Ok(mut response) => {
                    response.id = Some(id.clone());
                    response
                }
                Err(e) => {
                    let e: BoxError = e.into();
                    warn!(error = %e, "the MCP service failed");
                    let error = JsonRpcError::internal("the server failed to handle the request");
                    JsonRpcResponse::error(Some(id.clone()), error)
                }
            };
            in_flight.remove(&id, serial);
            drop(permit);
            let _ = outgoing.send(response.to_vec()).await;
        });
        calls.insert(key, (serial, handle));
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// Answers `{"ms": N}` after N ms; `hang` never; `ask` once the client
    /// answered its `roots/list`.
    fn sleeper() -> impl Service<
        JsonRpcRequest,
        Response = JsonRpcResponse,
        Error = Infallible,
        Future = impl Send + 'static,
    > + Clone
           + Send
           + 'static {
        tower::service_fn(|req: JsonRpcRequest| async move {
            if req.method == "hang" {
                std::future::pending::<()>().await;
            }
            if req.method == "ask" {
                let peer = req.extensions.get::<Peer>().cloned().expect("a peer");
                let answer = peer.request("roots/list".into(), json!({})).await;
                let result = json!({ "answered": answer.is_ok() });
                return Ok(JsonRpcResponse::result(req.id, result));
            }
            let ms = req
                .params
                .as_ref()
                .and_then(|p| p.get("ms")?.as_u64())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(JsonRpcResponse::result(req.id, json!({"slept": ms})))
        })
    }

    fn settings(max_in_flight: usize) -> Settings {
        Settings {
            line_limit: 1024,
            max_in_flight,
            drain_deadline: Duration::from_secs(1),
            owner: None,
        }
    }

    /// `serve` over in-memory pipes: the client's input end, the client's
    /// output end, and the served stream.
    fn start(
        settings: Settings,
    ) -> (
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        let (client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let served = tokio::spawn(serve(
            sleeper(),
            settings,
            BufReader::new(server_in),
            server_out,
        ));
        (client, client_out, served)
    }

    #[tokio::test(start_paused = true)]
    async fn responses_come_as_calls_finish_and_the_bound_still_reads_cancels() {
        let (mut client, client_out, served) = start(settings(1));
        let mut lines = BufReader::new(client_out).lines();
        // One slot: the hanging call takes it; the next request waits, but
        // the cancel behind it is still read and frees the slot.
        client
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hang\"}\n\
                  {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\",\"params\":{\"ms\":50}}\n\
                  {\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n",
            )
            .await
            .unwrap();
        let line = lines.next_line().await.unwrap().unwrap();
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":2,"result":{"slept":50}}"#);
        drop(served);

        // Many slots: the quick call overtakes the slow one.
        let (mut client, client_out, served) = start(settings(8));
        let mut lines = BufReader::new(client_out).lines();
        client
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"ms\":500}}\n\
                  {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\",\"params\":{\"ms\":10}}\n",
            )
            .await
            .unwrap();
        drop(client);
        let first = lines.next_line().await.unwrap().unwrap();
        let second = lines.next_line().await.unwrap().unwrap();
        assert!(
            first.contains("\"id\":2") && second.contains("\"id\":1"),
            "{first} {second}"
        );
        assert_eq!(
            lines.next_line().await.unwrap(),
            None,
            "output closed after EOF"
        );
        served.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn eof_drops_calls_still_running_at_the_deadline() {
        let (mut client, client_out, served) = start(settings(8));
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hang\"}\n")
            .await
            .unwrap();
        drop(client);
        served.await.unwrap().unwrap();
        let mut lines = BufReader::new(client_out).lines();
        assert_eq!(lines.next_line().await.unwrap(), None);
    }

    /// The next line the client reads, as JSON (bounded: 10 s).
    async fn next(lines: &mut tokio::io::Lines<BufReader<tokio::io::DuplexStream>>) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("a line within 10 s")
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// One slot, held by a call that waits for the client's answer, and
    /// two more requests before that answer: the one that waits its turn,
    /// and one refused at once, so that the answer behind them is still
    /// read. Before, the stream stopped reading at the second request, and
    /// the three hung for ever.
    #[tokio::test]
    async fn past_the_bound_requests_are_refused_so_the_answer_behind_them_is_read() {
        let (mut client, client_out, served) = start(settings(1));
        let mut lines = BufReader::new(client_out).lines();
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ask\"}\n")
            .await
            .unwrap();
        let question = next(&mut lines).await;
        assert_eq!(question["method"], "roots/list");
        let answer = json!({ "jsonrpc": "2.0", "id": question["id"], "result": { "roots": [] } });
        client
            .write_all(
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\"}}\n\
                     {{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"x\"}}\n\
                     {{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"x\"}}\n{answer}\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(next(&mut lines).await);
        }
        let by_id = |id: i64| {
            got.iter()
                .find(|m| m["id"] == id)
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(by_id(1)["result"], json!({ "answered": true }), "{got:?}");
        assert_eq!(by_id(2)["result"], json!({ "slept": 0 }), "{got:?}");
        assert!(
            by_id(3)["result"] == json!({ "slept": 0 }) || by_id(3)["error"].is_object(),
            "{got:?}"
        );
        assert!(
            by_id(4)["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("too many requests in flight")),
            "{got:?}"
        );
        drop(client);
        served.await.unwrap().unwrap();
    }
}
