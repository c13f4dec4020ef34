//! A hostile client over real HTTP: `McpEndpoint` around `common::layer()`
//! and the scripted server, on 127.0.0.1:0. Owner `alice` has five tasks
//! (waiting for input, working, completed, cancelled, and a 2025-11-25 one
//! that is working); then more than 500 malformed or adversarial requests
//! arrive. Each must get its exact answer (HTTP status, JSON-RPC code, id),
//! the server must keep answering, and no task may change.
#![cfg(feature = "axum")]

#[path = "../common/mod.rs"]
mod common;

use common::wire::{bearer, send, Chunked, Reply};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::Method;
use http_body_util::Full;
use mcp_task_layer::{McpEndpoint, TaskEvent, DEFAULT_BODY_LIMIT};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tower::ServiceBuilder;

const TASKS: &str = "io.modelcontextprotocol/tasks";
const PV: &str = "io.modelcontextprotocol/protocolVersion";
const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
const ALICE: &str = "alice";
const BOB: &str = "bob";
/// The one body of every unknown, foreign or other-era task id.
const NOT_FOUND: &str = "Failed to retrieve task: Task not found";
/// A well-formed id that no task has.
const UNKNOWN: &str = "0123456789abcdef0123456789abcdef";

// ----- the server -----

struct Server {
    addr: SocketAddr,
    seen: Arc<common::Seen>,
    events: broadcast::Receiver<TaskEvent>,
}

async fn start() -> Server {
    let seen = Arc::new(common::Seen::default());
    let layer = common::layer();
    let events = layer.subscribe();
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(common::server(Arc::clone(&seen)));
    let app = McpEndpoint::new(service)
        .with_identity(bearer)
        .into_router("/mcp");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server { addr, seen, events }
}

// ----- the client -----

/// A request written by hand, for bodies the server refuses before reading
/// them: it answers 413 and closes, so writing the rest of the body may
/// fail (EPIPE) while the answer is already on its way. The body is written
/// beside the read, its errors ignored, and the answer is read until its
/// `Content-Length` is complete.
async fn send_refused(addr: SocketAddr, headers: &Headers, body: Body) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let mut head = format!("POST /mcp HTTP/1.1\r\nhost: {addr}\r\n").into_bytes();
    for (name, value) in headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    let body = match body {
        Body::Full(bytes) => {
            head.extend_from_slice(format!("content-length: {}\r\n\r\n", bytes.len()).as_bytes());
            bytes
        }
        Body::Chunked(chunks) => {
            head.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            let mut out = Vec::new();
            for chunk in chunks.iter().rev() {
                out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                out.extend_from_slice(chunk);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            out
        }
    };
    let writer = tokio::spawn(async move {
        let _ = write.write_all(&head).await;
        let _ = write.write_all(&body).await;
        write
    });
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let reply = tokio::time::timeout(Duration::from_secs(30), async {
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
                    .unwrap_or(0);
                if buf.len() >= end + 4 + length {
                    let status = head
                        .split(' ')
                        .nth(1)
                        .and_then(|s| s.parse().ok())
                        .expect("an HTTP status line");
                    return Reply {
                        status,
                        content_type: field("content-type:"),
                        body: Bytes::copy_from_slice(&buf[end + 4..end + 4 + length]),
                    };
                }
            }
            match read.read(&mut chunk).await {
                Ok(0) | Err(_) => panic!(
                    "the connection ended before a whole answer: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .expect("an answer within 30 s");
    writer.abort();
    reply
}

type Headers = Vec<(String, Vec<u8>)>;

fn header(headers: &mut Headers, name: &str, value: impl Into<Vec<u8>>) {
    headers.push((name.to_owned(), value.into()));
}

fn set_header(mut headers: Headers, name: &str, value: impl Into<Vec<u8>>) -> Headers {
    headers.retain(|(n, _)| n != name);
    header(&mut headers, name, value);
    headers
}

fn without(mut headers: Headers, name: &str) -> Headers {
    headers.retain(|(n, _)| n != name);
    headers
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
        for _ in chunk.len()..3 {
            out.push('=');
        }
    }
    out
}

/// The headers a conforming client derives from a body (and `caller`'s
/// bearer token): what the endpoint checks, so that only what a case
/// breaks on purpose is wrong.
fn routing(body: &Value, caller: Option<&str>) -> Headers {
    let mut headers = Vec::new();
    header(&mut headers, "content-type", "application/json");
    if let Some(caller) = caller {
        header(&mut headers, "authorization", format!("Bearer {caller}"));
    }
    let Some(version) = body["params"]["_meta"][PV].as_str() else {
        return headers;
    };
    header(&mut headers, "mcp-protocol-version", version);
    let method = body["method"].as_str().unwrap_or_default();
    header(&mut headers, "mcp-method", method);
    let name = match method {
        "tools/call" | "prompts/get" => body["params"]["name"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => body["params"]["taskId"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic());
        let value = if plain {
            name.to_owned()
        } else {
            format!("=?base64?{}?=", base64(name.as_bytes()))
        };
        header(&mut headers, "mcp-name", value);
    }
    headers
}

fn meta(tasks: bool) -> Value {
    let mut caps = json!({ "elicitation": {} });
    if tasks {
        caps["extensions"] = json!({ TASKS: {} });
    }
    json!({ PV: "2026-07-28", CAPS: caps })
}

/// A 2026-07-28 request declaring the tasks extension.
fn modern(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(true);
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A 2025-11-25 request (no `_meta`).
fn legacy(id: i64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

fn accept_name(name: &str) -> Value {
    json!({ "action": "accept", "content": { "name": name } })
}

async fn rpc(addr: SocketAddr, body: &Value, caller: Option<&str>) -> Value {
    let reply = post(addr, routing(body, caller), body.to_string()).await;
    assert_eq!(reply.status.as_u16(), 200, "{body}: {reply:?}");
    serde_json::from_slice(&reply.body).unwrap()
}

async fn post(addr: SocketAddr, headers: Headers, body: impl Into<Bytes>) -> Reply {
    send(addr, Method::POST, &headers, Full::new(body.into())).await
}

// ----- the tasks -----

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum T {
    /// `ask`, waiting for `name`.
    Ask,
    /// `hang`, working.
    Hang,
    /// `ask`, answered and completed.
    Done,
    /// `ask`, cancelled while it waited for input.
    Cancelled,
    /// A 2025-11-25 `hang` task, working.
    Legacy,
}

const ALL: [T; 5] = [T::Ask, T::Hang, T::Done, T::Cancelled, T::Legacy];
const MODERN: [T; 4] = [T::Ask, T::Hang, T::Done, T::Cancelled];

struct World {
    server: Server,
    ids: BTreeMap<T, String>,
    next: i64,
}

impl World {
    fn id(&self, t: T) -> &str {
        &self.ids[&t]
    }

    fn next_id(&mut self) -> i64 {
        self.next += 1;
        self.next
    }

    /// `tasks/get` of a task as alice, in its own era.
    async fn get(&mut self, t: T) -> Value {
        let id = self.next_id();
        let task = self.id(t).to_owned();
        let body = if t == T::Legacy {
            legacy(id, "tasks/get", json!({ "taskId": task }))
        } else {
            modern(id, "tasks/get", json!({ "taskId": task }))
        };
        let v = rpc(self.server.addr, &body, Some(ALICE)).await;
        assert!(v.get("error").is_none(), "{v}");
        v["result"].clone()
    }

    /// Wait, on the layer's events and never on wall time, until a task
    /// has `status`.
    async fn wait_for(&mut self, t: T, status: &str) -> Value {
        for _ in 0..1_000 {
            let body = self.get(t).await;
            if body["status"] == status {
                return body;
            }
            match tokio::time::timeout(Duration::from_secs(30), self.server.events.recv()).await {
                Ok(Ok(_) | Err(broadcast::error::RecvError::Lagged(_))) => {}
                other => panic!("{t:?} never reached {status}: {other:?}, last {body}"),
            }
        }
        panic!("{t:?} never reached {status}");
    }

    async fn snapshot(&mut self) -> BTreeMap<T, Value> {
        let mut out = BTreeMap::new();
        for t in ALL {
            out.insert(t, self.get(t).await);
        }
        out
    }
}

async fn setup() -> World {
    let server = start().await;
    let addr = server.addr;
    let mut w = World {
        server,
        ids: BTreeMap::new(),
        next: 0,
    };
    let mut start_task = |tool: &'static str| {
        let id = w.next_id();
        async move {
            // `ask` works 50 ms before it asks, so it asks inside a task.
            let args = json!({ "delay_ms": 50 });
            let body = modern(id, "tools/call", json!({ "name": tool, "arguments": args }));
            let v = rpc(addr, &body, Some(ALICE)).await;
            assert_eq!(v["result"]["resultType"], "task", "{v}");
            v["result"]["taskId"].as_str().unwrap().to_owned()
        }
    };
    let ask = start_task("ask").await;
    let hang = start_task("hang").await;
    let done = start_task("ask").await;
    let cancelled = start_task("ask").await;
    w.ids.insert(T::Ask, ask);
    w.ids.insert(T::Hang, hang);
    w.ids.insert(T::Done, done);
    w.ids.insert(T::Cancelled, cancelled);

    let id = w.next_id();
    let body = legacy(id, "tools/call", json!({ "name": "hang", "task": {} }));
    let v = rpc(addr, &body, Some(ALICE)).await;
    w.ids.insert(
        T::Legacy,
        v["result"]["task"]["taskId"].as_str().unwrap().to_owned(),
    );

    for t in [T::Ask, T::Done, T::Cancelled] {
        w.wait_for(t, "input_required").await;
    }
    let id = w.next_id();
    let done = w.id(T::Done).to_owned();
    let body = modern(
        id,
        "tasks/update",
        json!({ "taskId": done, "inputResponses": { "name": accept_name("Ada") } }),
    );
    assert_eq!(
        rpc(addr, &body, Some(ALICE)).await["result"],
        json!({ "resultType": "complete" })
    );
    let id = w.next_id();
    let cancelled = w.id(T::Cancelled).to_owned();
    let body = modern(id, "tasks/cancel", json!({ "taskId": cancelled }));
    rpc(addr, &body, Some(ALICE)).await;
    w.wait_for(T::Done, "completed").await;
    w.wait_for(T::Cancelled, "cancelled").await;
    assert_eq!(w.get(T::Hang).await["status"], "working");
    assert_eq!(w.get(T::Legacy).await["status"], "working");
    w
}

// ----- the cases -----

/// What a case must get back.
#[derive(Clone, Debug)]
enum Want {
    /// A JSON-RPC error with this HTTP status and code; `id` is the `id`
    /// member (`None`: no `id` member at all).
    Error {
        status: u16,
        code: i64,
        id: Option<Value>,
    },
    /// `-32602` with exactly the "Task not found" body, HTTP 200.
    NotFound(Value),
    /// HTTP 200 with `{"resultType": "complete"}` (an ack that changes
    /// nothing).
    Ack(Value),
    /// HTTP 200 with what `tasks/get` of this task answered before.
    Same(T, Value),
    /// HTTP 202, empty body.
    Accepted,
    /// HTTP 405.
    NotAllowed,
}

fn error(status: u16, code: i64, id: impl Into<Option<Value>>) -> Want {
    Want::Error {
        status,
        code,
        id: id.into(),
    }
}

enum Body {
    Full(Vec<u8>),
    Chunked(Vec<Bytes>),
}

struct Case {
    what: String,
    method: Method,
    headers: Headers,
    body: Body,
    want: Want,
}

impl Case {
    /// A body the server answers without reading it (HTTP 413).
    fn refused(&self) -> bool {
        matches!(self.want, Want::Error { status: 413, .. })
    }
}

#[derive(Default)]
struct Cases(Vec<Case>);

impl Cases {
    fn raw(
        &mut self,
        what: impl Into<String>,
        headers: Headers,
        body: impl Into<Vec<u8>>,
        want: Want,
    ) {
        self.0.push(Case {
            what: what.into(),
            method: Method::POST,
            headers,
            body: Body::Full(body.into()),
            want,
        });
    }

    /// `body` with the headers a conforming client would send as `caller`.
    fn json(&mut self, what: impl Into<String>, body: &Value, caller: Option<&str>, want: Want) {
        self.raw(what, routing(body, caller), body.to_string(), want);
    }
}

fn parse_error() -> Want {
    error(400, -32700, Value::Null)
}

fn invalid(id: Value) -> Want {
    error(400, -32600, id)
}

fn hostile_cases(ids: &BTreeMap<T, String>) -> Cases {
    let mut c = Cases::default();
    let ask = ids[&T::Ask].clone();
    let hang = ids[&T::Hang].clone();
    let legacy_task = ids[&T::Legacy].clone();
    let mut counter = 1_000_000;
    let mut n = move || {
        counter += 1;
        counter
    };

    // A valid answer to the task that waits for it: every case built on
    // it breaks something else, so none may reach the task.
    let answer = |id: i64, task: &str| {
        modern(
            id,
            "tasks/update",
            json!({ "taskId": task, "inputResponses": { "name": accept_name("Mallory") } }),
        )
    };

    // 1. Bytes that are not JSON: -32700, id null, HTTP 400.
    let valid = answer(n(), &ask);
    let text = valid.to_string();
    let headers = routing(&valid, Some(ALICE));
    for cut in (0..text.len()).step_by(3) {
        c.raw(
            format!("truncated at {cut}"),
            headers.clone(),
            &text.as_bytes()[..cut],
            parse_error(),
        );
    }
    let at = text.find("Mallory").unwrap();
    for bad in [
        &b"\xff"[..],
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"\xf8\x88\x80\x80\x80",
        b"\xe2\x82",
        b"\x80",
    ] {
        let mut bytes = text.as_bytes().to_vec();
        bytes.splice(at..at + 1, bad.iter().copied());
        c.raw(
            format!("invalid UTF-8 {bad:?}"),
            headers.clone(),
            bytes,
            parse_error(),
        );
    }
    let mut with_nul = text.clone().into_bytes();
    with_nul.insert(at, 0);
    c.raw(
        "a raw NUL in a string",
        headers.clone(),
        with_nul,
        parse_error(),
    );
    let mut with_tab = text.clone().into_bytes();
    with_tab.insert(at, b'\n');
    c.raw(
        "a raw newline in a string",
        headers.clone(),
        with_tab,
        parse_error(),
    );
    for (what, body) in [
        ("an empty body", String::new()),
        ("whitespace", " \r\n\t ".into()),
        (
            "NaN",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":NaN}}"#.into(),
        ),
        (
            "Infinity",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":-Infinity}}"#.into(),
        ),
        (
            "a number out of range",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}}"#.into(),
        ),
        (
            "a trailing comma",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping",}"#.into(),
        ),
        (
            "single quotes",
            r#"{'jsonrpc':'2.0','id':1,'method':'ping'}"#.into(),
        ),
        (
            "a comment",
            r#"{"jsonrpc":"2.0","id":1,/* hi */"method":"ping"}"#.into(),
        ),
        ("trailing garbage", format!("{text}xyz")),
        ("two objects", format!("{text}{text}")),
        ("a byte-order mark", format!("\u{feff}{text}")),
        ("a lone surrogate", text.replace("Mallory", "\\ud800")),
        ("a bad escape", text.replace("Mallory", "\\x41")),
        (
            "a leading zero id",
            r#"{"jsonrpc":"2.0","id":01,"method":"ping"}"#.into(),
        ),
        (
            "a hex id",
            r#"{"jsonrpc":"2.0","id":0x10,"method":"ping"}"#.into(),
        ),
        (
            "a plus-signed id",
            r#"{"jsonrpc":"2.0","id":+1,"method":"ping"}"#.into(),
        ),
        (
            "unquoted keys",
            r#"{jsonrpc:"2.0",id:1,method:"ping"}"#.into(),
        ),
        (
            "an unterminated string",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"#.into(),
        ),
        (
            "nesting 129 deep",
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"a":{}1{}}}}}"#,
                "[".repeat(129),
                "]".repeat(129)
            ),
        ),
        ("nesting 100000 deep", "[".repeat(100_000)),
        ("the word null, misspelt", "nul".into()),
    ] {
        c.raw(what, headers.clone(), body, parse_error());
    }

    // 2. JSON that is not one request object: -32600, HTTP 400, the id
    // when it can be read.
    for (what, body) in [
        ("a batch", json!([valid.clone()])),
        ("an empty batch", json!([])),
        ("a batch of two", json!([valid.clone(), valid.clone()])),
        ("a nested batch", json!([[valid.clone()]])),
        ("null", Value::Null),
        ("true", json!(true)),
        ("a number", json!(7)),
        ("a string", json!("tasks/update")),
        ("a float", json!(1.5)),
    ] {
        c.json(what, &body, Some(ALICE), invalid(Value::Null));
    }
    let mut broken = |what: &str, f: &dyn Fn(&mut Value), id: Value| {
        let mut body = answer(4242, &ask);
        f(&mut body);
        let headers = routing(&answer(0, &ask), Some(ALICE));
        c.raw(
            format!("not a request: {what}"),
            headers,
            body.to_string(),
            invalid(id),
        );
    };
    for (what, v) in [
        ("jsonrpc missing", None),
        ("jsonrpc 1.0", Some(json!("1.0"))),
        ("jsonrpc a number", Some(json!(2.0))),
        ("jsonrpc padded", Some(json!("2.0 "))),
        ("jsonrpc null", Some(Value::Null)),
        ("jsonrpc an object", Some(json!({}))),
    ] {
        broken(
            what,
            &|b: &mut Value| match &v {
                Some(v) => b["jsonrpc"] = v.clone(),
                None => {
                    b.as_object_mut().unwrap().remove("jsonrpc");
                }
            },
            json!(4242),
        );
    }
    for (what, v) in [
        ("method missing", None),
        ("method null", Some(Value::Null)),
        ("method a number", Some(json!(1))),
        ("method an array", Some(json!(["tasks/update"]))),
        ("method an object", Some(json!({"name": "tasks/update"}))),
        ("method true", Some(json!(true))),
    ] {
        broken(
            what,
            &|b: &mut Value| match &v {
                Some(v) => b["method"] = v.clone(),
                None => {
                    b.as_object_mut().unwrap().remove("method");
                }
            },
            json!(4242),
        );
    }
    for (what, v) in [
        ("id null", Value::Null),
        ("id a float", json!(1.5)),
        ("id true", json!(true)),
        ("id an array", json!([1])),
        ("id an object", json!({"id": 1})),
        ("id beyond i64", json!(9_223_372_036_854_775_808u64)),
        ("id a float with exponent", json!(1e3)),
    ] {
        broken(what, &|b: &mut Value| b["id"] = v.clone(), Value::Null);
    }
    for (what, v) in [
        ("params an array", json!([{ "taskId": ask.clone() }])),
        ("params a string", json!("taskId")),
        ("params a number", json!(1)),
        ("params true", json!(true)),
        ("params null", Value::Null),
    ] {
        broken(what, &|b: &mut Value| b["params"] = v.clone(), json!(4242));
    }
    // Responses nobody waits for: HTTP 400, -32600, no id member.
    for (what, body) in [
        (
            "a response to nothing",
            json!({"jsonrpc": "2.0", "id": "srv-00000000000000000000000000000000", "result": {}}),
        ),
        (
            "an error response to nothing",
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}),
        ),
        (
            "a response with result and error",
            json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}),
        ),
        (
            "a 1.0 response",
            json!({"jsonrpc": "1.0", "id": 1, "result": {}}),
        ),
        (
            "a response without id",
            json!({"jsonrpc": "2.0", "result": {}}),
        ),
        (
            "an error response with a string error",
            json!({"jsonrpc": "2.0", "id": 1, "error": "bad"}),
        ),
    ] {
        c.json(what, &body, Some(ALICE), error(400, -32600, None));
    }

    // 3. Bodies over the limit: HTTP 413, -32600, id null. Each carries a
    // valid answer.
    let mut padded = answer(n(), &ask).to_string().into_bytes();
    padded.resize(DEFAULT_BODY_LIMIT + 1, b' ');
    c.raw(
        "a body one byte over the limit",
        headers.clone(),
        padded.clone(),
        error(413, -32600, Value::Null),
    );
    let chunks: Vec<Bytes> = padded
        .chunks(256 * 1024)
        .rev()
        .map(Bytes::copy_from_slice)
        .collect();
    c.0.push(Case {
        what: "a chunked body over the limit".into(),
        method: Method::POST,
        headers: without(headers.clone(), "content-length"),
        body: Body::Chunked(chunks),
        want: error(413, -32600, Value::Null),
    });
    // Exactly at the limit is read: a 4 MiB tasks/get of alice's task.
    let get_ask = modern(n(), "tasks/get", json!({ "taskId": ask }));
    let mut at_limit = get_ask.to_string().into_bytes();
    at_limit.resize(DEFAULT_BODY_LIMIT, b' ');
    c.raw(
        "a body exactly at the limit",
        routing(&get_ask, Some(ALICE)),
        at_limit,
        Want::Same(T::Ask, get_ask["id"].clone()),
    );

    // 4. 2026-07-28 headers that disagree with the body: -32020, HTTP 400,
    // the request's id.
    let bodies = [
        answer(n(), &ask),
        modern(n(), "tasks/cancel", json!({ "taskId": hang })),
        modern(n(), "tasks/get", json!({ "taskId": ask })),
        modern(
            n(),
            "tools/call",
            json!({ "name": "hang", "arguments": {} }),
        ),
    ];
    for body in &bodies {
        let good = routing(body, Some(ALICE));
        let method = body["method"].as_str().unwrap();
        let id = body["id"].clone();
        let mut variants: Vec<(String, Headers)> = vec![
            (
                "no MCP-Protocol-Version".into(),
                without(good.clone(), "mcp-protocol-version"),
            ),
            (
                "an older MCP-Protocol-Version".into(),
                set_header(good.clone(), "mcp-protocol-version", "2025-11-25"),
            ),
            (
                "a future MCP-Protocol-Version".into(),
                set_header(good.clone(), "mcp-protocol-version", "2026-07-29"),
            ),
            ("no Mcp-Method".into(), without(good.clone(), "mcp-method")),
            (
                "another Mcp-Method".into(),
                set_header(good.clone(), "mcp-method", "ping"),
            ),
            (
                "an upper-case Mcp-Method".into(),
                set_header(good.clone(), "mcp-method", method.to_uppercase()),
            ),
            ("no Mcp-Name".into(), without(good.clone(), "mcp-name")),
            (
                "another task in Mcp-Name".into(),
                set_header(good.clone(), "mcp-name", UNKNOWN),
            ),
            (
                "an upper-case Mcp-Name".into(),
                set_header(
                    good.clone(),
                    "mcp-name",
                    body["params"]["taskId"]
                        .as_str()
                        .or(body["params"]["name"].as_str())
                        .unwrap()
                        .to_uppercase(),
                ),
            ),
            (
                "a non-ASCII Mcp-Name".into(),
                set_header(good.clone(), "mcp-name", &b"t\xe9st"[..]),
            ),
            (
                "a malformed base64 Mcp-Name".into(),
                set_header(good.clone(), "mcp-name", "=?base64?!!!?="),
            ),
            (
                "a base64 Mcp-Name of something else".into(),
                set_header(
                    good.clone(),
                    "mcp-name",
                    format!("=?base64?{}?=", base64(b"other")),
                ),
            ),
        ];
        for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
            let mut repeated = good.clone();
            let value = good.iter().find(|(n, _)| n == name).unwrap().1.clone();
            header(&mut repeated, name, value);
            variants.push((format!("a repeated {name}"), repeated));
        }
        for (what, headers) in variants {
            c.raw(
                format!("{method}: {what}"),
                headers,
                body.to_string(),
                error(400, -32020, id.clone()),
            );
        }
    }
    // The same for notifications: no id member.
    for body in [
        modern(0, "tasks/cancel", json!({ "taskId": hang })),
        answer(0, &ask),
    ] {
        let mut body = body;
        body.as_object_mut().unwrap().remove("id");
        let headers = set_header(routing(&body, Some(ALICE)), "mcp-method", "ping");
        c.raw(
            "a notification with a wrong Mcp-Method",
            headers,
            body.to_string(),
            error(400, -32020, None),
        );
    }

    // 5. tasks/* without the tasks extension: -32021, HTTP 400.
    let caps_variants: Vec<(&str, Value)> = vec![
        ("no clientCapabilities", json!({ PV: "2026-07-28" })),
        (
            "empty clientCapabilities",
            json!({ PV: "2026-07-28", CAPS: {} }),
        ),
        (
            "clientCapabilities null",
            json!({ PV: "2026-07-28", CAPS: null }),
        ),
        (
            "clientCapabilities a string",
            json!({ PV: "2026-07-28", CAPS: "tasks" }),
        ),
        (
            "extensions null",
            json!({ PV: "2026-07-28", CAPS: { "extensions": null } }),
        ),
        (
            "extensions an array",
            json!({ PV: "2026-07-28", CAPS: { "extensions": [TASKS] } }),
        ),
        (
            "the extension true",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: true } } }),
        ),
        (
            "the extension a string",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: "yes" } } }),
        ),
        (
            "the extension null",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: null } } }),
        ),
        (
            "the extension an array",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: [] } } }),
        ),
        (
            "a misspelt extension",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { "io.modelcontextprotocol/task": {} } } }),
        ),
        (
            "the extension outside clientCapabilities",
            json!({ PV: "2026-07-28", "extensions": { TASKS: {} } }),
        ),
        (
            "legacy capabilities.tasks",
            json!({ PV: "2026-07-28", CAPS: { "tasks": {} } }),
        ),
    ];
    for (what, m) in &caps_variants {
        for (method, params) in [
            ("tasks/get", json!({ "taskId": ask })),
            (
                "tasks/update",
                json!({ "taskId": ask, "inputResponses": { "name": accept_name("Mallory") } }),
            ),
            ("tasks/cancel", json!({ "taskId": hang })),
        ] {
            let id = n();
            let mut body = modern(id, method, params);
            body["params"]["_meta"] = m.clone();
            c.json(
                format!("{method} with {what}"),
                &body,
                Some(ALICE),
                error(400, -32021, json!(id)),
            );
        }
    }
    for tool in ["hang", "ask", "nope"] {
        let id = n();
        let mut body = modern(id, "tools/call", json!({ "name": tool, "arguments": {} }));
        body["params"]["_meta"] = meta(false);
        c.json(
            format!("{tool} as a task without the extension"),
            &body,
            Some(ALICE),
            error(400, -32021, json!(id)),
        );
    }

    // 6. Methods the 2026-07-28 layer does not have: -32601, HTTP 404.
    for (method, params) in [
        ("tasks/result", json!({ "taskId": ask })),
        ("tasks/list", json!({})),
        ("tasks/list", json!({ "cursor": "00" })),
        ("tasks/Get", json!({ "taskId": ask })),
        ("TASKS/GET", json!({ "taskId": ask })),
        ("tasks/delete", json!({ "taskId": ask })),
        ("tasks/", json!({ "taskId": ask })),
        ("tasks/update/", json!({ "taskId": ask })),
    ] {
        let id = n();
        c.json(
            format!("modern {method:?}"),
            &modern(id, method, params.clone()),
            Some(ALICE),
            error(404, -32601, json!(id)),
        );
        let id = n();
        let mut body = modern(id, method, params);
        body["params"]["_meta"] = meta(false);
        c.json(
            format!("modern {method:?} without the extension"),
            &body,
            Some(ALICE),
            error(404, -32601, json!(id)),
        );
    }
    let id = n();
    c.json(
        "2025-11-25 tasks/update",
        &legacy(
            id,
            "tasks/update",
            json!({ "taskId": legacy_task, "inputResponses": {} }),
        ),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    let id = n();
    c.json(
        "2025-11-25 tasks/update of a modern task",
        &legacy(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": { "name": accept_name("Mallory") } }),
        ),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );

    // 7. Bad task ids: -32602; strings that name no task of the caller get
    // exactly the "not found" body.
    let wrong_types: Vec<(&str, Value)> = vec![
        ("missing", Value::Null),
        ("null", json!(null)),
        ("a number", json!(1)),
        ("a float", json!(1.5)),
        ("true", json!(true)),
        ("an array", json!([ask.clone()])),
        ("an object", json!({ "taskId": ask.clone() })),
        ("a huge number", json!(u64::MAX)),
    ];
    let wrong_strings: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("a space", " ".into()),
        ("upper case", ask.to_uppercase()),
        ("with a trailing space", format!("{ask} ")),
        ("with a leading space", format!(" {ask}")),
        ("one digit short", ask[..31].to_owned()),
        ("one digit long", format!("{ask}0")),
        ("with a NUL", format!("{ask}\u{0}")),
        ("with unicode", format!("{ask}é")),
        ("a path", format!("../{ask}")),
        ("a wildcard", "*".into()),
        ("SQL", "' OR '1'='1".into()),
        ("4 KiB", "a".repeat(4096)),
        (
            "another owner's prefix",
            format!("{}{}", &ask[..16], &hang[16..]),
        ),
        ("unknown", UNKNOWN.into()),
    ];
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = |task: Option<Value>| {
            let mut p = json!({ "inputResponses": { "name": accept_name("Mallory") } });
            if method != "tasks/update" {
                p = json!({});
            }
            if let Some(task) = task {
                p["taskId"] = task;
            }
            p
        };
        for (what, v) in &wrong_types {
            let id = n();
            let task = (*what != "missing").then(|| v.clone());
            c.json(
                format!("{method}: taskId {what}"),
                &modern(id, method, params(task)),
                Some(ALICE),
                error(200, -32602, json!(id)),
            );
        }
        for (what, s) in &wrong_strings {
            let id = n();
            c.json(
                format!("{method}: taskId {what}"),
                &modern(id, method, params(Some(json!(s)))),
                Some(ALICE),
                Want::NotFound(json!(id)),
            );
        }
    }

    // 8. Other owners, no owner, the other era: exactly "not found".
    let callers: [(&str, Option<&str>); 5] = [
        ("bob", Some(BOB)),
        ("nobody", None),
        ("an upper-case alice", Some("ALICE")),
        ("alice with a leading space", Some(" alice")),
        ("an empty bearer", Some("")),
    ];
    for t in MODERN {
        let task = ids[&t].clone();
        for (who, caller) in callers {
            for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
                let id = n();
                let mut params = json!({ "taskId": task });
                if method == "tasks/update" {
                    params["inputResponses"] = json!({ "name": accept_name("Mallory") });
                }
                c.json(
                    format!("{method} of {t:?} by {who}"),
                    &modern(id, method, params),
                    caller,
                    Want::NotFound(json!(id)),
                );
            }
        }
        for method in ["tasks/get", "tasks/cancel", "tasks/result"] {
            let id = n();
            c.json(
                format!("2025-11-25 {method} of modern {t:?}"),
                &legacy(id, method, json!({ "taskId": task })),
                Some(ALICE),
                Want::NotFound(json!(id)),
            );
        }
    }
    for (who, caller) in callers {
        for method in ["tasks/get", "tasks/cancel", "tasks/result"] {
            let id = n();
            c.json(
                format!("2025-11-25 {method} of the legacy task by {who}"),
                &legacy(id, method, json!({ "taskId": legacy_task })),
                caller,
                Want::NotFound(json!(id)),
            );
        }
    }
    for method in ["tasks/get", "tasks/cancel"] {
        let id = n();
        c.json(
            format!("modern {method} of the legacy task"),
            &modern(id, method, json!({ "taskId": legacy_task })),
            Some(ALICE),
            Want::NotFound(json!(id)),
        );
    }
    let id = n();
    c.json(
        "modern tasks/update of the legacy task",
        &answer(id, &legacy_task),
        Some(ALICE),
        Want::NotFound(json!(id)),
    );

    // 9. Malformed inputResponses: -32602, whatever the task.
    let mut deep33 = json!("x");
    for _ in 0..33 {
        deep33 = json!({ "d": deep33 });
    }
    let mut deep100 = json!(1);
    for _ in 0..100 {
        deep100 = json!([deep100]);
    }
    let many: serde_json::Map<String, Value> = (0..65)
        .map(|i| {
            (
                if i == 0 {
                    "name".to_owned()
                } else {
                    format!("k{i}")
                },
                accept_name("x"),
            )
        })
        .collect();
    let bad_answers: Vec<(&str, Option<Value>)> = vec![
        ("missing", None),
        ("null", Some(Value::Null)),
        ("an array", Some(json!([accept_name("Mallory")]))),
        ("a string", Some(json!("Mallory"))),
        ("a number", Some(json!(1))),
        ("true", Some(json!(true))),
        (
            "an answer that is a string",
            Some(json!({ "name": "Mallory" })),
        ),
        ("an answer that is a number", Some(json!({ "name": 7 }))),
        ("an answer that is null", Some(json!({ "name": null }))),
        (
            "an answer that is an array",
            Some(json!({ "name": [accept_name("Mallory")] })),
        ),
        (
            "a valid answer beside a string",
            Some(json!({ "name": accept_name("Mallory"), "x": "y" })),
        ),
        (
            "a valid answer beside null",
            Some(json!({ "name": accept_name("Mallory"), "x": null })),
        ),
        (
            "a valid answer beside an array",
            Some(json!({ "x": [], "name": accept_name("Mallory") })),
        ),
        ("65 answers", Some(Value::Object(many))),
        (
            "an answer over 1 MiB",
            Some(json!({ "name": accept_name(&"m".repeat(1 << 20)) })),
        ),
        (
            "answers over 1 MiB together",
            Some(
                json!({ "name": accept_name(&"m".repeat(600_000)), "zz": accept_name(&"m".repeat(600_000)) }),
            ),
        ),
        ("an answer 34 deep", Some(json!({ "name": deep33 }))),
        (
            "an unknown key 101 deep",
            Some(json!({ "name": accept_name("Mallory"), "zz": { "deep": deep100 } })),
        ),
    ];
    for t in [T::Ask, T::Hang, T::Done] {
        let task = ids[&t].clone();
        for (what, answers) in &bad_answers {
            let id = n();
            let mut params = json!({ "taskId": task });
            if let Some(a) = answers {
                params["inputResponses"] = a.clone();
            }
            c.json(
                format!("tasks/update of {t:?}: inputResponses {what}"),
                &modern(id, "tasks/update", params),
                Some(ALICE),
                error(200, -32602, json!(id)),
            );
        }
    }

    // 10. Stale, replayed and unknown keys: acked, nothing changes.
    let stale_keys = [
        "name.2",
        "Name",
        "name ",
        " name",
        "",
        "nam",
        "name\u{0}",
        "inputRequests",
        "__proto__",
    ];
    for key in stale_keys {
        let id = n();
        let body = modern(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": { key: accept_name("Mallory") } }),
        );
        c.json(
            format!("tasks/update of Ask with key {key:?}"),
            &body,
            Some(ALICE),
            Want::Ack(json!(id)),
        );
    }
    let id = n();
    c.json(
        "tasks/update of Ask with no answers",
        &modern(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": {} }),
        ),
        Some(ALICE),
        Want::Ack(json!(id)),
    );
    let unknown64: serde_json::Map<String, Value> =
        (0..64).map(|i| (format!("k{i}"), json!({}))).collect();
    let id = n();
    c.json(
        "tasks/update of Ask with 64 unknown keys",
        &modern(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": unknown64 }),
        ),
        Some(ALICE),
        Want::Ack(json!(id)),
    );
    for t in [T::Hang, T::Done, T::Cancelled] {
        let task = ids[&t].clone();
        for _ in 0..2 {
            let id = n();
            c.json(
                format!("a replayed answer to {t:?}"),
                &answer(id, &task),
                Some(ALICE),
                Want::Ack(json!(id)),
            );
        }
    }
    for t in [T::Done, T::Cancelled] {
        let task = ids[&t].clone();
        let id = n();
        c.json(
            format!("tasks/cancel of terminal {t:?}"),
            &modern(id, "tasks/cancel", json!({ "taskId": task })),
            Some(ALICE),
            Want::Ack(json!(id)),
        );
    }

    // 11. 2025-11-25 tasks/list with bad cursors: -32602.
    let hex = |s: &[u8]| s.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let cursors: Vec<(&str, Value)> = vec![
        ("not hex", json!("zz")),
        ("odd length", json!("abc")),
        ("no colon", json!(hex(b"nocolon"))),
        (
            "a non-number time",
            json!(hex(format!("x:{legacy_task}").as_bytes())),
        ),
        (
            "a time out of range",
            json!(hex(b"99999999999999999999999:abc")),
        ),
        ("not UTF-8", json!(hex(b"\xff\xfe:1"))),
        ("over 512 characters", json!("30".repeat(300))),
        ("unicode", json!("éé")),
        ("a sign", json!("+1")),
        ("a number", json!(12)),
        ("true", json!(true)),
        ("an array", json!(["00"])),
        ("an object", json!({ "after": legacy_task })),
    ];
    for (who, caller) in [("alice", Some(ALICE)), ("bob", Some(BOB))] {
        for (what, cursor) in &cursors {
            let id = n();
            c.json(
                format!("2025-11-25 tasks/list by {who} with a cursor {what}"),
                &legacy(id, "tasks/list", json!({ "cursor": cursor })),
                caller,
                error(200, -32602, json!(id)),
            );
        }
    }

    // 12. Tool calls the layer refuses before any handler runs.
    let id = n();
    c.json(
        "2025-11-25 hang without params.task",
        &legacy(id, "tools/call", json!({ "name": "hang" })),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    let id = n();
    c.json(
        "2025-11-25 hang with params.task a string",
        &legacy(id, "tools/call", json!({ "name": "hang", "task": "yes" })),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    let id = n();
    c.json(
        "2025-11-25 echo as a task",
        &legacy(id, "tools/call", json!({ "name": "echo", "task": {} })),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    for (what, args) in [
        (
            "arguments over 1 MiB",
            json!({ "blob": "b".repeat(1 << 20) }),
        ),
        (
            "a string argument over 1 MiB",
            json!("s".repeat((1 << 20) + 1)),
        ),
    ] {
        let id = n();
        c.json(
            format!("hang with {what}"),
            &modern(
                id,
                "tools/call",
                json!({ "name": "hang", "arguments": args }),
            ),
            Some(ALICE),
            error(200, -32602, json!(id)),
        );
    }
    let id = n();
    let mut body = modern(id, "tools/call", json!({ "name": "hang", "arguments": {} }));
    body["params"]["_meta"]["pad"] = json!("p".repeat(1 << 20));
    c.json(
        "hang with a _meta over 1 MiB",
        &body,
        Some(ALICE),
        error(200, -32602, json!(id)),
    );

    // 13. Notifications that would change a task if they came from alice:
    // 202 and nothing else.
    for (what, mut body, caller) in [
        (
            "bob cancels Hang",
            modern(0, "tasks/cancel", json!({ "taskId": hang })),
            Some(BOB),
        ),
        ("bob answers Ask", answer(0, &ask), Some(BOB)),
        (
            "nobody cancels Hang",
            modern(0, "tasks/cancel", json!({ "taskId": hang })),
            None,
        ),
        (
            "bob cancels the legacy task",
            legacy(0, "tasks/cancel", json!({ "taskId": legacy_task })),
            Some(BOB),
        ),
        (
            "alice cancels Hang without the extension",
            {
                let mut b = modern(0, "tasks/cancel", json!({ "taskId": hang }));
                b["params"]["_meta"] = meta(false);
                b
            },
            Some(ALICE),
        ),
        (
            "alice answers Ask with a non-object answer",
            modern(
                0,
                "tasks/update",
                json!({ "taskId": ask, "inputResponses": { "name": accept_name("M"), "x": 1 } }),
            ),
            Some(ALICE),
        ),
    ] {
        body.as_object_mut().unwrap().remove("id");
        c.json(
            format!("notification: {what}"),
            &body,
            caller,
            Want::Accepted,
        );
    }

    // 14. Duplicate keys: the last one counts, everywhere.
    let h = |method: &str, name: Option<&str>, caller: &str| {
        let mut h = Vec::new();
        header(&mut h, "content-type", "application/json");
        header(&mut h, "authorization", format!("Bearer {caller}"));
        header(&mut h, "mcp-protocol-version", "2026-07-28");
        header(&mut h, "mcp-method", method);
        if let Some(name) = name {
            header(&mut h, "mcp-name", name);
        }
        h
    };
    let m = meta(true).to_string();
    c.raw(
        "duplicate ids",
        h("tasks/get", Some(UNKNOWN), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":1,"id":"dup","method":"tasks/get","params":{{"taskId":"{UNKNOWN}","_meta":{m}}}}}"#),
        Want::NotFound(json!("dup")),
    );
    c.raw(
        "duplicate taskIds, the last one alice's, sent by bob",
        h("tasks/cancel", Some(&hang), BOB),
        format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{{"taskId":"{UNKNOWN}","taskId":"{hang}","_meta":{m}}}}}"#),
        Want::NotFound(json!(2)),
    );
    c.raw(
        "duplicate methods, cancel then get",
        h("tasks/get", Some(&hang), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","method":"tasks/get","params":{{"taskId":"{hang}","_meta":{m}}}}}"#),
        Want::Same(T::Hang, json!(3)),
    );
    c.raw(
        "duplicate answers, the last one not an object",
        h("tasks/update", Some(&ask), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":4,"method":"tasks/update","params":{{"taskId":"{ask}","inputResponses":{{"name":{},"name":"x"}},"_meta":{m}}}}}"#, accept_name("M")),
        error(200, -32602, json!(4)),
    );
    c.raw(
        "duplicate _meta, the last one without the extension",
        h("tasks/cancel", Some(&hang), ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{{"taskId":"{hang}","_meta":{m},"_meta":{}}}}}"#, meta(false)),
        error(400, -32021, json!(5)),
    );
    c.raw(
        "duplicate params, the last one empty",
        h("tasks/update", None, ALICE),
        format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tasks/update","params":{{"taskId":"{ask}","inputResponses":{{"name":{}}},"_meta":{m}}},"params":{{"_meta":{m}}}}}"#, accept_name("M")),
        error(200, -32602, json!(6)),
    );
    for (what, id) in [
        ("a reused id", json!(1)),
        ("a string id", json!("x")),
        ("an empty string id", json!("")),
        ("the largest id", json!(i64::MAX)),
        ("the smallest id", json!(i64::MIN)),
    ] {
        let mut body = modern(0, "tasks/get", json!({ "taskId": UNKNOWN }));
        body["id"] = id.clone();
        c.json(
            format!("tasks/get with {what}"),
            &body,
            Some(ALICE),
            Want::NotFound(id),
        );
    }

    // 15. Other HTTP methods: 405.
    for method in [
        Method::GET,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
    ] {
        c.0.push(Case {
            what: format!("HTTP {method}"),
            method,
            headers: routing(&valid, Some(ALICE)),
            body: Body::Full(valid.to_string().into_bytes()),
            want: Want::NotAllowed,
        });
    }

    // 16. Odd but harmless headers: the body decides.
    let id = n();
    let body = modern(id, "tasks/cancel", json!({ "taskId": hang }));
    c.raw(
        "text/plain",
        set_header(routing(&body, Some(BOB)), "content-type", "text/plain"),
        body.to_string(),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = modern(id, "tasks/get", json!({ "taskId": UNKNOWN }));
    let mut hs = routing(&body, Some(ALICE));
    header(&mut hs, "accept", "text/event-stream");
    c.raw(
        "an SSE Accept on an error",
        hs,
        body.to_string(),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = modern(id, "tasks/cancel", json!({ "taskId": hang }));
    let mut hs = routing(&body, Some(BOB));
    header(&mut hs, "authorization", "Bearer alice");
    c.raw(
        "two bearer tokens, bob's first",
        hs,
        body.to_string(),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = modern(id, "tasks/get", json!({ "taskId": ask }));
    let hs = set_header(routing(&body, Some(ALICE)), "authorization", "bearer alice");
    c.raw(
        "a lower-case bearer scheme",
        hs,
        body.to_string(),
        Want::NotFound(json!(id)),
    );

    // 17. Huge strings, unknown keys and deep nesting where they are
    // allowed: the request is served as if they were not there.
    let id = n();
    let mut body = modern(
        id,
        "tasks/get",
        json!({ "taskId": ask, "junk": "j".repeat(3 << 20) }),
    );
    body["junk2"] = json!({ "more": [1, 2, 3] });
    c.json(
        "tasks/get of Ask with a 3 MiB unknown key",
        &body,
        Some(ALICE),
        Want::Same(T::Ask, json!(id)),
    );
    let id = n();
    let body = modern(
        id,
        "tasks/get",
        json!({ "taskId": UNKNOWN, "junk": "j".repeat(3 << 20) }),
    );
    c.json(
        "tasks/get of an unknown task with a 3 MiB unknown key",
        &body,
        Some(ALICE),
        Want::NotFound(json!(id)),
    );
    let big_id = "i".repeat(1 << 20);
    c.json("a 1 MiB string id", &json!({ "jsonrpc": "2.0", "id": big_id, "method": "tasks/get", "params": { "taskId": UNKNOWN } }), Some(ALICE), Want::NotFound(json!(big_id)));
    let id = n();
    let mut body = modern(id, "tasks/get", json!({ "taskId": hang, "deep": deep100 }));
    body["params"]["_meta"]["x-unknown"] = json!({ "a": [1, { "b": null }] });
    c.json(
        "tasks/get of Hang with deep unknown keys",
        &body,
        Some(ALICE),
        Want::Same(T::Hang, json!(id)),
    );
    let id = n();
    let body = modern(
        id,
        "tasks/cancel",
        json!({ "taskId": hang, "force": true, "reason": "r".repeat(100_000) }),
    );
    c.json(
        "bob cancels Hang with force: true",
        &body,
        Some(BOB),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = legacy(
        id,
        "tasks/get",
        json!({ "taskId": legacy_task, "junk": [null, {}, []] }),
    );
    c.json(
        "2025-11-25 tasks/get with unknown keys",
        &body,
        Some(ALICE),
        Want::Same(T::Legacy, json!(id)),
    );

    c
}

/// Check one reply; `Err` says how it is wrong.
fn check(reply: &Reply, want: &Want, before: &BTreeMap<T, Value>) -> Result<(), String> {
    let json = || -> Result<Value, String> {
        if reply.content_type.as_deref() != Some("application/json") {
            return Err(format!("content type {:?}", reply.content_type));
        }
        let v: Value =
            serde_json::from_slice(&reply.body).map_err(|e| format!("body is not JSON: {e}"))?;
        if v["jsonrpc"] != "2.0" {
            return Err(format!("no jsonrpc 2.0: {v}"));
        }
        Ok(v)
    };
    let expect_status = |status: u16| {
        if reply.status.as_u16() == status {
            Ok(())
        } else {
            Err(format!(
                "HTTP {} instead of {status}",
                reply.status.as_u16()
            ))
        }
    };
    let result_with_id = |id: &Value| -> Result<Value, String> {
        expect_status(200)?;
        let v = json()?;
        if &v["id"] != id {
            return Err(format!("id {} instead of {id}", v["id"]));
        }
        v.get("result")
            .cloned()
            .ok_or_else(|| format!("not a result: {v}"))
    };
    match want {
        Want::Error { status, code, id } => {
            expect_status(*status)?;
            let v = json()?;
            if v.get("result").is_some() {
                return Err(format!("a result: {v}"));
            }
            if v["error"]["code"] != *code {
                return Err(format!("error {} instead of {code}", v["error"]));
            }
            if !v["error"]["message"].is_string() {
                return Err(format!("no message: {v}"));
            }
            if v.get("id") != id.as_ref() {
                return Err(format!("id {:?} instead of {id:?}", v.get("id")));
            }
        }
        Want::NotFound(id) => {
            expect_status(200)?;
            let v = json()?;
            let expected = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32602, "message": NOT_FOUND } });
            if v != expected {
                return Err(format!("{v} instead of the not-found body"));
            }
        }
        Want::Ack(id) => {
            let r = result_with_id(id)?;
            if r != json!({ "resultType": "complete" }) {
                return Err(format!("{r} instead of an ack"));
            }
        }
        Want::Same(t, id) => {
            let r = result_with_id(id)?;
            if r != before[t] {
                return Err(format!("{r} instead of {}", before[t]));
            }
        }
        Want::Accepted => {
            expect_status(202)?;
            if !reply.body.is_empty() {
                return Err(format!("a body: {:?}", reply.body));
            }
        }
        Want::NotAllowed => expect_status(405)?,
    }
    Ok(())
}

fn label(want: &Want) -> String {
    match want {
        Want::Error { status, code, .. } => format!("HTTP {status} {code}"),
        Want::NotFound(_) => "HTTP 200 -32602 task not found".into(),
        Want::Ack(_) => "HTTP 200 ack, no change".into(),
        Want::Same(..) => "HTTP 200 the unchanged task".into(),
        Want::Accepted => "HTTP 202".into(),
        Want::NotAllowed => "HTTP 405".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_hostile_requests_change_nothing() {
    let mut w = setup().await;
    let addr = w.server.addr;
    let before = w.snapshot().await;
    let calls_before: Vec<usize> = ["ask", "hang", "echo"]
        .iter()
        .map(|t| w.server.seen.calls(t))
        .collect();

    let cases = hostile_cases(&w.ids);
    assert!(cases.0.len() >= 500, "only {} cases", cases.0.len());
    let mut failures = Vec::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let total = cases.0.len();
    for case in cases.0 {
        let refused = case.refused();
        let reply = match case.body {
            body if refused => send_refused(addr, &case.headers, body).await,
            Body::Full(bytes) => {
                send(
                    addr,
                    case.method,
                    &case.headers,
                    Full::new(Bytes::from(bytes)),
                )
                .await
            }
            Body::Chunked(chunks) => send(addr, case.method, &case.headers, Chunked(chunks)).await,
        };
        match check(&reply, &case.want, &before) {
            Ok(()) => *outcomes.entry(label(&case.want)).or_default() += 1,
            Err(why) => failures.push(format!("{}: {why}", case.what)),
        }
    }
    println!("{total} hostile requests:");
    for (outcome, count) in &outcomes {
        println!("  {count:>4}  {outcome}");
    }
    assert!(
        failures.is_empty(),
        "{} of {total} requests got the wrong answer:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // The server still answers, and nothing changed.
    let id = w.next_id();
    let ping = rpc(addr, &legacy(id, "ping", json!({})), None).await;
    assert_eq!(ping["result"], json!({ "resultType": "complete" }));
    let after = w.snapshot().await;
    for t in ALL {
        assert_eq!(after[&t], before[&t], "{t:?} changed");
    }
    assert_eq!(after[&T::Ask]["status"], "input_required");
    assert!(after[&T::Ask]["inputRequests"]["name"].is_object());
    assert_eq!(after[&T::Hang]["status"], "working");
    assert_eq!(after[&T::Done]["status"], "completed");
    assert_eq!(after[&T::Cancelled]["status"], "cancelled");
    assert_eq!(after[&T::Legacy]["status"], "working");
    let calls_after: Vec<usize> = ["ask", "hang", "echo"]
        .iter()
        .map(|t| w.server.seen.calls(t))
        .collect();
    assert_eq!(calls_after, calls_before, "no handler ran or resumed");
    assert_eq!(
        w.server
            .seen
            .cancelled_handlers
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    assert_eq!(
        w.server
            .seen
            .aborted_handlers
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );

    // alice's 2025-11-25 listing still shows her one legacy task, as it was.
    let id = w.next_id();
    let list = rpc(addr, &legacy(id, "tasks/list", json!({})), Some(ALICE)).await;
    assert_eq!(list["result"]["tasks"], json!([before[&T::Legacy]]));
    // And the task that waits for input still takes its answer.
    let id = w.next_id();
    let ask = w.id(T::Ask).to_owned();
    let body = modern(
        id,
        "tasks/update",
        json!({ "taskId": ask, "inputResponses": { "name": accept_name("Ada") } }),
    );
    assert_eq!(
        rpc(addr, &body, Some(ALICE)).await["result"],
        json!({ "resultType": "complete" })
    );
    let done = w.wait_for(T::Ask, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
}
