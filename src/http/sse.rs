//! The `text/event-stream` answer: the peer's messages, then the response.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::BoxError;
use http_body::Frame;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::warn;

use super::answer::{other, Response};
use super::peer::StreamPeer;
use super::response::{outcome_response, respond_owned, service_failed};
use crate::jsonrpc::{JsonRpcResponse, RequestId};

/// Run `call` with `peer`: plain JSON if the call ends before the peer
/// sends anything (its headers written into `headers`, empty), an SSE
/// stream otherwise.
pub(super) async fn serve_with_peer<F, E>(
    mut call: Pin<Box<F>>,
    peer: Arc<StreamPeer>,
    id: RequestId,
    modern: bool,
    headers: HeaderMap,
) -> Response
where
    F: Future<Output = Result<JsonRpcResponse, E>> + Send + 'static,
    E: Into<BoxError>,
{
    // Whichever way this ends (the answer, or the caller dropping this
    // future), the peer can send no more and a channel it made is closed.
    let peer = EndsPeer(peer);
    // Most calls answer without a message: no channel until the peer sends.
    // The call first: one that answers at once never waits on the peer
    // (what the peer queued meanwhile still goes first, see `answer`).
    tokio::select! {
        biased;
        outcome = &mut call => return answer::<F, E>(peer, None, outcome, id, modern, headers),
        () = peer.0.opened() => {}
    }
    let mut messages = peer.0.messages();
    let first = match &mut messages {
        Some(queue) => tokio::select! {
            biased;
            message = queue.recv() => message,
            outcome = &mut call => return answer::<F, E>(peer, messages, outcome, id, modern, headers),
        },
        None => None,
    };
    let Some(first) = first else {
        // Every sender is gone: only the call is left.
        let outcome = call.await;
        return answer::<F, E>(peer, messages, outcome, id, modern, headers);
    };
    event_stream(EventStream {
        queued: VecDeque::from([first]),
        call: Some(call),
        messages,
        peer,
        id,
        last: None,
    })
}

/// The response once the call has answered: plain JSON (its headers
/// written into `headers`), or, when the peer queued messages before the
/// answer (in `taken`, or still in the peer), those first and the answer
/// last on an event stream.
fn answer<F, E>(
    peer: EndsPeer,
    taken: Option<mpsc::Receiver<Value>>,
    outcome: Result<JsonRpcResponse, E>,
    id: RequestId,
    modern: bool,
    headers: HeaderMap,
) -> Response
where
    F: Future<Output = Result<JsonRpcResponse, E>> + Send + 'static,
    E: Into<BoxError>,
{
    // The peer can send no more; what it sent before still goes first.
    let untaken = peer.0.end();
    let mut queued = VecDeque::new();
    if let Some(mut messages) = taken.or(untaken) {
        messages.close();
        while let Ok(message) = messages.try_recv() {
            queued.push_back(message);
        }
    }
    let (status, response) = outcome_response(id.clone(), outcome, modern);
    if queued.is_empty() {
        return respond_owned(status, response, headers);
    }
    event_stream(EventStream::<F> {
        queued,
        call: None,
        messages: None,
        peer,
        id,
        last: Some(sse_event(&response.to_vec())),
    })
}

/// Ends the peer when dropped: the response is written, or abandoned.
struct EndsPeer(Arc<StreamPeer>);

impl Drop for EndsPeer {
    fn drop(&mut self) {
        self.0.end();
    }
}

fn event_stream(
    stream: impl HttpBody<Data = Bytes, Error = Infallible> + Send + 'static,
) -> Response {
    other(
        (
            StatusCode::OK,
            [
                (CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
                (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            Body::new(stream),
        )
            .into_response(),
    )
}

/// The body of an SSE response: the queued messages, then whatever the peer
/// sends while the call runs, then the call's response; then the end.
struct EventStream<F> {
    queued: VecDeque<Value>,
    call: Option<Pin<Box<F>>>,
    /// `None` once the call has answered and the queue is drained.
    messages: Option<mpsc::Receiver<Value>>,
    peer: EndsPeer,
    id: RequestId,
    /// The final event, once the call has answered.
    last: Option<Bytes>,
}

impl<F, E> HttpBody for EventStream<F>
where
    F: Future<Output = Result<JsonRpcResponse, E>>,
    E: Into<BoxError>,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let event = |message: &Value| {
            let json = serde_json::to_vec(message).unwrap_or_else(|e| {
                warn!(error = %e, "cannot encode a message for the event stream");
                json!({ "jsonrpc": "2.0", "error": service_failed() })
                    .to_string()
                    .into_bytes()
            });
            Poll::Ready(Some(Ok(Frame::data(sse_event(&json)))))
        };
        if let Some(message) = this.queued.pop_front() {
            return event(&message);
        }
        if let Some(call) = this.call.as_mut() {
            if let Some(Poll::Ready(Some(message))) =
                this.messages.as_mut().map(|m| m.poll_recv(cx))
            {
                return event(&message);
            }
            let outcome = match call.as_mut().poll(cx) {
                Poll::Ready(outcome) => outcome,
                Poll::Pending => return Poll::Pending,
            };
            this.call = None;
            this.peer.0.end();
            if let Some(messages) = this.messages.as_mut() {
                messages.close();
            }
            let (_, response) = outcome_response(this.id.clone(), outcome, false);
            this.last = Some(sse_event(&response.to_vec()));
        }
        if let Some(Ok(message)) = this.messages.as_mut().map(mpsc::Receiver::try_recv) {
            return event(&message);
        }
        Poll::Ready(this.last.take().map(|last| Ok(Frame::data(last))))
    }
}

/// One SSE `message` event carrying a JSON-RPC message's compact JSON
/// (which never contains a line break, so one `data` line suffices).
fn sse_event(json: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(json.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(json);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// Whether one of the comma-separated media ranges of an `Accept` value
/// is `text/event-stream` (any case, parameters and spaces around it
/// allowed). Read on the bytes: a value that is not visible ASCII lists
/// nothing (as `HeaderValue::to_str` would refuse it).
///
/// Looks for the name and checks what surrounds it, instead of splitting
/// the value (an `Accept` is read on every request).
pub(super) fn lists_event_stream(value: &[u8]) -> bool {
    const NAME: &[u8] = b"text/event-stream";
    // What the SDKs send, compared whole.
    if value == b"application/json, text/event-stream" {
        return true;
    }
    if !value.iter().all(|&b| b == b'\t' || (32..127).contains(&b)) {
        return false;
    }
    let blank = |bytes: &[u8]| bytes.iter().all(u8::is_ascii_whitespace);
    (0..value.len().saturating_sub(NAME.len() - 1)).any(|at| {
        let end = at + NAME.len();
        value[at..end].eq_ignore_ascii_case(NAME) && {
            let before = &value[..at];
            let range_start = before.iter().rposition(|&b| b == b',').map_or(0, |i| i + 1);
            let after = &value[end..];
            let type_end = after
                .iter()
                .position(|&b| b == b',' || b == b';')
                .unwrap_or(after.len());
            blank(&before[range_start..]) && blank(&after[..type_end])
        }
    })
}

#[cfg(test)]
mod tests {
    use super::lists_event_stream;

    /// The split-and-compare reading of an `Accept` value, as the media
    /// range grammar says: the fast scan must agree with it.
    fn by_ranges(value: &[u8]) -> bool {
        value.iter().all(|&b| b == b'\t' || (32..127).contains(&b))
            && value.split(|&b| b == b',').any(|range| {
                let media = range.split(|&b| b == b';').next().unwrap_or_default();
                media
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"text/event-stream")
            })
    }

    #[test]
    fn the_accept_scan_agrees_with_splitting_the_ranges() {
        let cases = [
            "application/json, text/event-stream",
            "text/event-stream",
            " text/event-stream ",
            "\ttext/event-stream;q=0.5",
            "Text/Event-Stream",
            "application/json",
            "*/*",
            "",
            "text/event-stream2",
            "xtext/event-stream",
            "text/event-streamx, application/json",
            "a;x=text/event-stream",
            "a, b;q=1;x=text/event-stream , text/event-stream ;q=0",
            "text/event-stream\u{7f}",
            "text/event-str",
            ",,text/event-stream,,",
            "text/plain, text/event-stream;charset=utf-8",
            "te xt/event-stream",
        ];
        for case in cases {
            assert_eq!(
                lists_event_stream(case.as_bytes()),
                by_ranges(case.as_bytes()),
                "{case:?}"
            );
        }
        assert!(!lists_event_stream(b"text/event-stream\xff"));
    }
}
