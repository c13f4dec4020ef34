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
use bytes::Buf;
use http_body::{Frame, SizeHint};

/// An HTTP answer of the endpoint.
pub(super) type Response = axum::http::Response<Answer>;

/// The body of an answer.
#[derive(Debug)]
pub(super) enum Answer {
    /// A whole body, sent as one frame (`None` once sent): the buffer the
    /// answer was written in, whatever its capacity (`Bytes::from` would
    /// allocate for one larger than its length).
    Whole(Option<Vec<u8>>),
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

/// A piece of an answer's body, as hyper writes it out.
#[derive(Debug)]
pub(super) enum Chunk {
    /// Bytes of another body.
    Shared(Bytes),
    /// A whole answer's buffer, from the given place on.
    Owned(Vec<u8>, usize),
}

impl Buf for Chunk {
    fn remaining(&self) -> usize {
        match self {
            Chunk::Shared(bytes) => bytes.len(),
            Chunk::Owned(buf, at) => buf.len().saturating_sub(*at),
        }
    }

    fn chunk(&self) -> &[u8] {
        match self {
            Chunk::Shared(bytes) => bytes,
            Chunk::Owned(buf, at) => buf.get(*at..).unwrap_or_default(),
        }
    }

    fn advance(&mut self, n: usize) {
        match self {
            // Not past the end (where `Bytes` would panic).
            Chunk::Shared(bytes) => bytes.advance(n.min(bytes.len())),
            Chunk::Owned(buf, at) => *at = at.saturating_add(n).min(buf.len()),
        }
    }
}

/// An answer with any other body (see [`Answer::Other`]).
pub(super) fn other(response: axum::response::Response) -> Response {
    response.map(Answer::Other)
}

impl HttpBody for Answer {
    type Data = Chunk;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Chunk>, axum::Error>>> {
        match self.get_mut() {
            Answer::Whole(buf) => {
                Poll::Ready(buf.take().map(|b| Ok(Frame::data(Chunk::Owned(b, 0)))))
            }
            Answer::Other(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map(|f| f.map_data(Chunk::Shared)))),
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
