//! The upstream as a Streamable HTTP endpoint: each message a `POST`; a
//! request's answer is JSON or an SSE stream that also carries the
//! upstream's questions and notifications for that request (so they are
//! tied to their call exactly); `Mcp-Session-Id` and
//! `MCP-Protocol-Version` after the handshake; a `GET` stream for what the
//! upstream sends outside any request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::link::{InboundSink, Link};
use crate::client::sse::EventDecoder;

/// The largest JSON answer or SSE event read from the upstream.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";
/// Resumptions in a row that give no new event before a call fails.
const MAX_IDLE_RESUMES: u32 = 3;
/// The longest wait before resuming, whatever the upstream asks.
const MAX_RETRY: Duration = Duration::from_secs(5);
/// The wait before the session's GET stream is opened again after it
/// ended: the first, and the longest (doubling between them).
const LISTEN_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(30));

/// One upstream endpoint and the session the handshake opened.
struct Wire {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    session: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    sink: Arc<dyn InboundSink>,
}

/// A header given as `Name: value`.
pub(crate) fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not 'Name: value'"))?;
    let name = HeaderName::try_from(name.trim()).map_err(|e| format!("{name:?}: {e}"))?;
    let value = HeaderValue::try_from(value.trim()).map_err(|e| format!("{name}: {e}"))?;
    Ok((name, value))
}

/// A link to the endpoint at `url` (plain `http://`), sending `headers`
/// with every request.
pub(crate) fn connect(
    serial: u64,
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    sink: Arc<dyn InboundSink>,
) -> Result<Arc<Link>, String> {
    let uri: Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("{url:?}: only http:// upstream URLs are supported"));
    }
    let wire = Arc::new(Wire {
        client: Client::builder(TokioExecutor::new()).build_http(),
        uri,
        headers: headers.to_vec(),
        session: Mutex::default(),
        version: Mutex::default(),
        sink,
    });
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(256);
    let link = Link::says_request(serial, tx);
    let writer = Arc::clone(&link);
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                m = rx.recv() => m,
                () = writer.closed() => None,
            };
            let Some(message) = message else { break };
            let request = is_request(&message);
            // Each message's exchange lasts as long as the connection at
            // most: one given up (a silent upstream) holds no request.
            let (sending, link) = (
                Arc::clone(&wire).send(Arc::clone(&writer), message),
                Arc::clone(&writer),
            );
            let exchange = async move {
                tokio::select! {
                    () = sending => {}
                    () = link.closed() => {}
                }
            };
            if request {
                // Its answer may take as long as its call: beside the rest.
                tokio::spawn(exchange);
            } else {
                // A notification or an answer is taken (202) before
                // anything after it is sent, as an SDK client does: the
                // upstream hears `initialized` before `tools/list`, an
                // answer before the cancel that follows it.
                exchange.await;
            }
        }
        let _ = wire.delete().await;
        wire.sink.link_closed(writer.serial);
    });
    Ok(link)
}

impl Wire {
    fn request(
        &self,
        method: Method,
        accept: &'static str,
        body: Vec<u8>,
    ) -> Result<Request<Full<Bytes>>, http::Error> {
        let mut req = Request::builder()
            .method(method)
            .uri(self.uri.clone())
            .header(ACCEPT, accept);
        if !body.is_empty() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        for (name, value) in &self.headers {
            req = req.header(name, value);
        }
        if let Some(s) = lock(&self.session).clone() {
            req = req.header(SESSION, s);
        }
        if let Some(v) = lock(&self.version).clone() {
            req = req.header(VERSION, v);
        }
        req.body(Full::new(Bytes::from(body)))
    }

    /// `POST` one message; a request's answer (and what comes with it) is
    /// delivered to the link.
    async fn send(self: Arc<Self>, link: Arc<Link>, message: Vec<u8>) {
        let parsed: Value = serde_json::from_slice(&message).unwrap_or(Value::Null);
        let id = parsed
            .get("id")
            .and_then(Value::as_u64)
            .filter(|_| parsed.get("method").is_some());
        let initialize = parsed.get("method").and_then(Value::as_str) == Some("initialize");
        let req = match self.request(Method::POST, "application/json, text/event-stream", message) {
            Ok(req) => req,
            Err(e) => return link.close(format!("cannot make the upstream request: {e}")),
        };
        // A request's caller may go before the answer's headers come (an
        // upstream answering in JSON sends them with the answer): the
        // exchange ends then. Nobody waits for one already gone.
        let abandoned = match id {
            Some(id) => match link.abandoned(id) {
                Some(token) => Some(token),
                None => return,
            },
            None => None,
        };
        let gone = async {
            match &abandoned {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let resp = tokio::select! {
            resp = self.client.request(req) => resp,
            () = gone => return,
        };
        let resp = match resp {
            Ok(resp) => resp,
            Err(e) => {
                return link.close(format!("the upstream at {} is unreachable: {e}", self.uri));
            }
        };
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && lock(&self.session).is_some() {
            return link.close("the upstream ended its session (HTTP 404)".to_owned());
        }
        if initialize {
            if let Some(s) = resp.headers().get(SESSION) {
                *lock(&self.session) = Some(s.clone());
            }
        }
        let Some(id) = id else { return };
        // Nobody waits any more (the call was cancelled or dropped while
        // the answer's headers came): the stream is not read.
        let Some(abandoned) = link.abandoned(id) else {
            return;
        };
        if !status.is_success() {
            return self.fail(&link, id, &format!("the upstream answered HTTP {status}"));
        }
        let sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = resp.into_body();
        if !sse {
            // Read while someone waits: a body that never ends holds
            // nothing once its caller is gone.
            let read = tokio::select! {
                read = Limited::new(body, MAX_MESSAGE).collect() => read,
                () = abandoned.cancelled() => return,
                () = link.closed() => return,
            };
            match read {
                Ok(bytes) => {
                    self.deliver(&link, &bytes.to_bytes(), Some(id), initialize);
                    // A body that was not the answer (empty, not JSON,
                    // another id): no other is coming for this request.
                    if link.waits_for(id) {
                        self.fail(
                            &link,
                            id,
                            &format!(
                                "the upstream's HTTP {status} answer held no answer to the request"
                            ),
                        );
                    }
                }
                Err(e) => self.fail(
                    &link,
                    id,
                    &format!("reading the upstream's answer failed: {e}"),
                ),
            }
            return;
        }
        let mut decoder = EventDecoder::new(MAX_MESSAGE);
        let mut body = body;
        let mut idle = 0;
        loop {
            let before = decoder.last_event_id().map(str::to_owned);
            let ended = each_event(body, &mut decoder, &link, Some((id, &abandoned)), |data| {
                self.deliver(&link, data, Some(id), initialize);
            })
            .await;
            let why = match ended {
                Ended::Closed => return,
                Ended::Finished => "the upstream closed the stream without answering".to_owned(),
                Ended::Broke(why) => why,
            };
            if !link.waits_for(id) {
                return;
            }
            // A stream that ended before its answer is resumed after the
            // last event it gave, if it gave ids (the upstream keeps the
            // rest); an answer not given otherwise never comes.
            let Some(last) = decoder.last_event_id().map(str::to_owned) else {
                return self.fail(&link, id, &why);
            };
            idle = if before.as_deref() == Some(last.as_str()) {
                idle + 1
            } else {
                0
            };
            if idle >= MAX_IDLE_RESUMES {
                return self.fail(&link, id, &format!("{why}; resuming gave nothing new"));
            }
            let wait = Duration::from_millis(decoder.retry_ms().unwrap_or(0)).min(MAX_RETRY);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = abandoned.cancelled() => return,
                () = link.closed() => return,
            }
            // The resumed stream's headers are waited for as the first
            // answer's were: while someone waits, and the link lives.
            let resumed = tokio::select! {
                resumed = self.resume(&last) => resumed,
                () = abandoned.cancelled() => return,
                () = link.closed() => return,
            };
            body = match resumed {
                Ok(body) => body,
                Err(e) => {
                    let why = format!("{why}; resuming after event {last:?} failed: {e}");
                    return self.fail(&link, id, &why);
                }
            };
        }
    }

    /// `GET` the stream that ended, from the event after `last`.
    async fn resume(&self, last: &str) -> Result<hyper::body::Incoming, String> {
        let mut req = self
            .request(Method::GET, "text/event-stream", Vec::new())
            .map_err(|e| e.to_string())?;
        let value = HeaderValue::from_str(last).map_err(|e| e.to_string())?;
        req.headers_mut().insert(LAST_EVENT_ID, value);
        let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("HTTP {}", resp.status()));
        }
        Ok(resp.into_body())
    }

    fn deliver(
        self: &Arc<Self>,
        link: &Arc<Link>,
        bytes: &[u8],
        related: Option<u64>,
        initialize: bool,
    ) {
        if initialize {
            let version = serde_json::from_slice::<Value>(bytes).ok().and_then(|m| {
                m.pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    .and_then(|v| HeaderValue::from_str(v).ok())
            });
            if let Some(v) = version {
                *lock(&self.version) = Some(v);
                // What the upstream sends outside any request comes on a
                // GET stream, once the session exists.
                tokio::spawn(listen(Arc::clone(self), Arc::clone(link)));
            }
        }
        link.deliver_related(bytes, &*self.sink, related);
    }

    /// Request `id` failed: its waiter learns why (a later answer is
    /// ignored).
    fn fail(&self, link: &Arc<Link>, id: u64, why: &str) {
        let error =
            json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32603, "message": why } });
        link.deliver_related(error.to_string().as_bytes(), &*self.sink, Some(id));
    }

    /// End the session (best effort).
    async fn delete(&self) -> Result<(), String> {
        if lock(&self.session).is_none() {
            return Ok(());
        }
        let req = self
            .request(Method::DELETE, "application/json", Vec::new())
            .map_err(|e| e.to_string())?;
        let call = self.client.request(req);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), call).await;
        Ok(())
    }
}

/// The session's GET stream, opened again whenever it ends (the upstream,
/// or a proxy between, may close an idle stream), resumed after the last
/// event it gave, until the link ends. An upstream without one answers 405:
/// nothing to listen to.
async fn listen(wire: Arc<Wire>, link: Arc<Link>) {
    let mut decoder = EventDecoder::new(MAX_MESSAGE);
    let mut backoff = LISTEN_BACKOFF.0;
    loop {
        let Ok(mut req) = wire.request(Method::GET, "text/event-stream", Vec::new()) else {
            return;
        };
        if let Some(last) = decoder.last_event_id() {
            if let Ok(value) = HeaderValue::from_str(last) {
                req.headers_mut().insert(LAST_EVENT_ID, value);
            }
        }
        let opened = tokio::select! {
            r = wire.client.request(req) => r.ok(),
            () = link.closed() => return,
        };
        match opened {
            Some(resp) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => return,
            Some(resp) if resp.status().is_success() => {
                let mut heard = false;
                let ended = each_event(resp.into_body(), &mut decoder, &link, None, |data| {
                    heard = true;
                    link.deliver_related(data, &*wire.sink, None);
                })
                .await;
                if let Ended::Closed = ended {
                    return;
                }
                // A stream that gave something is opened again soon; one
                // that ends at once each time, ever more slowly.
                if heard {
                    backoff = LISTEN_BACKOFF.0;
                }
            }
            _ => {}
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = link.closed() => return,
        }
        backoff = (backoff * 2).min(LISTEN_BACKOFF.1);
    }
}

/// How an event stream ended.
enum Ended {
    /// The link closed first.
    Closed,
    /// The upstream ended it.
    Finished,
    /// It broke, or an event was too large.
    Broke(String),
}

/// Hand each non-empty event of `body` to `each` until it ends, the link
/// closes or, for the answer stream of request `id`, its answer came or
/// its caller stops waiting (`abandoned`): the upstream may never end a
/// stream whose request it answered or was told to cancel, and the
/// connection would stay open for ever.
async fn each_event(
    mut body: hyper::body::Incoming,
    decoder: &mut EventDecoder,
    link: &Link,
    request: Option<(u64, &CancellationToken)>,
    mut each: impl FnMut(&[u8]),
) -> Ended {
    let mut events: VecDeque<Vec<u8>> = VecDeque::new();
    let abandoned = request.map(|(_, token)| token);
    loop {
        while let Some(data) = events.pop_front() {
            if !data.is_empty() {
                each(&data);
            }
        }
        if let Some((id, _)) = request {
            if !link.waits_for(id) {
                return Ended::Closed;
            }
        }
        let frame = tokio::select! {
            f = body.frame() => f,
            () = link.closed() => return Ended::Closed,
            () = async {
                match abandoned {
                    Some(token) => token.cancelled().await,
                    None => std::future::pending().await,
                }
            } => return Ended::Closed,
        };
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if decoder.feed(&data, &mut events).is_err() {
                        return Ended::Broke("an upstream SSE event is too large".to_owned());
                    }
                }
            }
            Some(Err(e)) => return Ended::Broke(format!("the upstream's stream broke: {e}")),
            None => return Ended::Finished,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `message` is a request (a method and an id), not a
/// notification or an answer.
fn is_request(message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind {
        method: Option<serde::de::IgnoredAny>,
        id: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Kind>(message).is_ok_and(|k| k.method.is_some() && k.id.is_some())
}
