//! The endpoint's edges (issue "Close the holes", defects 11 and 13): what
//! it refuses before it reads a body (a foreign `Origin`, a body not
//! declared JSON, a body over the limit), with which status and JSON-RPC
//! error, and that every client sees that answer, even one that writes its
//! whole body before it reads. Each test says whether it failed on the code
//! before its fix.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::Method;
use http_body_util::Full;
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, McpEndpoint, TaskEvent};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tower::util::BoxCloneSyncService;

use crate::client::{
    header, legacy, modern, read_reply, request_head, routing, set_header, without, Headers,
};
use crate::common;
use crate::common::wire::{bearer, send, Reply};
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

    async fn post(&self, headers: &Headers, body: impl Into<Bytes>) -> Reply {
        send(self.addr, Method::POST, headers, Full::new(body.into())).await
    }
}

/// A `tools/call` of `hang` as alice (it would become a task), and the
/// headers a conforming client sends with it.
fn hang_call() -> (Value, Headers) {
    let body = modern(7, "tools/call", json!({ "name": "hang", "arguments": {} }));
    let headers = routing(&body, Some(ALICE));
    (body, headers)
}

/// The refusal the endpoint writes before it reads a body: `status`, a
/// JSON-RPC error `code` and no `id` member.
fn assert_refused(reply: &Reply, status: u16, code: i64, what: &str) -> Value {
    assert_eq!(reply.status.as_u16(), status, "{what}: {reply:?}");
    let v = reply.json();
    assert_eq!(v["jsonrpc"], "2.0", "{what}");
    assert_eq!(v["error"]["code"], code, "{what}: {v}");
    assert!(v["error"]["message"].is_string(), "{what}: {v}");
    assert!(v.get("id").is_none(), "{what}: no id member: {v}");
    assert!(v.get("result").is_none(), "{what}: {v}");
    v
}

// ----- Origin (defect 11) -----

/// A page on another site (or a DNS-rebound name, whose `Origin` is the
/// attacker's) cannot reach the tools: 403, `-32600`, no `id`, before the
/// body is read. Failed before the fix: the call ran (HTTP 200, a task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_before_anything_runs() {
    let mut edge = Edge::start(|e| e).await;
    let (body, headers) = hang_call();
    for origin in [
        "http://evil.example",
        "https://attacker.test:8443",
        // What a rebound name looks like to the server.
        "http://rebind.evil.example:3001",
        // Loopback look-alikes.
        "http://localhost.evil.example",
        "http://127.0.0.1.nip.io",
        "http://127.0.0.2",
        "http://[::2]",
        // A sandboxed frame, a `no-referrer` page, a file.
        "null",
        "file://",
        "not an origin",
    ] {
        let reply = edge
            .post(
                &set_header(headers.clone(), "origin", origin),
                body.to_string(),
            )
            .await;
        let v = assert_refused(&reply, 403, -32600, origin);
        assert_eq!(
            v["error"]["message"],
            "Invalid request: the Origin header is not allowed"
        );
    }
    // Checked before the body is read: not JSON, a notification, an answer
    // to a server request, a body over the limit, all get the same 403.
    let evil = set_header(headers.clone(), "origin", "http://evil.example");
    let notification =
        json!({ "jsonrpc": "2.0", "method": "tools/call", "params": { "name": "hang" } });
    let answer = json!({ "jsonrpc": "2.0", "id": "srv-0", "result": {} });
    for (what, text) in [
        ("not JSON", "{\"jsonrpc\":".to_owned()),
        ("a notification", notification.to_string()),
        ("an answer", answer.to_string()),
        (
            "over the limit",
            " ".repeat(mcp_task_layer::DEFAULT_BODY_LIMIT + 1),
        ),
    ] {
        let reply = edge.post(&evil, text).await;
        assert_refused(&reply, 403, -32600, what);
    }
    // Two Origin headers, one of them fine: refused.
    let mut two = set_header(headers.clone(), "origin", "http://localhost:5173");
    header(&mut two, "origin", "http://evil.example");
    assert_refused(&edge.post(&two, body.to_string()).await, 403, -32600, "two");
    edge.untouched();
}

/// By default, requests without `Origin` (every non-browser client) and
/// pages on loopback (`localhost`, `127.0.0.1`, `[::1]`, any port or
/// scheme) are served. Passed before the fix too: nothing was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_origin_and_loopback_origins_are_served_by_default() {
    let edge = Edge::start(|e| e).await;
    let ping = legacy(1, "ping", json!({}));
    let headers = routing(&ping, Some(ALICE));
    let mut origins = vec![None];
    origins.extend(
        [
            "http://localhost:5173",
            "http://127.0.0.1:8080",
            "http://[::1]:3000",
            "https://localhost",
            "HTTP://LocalHost:1",
        ]
        .map(Some),
    );
    for origin in origins {
        let headers = match origin {
            Some(origin) => set_header(headers.clone(), "origin", origin),
            None => headers.clone(),
        };
        let reply = edge.post(&headers, ping.to_string()).await;
        assert_eq!(reply.status.as_u16(), 200, "{origin:?}: {reply:?}");
        assert_eq!(reply.json()["result"], json!({ "resultType": "complete" }));
    }
}

/// `with_allowed_origins` lists the browser origins served, instead of
/// loopback: exactly those (scheme, host and port), case aside. New API
/// (did not compile before the fix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_list_replaces_the_loopback_default() {
    let edge = Edge::start(|e| {
        e.with_allowed_origins(["https://app.example.com", "http://localhost:5173/"])
    })
    .await;
    let ping = legacy(1, "ping", json!({}));
    let headers = routing(&ping, Some(ALICE));
    for (origin, status) in [
        ("https://app.example.com", 200),
        ("HTTPS://App.Example.COM", 200),
        ("http://localhost:5173", 200),
        ("http://app.example.com", 403),
        ("https://app.example.com:444", 403),
        ("https://evil.app.example.com", 403),
        ("http://localhost:3000", 403),
        ("http://127.0.0.1:5173", 403),
        ("null", 403),
    ] {
        let reply = edge
            .post(
                &set_header(headers.clone(), "origin", origin),
                ping.to_string(),
            )
            .await;
        assert_eq!(reply.status.as_u16(), status, "{origin}: {reply:?}");
    }
    let reply = edge.post(&headers, ping.to_string()).await;
    assert_eq!(reply.status.as_u16(), 200, "no Origin: {reply:?}");
}

// ----- Content-Type (defect 11) -----

/// A body not declared `application/json` is refused with 415, `-32600`,
/// no `id`, before it is read: a browser can send `text/plain`, a form
/// or no type at all without a CORS preflight. Failed before the fix: every
/// body was read as JSON and the call ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_not_declared_json_is_refused_with_415() {
    let mut edge = Edge::start(|e| e).await;
    let (body, headers) = hang_call();
    for content_type in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-seq",
        "application/*",
        "*/*",
        "json",
        "",
    ] {
        let reply = edge
            .post(
                &set_header(headers.clone(), "content-type", content_type),
                body.to_string(),
            )
            .await;
        let v = assert_refused(&reply, 415, -32600, content_type);
        assert_eq!(
            v["error"]["message"],
            "Invalid request: the Content-Type must be application/json"
        );
    }
    let reply = edge
        .post(&without(headers.clone(), "content-type"), body.to_string())
        .await;
    assert_refused(&reply, 415, -32600, "no Content-Type");
    let mut two = headers.clone();
    header(&mut two, "content-type", "text/plain");
    assert_refused(&edge.post(&two, body.to_string()).await, 415, -32600, "two");
    // Before the body is read: not JSON, or over the limit, still 415.
    let plain = set_header(headers.clone(), "content-type", "text/plain");
    let reply = edge.post(&plain, "{\"jsonrpc\":").await;
    assert_refused(&reply, 415, -32600, "not JSON");
    let reply = edge
        .post(&plain, " ".repeat(mcp_task_layer::DEFAULT_BODY_LIMIT + 1))
        .await;
    assert_refused(&reply, 415, -32600, "over the limit");
    // The Origin is checked first.
    let both = set_header(plain, "origin", "http://evil.example");
    assert_refused(
        &edge.post(&both, body.to_string()).await,
        403,
        -32600,
        "both",
    );
    edge.untouched();
}

/// `application/json` in any case, with parameters, is read. Passed before
/// the fix too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_json_with_parameters_is_read() {
    let edge = Edge::start(|e| e).await;
    let ping = legacy(1, "ping", json!({}));
    let headers = routing(&ping, Some(ALICE));
    for content_type in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=\"UTF-8\"",
        " application/json ; foo=bar",
    ] {
        let reply = edge
            .post(
                &set_header(headers.clone(), "content-type", content_type),
                ping.to_string(),
            )
            .await;
        assert_eq!(reply.status.as_u16(), 200, "{content_type}: {reply:?}");
    }
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
    let mut request = request_head(addr, headers);
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

/// The same for the other refusals made before a body is read: a 1 MB body
/// with a foreign `Origin` or as `text/plain`, written whole first, still
/// reads its 403 or 415. New with the fix of defect 11 (before it these
/// bodies were read and run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_reading_reach_a_client_that_writes_first() {
    let mut edge = Edge::start(|e| e).await;
    let (body, headers) = hang_call();
    let mut padded = body.to_string().into_bytes();
    padded.resize(1_000_000, b' ');
    for (headers, status) in [
        (
            set_header(headers.clone(), "origin", "http://evil.example"),
            403,
        ),
        (
            set_header(headers.clone(), "content-type", "text/plain"),
            415,
        ),
    ] {
        let (written, reply) = write_whole_then_read(edge.addr, &headers, &padded, false).await;
        assert!(written.is_ok(), "{status}: the write broke: {written:?}");
        let reply = reply.unwrap_or_else(|e| panic!("{status}: {e}"));
        assert_refused(&reply, status, -32600, "written whole");
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
