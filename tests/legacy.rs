//! The 2025-11-25 experimental tasks, served by the same layer and store:
//! one test per [2025] requirement of `docs/requirements.md`, and the Q9
//! cross-era rule.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::peer::{send_with_peer, TestPeer};
use common::{accept, err, ok, Client};
use mcp_task_layer::store::{BoxFuture, TaskRecord};
use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, MemoryStore, Peer, TaskStatus,
    TaskStore,
};
use serde_json::{json, Value};
use tower::ServiceExt;

const RELATED: &str = "io.modelcontextprotocol/related-task";

fn layer() -> mcp_task_layer::TaskLayer {
    common::layer()
}

/// Start a legacy task-augmented call; the task body.
async fn start(c: &Client, tool: &str, args: Value, ttl: Option<u64>) -> Value {
    let mut params = json!({"name": tool, "arguments": args, "task": {}});
    if let Some(ttl) = ttl {
        params["task"]["ttl"] = json!(ttl);
    }
    let r = c.send("tools/call", params).await;
    let body = ok(&r);
    assert!(
        body.get("resultType").is_none(),
        "no resultType in 2025-11-25: {body}"
    );
    body["task"].clone()
}

async fn get(c: &Client, id: &str) -> JsonRpcResponse {
    c.send("tasks/get", json!({"taskId": id})).await
}

async fn wait_legacy(c: &mut Client, id: &str, status: TaskStatus) -> Value {
    loop {
        let body = ok(&get(c, id).await).clone();
        if body["status"] == status.as_str() {
            return body;
        }
        let _ = tokio::time::timeout(Duration::from_secs(3600), c.events.recv()).await;
    }
}

/// A client that takes input requests and never answers them.
#[derive(Clone)]
struct SilentPeer;

impl ClientPeer for SilentPeer {
    fn request(&self, _: String, _: Value) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(std::future::pending())
    }
    fn notify(&self, _: String, _: Value) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

#[tokio::test(start_paused = true)]
/// R64 does not arise: the layer always advertises `tasks.requests.tools.call`,
/// so a task-augmented call is always served as a task (R63).
async fn r59_r64_initialize_advertises_tasks_capabilities() {
    let mut c = Client::new(layer());
    // `tasks.list` only to a caller with an identity (tests/hostile/owners.rs).
    c.owner = Some("alice".into());
    let r = c.send("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})).await;
    let caps = &ok(&r)["capabilities"];
    assert_eq!(
        caps["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "R59"
    );
    assert_eq!(caps["tools"], json!({}));
}

#[tokio::test(start_paused = true)]
async fn r60_tools_list_carries_task_support_from_the_policy() {
    let c = Client::new(layer());
    let r = c.send("tools/list", json!({})).await;
    let tools = ok(&r)["tools"].as_array().unwrap().clone();
    let support: Vec<_> = tools
        .iter()
        .map(|t| (t["name"].clone(), t["execution"]["taskSupport"].clone()))
        .collect();
    assert_eq!(
        support,
        [
            (json!("echo"), json!("forbidden")),
            (json!("slow"), json!("optional")),
            (json!("ask"), json!("required")),
        ],
        "R60: Sync → forbidden, Auto → optional, Task → required (the policy wins)"
    );
    // The 2026-07-28 tools/list is left alone.
    let r = c.send26("tools/list", json!({}), true).await;
    assert!(ok(&r)["tools"][0].get("execution").is_none());
}

#[tokio::test(start_paused = true)]
async fn r61_r62_task_param_must_match_task_support() {
    let c = Client::new(layer());
    let r = c
        .send(
            "tools/call",
            json!({"name": "echo", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(err(&r).code, -32601, "R61: forbidden tool with task");
    let r = c
        .send("tools/call", json!({"name": "ask", "arguments": {}}))
        .await;
    assert_eq!(err(&r).code, -32601, "R62: required tool without task");
    let r = c
        .send(
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 5}}),
        )
        .await;
    assert_eq!(
        ok(&r)["content"][0]["text"],
        "slept 5",
        "optional without task runs synchronously"
    );
}

#[tokio::test(start_paused = true)]
async fn r49_r63_r78_task_augmented_call_returns_the_wrapped_task_with_applied_ttl() {
    let c = Client::new(layer().with_max_ttl(Some(Duration::from_secs(120))));
    let task = start(&c, "hang", json!({}), Some(600_000)).await;
    assert_eq!(task["status"], "working", "R63");
    assert_eq!(task["ttl"], 120_000, "R49: the applied ttl, capped");
    assert_eq!(task["pollInterval"], 1000);
    assert!(
        task["createdAt"].is_string() && task["lastUpdatedAt"].is_string(),
        "R78"
    );
    assert!(task.get("ttlMs").is_none());
    let got = ok(&get(&c, task["taskId"].as_str().unwrap()).await).clone();
    assert_eq!(got["ttl"], 120_000, "R49: tasks/get includes ttl");
}

#[tokio::test(start_paused = true)]
async fn r65_tasks_get_is_a_flat_task_without_result() {
    let mut c = Client::new(layer());
    let task = start(&c, "tool_error", json!({}), None).await;
    let id = task["taskId"].as_str().unwrap();
    let body = wait_legacy(&mut c, id, TaskStatus::Failed).await;
    assert!(
        body.get("task").is_none() && body.get("result").is_none() && body.get("error").is_none(),
        "R65"
    );
    assert!(body.get("resultType").is_none());
    assert!(body.get("_meta").is_none(), "R75: no related-task on get");
    assert_eq!(body["taskId"], id);
}

#[tokio::test(start_paused = true)]
async fn r66_r68_tasks_result_blocks_until_terminal_then_returns_the_result() {
    let c = Client::new(layer());
    let task = start(&c, "slow", json!({"ms": 5000}), None).await;
    let id = task["taskId"].as_str().unwrap().to_owned();
    let c2 = c.as_owner("x");
    let mut c2 = c2;
    c2.owner = None;
    let started = tokio::time::Instant::now();
    let waiting = tokio::spawn(async move { c2.send("tasks/result", json!({"taskId": id})).await });
    let r = waiting.await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "R68: answered only when terminal"
    );
    let body = ok(&r);
    assert_eq!(body["content"][0]["text"], "slept 5000");
    assert_eq!(body["_meta"][RELATED]["taskId"], task["taskId"], "R66");
}

#[tokio::test(start_paused = true)]
async fn r67_tasks_result_of_a_failed_task_is_that_error() {
    let c = Client::new(layer());
    let task = start(&c, "boom", json!({}), None).await;
    let r = c
        .send("tasks/result", json!({"taskId": task["taskId"]}))
        .await;
    assert_eq!(
        err(&r),
        &JsonRpcError::new(-32050, "upstream exploded").with_data(json!({"retry": false})),
        "R67"
    );
}

#[tokio::test(start_paused = true)]
async fn r69_is_error_fails_the_legacy_task_and_result_returns_it() {
    let mut c = Client::new(layer());
    let task = start(&c, "tool_error", json!({}), None).await;
    let id = task["taskId"].as_str().unwrap();
    wait_legacy(&mut c, id, TaskStatus::Failed).await;
    let r = c.send("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        ok(&r)["isError"],
        true,
        "R69: a successful response carrying isError"
    );
}

#[tokio::test(start_paused = true)]
async fn r70_r71_r78_cancel_returns_the_cancelled_task_and_sticks() {
    let c = Client::new(layer());
    let task = start(&c, "slow", json!({"ms": 1000}), None).await;
    let id = task["taskId"].as_str().unwrap();
    let r = c.send("tasks/cancel", json!({"taskId": id})).await;
    let body = ok(&r);
    assert_eq!(
        body["status"], "cancelled",
        "R70: cancelled before answering"
    );
    assert!(
        body["createdAt"].is_string() && body["lastUpdatedAt"].is_string(),
        "R78"
    );
    assert!(body.get("_meta").is_none(), "R75");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        ok(&get(&c, id).await)["status"],
        "cancelled",
        "R70: stays cancelled"
    );
    let r = c.send("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(err(&r).code, -32602, "R71");
}

#[tokio::test(start_paused = true)]
async fn r72_unknown_ids_are_32602() {
    let c = Client::new(layer());
    for m in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let r = c.send(m, json!({"taskId": "nope"})).await;
        assert_eq!(err(&r).code, -32602, "R72 {m}");
    }
}

#[tokio::test(start_paused = true)]
async fn r52_r73_r74_list_pages_the_callers_tasks_newest_first() {
    let mut alice = Client::new(layer());
    alice.owner = Some("alice".into());
    let bob = alice.as_owner("bob");
    let mut ids = Vec::new();
    for _ in 0..120 {
        ids.push(
            start(&alice, "hang", json!({}), None).await["taskId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    let bobs = start(&bob, "hang", json!({}), None).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = alice.send("tasks/list", params).await;
        let body = ok(&r).clone();
        pages += 1;
        for t in body["tasks"].as_array().unwrap() {
            assert!(t["createdAt"].is_string() && t.get("_meta").is_none());
            seen.push(t["taskId"].as_str().unwrap().to_owned());
        }
        match body.get("nextCursor") {
            Some(c) => cursor = Some(c.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3, "R73: nextCursor while more remain (50 per page)");
    ids.reverse();
    assert_eq!(seen, ids, "R74: every task, newest first, once");
    assert!(
        !seen.contains(&bobs["taskId"].as_str().unwrap().to_owned()),
        "R52"
    );
    for bad in ["zz", "abc", "not-hex!", "00"] {
        let r = alice.send("tasks/list", json!({"cursor": bad})).await;
        assert_eq!(err(&r).code, -32602, "R73: malformed cursor {bad}");
    }
    // A cursor from Alice's listing only positions Bob's own listing.
    let r = bob
        .send("tasks/list", json!({"cursor": cursor.unwrap_or_default()}))
        .await;
    let listed: Vec<_> = ok(&r)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].clone())
        .collect();
    assert!(
        listed.iter().all(|t| *t == bobs["taskId"]),
        "R52: no foreign task through a cursor"
    );
}

/// R50 (defect 9): a `tasks/result` that delivers input to a client that
/// never answers still ends when the task expires, with `-32602`. Before
/// the fix it waited for that answer forever.
#[tokio::test(start_paused = true)]
async fn r50_tasks_result_waiting_on_a_silent_client_ends_at_expiry() {
    let c = Client::new(layer());
    let task = start(&c, "ask", json!({}), Some(2_000)).await;
    let mut req = JsonRpcRequest::new(9_001, "tasks/result", json!({"taskId": task["taskId"]}));
    req.extensions.insert(Peer::new(SilentPeer));
    let r = tokio::time::timeout(Duration::from_secs(60), c.svc.clone().oneshot(req))
        .await
        .expect("tasks/result answers when the task expires")
        .unwrap();
    assert_eq!(err(&r).code, -32602, "R50");
}

#[tokio::test(start_paused = true)]
async fn r75_input_goes_out_on_the_result_stream_with_related_task_meta() {
    let c = Client::new(layer());
    let task = start(&c, "ask", json!({}), None).await;
    let id = task["taskId"].as_str().unwrap().to_owned();
    let peer = Arc::new(TestPeer::default());
    let r = send_with_peer(&c, "tasks/result", json!({"taskId": id}), &peer).await;
    assert_eq!(ok(&r)["content"][0]["text"], "Hello, Grace!");
    let sent = peer.sent.lock().unwrap().clone();
    let requests: Vec<_> = sent
        .iter()
        .filter(|(m, _)| m == "elicitation/create")
        .collect();
    assert_eq!(requests.len(), 1, "one request per outstanding input");
    assert_eq!(
        requests[0].1["_meta"][RELATED]["taskId"],
        id.as_str(),
        "R75"
    );
    assert_eq!(requests[0].1["message"], "Your name?");
    assert_eq!(c.seen.calls("ask"), 2, "resumed exactly once");
    // While it waited the stream carried status notifications (R58).
    let notes: Vec<_> = sent
        .iter()
        .filter(|(m, _)| m == "notifications/tasks/status")
        .collect();
    assert!(!notes.is_empty());
    for (_, params) in notes {
        assert!(
            params.get("_meta").is_none(),
            "R58: no related-task on status notifications"
        );
        assert_eq!(params["taskId"], id.as_str());
    }
}

#[tokio::test(start_paused = true)]
async fn r58_status_notifications_go_to_the_creating_peer() {
    let c = Client::new(layer());
    let peer = Arc::new(TestPeer::default());
    let r = send_with_peer(
        &c,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 100}, "task": {}}),
        &peer,
    )
    .await;
    let id = ok(&r)["task"]["taskId"].as_str().unwrap().to_owned();
    common::eventually(
        || {
            peer.sent
                .lock()
                .unwrap()
                .iter()
                .any(|(_, p)| p["status"] == "completed")
        },
        "a completed notification",
    )
    .await;
    let sent = peer.sent.lock().unwrap().clone();
    let (method, params) = sent.last().unwrap();
    assert_eq!(method, "notifications/tasks/status");
    assert_eq!(params["taskId"], id.as_str());
    assert!(params.get("_meta").is_none(), "R58");
    assert!(params["ttl"].is_number(), "params are a Task");
}

#[tokio::test(start_paused = true)]
async fn r76_tasks_update_is_method_not_found() {
    let c = Client::new(layer());
    let r = c
        .send("tasks/update", json!({"taskId": "x", "inputResponses": {}}))
        .await;
    assert_eq!(err(&r).code, -32601, "R76");
}

#[derive(Debug, Clone)]
struct NoListStore(MemoryStore);

impl TaskStore for NoListStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, mcp_task_layer::store::Result<()>> {
        self.0.create(record)
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
        now: i64,
    ) -> BoxFuture<'a, mcp_task_layer::store::Result<Option<Arc<TaskRecord>>>> {
        self.0.get(id, now)
    }
    fn replace(
        &self,
        record: TaskRecord,
        v: u64,
    ) -> BoxFuture<'_, mcp_task_layer::store::Result<()>> {
        self.0.replace(record, v)
    }
    fn delete_expired(
        &self,
        now: i64,
        limit: usize,
    ) -> BoxFuture<'_, mcp_task_layer::store::Result<Vec<String>>> {
        self.0.delete_expired(now, limit)
    }
}

#[tokio::test(start_paused = true)]
async fn r77_list_without_store_support_is_method_not_found() {
    let mut c = Client::new(common::layer_on(NoListStore(MemoryStore::new())));
    c.owner = Some("alice".into());
    let r = c.send("tasks/list", json!({})).await;
    assert_eq!(err(&r).code, -32601, "R77");
}

#[tokio::test(start_paused = true)]
async fn q9_one_store_holds_both_eras_and_each_sees_only_its_own() {
    let mut c = Client::new(layer());
    c.owner = Some("alice".into());
    let legacy = start(&c, "ask", json!({}), None).await["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let modern = c.start("ask", json!({})).await;
    c.wait_for(&modern, TaskStatus::InputRequired).await;
    // 2026-07-28 requests do not see 2025-11-25 tasks and vice versa.
    assert_eq!(err(&c.get(&legacy).await).code, -32602, "Q9");
    assert_eq!(
        err(&c
            .update(&legacy, json!({"name": accept("name", "x")}))
            .await)
        .code,
        -32602
    );
    assert_eq!(err(&c.cancel(&legacy).await).code, -32602);
    assert_eq!(err(&get(&c, &modern).await).code, -32602, "Q9");
    assert_eq!(
        err(&c.send("tasks/cancel", json!({"taskId": modern})).await).code,
        -32602
    );
    let r = c.send("tasks/list", json!({})).await;
    let listed: Vec<_> = ok(&r)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].clone())
        .collect();
    assert_eq!(
        listed,
        [json!(legacy)],
        "the legacy listing holds only legacy tasks"
    );
    // Both still work in their own era.
    ok(&c
        .update(&modern, json!({"name": accept("name", "Ada")}))
        .await);
    c.wait_for(&modern, TaskStatus::Completed).await;
    assert_eq!(ok(&get(&c, &legacy).await)["status"], "input_required");
}
