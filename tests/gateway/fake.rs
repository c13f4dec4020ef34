//! A bare HTTP/1.1 MCP upstream for the gateway's HTTP tests: what an SDK
//! server does at the edges (streams it never ends, requests it never
//! answers, questions on its session's stream), on demand.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_task_layer::gateway::UpstreamTarget;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// What the bare upstream below has done.
#[derive(Default)]
pub(crate) struct Fake {
    /// `tools/call` streams still open.
    pub(crate) open: AtomicUsize,
    /// `GET` streams opened.
    pub(crate) gets: AtomicUsize,
    /// `resources/unsubscribe` requests.
    pub(crate) unsubscribes: AtomicUsize,
    /// Pings are taken and never answered.
    pub(crate) mute: AtomicBool,
    /// Pings taken and not answered, their connections still open.
    pub(crate) hung: AtomicUsize,
    /// `tools/list` after the first is taken and never answered.
    pub(crate) relist_hangs: AtomicBool,
    /// `tools/list` requests.
    pub(crate) tools_lists: AtomicUsize,
    /// `initialize` requests: one per connection.
    pub(crate) inits: AtomicUsize,
    /// The session's stream asks an `elicitation/create` (id 777) once a
    /// call's stream is open.
    pub(crate) ask_on_get: AtomicBool,
    /// The gateway's answer to it.
    pub(crate) answer_777: std::sync::Mutex<Option<serde_json::Value>>,
    /// `tools/call` of `silent` still open, no headers sent.
    pub(crate) silent: AtomicUsize,
    /// `notifications/initialized` is taken (202) only after a while.
    pub(crate) slow_initialized: AtomicBool,
    /// Whether it has been taken.
    initialized: AtomicBool,
    /// Requests other than `initialize` and `ping` that came before.
    pub(crate) early: AtomicUsize,
    /// Resuming `GET`s (with `Last-Event-ID`) still open, no headers sent.
    pub(crate) resumes: AtomicUsize,
}

/// A bare HTTP/1.1 MCP upstream, one request at a time per connection. It
/// answers `tools/call` of `hang` with an SSE stream it never ends or
/// writes to, as the TypeScript SDK leaves the stream of a request it was
/// told to cancel, and `resources/subscribe` likewise (it never answers).
/// `blank` is taken (HTTP 202) with no answer; `cut`'s stream gives one
/// event with an id and ends, and a `GET` resuming it never gets headers.
/// Its first `GET` stream ends at once (as a proxy closing
/// an idle stream would); the next says `notifications/tools/list_changed`
/// and its tools are `second` from then on (`first` before).
pub(crate) async fn fake_upstream() -> (UpstreamTarget, Arc<Fake>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let fake = Arc::new(Fake::default());
    let state = Arc::clone(&fake);
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(serve_fake(conn, Arc::clone(&state)));
        }
    });
    (
        UpstreamTarget::Url {
            url,
            headers: vec![],
        },
        fake,
    )
}

async fn serve_fake(conn: tokio::net::TcpStream, fake: Arc<Fake>) {
    const SSE: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let mut conn = tokio::io::BufReader::new(conn);
    loop {
        // The head, then a body of Content-Length bytes.
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut body = vec![0; length];
        if conn.read_exact(&mut body).await.is_err() {
            return;
        }
        if head.starts_with("GET") && head.to_ascii_lowercase().contains("last-event-id:") {
            // A resumed stream's headers never come.
            fake.resumes.fetch_add(1, Ordering::SeqCst);
            let _ = conn.read_to_end(&mut Vec::new()).await;
            fake.resumes.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if head.starts_with("GET") {
            let _ = conn.write_all(SSE).await;
            if fake.gets.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = conn.write_all(b"0\r\n\r\n").await;
                continue;
            }
            let event =
                "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            let _ = conn.write_all(chunk.as_bytes()).await;
            if fake.ask_on_get.load(Ordering::SeqCst) {
                // Bounded: 10 s.
                for _ in 0..200 {
                    if fake.open.load(Ordering::SeqCst) >= 1 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let event = "data: {\"jsonrpc\":\"2.0\",\"id\":777,\"method\":\"elicitation/create\",\"params\":{\"message\":\"a question of no call\",\"requestedSchema\":{\"type\":\"object\"}}}\n\n";
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                let _ = conn.write_all(chunk.as_bytes()).await;
            }
            let _ = conn.read_to_end(&mut Vec::new()).await;
            return;
        }
        if !head.starts_with("POST") {
            let _ = conn
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if msg["method"] == "initialize" {
            fake.inits.fetch_add(1, Ordering::SeqCst);
        }
        if fake.slow_initialized.load(Ordering::SeqCst) {
            if msg["method"] == "notifications/initialized" {
                tokio::time::sleep(Duration::from_millis(300)).await;
                fake.initialized.store(true, Ordering::SeqCst);
            } else if msg.get("id").is_some()
                && msg["method"] != "initialize"
                && msg["method"] != "ping"
                && !fake.initialized.load(Ordering::SeqCst)
            {
                fake.early.fetch_add(1, Ordering::SeqCst);
            }
        }
        if msg["id"] == 777 && msg.get("method").is_none() {
            *fake.answer_777.lock().unwrap() = Some(msg);
            let _ = conn
                .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        if msg["method"] == "ping" && fake.mute.load(Ordering::SeqCst) {
            fake.hung.fetch_add(1, Ordering::SeqCst);
            let _ = conn.read_to_end(&mut Vec::new()).await;
            fake.hung.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let result = match msg["method"].as_str().unwrap_or_default() {
            "tools/list"
                if fake.tools_lists.fetch_add(1, Ordering::SeqCst) >= 1
                    && fake.relist_hangs.load(Ordering::SeqCst) =>
            {
                let _ = conn.read_to_end(&mut Vec::new()).await;
                return;
            }
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": { "tools": { "listChanged": true }, "resources": { "subscribe": true } },
                "serverInfo": { "name": "fake", "version": "1" }
            }),
            "tools/list" => {
                let name = if fake.gets.load(Ordering::SeqCst) > 1 {
                    "second"
                } else {
                    "first"
                };
                json!({ "tools": [
                    { "name": "hang", "inputSchema": { "type": "object" } },
                    { "name": "silent", "inputSchema": { "type": "object" } },
                    { "name": "linger", "inputSchema": { "type": "object" } },
                    { "name": "blank", "inputSchema": { "type": "object" } },
                    { "name": "cut", "inputSchema": { "type": "object" } },
                    { "name": name, "inputSchema": { "type": "object" } }
                ] })
            }
            "tools/call" if msg["params"]["name"] == "silent" => {
                // No headers until the answer, which never comes.
                fake.silent.fetch_add(1, Ordering::SeqCst);
                let _ = conn.read_to_end(&mut Vec::new()).await;
                fake.silent.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            "tools/call" if msg["params"]["name"] == "blank" => {
                // Taken, with no answer in the body.
                let _ = conn
                    .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    .await;
                continue;
            }
            "tools/call" if msg["params"]["name"] == "cut" => {
                // One event with an id, then the stream ends unanswered.
                let event = "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"cut\"}}\n\n";
                let chunk = format!("{:x}\r\n{event}\r\n0\r\n\r\n", event.len());
                let _ = conn.write_all(SSE).await;
                let _ = conn.write_all(chunk.as_bytes()).await;
                continue;
            }
            "tools/call" if msg["params"]["name"] == "linger" => {
                // The answer on its stream, which then stays open.
                let answer = json!({ "jsonrpc": "2.0", "id": msg["id"], "result": {
                    "content": [{ "type": "text", "text": "lingered" }] } });
                let event = format!("data: {answer}\n\n");
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                let _ = conn.write_all(SSE).await;
                let _ = conn.write_all(chunk.as_bytes()).await;
                fake.open.fetch_add(1, Ordering::SeqCst);
                let _ = conn.read_to_end(&mut Vec::new()).await;
                fake.open.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            "tools/call" | "resources/subscribe" => {
                let _ = conn.write_all(SSE).await;
                fake.open.fetch_add(1, Ordering::SeqCst);
                // Until the gateway closes the connection.
                let _ = conn.read_to_end(&mut Vec::new()).await;
                fake.open.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            "resources/unsubscribe" => {
                fake.unsubscribes.fetch_add(1, Ordering::SeqCst);
                json!({})
            }
            _ if msg.get("id").is_none() => {
                let _ = conn
                    .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    .await;
                continue;
            }
            _ => json!({}),
        };
        let answer = json!({ "jsonrpc": "2.0", "id": msg["id"], "result": result }).to_string();
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        let _ = conn.write_all(reply.as_bytes()).await;
    }
}
