//! Slow clients over real TCP (issue 28): `mcp_task_layer::serve` with
//! short deadlines. A request whose head, or whose body, trickles in a byte
//! at a time gets HTTP 408 within its deadline (measured from the head's
//! first byte, or from the end of the head, not between bytes), the
//! connection closes, and the slot the request held is free again; an
//! idle connection closes after the idle timeout.
#![cfg(feature = "axum")]

mod common;

use std::convert::Infallible;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::Method;
use http_body_util::Full;
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, McpEndpoint};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{service_fn, ServiceBuilder};

const HEADER: Duration = Duration::from_millis(500);
const BODY: Duration = Duration::from_millis(500);
/// The pause between two bytes of a slow client.
const PAUSE: Duration = Duration::from_millis(100);
/// How late an answer may come after its deadline on a busy machine.
const SLACK: Duration = Duration::from_millis(1500);

type Inner = tower::util::BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// An endpoint answering every request at once, with the test's body
/// deadline.
fn endpoint() -> McpEndpoint<Inner> {
    let inner = service_fn(|req: JsonRpcRequest| async move {
        Ok::<_, Infallible>(JsonRpcResponse::result(req.id, json!({"ok": true})))
    });
    McpEndpoint::new(Inner::new(inner)).with_body_timeout(BODY)
}

/// Serve the endpoint with the test's deadlines and `idle`.
async fn start(idle: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = endpoint()
        .serve(listener, "/mcp")
        .with_header_timeout(HEADER)
        .with_idle_timeout(idle);
    tokio::spawn(server.into_future());
    addr
}

const REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

fn head(addr: SocketAddr, length: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {length}\r\n\r\n"
    )
}

/// One answer with a `Content-Length`: its status line and body.
async fn read_answer<R: AsyncRead + Unpin>(stream: &mut R) -> (String, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + length {
                let status = head.lines().next().unwrap().to_owned();
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + length]).into_owned();
                return (status, body);
            }
        }
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the connection ended after {} bytes", buf.len());
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Whether the server closes the connection (reads end) within `within`.
async fn closed_within<R: AsyncRead + Unpin>(stream: &mut R, within: Duration) -> bool {
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Write `bytes` one at a time with a pause after each, until they are all
/// sent, a write fails, or `stop` fires; the number sent.
async fn trickle(
    mut write: tokio::net::tcp::OwnedWriteHalf,
    bytes: Vec<u8>,
    mut stop: oneshot::Receiver<()>,
) -> usize {
    for (sent, byte) in bytes.iter().enumerate() {
        if write.write_all(&[*byte]).await.is_err() {
            return sent;
        }
        tokio::select! {
            _ = tokio::time::sleep(PAUSE) => {}
            _ = &mut stop => return sent + 1,
        }
    }
    bytes.len()
}

/// A slow client: `first` at once, then `slow` a byte at a time. Returns
/// the answer's status line and body, how long after the first trickled
/// byte it came, how many bytes were trickled, and whether the connection
/// then closed.
async fn slow_client(
    addr: SocketAddr,
    first: Vec<u8>,
    slow: Vec<u8>,
) -> (String, String, Duration, usize, bool) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (read, mut write) = stream.into_split();
    write.write_all(&first).await.unwrap();
    let (stop, stopped) = oneshot::channel();
    let started = Instant::now();
    let writer = tokio::spawn(trickle(write, slow, stopped));
    let mut read = read;
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), read_answer(&mut read))
        .await
        .expect("an answer within 10 s");
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let sent = writer.await.unwrap();
    let closed = closed_within(&mut read, Duration::from_secs(5)).await;
    (status, body, elapsed, sent, closed)
}

#[tokio::test]
async fn a_head_sent_a_byte_at_a_time_gets_408_within_the_header_deadline() {
    let addr = start(Duration::from_secs(30)).await;
    let request = head(addr, REQUEST.len()) + REQUEST;
    let (status, body, elapsed, sent, closed) =
        slow_client(addr, Vec::new(), request.into_bytes()).await;
    assert_eq!(status, "http/1.1 408 request timeout", "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], -32600, "{body}");
    assert!(
        elapsed >= HEADER - PAUSE && elapsed < HEADER + SLACK,
        "408 after {elapsed:?}, the deadline is {HEADER:?} from the first byte"
    );
    // The client never paused longer than PAUSE: a deadline between bytes
    // would never have fired.
    assert!(sent >= 3, "only {sent} bytes trickled");
    assert!(closed, "the connection is closed after the 408");
}

#[tokio::test]
async fn a_body_sent_a_byte_at_a_time_gets_408_within_the_body_deadline() {
    let addr = start(Duration::from_secs(30)).await;
    let head = head(addr, REQUEST.len());
    let (status, body, elapsed, sent, closed) =
        slow_client(addr, head.into_bytes(), REQUEST.as_bytes().to_vec()).await;
    assert_eq!(status, "http/1.1 408 request timeout", "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], -32600, "{body}");
    assert!(error.get("id").is_none(), "{body}");
    assert!(
        elapsed >= BODY - PAUSE && elapsed < BODY + SLACK,
        "408 after {elapsed:?}, the deadline is {BODY:?} from the end of the head"
    );
    assert!(sent >= 3, "only {sent} bytes trickled");
    assert!(closed, "the connection is closed after the 408");
}

/// The head deadline counts from the head's first byte, not from the
/// connection's start: a client that waits longer than it before it
/// sends, then sends its request at once, is served.
#[tokio::test]
async fn the_header_deadline_starts_at_the_first_byte() {
    let addr = start(Duration::from_secs(30)).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // A client's pause before it writes (not a wait for the server's state).
    tokio::time::sleep(HEADER + PAUSE * 2).await;
    let request = head(addr, REQUEST.len()) + REQUEST;
    stream.write_all(request.as_bytes()).await.unwrap();
    let (status, body) = read_answer(&mut stream).await;
    assert_eq!(status, "http/1.1 200 ok", "{body}");
}

/// A request whose body trickles holds the only slot of a concurrency
/// bound in front of the endpoint; its 408 frees it, and the next request
/// is served.
#[tokio::test]
async fn a_slot_held_by_a_slow_body_is_released() {
    let (entered, mut entries) = mpsc::unbounded_channel();
    let app = endpoint().into_router("/mcp").layer(
        ServiceBuilder::new()
            .layer(GlobalConcurrencyLimitLayer::new(1))
            .map_request(move |request: Request| {
                let _ = entered.send(());
                request
            }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        mcp_task_layer::serve(listener, app)
            .with_header_timeout(HEADER)
            .into_future(),
    );

    let head = head(addr, REQUEST.len());
    let slow = tokio::spawn(slow_client(
        addr,
        head.into_bytes(),
        REQUEST.as_bytes().to_vec(),
    ));
    tokio::time::timeout(Duration::from_secs(10), entries.recv())
        .await
        .expect("the slow request takes the slot")
        .unwrap();
    // While the slow body holds the slot, this request waits for it.
    let next = tokio::spawn(async move {
        let headers = [("content-type".to_owned(), "application/json".to_owned())];
        common::wire::send(
            addr,
            Method::POST,
            &headers,
            Full::new(axum::body::Bytes::from_static(REQUEST.as_bytes())),
        )
        .await
    });
    let (status, body, _, _, closed) = slow.await.unwrap();
    assert_eq!(status, "http/1.1 408 request timeout", "{body}");
    assert!(closed);
    let reply = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the slot is free again after the 408")
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["result"]["ok"], true);
}

/// An idle keep-alive connection closes after the idle timeout; before
/// that it serves a second request.
#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_millis(300);
    let addr = start(idle).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = head(addr, REQUEST.len()) + REQUEST;
    for _ in 0..2 {
        stream.write_all(request.as_bytes()).await.unwrap();
        let (status, body) = read_answer(&mut stream).await;
        assert_eq!(status, "http/1.1 200 ok", "{body}");
    }
    let answered = Instant::now();
    assert!(closed_within(&mut stream, idle + SLACK).await, "still open");
    assert!(answered.elapsed() >= idle - Duration::from_millis(50));

    // A connection that never sends a byte closes too.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert!(closed_within(&mut silent, idle + SLACK).await, "still open");
}
