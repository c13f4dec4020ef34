//! The endpoint's edges (issue "Close the holes", defect 13): what it
//! refuses before it reads a body (a body over the limit), with which
//! status and JSON-RPC error, and that every client sees that answer, even
//! one that writes its whole body before it reads. Each test says whether
//! it failed on the code before its fix.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, McpEndpoint, TaskEvent};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tower::util::BoxCloneSyncService;

use crate::client::{modern, routing, Headers};
use crate::common;
use crate::common::wire::{bearer, Reply};
use crate::ALICE;

type Svc = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// The scripted server behind an endpoint that `configure` sets up, on
/// 127.0.0.1:0.
struct Edge {
    addr: SocketAddr,
    seen: Arc<common::Seen>,
    events: broadcast::Receiver<TaskEvent>,
}

impl Edge {
    async fn start(configure: impl FnOnce(McpEndpoint<Svc>) -> McpEndpoint<Svc>) -> Edge {
        let layer = common::layer();
        let events = layer.subscribe();
        let c = common::Client::new(layer);
        let app = configure(McpEndpoint::new(c.svc.clone()).with_identity(bearer));
        let app = app.into_router("/mcp");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Edge {
            addr,
            seen: c.seen,
            events,
        }
    }

    /// No handler ran and no task changed (or came to be).
    fn untouched(&mut self) {
        for tool in ["hang", "echo", "ask"] {
            assert_eq!(self.seen.calls(tool), 0, "{tool} ran");
        }
        assert!(
            matches!(
                self.events.try_recv(),
                Err(broadcast::error::TryRecvError::Empty)
            ),
            "a task changed"
        );
    }
}

/// A `tools/call` of `hang` as alice (it would become a task), and the
/// headers a conforming client sends with it.
fn hang_call() -> (Value, Headers) {
    let body = modern(7, "tools/call", json!({ "name": "hang", "arguments": {} }));
    let headers = routing(&body, Some(ALICE));
    (body, headers)
}

// ----- bodies written whole before the answer is read (defect 13) -----

/// A client that writes its whole request (head and body) before it reads
/// anything, as Python's `urllib` does: whether the write went through, and
/// the answer if one could be read.
async fn write_whole_then_read(
    addr: SocketAddr,
    headers: &Headers,
    body: &[u8],
    chunked: bool,
) -> (std::io::Result<()>, Result<Reply, String>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("POST /mcp HTTP/1.1\r\nhost: {addr}\r\n").into_bytes();
    for (name, value) in headers {
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
    }
    if chunked {
        request.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
        for chunk in body.chunks(64 * 1024) {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
    } else {
        request.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
        request.extend_from_slice(body);
    }
    let written = tokio::time::timeout(Duration::from_secs(30), stream.write_all(&request))
        .await
        .expect("the write ends within 30 s");
    let reply = tokio::time::timeout(Duration::from_secs(30), read_reply(&mut stream))
        .await
        .expect("the answer ends within 30 s");
    (written, reply)
}

/// One HTTP/1.1 answer with a `Content-Length`, read whole.
async fn read_reply(stream: &mut TcpStream) -> Result<Reply, String> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let field = |name: &str| {
                head.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_owned())
            };
            let length: usize = field("content-length:")
                .and_then(|v| v.parse().ok())
                .ok_or("no content-length")?;
            if buf.len() >= end + 4 + length {
                let status = head
                    .split(' ')
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or("no status line")?;
                return Ok(Reply {
                    status,
                    content_type: field("content-type:"),
                    body: Bytes::copy_from_slice(&buf[end + 4..end + 4 + length]),
                });
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) => return Err(format!("the connection ended after {} bytes", buf.len())),
            Err(e) => return Err(format!("{e} after {} bytes", buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A 5 MB body (the limit is 4 MiB) written whole before reading with a
/// `Content-Length`, or a 12 MB one chunked: the write goes through and the client reads
/// 413 with the JSON-RPC error. Failed before the fix: the server closed
/// the connection unread, and the client's write broke (EPIPE or a reset)
/// before it could read the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_writes_an_over_limit_body_before_reading_still_reads_its_413() {
    let mut edge = Edge::start(|e| e).await;
    let (body, headers) = hang_call();
    // Chunked, the first 4 MiB are read before the refusal: a bigger body
    // leaves as much unread.
    for (chunked, size) in [(false, 5_000_000), (true, 12_000_000)] {
        let mut padded = body.to_string().into_bytes();
        padded.resize(size, b' ');
        let (written, reply) = write_whole_then_read(edge.addr, &headers, &padded, chunked).await;
        assert!(
            written.is_ok(),
            "chunked {chunked}: the write broke: {written:?}"
        );
        let reply = reply.unwrap_or_else(|e| panic!("chunked {chunked}: {e}"));
        assert_eq!(reply.status.as_u16(), 413, "chunked {chunked}: {reply:?}");
        assert_eq!(
            reply.json(),
            json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {
                    "code": -32600,
                    "message": "Invalid request: the request body exceeds the limit of 4194304 bytes"
                }
            })
        );
    }
    edge.untouched();
}

/// What is read of a refused body is bounded: an endless chunked body is
/// not drained for ever; the server stops reading and closes. Bound of the
/// fix of defect 13.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_refused_body_is_not_read_for_ever() {
    let edge = Edge::start(|e| e).await;
    let (_, headers) = hang_call();
    let mut stream = TcpStream::connect(edge.addr).await.unwrap();
    let mut head = format!("POST /mcp HTTP/1.1\r\nhost: {}\r\n", edge.addr).into_bytes();
    for (name, value) in &headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
    stream.write_all(&head).await.unwrap();
    let mut chunk = format!("{:x}\r\n", 1 << 20).into_bytes();
    chunk.resize(chunk.len() + (1 << 20), b' ');
    chunk.extend_from_slice(b"\r\n");
    let mut sent = 0usize;
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while stream.write_all(&chunk).await.is_ok() {
            sent += chunk.len();
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the server read {sent} bytes and still reads"
    );
    // 4 MiB limit, drained up to 4 times that, plus what the sockets hold.
    assert!(sent < 64 << 20, "{sent} bytes were taken");
}
