//! Push instead of poll: `subscriptions/listen` with `notifications.taskIds`
//! (R55-R57), in process and over real HTTP with SSE.

mod common;

use std::time::Duration;

use common::{accept, err, meta, ok, Client};
use mcp_task_layer::store::BoxFuture;
use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, Peer, TaskOwner, TaskStatus,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower::ServiceExt;

/// A client end that forwards every notification to a channel.
#[derive(Clone)]
struct Listener(mpsc::UnboundedSender<(String, Value)>);

impl ClientPeer for Listener {
    fn request(&self, _: String, _: Value) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(async { Err(JsonRpcError::internal("not expected")) })
    }
    fn notify(&self, method: String, params: Value) -> BoxFuture<'static, ()> {
        let _ = self.0.send((method, params));
        Box::pin(async {})
    }
}

/// The notifications a [`Listener`] forwards.
type Notifications = mpsc::UnboundedReceiver<(String, Value)>;

/// The answer to a `subscriptions/listen` still streaming.
type Pending = tokio::task::JoinHandle<Result<JsonRpcResponse, std::convert::Infallible>>;

fn listen_request(id: i64, task_ids: &[&str], tasks: bool, owner: Option<&str>) -> JsonRpcRequest {
    let mut req = JsonRpcRequest::new(
        id,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": task_ids}, "_meta": meta(tasks)}),
    );
    if let Some(o) = owner {
        req.extensions.insert(TaskOwner::new(o));
    }
    req
}

#[tokio::test(start_paused = true)]
async fn r56_changes_are_pushed_in_order_as_tasks_get_would_show_them() {
    let mut c = Client::new(common::layer());
    c.owner = Some("alice".into());
    let mine = c.start("ask", json!({})).await;
    let bob = c.as_owner("bob");
    let theirs = bob.start("hang", json!({})).await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = listen_request(77, &[&mine, &theirs, "unknown"], true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    let listening = tokio::spawn(c.svc.clone().oneshot(req));

    let (method, ack) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["notifications"]["taskIds"],
        json!([mine]),
        "only the caller's known tasks"
    );
    assert_eq!(ack["_meta"]["io.modelcontextprotocol/subscriptionId"], 77);

    let mut statuses = Vec::new();
    let mut answered = false;
    while let Some((method, params)) = rx.recv().await {
        assert_eq!(
            method, "notifications/tasks",
            "R57: nothing but task notifications"
        );
        assert_eq!(
            params["_meta"]["io.modelcontextprotocol/subscriptionId"], 77,
            "R56"
        );
        assert!(params.get("resultType").is_none(), "R56: no resultType");
        let mut body = c.get_ok(&mine).await;
        body.as_object_mut().unwrap().remove("resultType");
        let mut pushed = params.clone();
        pushed.as_object_mut().unwrap().remove("_meta");
        if pushed["status"] == body["status"] {
            assert_eq!(pushed, body, "R56: what tasks/get returns at that moment");
        }
        statuses.push(params["status"].as_str().unwrap().to_owned());
        if params["status"] == "input_required" && !answered {
            answered = true;
            ok(&c
                .update(&mine, json!({"name": accept("name", "Ada")}))
                .await);
        }
        if params["status"] == "completed" {
            break;
        }
    }
    assert_eq!(statuses, ["input_required", "working", "completed"]);
    let done = listening.await.unwrap().unwrap();
    assert_eq!(
        ok(&done),
        &json!({"resultType": "complete"}),
        "answered once every task ended"
    );
    let _ = c.wait_for(&mine, TaskStatus::Completed).await;
}

#[tokio::test(start_paused = true)]
async fn r55_listen_for_tasks_without_the_extension_is_32021() {
    let c = Client::new(common::layer());
    let id = c.start("hang", json!({})).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let mut req = listen_request(5, &[&id], false, None);
    req.extensions.insert(Peer::new(Listener(tx)));
    let resp: JsonRpcResponse = c.svc.clone().oneshot(req).await.unwrap();
    assert_eq!(err(&resp).code, -32021, "R55");
    // Other subscriptions are the inner server's business.
    let other = JsonRpcRequest::new(
        6,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}, "_meta": meta(true)}),
    );
    let resp = c.svc.clone().oneshot(other).await.unwrap();
    assert_eq!(
        err(&resp).code,
        -32601,
        "passed through to the inner server"
    );
}

// ----- over HTTP -----

#[cfg(feature = "axum")]
mod http {
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
}

/// A replica of alice's with its own layer over `store`.
fn replica(store: impl mcp_task_layer::TaskStore, lease_ttl: Duration) -> Client {
    let mut c = Client::new(common::layer_on(store).with_lease_ttl(lease_ttl));
    c.owner = Some("alice".into());
    c
}

/// Start `ask` on `a` (working `delay_ms` before each answer) and subscribe
/// to it on `b`: the task id, the notifications and the pending answer to
/// `subscriptions/listen`.
async fn ask_on_a_listen_on_b(
    a: &Client,
    b: &Client,
    delay_ms: u64,
) -> (String, Notifications, Pending) {
    let id = a.start("ask", json!({"delay_ms": delay_ms})).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = listen_request(9, &[&id], true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    let listening = tokio::spawn(b.svc.clone().oneshot(req));
    let (method, ack) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(ack["notifications"]["taskIds"], json!([id]));
    (id, rx, listening)
}

/// Follow the task's notifications to `completed`, answering its question
/// on `a` (the replica running it); the statuses pushed, in order. Each
/// notification must come within 20 s of tokio time.
async fn follow_to_completion(a: &Client, id: &str, rx: &mut Notifications) -> Vec<String> {
    let mut statuses = Vec::new();
    loop {
        let (method, params) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a notification within 20 s")
            .expect("the stream stays open");
        assert_eq!(method, "notifications/tasks", "R57");
        assert_eq!(params["taskId"], json!(id));
        let status = params["status"].as_str().unwrap().to_owned();
        if status == "input_required" {
            assert!(params["inputRequests"]["name"].is_object(), "{params}");
            ok(&a.update(id, json!({"name": accept("name", "Ada")})).await);
        }
        let done = status == "completed";
        statuses.push(status);
        if done {
            assert_eq!(params["result"]["content"][0]["text"], "Hello, Ada!");
            return statuses;
        }
    }
}

/// A subscriber on one replica sees every change of a task that runs on
/// another, through the store's change feed (issue 9): the body, run on
/// PostgreSQL and on Redis below.
#[cfg(any(feature = "postgres", feature = "redis"))]
async fn a_subscriber_on_b_sees_a_task_running_on_a(
    store_a: impl mcp_task_layer::TaskStore,
    store_b: impl mcp_task_layer::TaskStore,
) {
    // A 30 s lease: the heartbeat cannot be what brings the changes over.
    let lease = Duration::from_secs(30);
    let (a, b) = (replica(store_a, lease), replica(store_b, lease));
    let (id, mut rx, listening) = ask_on_a_listen_on_b(&a, &b, 800).await;
    let statuses = follow_to_completion(&a, &id, &mut rx).await;
    assert_eq!(statuses, ["input_required", "working", "completed"]);
    let done = listening.await.unwrap().unwrap();
    assert_eq!(ok(&done), &json!({"resultType": "complete"}));
    assert_eq!(b.seen.calls("ask"), 0, "everything ran on a");
}

/// Through PostgreSQL's `LISTEN`/`NOTIFY`.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_replica_sees_a_task_running_on_another() {
    use common::pg::{url, Tables};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "subrep");
    let table = tables.next();
    let (store_a, store_b) = tokio::join!(tables.store(&table), tables.store(&table));
    a_subscriber_on_b_sees_a_task_running_on_a(store_a, store_b).await;
    tables.drop_all().await;
}

/// Through Redis pub/sub.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_one_replica_sees_a_task_running_on_another_over_redis() {
    use common::redis_db::{url, Prefixes};

    let Some(url) = url() else { return };
    let prefixes = Prefixes::new(&url, "subrep");
    let prefix = prefixes.next();
    let (store_a, store_b) = tokio::join!(prefixes.store(&prefix), prefixes.store(&prefix));
    a_subscriber_on_b_sees_a_task_running_on_a(store_a, store_b).await;
    prefixes.drop_all().await;
}

/// The change feed's connection is killed while a subscriber waits: the
/// feed reconnects, the subscriber re-reads, and still sees the task through
/// to its end.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_survives_the_change_feed_losing_its_connection() {
    use common::pg::{url, Tables};
    use mcp_task_layer::store::{PostgresStore, SqlOptions};
    use sqlx::{Connection, Row};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "subdrop");
    let table = tables.next();
    let store_a = tables.store(&table).await;
    let app = format!("{}_b", tables.prefix);
    let sep = if url.contains('?') { '&' } else { '?' };
    let store_b = PostgresStore::connect_with(
        &format!("{url}{sep}application_name={app}"),
        SqlOptions::new().with_table(table.clone()).unwrap(),
    )
    .await
    .unwrap();
    let lease = Duration::from_secs(30);
    let (a, b) = (replica(store_a, lease), replica(store_b, lease));
    let (id, mut rx, listening) = ask_on_a_listen_on_b(&a, &b, 500).await;
    // End b's LISTEN connection (and only it: b's other connections stay).
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let killed: i64 = sqlx::query(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1 AND query LIKE 'LISTEN%'",
    )
    .bind(&app)
    .fetch_one(&mut admin)
    .await
    .unwrap()
    .get(0);
    assert_eq!(killed, 1, "b's feed connection was found");
    // What was written while the feed was down may be seen only as the
    // state read after it came back.
    let statuses = follow_to_completion(&a, &id, &mut rx).await;
    assert_eq!(statuses.first().map(String::as_str), Some("input_required"));
    let done = listening.await.unwrap().unwrap();
    assert_eq!(ok(&done)["resultType"], "complete");
    tables.drop_all().await;
}

/// Without a change feed (two layers over one `MemoryStore`, as two
/// processes over one SQLite file would be), a subscriber on one still sees
/// every status of a task running on the other, by re-reading every third
/// of the lease TTL.
#[tokio::test(start_paused = true)]
async fn without_a_change_feed_a_subscriber_on_another_layer_still_follows_the_task() {
    let store = mcp_task_layer::MemoryStore::new();
    let lease = Duration::from_secs(3);
    let (a, b) = (replica(store.clone(), lease), replica(store, lease));
    // Each step takes 5 s, longer than a re-read period (1 s).
    let (id, mut rx, listening) = ask_on_a_listen_on_b(&a, &b, 5_000).await;
    let statuses = follow_to_completion(&a, &id, &mut rx).await;
    assert_eq!(statuses, ["input_required", "working", "completed"]);
    let done = listening.await.unwrap().unwrap();
    assert_eq!(ok(&done)["resultType"], "complete");
    assert_eq!(b.seen.calls("ask"), 0, "it ran on a");
}

/// Subscribe `c` (alice) to `ids`: the notifications and the pending
/// answer, after checking the acknowledgement.
fn listen_to(c: &Client, ids: &[&str]) -> (Notifications, Pending) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut req = listen_request(9, ids, true, Some("alice"));
    req.extensions.insert(Peer::new(Listener(tx)));
    (rx, tokio::spawn(c.svc.clone().oneshot(req)))
}

async fn acknowledged(rx: &mut Notifications, ids: &[&str]) {
    let (method, ack) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");
    assert_eq!(ack["notifications"]["taskIds"], json!(ids));
}

/// Defect 9, in memory and paused time: a watched task whose TTL runs out
/// ends the stream then (it is gone: nothing more to push), although
/// nothing writes it and the next re-read is 20 minutes away. Before the
/// fix the stream stayed open until that re-read.
#[tokio::test(start_paused = true)]
async fn r48_a_watched_task_that_expires_ends_the_subscription_at_its_ttl() {
    let layer = common::layer()
        .with_default_ttl(Some(Duration::from_secs(2)))
        .with_lease_ttl(Duration::from_secs(3_600));
    let mut c = Client::new(layer);
    c.owner = Some("alice".into());
    let id = c.start("hang", json!({})).await;
    let started = tokio::time::Instant::now();
    let (mut rx, listening) = listen_to(&c, &[&id]);
    acknowledged(&mut rx, &[&id]).await;
    let done = tokio::time::timeout(Duration::from_secs(60), listening)
        .await
        .expect("the stream ends when the task expires")
        .unwrap()
        .unwrap();
    assert_eq!(ok(&done), &json!({"resultType": "complete"}));
    assert!(
        started.elapsed() <= Duration::from_secs(2),
        "ended {:?} after the subscription, past the TTL",
        started.elapsed()
    );
    assert!(rx.try_recv().is_err(), "nothing pushed for a purged task");
    assert_eq!(err(&c.get(&id).await).code, -32602, "R48: gone");
}

/// R34, R56: a partial answer leaves the task `input_required` and, in the
/// same millisecond, its `lastUpdatedAt` as it was; it is pushed all the
/// same, with only the keys still outstanding. Before the fix the stream
/// took it for a lease renewal and pushed nothing.
#[tokio::test(start_paused = true)]
async fn r34_r56_a_partial_answer_is_pushed_with_the_keys_left() {
    let mut c = Client::new(common::layer());
    c.owner = Some("alice".into());
    let id = c.start("ask2", json!({})).await;
    let asked = c.wait_for(&id, TaskStatus::InputRequired).await;
    let (mut rx, listening) = listen_to(&c, &[&id]);
    acknowledged(&mut rx, &[&id]).await;
    ok(&c.update(&id, json!({"a": accept("v", "1")})).await);
    let (method, params) = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("the partial answer is pushed")
        .unwrap();
    assert_eq!(method, "notifications/tasks");
    assert_eq!(params["status"], "input_required");
    assert_eq!(params["lastUpdatedAt"], asked["lastUpdatedAt"], "same ms");
    let keys: Vec<_> = params["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["b"], "only the key left");
    ok(&c.update(&id, json!({"b": accept("v", "2")})).await);
    let mut statuses = Vec::new();
    while let Some((_, params)) = rx.recv().await {
        statuses.push(params["status"].as_str().unwrap().to_owned());
    }
    assert_eq!(statuses, ["working", "completed"]);
    assert_eq!(
        ok(&listening.await.unwrap().unwrap())["resultType"],
        "complete"
    );
}

/// Defect 9 on a store with a change feed: reaping is a delete, which no
/// change feed reports, and with a feed nothing re-reads on a timer; still,
/// when the TTL of a watched task runs out the stream ends, and a blocked
/// 2025-11-25 `tasks/result` answers `-32602` (R50). Before the fix the
/// stream never ended. Run on PostgreSQL and on Redis below.
#[cfg(any(feature = "postgres", feature = "redis"))]
async fn r50_expiry_ends_a_subscription_and_a_blocked_result(
    store: impl mcp_task_layer::TaskStore,
) {
    let layer = common::layer_on(store).with_default_ttl(Some(Duration::from_secs(1)));
    let mut c = Client::new(layer);
    c.owner = Some("alice".into());
    let watched = c.start("hang", json!({})).await;
    let legacy = c
        .send(
            "tools/call",
            json!({"name": "hang", "arguments": {}, "task": {"ttl": 1_000}}),
        )
        .await;
    let legacy = ok(&legacy)["task"]["taskId"].as_str().unwrap().to_owned();
    let (mut rx, listening) = listen_to(&c, &[&watched]);
    acknowledged(&mut rx, &[&watched]).await;
    let mut result = JsonRpcRequest::new(50, "tasks/result", json!({"taskId": legacy}));
    result.extensions.insert(TaskOwner::new("alice"));
    let result = tokio::spawn(c.svc.clone().oneshot(result));
    let done = tokio::time::timeout(Duration::from_secs(15), listening)
        .await
        .expect("the stream ends when the task expires")
        .unwrap()
        .unwrap();
    assert_eq!(ok(&done), &json!({"resultType": "complete"}));
    let result = tokio::time::timeout(Duration::from_secs(15), result)
        .await
        .expect("tasks/result answers when the task expires")
        .unwrap()
        .unwrap();
    assert_eq!(err(&result).code, -32602, "R50");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r50_on_postgres_expiry_ends_a_subscription_and_a_blocked_result() {
    use common::pg::{url, Tables};

    let Some(url) = url() else { return };
    let tables = Tables::new(&url, "subexp");
    r50_expiry_ends_a_subscription_and_a_blocked_result(tables.store(&tables.next()).await).await;
    tables.drop_all().await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r50_on_redis_expiry_ends_a_subscription_and_a_blocked_result() {
    use common::redis_db::{url, Prefixes};

    let Some(url) = url() else { return };
    let prefixes = Prefixes::new(&url, "subexp");
    r50_expiry_ends_a_subscription_and_a_blocked_result(prefixes.store(&prefixes.next()).await)
        .await;
    prefixes.drop_all().await;
}
