//! The body of the endpoint's answers ([`Answer`]): a JSON text held
//! whole, or any other body (an SSE stream, an empty one).
//!
//! A JSON answer, nearly every one, is sent without boxing it into axum's
//! `Body` when the endpoint is served by
//! [`McpEndpoint::serve`](super::McpEndpoint::serve); behind a router or
//! [`McpService`](super::McpService) it becomes axum's `Body` once, as
//! before.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use http_body::{Frame, SizeHint};

/// An HTTP answer of the endpoint.
pub(super) type Response = axum::http::Response<Answer>;

/// The body of an answer.
#[derive(Debug)]
pub(super) enum Answer {
    /// A whole body, sent as one frame (`None` once sent).
    Whole(Option<Bytes>),
    /// Any other body.
    Other(Body),
}

impl Answer {
    /// As axum's `Body`: boxed once (a whole text), or as it is.
    pub(super) fn into_body(self) -> Body {
        match self {
            Answer::Whole(Some(bytes)) => Body::from(bytes),
            Answer::Whole(None) => Body::empty(),
            Answer::Other(body) => body,
        }
    }
}

/// An answer with any other body (see [`Answer::Other`]).
pub(super) fn other(response: axum::response::Response) -> Response {
    response.map(Answer::Other)
}

impl HttpBody for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.get_mut() {
            Answer::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Answer::Other(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Whole(bytes) => bytes.is_none(),
            Answer::Other(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Whole(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Answer::Other(body) => body.size_hint(),
        }
    }
}
