//! Over real HTTP: `subscriptions/listen` answered as an SSE stream.

use super::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::Request;
use hyper_util::rt::TokioIo;
use mcp_task_layer::McpEndpoint;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpStream;
use tower::ServiceBuilder;

async fn post(
    addr: SocketAddr,
    body: &Value,
    owner: &str,
) -> hyper::Response<hyper::body::Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let method = body["method"].as_str().unwrap();
    let mut req = Request::post("/mcp")
        .header(HOST, addr.to_string())
        .header(CONTENT_TYPE, "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {owner}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = body["params"]["taskId"]
        .as_str()
        .or(body["params"]["name"].as_str())
    {
        req = req.header("mcp-name", name);
    }
    sender
        .send_request(req.body(Full::new(Bytes::from(body.to_string()))).unwrap())
        .await
        .unwrap()
}

async fn json_of(resp: hyper::Response<hyper::body::Incoming>) -> Value {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

fn rpc(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta(true);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Reads `data:` lines of an SSE body as JSON, one message per event.
struct Sse(hyper::body::Incoming, String);

impl Sse {
    async fn next(&mut self) -> Option<Value> {
        let next = async {
            loop {
                if let Some(end) = self.1.find("\n\n") {
                    let event: String = self.1.drain(..end + 2).collect();
                    let data = event
                        .lines()
                        .find_map(|l| l.strip_prefix("data: "))?
                        .to_owned();
                    return Some(serde_json::from_str(&data).unwrap());
                }
                let frame = self.0.frame().await?.unwrap();
                if let Ok(data) = frame.into_data() {
                    self.1.push_str(std::str::from_utf8(&data).unwrap());
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), next)
            .await
            .expect("an event in time")
    }
}

#[tokio::test]
async fn a_subscriber_sees_every_transition_over_sse_without_polling() {
    let seen = Arc::new(common::Seen::default());
    let svc = ServiceBuilder::new()
        .layer(common::layer())
        .service(common::server(Arc::clone(&seen)));
    let app = McpEndpoint::new(svc)
        .with_identity(|parts, ext| {
            let owner = parts
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            ext.insert(TaskOwner::new(owner.trim_start_matches("Bearer ")));
        })
        .into_router("/mcp");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let created = json_of(
        post(
            addr,
            &rpc(
                1,
                "tools/call",
                json!({"name": "ask", "arguments": {"delay_ms": 500}}),
            ),
            "alice",
        )
        .await,
    )
    .await;
    let mine = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let created = json_of(
        post(
            addr,
            &rpc(2, "tools/call", json!({"name": "hang", "arguments": {}})),
            "bob",
        )
        .await,
    )
    .await;
    let theirs = created["result"]["taskId"].as_str().unwrap().to_owned();

    let listen = rpc(
        3,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [mine, theirs]}}),
    );
    let resp = post(addr, &listen, "alice").await;
    assert_eq!(resp.headers()[CONTENT_TYPE], "text/event-stream");
    let mut sse = Sse(resp.into_body(), String::new());
    let ack = sse.next().await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([mine]),
        "bob's task is not acknowledged"
    );

    let mut statuses = Vec::new();
    while let Some(msg) = sse.next().await {
        if msg.get("method").is_none() {
            assert_eq!(msg["id"], 3);
            assert_eq!(msg["result"], json!({"resultType": "complete"}));
            break;
        }
        assert_eq!(msg["method"], "notifications/tasks");
        assert_eq!(
            msg["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            3
        );
        let status = msg["params"]["status"].as_str().unwrap().to_owned();
        if status == "input_required" {
            let key = msg["params"]["inputRequests"]
                .as_object()
                .unwrap()
                .keys()
                .next()
                .unwrap()
                .clone();
            let update = rpc(
                4,
                "tasks/update",
                json!({"taskId": mine, "inputResponses": {key: accept("name", "Ada")}}),
            );
            let ack = json_of(post(addr, &update, "alice").await).await;
            assert_eq!(ack["result"], json!({"resultType": "complete"}));
        }
        if status == "completed" {
            assert_eq!(msg["params"]["result"]["content"][0]["text"], "Hello, Ada!");
        }
        statuses.push(status);
    }
    assert_eq!(
        statuses,
        ["input_required", "working", "completed"],
        "every transition, in order"
    );
}

/// Issue "Close the holes", defect 10: a subscriber that stops reading
/// while 400 watched tasks end still gets every task's last state, each
/// before the answer that closes the stream. Small socket buffers on
/// both ends make the stream back up well before that. Failed before
/// the fix: notifications that found the 64-slot queue full were
/// dropped, and the stream closed with the answer after about a hundred
/// of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_reads_late_still_gets_every_last_state_before_the_answer() {
    const TASKS: usize = 400;
    let mut c = Client::new(common::layer());
    c.owner = Some("alice".into());
    let app = McpEndpoint::new(c.svc.clone())
        .with_identity(|parts, ext| {
            if let Some(owner) = parts.headers.get("authorization") {
                let owner = owner.to_str().unwrap().trim_start_matches("Bearer ");
                ext.insert(TaskOwner::new(owner));
            }
        })
        .into_router("/mcp");
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    // Accepted connections inherit the listener's buffer sizes.
    socket.set_send_buffer_size(4096).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(16).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut ids = Vec::new();
    for _ in 0..TASKS {
        ids.push(c.start("hang", json!({})).await);
    }
    // The same subscription in process, read at once: it says when the
    // layer has pushed everything.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut req = listen_request(4, &id_refs, true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    let reference = tokio::spawn(c.svc.clone().oneshot(req));

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let listen = rpc(
        3,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": ids}}),
    );
    let req = Request::post("/mcp")
        .header(HOST, addr.to_string())
        .header(CONTENT_TYPE, "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", "Bearer alice")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(Full::new(Bytes::from(listen.to_string())))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.headers()[CONTENT_TYPE], "text/event-stream");
    let mut sse = Sse(resp.into_body(), String::new());
    let ack = sse.next().await.unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"]
            .as_array()
            .unwrap()
            .len(),
        TASKS
    );

    // Every task ends while the subscriber reads nothing.
    for id in &ids {
        ok(&c.cancel(id).await);
    }
    let mut ended = std::collections::HashSet::new();
    while ended.len() < TASKS {
        let (method, params) = rx.recv().await.expect("the reference stays open");
        if method == "notifications/tasks" && params["status"] == "cancelled" {
            ended.insert(params["taskId"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(
        ok(&reference.await.unwrap().unwrap())["resultType"],
        "complete"
    );

    // Now it reads: every task's last state, then the answer.
    let mut last = std::collections::HashMap::new();
    let answer = loop {
        let msg = sse.next().await.expect("the stream ends with the answer");
        if msg.get("method").is_none() {
            break msg;
        }
        assert_eq!(msg["method"], "notifications/tasks");
        let task = msg["params"]["taskId"].as_str().unwrap().to_owned();
        last.insert(task, msg["params"]["status"].as_str().unwrap().to_owned());
    };
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"], json!({"resultType": "complete"}));
    let missing = ids.iter().filter(|id| !last.contains_key(*id)).count();
    assert_eq!(missing, 0, "{missing} of {TASKS} tasks' ends never came");
    assert!(last.values().all(|s| s == "cancelled"), "{last:?}");
    assert!(sse.next().await.is_none(), "nothing after the answer");
}
