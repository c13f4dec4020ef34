//! The `text/event-stream` answer: the peer's messages, then the response.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::BoxError;
use http_body::Frame;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::warn;

use super::response::{outcome_response, respond, service_failed};
use crate::jsonrpc::{JsonRpcResponse, RequestId};

/// Run `call` with a peer whose messages arrive on `messages`: plain JSON if
/// the call ends before the peer sends anything, an SSE stream otherwise.
pub(super) async fn serve_with_peer<F, E>(
    call: F,
    mut messages: mpsc::Receiver<Value>,
    id: RequestId,
    modern: bool,
) -> Response
where
    F: Future<Output = Result<JsonRpcResponse, E>> + Send + 'static,
    E: Into<BoxError>,
{
    let mut call = Box::pin(call);
    let mut open = true;
    let first = loop {
        tokio::select! {
            biased;
            message = messages.recv(), if open => match message {
                Some(message) => break Ok(message),
                // Every sender is gone, the peer included: only the call is left.
                None => open = false,
            },
            outcome = &mut call => break Err(outcome),
        }
    };
    match first {
        Ok(message) => event_stream(EventStream {
            queued: VecDeque::from([message]),
            call: Some(call),
            messages,
            id,
            last: None,
        }),
        Err(outcome) => {
            // Whatever the peer sends from now on is dropped, but what it
            // sent before the answer still goes first.
            messages.close();
            let mut queued = VecDeque::new();
            while let Ok(message) = messages.try_recv() {
                queued.push_back(message);
            }
            let (status, response) = outcome_response(id.clone(), outcome, modern);
            if queued.is_empty() {
                return respond(status, &response);
            }
            event_stream(EventStream::<F> {
                queued,
                call: None,
                messages,
                id,
                last: Some(sse_event(&response.to_vec())),
            })
        }
    }
}

fn event_stream(
    stream: impl HttpBody<Data = Bytes, Error = Infallible> + Send + 'static,
) -> Response {
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        Body::new(stream),
    )
        .into_response()
}

/// The body of an SSE response: the queued messages, then whatever the peer
/// sends while the call runs, then the call's response; then the end.
struct EventStream<F> {
    queued: VecDeque<Value>,
    call: Option<Pin<Box<F>>>,
    messages: mpsc::Receiver<Value>,
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
            if let Poll::Ready(Some(message)) = this.messages.poll_recv(cx) {
                return event(&message);
            }
            let outcome = match call.as_mut().poll(cx) {
                Poll::Ready(outcome) => outcome,
                Poll::Pending => return Poll::Pending,
            };
            this.call = None;
            this.messages.close();
            let (_, response) = outcome_response(this.id.clone(), outcome, false);
            this.last = Some(sse_event(&response.to_vec()));
        }
        if let Ok(message) = this.messages.try_recv() {
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

/// Whether an `Accept` header lists `text/event-stream`.
///
/// Read on the bytes: a value that is not visible ASCII lists nothing
/// (as `HeaderValue::to_str` would refuse it).
pub(super) fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().any(|value| {
        let value = value.as_bytes();
        value.iter().all(|&b| b == b'\t' || (32..127).contains(&b))
            && value.split(|&b| b == b',').any(|range| {
                let media = range.split(|&b| b == b';').next().unwrap_or_default();
                media
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"text/event-stream")
            })
    })
}
