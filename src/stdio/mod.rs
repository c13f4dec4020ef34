//! The stdio transport (feature `stdio`): see [`StdioTransport`].
//!
//! One file per concept: `lines` reads bounded lines, `writer` is the one
//! writer of the output, `peer` sends server→client messages, `serve`
//! dispatches each message and winds the stream down, `pipes` opens the
//! process's stdin and stdout.

pub(crate) mod lines;
mod peer;
mod pipes;
mod serve;
mod writer;

use std::fmt;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tower::BoxError;
use tower_service::Service;

use crate::context::TaskOwner;
use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse};
// Named by the docs only.
#[cfg(doc)]
use crate::peer::{ClientPeer, Peer};

use self::serve::{serve, Settings};

/// The default longest input line of [`StdioTransport`]: 4 MiB, as the
/// HTTP endpoint's body limit.
pub const DEFAULT_LINE_LIMIT: usize = 4 * 1024 * 1024;

/// Serves a JSON-RPC service over newline-delimited JSON-RPC on
/// stdin/stdout (or any pair of byte pipes), as the MCP stdio transport
/// does: one process, one client.
///
/// It turns a `Service<JsonRpcRequest, Response = JsonRpcResponse>`
/// (typically a [`TaskLayer`](crate::TaskLayer) around your MCP server) into
/// a loop over the input's lines.
///
/// # What the transport does
///
/// | Input line | Answer |
/// |---|---|
/// | a JSON-RPC request | the service's response, with the request's own `id`, written when it finishes; requests run concurrently (up to [`with_max_in_flight`](Self::with_max_in_flight), default 64), so responses can come in any order; past the bound one more request waits its turn and a further one is answered at once with an error (the stream keeps reading: a running call may be waiting for the client's answer) |
/// | a notification (no `id`) | the service is called (it counts against the same bound), its answer dropped |
/// | `notifications/cancelled` with the `requestId` of a request in flight | that call's future is dropped; it gets no response |
/// | a JSON-RPC response (`result` or `error`, no `method`) | handed to the waiting [`ClientPeer::request`]; ignored if none waits |
/// | not JSON, or not UTF-8 | `-32700`, `"id": null`; the next line is read |
/// | JSON that is not a request object | `-32600`, the request's `id` if it can be read, else `null` |
/// | over the [line limit](Self::with_line_limit) (default [`DEFAULT_LINE_LIMIT`]) | `-32600`, `"id": null`; the line is skipped without being kept |
/// | an empty line | ignored |
///
/// Every output line is one whole compact JSON-RPC message; one writer
/// writes them, so messages never interleave. Nothing else is written to
/// the output: log to stderr.
///
/// At the bound, the transport keeps reading responses and cancellations
/// (they may be what frees a slot) but stops reading after the next
/// request until a call finishes.
///
/// # Server→client messages
///
/// Every request carries a [`Peer`] in its extensions. A server→client
/// request gets a fresh id (`"srv-"` and 128 random bits) and is written to
/// the output; the client's response on the input resolves it to its
/// `result` or its `error`. Notifications are best effort: dropped when 256
/// messages wait for the output.
///
/// # End of input
///
/// When the input ends, the transport stops reading; server→client requests
/// still waiting resolve to a `-32603` error and [`ClientPeer::closed`]
/// fires. Calls in flight get up to the
/// [shutdown deadline](Self::with_shutdown_deadline) (default 5 s) to
/// finish and have their responses written; those still running then are
/// dropped. The output is flushed and [`serve`](Self::serve) returns. Tasks
/// keep their state in the store; a durable store lets the next process
/// find them.
///
/// # Caller identity
///
/// One process serves one client: [`with_owner`](Self::with_owner) puts the
/// same [`TaskOwner`] in every message's extensions, so the layer binds
/// tasks to it and the 2025-11-25 `tasks/list` lists them.
///
/// # Example
///
/// ```
/// use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, MemoryStore, StdioTransport, TaskLayer, TaskOwner};
/// use serde_json::json;
/// use tower::{service_fn, ServiceBuilder};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = service_fn(|req: JsonRpcRequest| async move {
///     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(req.id, json!({"resultType": "complete"})))
/// });
/// let service = ServiceBuilder::new()
///     .layer(TaskLayer::new(MemoryStore::new()))
///     .service(server);
/// let transport = StdioTransport::new(service).with_owner(TaskOwner::new("local-user"));
/// // A real server calls `transport.serve_stdio().await`; here, in-memory pipes.
/// let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
/// let mut output = Vec::new();
/// transport.serve(input, &mut output).await?;
/// assert_eq!(output, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"complete\"}}\n");
/// # Ok(())
/// # }
/// ```
#[must_use]
pub struct StdioTransport<S> {
    service: S,
    line_limit: usize,
    max_in_flight: usize,
    drain_deadline: Duration,
    owner: Option<TaskOwner>,
}

impl<S> fmt::Debug for StdioTransport<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioTransport")
            .field("service", &std::any::type_name::<S>())
            .field("line_limit", &self.line_limit)
            .field("max_in_flight", &self.max_in_flight)
            .field("drain_deadline", &self.drain_deadline)
            .field("owner", &self.owner)
            .finish()
    }
}

impl<S> StdioTransport<S> {
    /// A transport for `service` with the defaults: lines up to
    /// [`DEFAULT_LINE_LIMIT`], 64 requests in flight, a 5 s shutdown
    /// deadline, no owner.
    pub fn new(service: S) -> Self {
        StdioTransport {
            service,
            line_limit: DEFAULT_LINE_LIMIT,
            max_in_flight: 64,
            drain_deadline: Duration::from_secs(5),
            owner: None,
        }
    }

    /// The longest input line accepted, in bytes, without its `\n`.
    pub fn with_line_limit(mut self, bytes: usize) -> Self {
        self.line_limit = bytes;
        self
    }

    /// How many requests run at once (at least 1). Past it, one more
    /// waits its turn; a request beyond that gets an error at once (a
    /// notification is dropped), so that the stream goes on reading the
    /// client's answers and cancellations.
    pub fn with_max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests.max(1);
        self
    }

    /// How long calls in flight may run once the input has ended.
    pub fn with_shutdown_deadline(mut self, deadline: Duration) -> Self {
        self.drain_deadline = deadline;
        self
    }

    /// The caller of every message on this stream.
    pub fn with_owner(mut self, owner: TaskOwner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Serve `input` and `output` until the input ends (see
    /// [End of input](#end-of-input)). Errors are the input's or the
    /// output's I/O errors; a broken output ends the stream too.
    pub async fn serve<R, W>(self, input: R, output: W) -> io::Result<()>
    where
        S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let settings = Settings {
            line_limit: self.line_limit,
            max_in_flight: self.max_in_flight,
            drain_deadline: self.drain_deadline,
            owner: self.owner,
        };
        serve(self.service, settings, BufReader::new(input), output).await
    }

    /// Serve the process's stdin and stdout. Where both are pipes (as
    /// under an MCP host) they are polled on the runtime's thread (needs
    /// tokio's I/O driver: `enable_io` or `enable_all`); otherwise each
    /// read and write runs on tokio's blocking threads.
    pub async fn serve_stdio(self) -> io::Result<()>
    where
        S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
    {
        let (input, output) = pipes::std_pipes();
        self.serve(input, output).await
    }
}
