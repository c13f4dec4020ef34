//! Serving an HTTP application on a TCP listener with deadlines for slow
//! clients: [`serve`] and [`Serve`].

use std::convert::Infallible;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{debug, warn};

use super::answer::other;
use super::deadline::{ConnClock, Deadlines, Tracked, Watched};
use crate::store::BoxFuture;

/// How long a request head may take to arrive whole, from its first byte,
/// by default: 30 s ([`Serve::with_header_timeout`]).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may stay idle between requests by default: 60 s
/// ([`Serve::with_idle_timeout`]).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Serve `app` (an [`McpEndpoint`](super::McpEndpoint)'s
/// [router](super::McpEndpoint::into_router) or
/// [service](super::McpEndpoint::into_service), with any HTTP layers
/// around it) over HTTP/1.1 on `listener`, with deadlines for slow
/// clients; await the returned [`Serve`] to run it.
///
/// It answers as `axum::serve` does, and adds what that leaves out:
///
/// - A request whose head (request line and headers) has not arrived whole
///   within the [header timeout](Serve::with_header_timeout) (default
///   [`DEFAULT_HEADER_TIMEOUT`]) of its first byte gets HTTP 408 and the
///   connection closes. The deadline is the head's, not one between bytes:
///   a client that sends a byte a second gets no longer.
/// - A request whose body has not arrived whole within the endpoint's
///   [body timeout](super::McpEndpoint::with_body_timeout) gets HTTP 408
///   from the endpoint, and the connection closes.
/// - A connection idle between requests (or that never sends a byte)
///   closes after the [idle timeout](Serve::with_idle_timeout) (default
///   [`DEFAULT_IDLE_TIMEOUT`]).
///
/// A response streamed to the client (an SSE answer) has no deadline.
/// Each accepted connection has `TCP_NODELAY` set: what is written (an SSE
/// event, a whole answer) is sent at once, not held back by Nagle's
/// algorithm until the client acknowledges what went before.
///
/// ```no_run
/// use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, McpEndpoint};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = tower::service_fn(|req: JsonRpcRequest| async move {
///     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(req.id, serde_json::json!({})))
/// });
/// let app = McpEndpoint::new(server)
///     .with_body_timeout(Duration::from_secs(10))
///     .into_service("/mcp");
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3001").await?;
/// mcp_task_layer::serve(listener, app)
///     .with_header_timeout(Duration::from_secs(10))
///     .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap() })
///     .await
/// # }
/// ```
pub fn serve<A>(listener: TcpListener, app: A) -> Serve<A> {
    Serve {
        listener,
        app,
        deadlines: Deadlines {
            header: DEFAULT_HEADER_TIMEOUT,
            idle: DEFAULT_IDLE_TIMEOUT,
        },
        shutdown: None,
        connect: None,
    }
}

/// How a [`Serve`] serves one accepted connection, when not through the
/// app's `Service` impl (see [`Serve::with_connect`]).
pub(super) type Connect<A> =
    fn(TcpStream, A, Deadlines, watch::Receiver<()>) -> BoxFuture<'static, ()>;

/// A server made by [`serve`]; `.await` it to run it.
#[must_use = "a server does nothing until awaited"]
pub struct Serve<A> {
    listener: TcpListener,
    app: A,
    deadlines: Deadlines,
    shutdown: Option<BoxFuture<'static, ()>>,
    /// `None`: each request through `A`'s `Service` impl.
    connect: Option<Connect<A>>,
}

impl<A> fmt::Debug for Serve<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("app", &std::any::type_name::<A>())
            .field("header_timeout", &self.deadlines.header)
            .field("idle_timeout", &self.deadlines.idle)
            .field("graceful_shutdown", &self.shutdown.is_some())
            .finish()
    }
}

impl<A> Serve<A> {
    /// How long a request head may take to arrive whole, counted from its
    /// first byte (default [`DEFAULT_HEADER_TIMEOUT`]); past it the client
    /// gets HTTP 408 and the connection closes.
    pub fn with_header_timeout(mut self, timeout: Duration) -> Self {
        self.deadlines.header = timeout;
        self
    }

    /// How long a connection may stay idle, with no request under way,
    /// before it closes (default [`DEFAULT_IDLE_TIMEOUT`]).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.deadlines.idle = timeout;
        self
    }

    /// Stop accepting connections when `signal` completes, let each
    /// connection finish the request it is serving (idle ones close at
    /// once), then return.
    pub fn with_graceful_shutdown<F>(mut self, signal: F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.shutdown = Some(Box::pin(signal));
        self
    }

    /// Serve each connection with `connect` instead of through `A`'s
    /// `Service` impl: an app that answers the same, for less work
    /// (`McpEndpoint::serve`).
    pub(super) fn with_connect(mut self, connect: Connect<A>) -> Self {
        self.connect = Some(connect);
        self
    }
}

impl<A> IntoFuture for Serve<A>
where
    A: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    A::Future: Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = BoxFuture<'static, io::Result<()>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl<A> Serve<A>
where
    A: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    A::Future: Send + 'static,
{
    async fn run(self) -> io::Result<()> {
        let Serve {
            listener,
            app,
            deadlines,
            shutdown,
            connect,
        } = self;
        let mut shutdown = shutdown.unwrap_or_else(|| Box::pin(std::future::pending()));
        // Each connection holds a receiver; the sender tells them to stop,
        // then waits until every one is dropped.
        let (stop, stopped) = watch::channel(());
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        // Each write goes out at once: an SSE event written
                        // while the one before is unacknowledged is not held
                        // back by Nagle's algorithm (up to the client's
                        // delayed ACK, 40 ms on Linux). A failure only loses that.
                        let _ = stream.set_nodelay(true);
                        stream
                    }
                    Err(e) => {
                        accept_failed(e).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let (app, stopped) = (app.clone(), stopped.clone());
            match connect {
                Some(connect) => tokio::spawn(connect(stream, app, deadlines, stopped)),
                None => tokio::spawn(through_service(stream, app, deadlines, stopped)),
            };
        }
        drop(listener);
        drop(stopped);
        stop.send_replace(());
        stop.closed().await;
        Ok(())
    }
}

/// A failed `accept`: an error of that one connection is skipped; others
/// (out of file descriptors, for one) get a short pause, as in
/// `axum::serve`, instead of a busy loop.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    warn!(error = %e, "accepting a connection failed");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Serve one connection through `app`'s `Service` impl.
async fn through_service<A>(
    stream: TcpStream,
    app: A,
    deadlines: Deadlines,
    stop: watch::Receiver<()>,
) where
    A: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    A::Future: Send + 'static,
{
    let serve_one = move |request: hyper::Request<Incoming>| {
        let call = app.clone().oneshot(request.map(Body::new));
        async move {
            match call.await {
                Ok(response) => other(response),
                Err(never) => match never {},
            }
        }
    };
    connection(stream, deadlines, stop, serve_one).await;
}

/// Serve one connection until it ends, or until told to stop (then it
/// finishes the request under way), each request answered by `serve_one`.
pub(super) async fn connection<F, R>(
    stream: TcpStream,
    deadlines: Deadlines,
    mut stop: watch::Receiver<()>,
    serve_one: F,
) where
    F: Fn(hyper::Request<Incoming>) -> R + Send + 'static,
    R: Future<Output = super::answer::Response> + Send + 'static,
{
    let clock = ConnClock::new();
    let io = TokioIo::new(Watched::new(stream, Arc::clone(&clock), deadlines));
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        clock.head_done();
        let call = serve_one(request);
        let clock = Arc::clone(&clock);
        async move { Ok::<_, Infallible>(call.await.map(|body| Tracked::new(body, clock))) }
    });
    // hyper's vectored writes (its default), not `writev(false)`: that
    // one copies each answer into the connection's write buffer, which
    // keeps the size of the largest answer it ever sent until the
    // connection closes (a `tasks/result` of megabytes, times every
    // keep-alive poller), for ~46 lines of code fewer a request (issue 32,
    // BENCHMARKS.md, "Eleventh pass").
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    // Told to stop? The watch's `changed()` is polled once, to register
    // this task, and again only once a look at the version (`has_changed`,
    // one atomic load) says the signal came: polling it on every wake-up
    // (twice a request) cost ~370 instructions. A spawned task's root
    // future (this one) is always woken by the same waker. The first poll
    // is the task's first (nothing above awaits), before the connection's:
    // with the task's whole budget, so tokio's cooperative budget cannot
    // turn it away unregistered.
    let probe = stop.clone();
    let mut signal = std::pin::pin!(stop.changed());
    let mut registered = false;
    let ended = std::future::poll_fn(|cx| {
        if !registered {
            registered = true;
            if signal.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        if let Poll::Ready(ended) = conn.as_mut().poll(cx) {
            return Poll::Ready(Some(ended));
        }
        if probe.has_changed().unwrap_or(true) && signal.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await;
    if let Some(ended) = ended {
        if let Err(e) = ended {
            debug!(error = %e, "a connection ended with an error");
        }
        return;
    }
    conn.as_mut().graceful_shutdown();
    if let Err(e) = conn.await {
        debug!(error = %e, "a connection ended with an error");
    }
}
