//! One connection's deadlines for slow clients, kept by a wrapper around
//! its socket: a request head must arrive whole within the header deadline
//! of its first byte (else HTTP 408, written here, and the connection
//! closes), and a connection idle between requests closes after the idle
//! timeout. The body deadline is the endpoint's (`handle.rs`).
//!
//! hyper's own `header_read_timeout` is not used: it starts when hyper
//! waits for a head (so it is an idle timeout as well, not measured from
//! the first byte), and when it fires hyper closes the connection without
//! an answer.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use pin_project_lite::pin_project;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::answer::{Answer, Chunk};
use crate::jsonrpc::JsonRpcError;

/// Where a connection is between requests, as its socket wrapper reads
/// it when a read waits.
///
/// The instant a phase began is read only once a read waits (the first
/// `Pending` of the phase), not when the phase begins: nearly every head
/// arrives whole in one read, and nearly every answer is followed by a
/// wait for the next request, so a request reads the time once, not
/// twice. A head's deadline thus counts from the first wait after its
/// first byte (the same poll of the connection, microseconds later), an
/// idle deadline from the first wait after the answer was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No request under way since the instant.
    Idle(Instant),
    /// A request head began to arrive at the instant.
    Head(Instant),
    /// A request is being served (its body read, its answer written).
    Busy,
}

/// Idle, its instant not read yet.
const IDLE: u8 = 0;
/// Idle since the instant the socket wrapper keeps.
const IDLE_AT: u8 = 1;
/// A head under way, its instant not read yet.
const HEAD: u8 = 2;
/// A head under way since the instant the socket wrapper keeps.
const HEAD_AT: u8 = 3;
const BUSY: u8 = 4;

/// The phase of one connection, shared by its socket wrapper, its
/// service and the bodies of its answers (all on the connection's task):
/// one atomic byte, no lock. The phase's instant is the socket wrapper's
/// alone (it is the only one that reads it).
#[derive(Debug)]
pub(super) struct ConnClock(AtomicU8);

impl ConnClock {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(ConnClock(AtomicU8::new(IDLE)))
    }

    fn set(&self, tag: u8) {
        self.0.store(tag, Ordering::Relaxed);
    }

    /// A head is complete: hyper hands the request to the service.
    pub(super) fn head_done(&self) {
        self.set(BUSY);
    }

    /// An answer has been written (its body is dropped): idle from now.
    fn answered(&self) {
        self.set(IDLE);
    }

    /// Bytes arrived: the first of a head, when idle.
    fn bytes_arrived(&self) {
        if self.0.load(Ordering::Relaxed) <= IDLE_AT {
            self.set(HEAD);
        }
    }

    /// A read waits: the phase, with `since` (the socket wrapper's) read
    /// now if the phase has not read it yet.
    fn waiting(&self, since: &mut Instant) -> Phase {
        let tag = self.0.load(Ordering::Relaxed);
        if tag == IDLE || tag == HEAD {
            *since = Instant::now();
            self.set(tag + 1);
        }
        match tag {
            IDLE | IDLE_AT => Phase::Idle(*since),
            HEAD | HEAD_AT => Phase::Head(*since),
            _ => Phase::Busy,
        }
    }
}

/// The header and idle deadlines of a connection.
#[derive(Clone, Copy, Debug)]
pub(super) struct Deadlines {
    pub(super) header: Duration,
    pub(super) idle: Duration,
}

/// What the wrapper does once a deadline has passed.
#[derive(Debug)]
enum Trip {
    /// No deadline has passed.
    None,
    /// The head deadline passed: writing the 408 answer, `.0` bytes so far.
    Answering(usize),
    /// The connection reads as ended from now on.
    Ended,
}

pin_project! {
    /// A socket whose reads end (after a 408 answer when a head was under
    /// way) once the connection's deadline has passed.
    pub(super) struct Watched<T> {
        #[pin]
        io: T,
        clock: Arc<ConnClock>,
        deadlines: Deadlines,
        timer: Pin<Box<Sleep>>,
        armed: Option<Instant>,
        // The timer has this task's waker for its deadline.
        registered: bool,
        // When the clock's phase began (see `ConnClock::waiting`).
        since: Instant,
        trip: Trip,
        answer: Bytes,
    }
}

impl<T> Watched<T> {
    pub(super) fn new(io: T, clock: Arc<ConnClock>, deadlines: Deadlines) -> Self {
        Watched {
            io,
            clock,
            deadlines,
            timer: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed: None,
            registered: false,
            since: Instant::now(),
            trip: Trip::None,
            answer: Bytes::new(),
        }
    }
}

/// The whole HTTP/1.1 408 answer to a head that did not arrive in time.
fn timeout_answer(deadline: Duration) -> Bytes {
    let error = JsonRpcError::invalid_request(format!(
        "the request headers did not arrive within {deadline:?}"
    ));
    let body = serde_json::json!({ "jsonrpc": "2.0", "error": error }).to_string();
    let head = format!(
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    Bytes::from(head + &body)
}

impl<T: AsyncRead + AsyncWrite> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut this = self.project();
        loop {
            match *this.trip {
                Trip::Ended => return Poll::Ready(Ok(())),
                Trip::Answering(written) => {
                    let rest = this.answer.slice(written.min(this.answer.len())..);
                    if rest.is_empty() {
                        // Flushed or not, the reads end: hyper then drops
                        // the socket, which closes it.
                        let _ = this.io.as_mut().poll_flush(cx);
                        *this.trip = Trip::Ended;
                        continue;
                    }
                    match ready!(this.io.as_mut().poll_write(cx, &rest)) {
                        Ok(n) if n > 0 => *this.trip = Trip::Answering(written + n),
                        _ => *this.trip = Trip::Ended,
                    }
                    continue;
                }
                Trip::None => {}
            }
            let before = buf.filled().len();
            match this.io.as_mut().poll_read(cx, buf) {
                Poll::Ready(Ok(())) => {
                    if buf.filled().len() > before {
                        this.clock.bytes_arrived();
                    }
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => {}
            }
            let (deadline, head) = match this.clock.waiting(this.since) {
                Phase::Busy => return Poll::Pending,
                Phase::Idle(since) => (since + this.deadlines.idle, false),
                Phase::Head(since) => (since + this.deadlines.header, true),
            };
            // The timer is re-armed only for an earlier deadline: an idle
            // deadline moves later with every request, and resetting the
            // timer each time costs more than waking once too early.
            if this.armed.is_none_or(|armed| deadline < armed) {
                this.timer.as_mut().reset(deadline);
                *this.armed = Some(deadline);
                *this.registered = false;
            }
            // Polled once a deadline, outside tokio's cooperative budget
            // (which could turn a poll away before it registers this task's
            // waker), and then only once it has elapsed: a spawned task's
            // waker is always the same, and a look at the timer's state is
            // cheaper than a poll on every wait (twice a request).
            if *this.registered && !this.timer.is_elapsed() {
                return Poll::Pending;
            }
            let polled = Pin::new(&mut tokio::task::unconstrained(this.timer.as_mut())).poll(cx);
            *this.registered = true;
            ready!(polled);
            if *this.armed != Some(deadline) {
                // Woken for a deadline that has moved since: wait for this one.
                this.timer.as_mut().reset(deadline);
                *this.armed = Some(deadline);
                *this.registered = false;
                continue;
            }
            *this.trip = if head {
                tracing::debug!("a request head did not arrive in time: 408");
                *this.answer = timeout_answer(this.deadlines.header);
                Trip::Answering(0)
            } else {
                tracing::trace!("closing an idle connection");
                Trip::Ended
            };
        }
    }
}

impl<T: AsyncWrite> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

pin_project! {
    /// An answer's body that marks its connection idle once dropped
    /// (written whole, or abandoned).
    pub(super) struct Tracked {
        #[pin]
        body: Answer,
        clock: Arc<ConnClock>,
    }

    impl PinnedDrop for Tracked {
        fn drop(this: Pin<&mut Self>) {
            this.clock.answered();
        }
    }
}

impl Tracked {
    pub(super) fn new(body: Answer, clock: Arc<ConnClock>) -> Self {
        Tracked { body, clock }
    }
}

impl http_body::Body for Tracked {
    type Data = Chunk;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Chunk>, axum::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
