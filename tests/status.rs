//! What a handler says while it runs: `TaskHandle::set_status_message`,
//! seen by `tasks/get` as `statusMessage`, by `subscriptions/listen`
//! subscribers (R56) and by 2025-11-25 clients on
//! `notifications/tasks/status` (R58); replaced by the layer's own message
//! on a state change (R35); dropped when the run is stale; coalesced into a
//! bounded number of store writes.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{meta, ok};
use mcp_task_layer::store::{BoxFuture, Result as StoreResult, TaskRecord};
use mcp_task_layer::{
    ClientPeer, JsonRpcError, JsonRpcRequest, JsonRpcResponse, MemoryStore, Peer, TaskHandle,
    TaskLayer, TaskPolicy, TaskStore,
};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Semaphore};
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

type Svc = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// The test's MCP server. Tools (all `Task`):
/// - `progress {steps}`: for each step k, sets "step k of n", then waits
///   for one permit of `gate`; then completes.
/// - `chatty {n}`: sets "tick i" n times, 1 ms apart, then waits for one
///   permit and completes.
/// - `ask`: sets "about to ask" and asks for `go` at once; resumed with
///   it, sets "resumed as {id}" and waits for one permit.
/// - `plain`: checks it got a handle, then waits for one permit.
fn server(gate: Arc<Semaphore>) -> Svc {
    BoxCloneSyncService::new(tower::service_fn(move |req: JsonRpcRequest| {
        let gate = Arc::clone(&gate);
        async move {
            let params = req
                .params
                .clone()
                .map_or(Value::Null, mcp_task_layer::Params::into_value);
            let handle = req.extensions.get::<TaskHandle>().cloned();
            let Some(task) = handle else {
                return Ok(JsonRpcResponse::error(
                    req.id,
                    JsonRpcError::internal("no task handle"),
                ));
            };
            // Some work first, so that the call becomes a task.
            tokio::time::sleep(Duration::from_millis(1)).await;
            let args = &params["arguments"];
            match params["name"].as_str().unwrap_or_default() {
                "progress" => {
                    let steps = args["steps"].as_u64().unwrap_or(3);
                    for k in 1..=steps {
                        task.set_status_message(format!("step {k} of {steps}"));
                        gate.acquire().await.unwrap().forget();
                    }
                }
                "chatty" => {
                    let n = args["n"].as_u64().unwrap_or(1);
                    for i in 0..n {
                        task.set_status_message(format!("tick {i}"));
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    gate.acquire().await.unwrap().forget();
                }
                "ask" if params["inputResponses"]["go"].is_null() => {
                    task.set_status_message("about to ask");
                    return Ok(JsonRpcResponse::result(
                        req.id,
                        json!({"resultType": "input_required", "inputRequests": {"go": {
                            "method": "elicitation/create",
                            "params": {"mode": "form", "message": "Go?", "requestedSchema": {
                                "type": "object", "properties": {}
                            }}
                        }}}),
                    ));
                }
                "ask" => {
                    task.set_status_message(format!("resumed as {}", task.id().unwrap()));
                    gate.acquire().await.unwrap().forget();
                }
                _ => gate.acquire().await.unwrap().forget(),
            }
            let id = task.id().unwrap_or_default().to_owned();
            Ok(JsonRpcResponse::result(
                req.id,
                json!({"resultType": "complete", "content": [{"type": "text", "text": id}]}),
            ))
        }
    }))
}

struct Harness {
    svc: Svc,
    gate: Arc<Semaphore>,
    next: AtomicUsize,
}

impl Harness {
    fn on(store: impl TaskStore) -> Self {
        Self::with(TaskLayer::new(store).with_default_policy(TaskPolicy::Task))
    }

    fn with(layer: TaskLayer) -> Self {
        let gate = Arc::new(Semaphore::new(0));
        let svc = BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(layer)
                .service(server(Arc::clone(&gate))),
        );
        Harness {
            svc,
            gate,
            next: AtomicUsize::new(1),
        }
    }

    async fn send(&self, method: &str, params: Value, peer: Option<Peer>) -> JsonRpcResponse {
        let id = self.next.fetch_add(1, Ordering::SeqCst) as i64;
        let mut req = JsonRpcRequest::new(id, method, params);
        if let Some(peer) = peer {
            req.extensions.insert(peer);
        }
        self.svc.clone().oneshot(req).await.unwrap()
    }

    /// A 2026-07-28 task of `tool`; its id.
    async fn start(&self, tool: &str, args: Value) -> String {
        let r = self
            .send(
                "tools/call",
                json!({"name": tool, "arguments": args, "_meta": meta(true)}),
                None,
            )
            .await;
        assert_eq!(ok(&r)["resultType"], "task", "{r:?}");
        ok(&r)["taskId"].as_str().unwrap().to_owned()
    }

    async fn get(&self, id: &str) -> Value {
        let r = self
            .send(
                "tasks/get",
                json!({"taskId": id, "_meta": meta(true)}),
                None,
            )
            .await;
        ok(&r).clone()
    }

    /// Poll `tasks/get` (bounded, on the paused clock) until `done` holds.
    async fn get_until(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..6000 {
            let body = self.get(id).await;
            if done(&body) {
                return body;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id} never showed {what}");
    }

    async fn message_until(&self, id: &str, message: &str) -> Value {
        self.get_until(id, message, |b| b["statusMessage"] == message)
            .await
    }
}

/// Let everything runnable run: with the clock paused, tokio moves time on
/// only when every task is idle, so after this the background writers have
/// done whatever they were going to do.
async fn quiesce() {
    tokio::time::sleep(Duration::from_secs(5)).await;
}

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

#[tokio::test(start_paused = true)]
async fn a_running_handlers_messages_show_in_tasks_get_and_end_with_the_task() {
    let h = Harness::on(MemoryStore::new());
    let id = h.start("progress", json!({"steps": 3})).await;
    for k in 1..=3 {
        let body = h.message_until(&id, &format!("step {k} of 3")).await;
        assert_eq!(body["status"], "working");
        h.gate.add_permits(1);
    }
    let done = h
        .get_until(&id, "completed", |b| b["status"] == "completed")
        .await;
    assert!(
        done.get("statusMessage").is_none(),
        "the layer's state change clears the handler's message: {done}"
    );
    assert_eq!(
        done["result"]["content"][0]["text"], id,
        "the handle knew its task's id"
    );
}

/// Issue #18: a run on a worker (queued execution) has its handle too; its
/// messages show on the front, where the call was accepted, and the id is
/// the task's (the first run and the resume alike).
#[tokio::test(start_paused = true)]
async fn a_run_on_a_worker_has_a_handle_and_its_messages_show_on_the_front() {
    let layer = TaskLayer::new(MemoryStore::new())
        .with_default_policy(TaskPolicy::Task)
        .with_execution(mcp_task_layer::Execution::Queued);
    let h = Harness::with(layer.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = layer.worker(server(Arc::clone(&h.gate)));
    let running = tokio::spawn(worker.run(
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(1),
    ));
    let id = h.start("progress", json!({"steps": 2})).await;
    for k in 1..=2 {
        h.message_until(&id, &format!("step {k} of 2")).await;
        h.gate.add_permits(1);
    }
    let done = h
        .get_until(&id, "completed", |b| b["status"] == "completed")
        .await;
    assert_eq!(done["result"]["content"][0]["text"], id.as_str());
    let asking = h.start("ask", json!({})).await;
    h.get_until(&asking, "input_required", |b| {
        b["status"] == "input_required"
    })
    .await;
    let answer = json!({"taskId": asking, "inputResponses": {"go": {"action": "accept", "content": {}}},
        "_meta": meta(true)});
    ok(&h.send("tasks/update", answer, None).await);
    h.message_until(&asking, &format!("resumed as {asking}"))
        .await;
    h.gate.add_permits(1);
    let _ = stop.send(());
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn r35_the_layers_message_wins_and_a_resumed_run_has_a_handle_of_its_own() {
    let h = Harness::on(MemoryStore::new());
    let id = h.start("ask", json!({})).await;
    h.get_until(&id, "input_required", |b| b["status"] == "input_required")
        .await;
    // The handler's "about to ask" may be flushed before or after the
    // answer is written; either way it loses to the layer's message.
    quiesce().await;
    let waiting = h.get(&id).await;
    assert_eq!(waiting["status"], "input_required");
    assert_eq!(waiting["statusMessage"], "The task is waiting for input.");

    let r = h
        .send(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"go": {"action": "accept", "content": {}}},
                   "_meta": meta(true)}),
            None,
        )
        .await;
    ok(&r);
    let resumed = h.message_until(&id, &format!("resumed as {id}")).await;
    assert_eq!(resumed["status"], "working");
    h.gate.add_permits(1);
    h.get_until(&id, "completed", |b| b["status"] == "completed")
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_call_that_cannot_be_a_task_gets_no_handle() {
    let gate = Arc::new(Semaphore::new(0));
    let layer = TaskLayer::new(MemoryStore::new()).with_default_policy(TaskPolicy::Sync);
    let svc = ServiceBuilder::new().layer(layer).service(server(gate));
    let r = svc
        .oneshot(JsonRpcRequest::new(
            1,
            "tools/call",
            json!({"name": "plain", "arguments": {}, "_meta": meta(true)}),
        ))
        .await
        .unwrap();
    let message = &r.error_value().unwrap().message;
    assert!(message.contains("no task handle"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn r56_a_subscriber_sees_every_message_in_order_then_the_end() {
    let h = Harness::on(MemoryStore::new());
    let id = h.start("progress", json!({"steps": 4})).await;
    h.message_until(&id, "step 1 of 4").await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut listen = JsonRpcRequest::new(
        900,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [id]}, "_meta": meta(true)}),
    );
    listen.extensions.insert(Peer::new(Listener(tx)));
    let listening = tokio::spawn(h.svc.clone().oneshot(listen));
    let (method, _) = rx.recv().await.unwrap();
    assert_eq!(method, "notifications/subscriptions/acknowledged");

    // Each message is let through after the previous one was pushed.
    let mut seen = Vec::new();
    h.gate.add_permits(1);
    while let Some((method, params)) = rx.recv().await {
        assert_eq!(method, "notifications/tasks");
        assert_eq!(params["taskId"], id.as_str());
        seen.push((
            params["status"].as_str().unwrap().to_owned(),
            params["statusMessage"].as_str().map(str::to_owned),
        ));
        if params["status"] == "completed" {
            break;
        }
        h.gate.add_permits(1);
    }
    let working = |m: &str| ("working".to_owned(), Some(m.to_owned()));
    assert_eq!(
        seen,
        vec![
            working("step 2 of 4"),
            working("step 3 of 4"),
            working("step 4 of 4"),
            ("completed".to_owned(), None),
        ]
    );
    let r = listening.await.unwrap().unwrap();
    assert!(r.result_value().is_some(), "the stream ends with the task");
}

#[tokio::test(start_paused = true)]
async fn r58_a_2025_client_gets_each_message_as_a_status_notification() {
    let h = Harness::on(MemoryStore::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    // No `_meta` protocol version: a 2025-11-25 task-augmented call.
    let r = h
        .send(
            "tools/call",
            json!({"name": "progress", "arguments": {"steps": 3}, "task": {}}),
            Some(Peer::new(Listener(tx))),
        )
        .await;
    let id = ok(&r)["task"]["taskId"].as_str().unwrap().to_owned();
    let mut seen = Vec::new();
    while let Some((method, params)) = rx.recv().await {
        assert_eq!(method, "notifications/tasks/status");
        assert_eq!(params["taskId"], id.as_str());
        let message = params["statusMessage"].as_str().map(str::to_owned);
        let status = params["status"].as_str().unwrap().to_owned();
        seen.push((status.clone(), message));
        if status == "completed" {
            break;
        }
        h.gate.add_permits(1);
    }
    let working = |m: &str| ("working".to_owned(), Some(m.to_owned()));
    assert_eq!(
        seen,
        vec![
            working("step 1 of 3"),
            working("step 2 of 3"),
            working("step 3 of 3"),
            ("completed".to_owned(), None),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stale_runners_message_is_dropped() {
    let store = Arc::new(MemoryStore::new());
    let h = Harness::on(Arc::clone(&store));
    let id = h.start("progress", json!({"steps": 3})).await;
    let before = h.message_until(&id, "step 1 of 3").await;

    // Another replica takes the task over: a new holder, one fence more.
    let now = before["lastUpdatedAt"].clone();
    let record = store.get(&id, 0).await.unwrap().unwrap();
    let mut taken = TaskRecord::clone(&record);
    let lease = taken.lease.as_mut().expect("a working task has a lease");
    lease.holder = "another-replica".into();
    lease.fence += 1;
    taken.version += 1;
    store.replace(taken, record.version).await.unwrap();

    h.gate.add_permits(1);
    quiesce().await;
    let after = store.get(&id, 0).await.unwrap().unwrap();
    assert_eq!(
        after.status_message.as_deref(),
        Some("step 1 of 3"),
        "the stale run's \"step 2 of 3\" was not written"
    );
    assert_eq!(after.version, record.version + 1, "nothing written since");
    assert_eq!(after.lease.as_ref().unwrap().holder, "another-replica");
    let body = h.get(&id).await;
    assert_eq!(body["statusMessage"], "step 1 of 3");
    assert_eq!(body["lastUpdatedAt"], now);
}

/// Counts the writes that reach the store.
#[derive(Debug, Default)]
struct Counting {
    inner: MemoryStore,
    replaces: AtomicUsize,
}

impl TaskStore for Counting {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, StoreResult<()>> {
        self.inner.create(record)
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, StoreResult<Option<Arc<TaskRecord>>>> {
        self.inner.get(id, now_ms)
    }
    fn replace(&self, record: TaskRecord, expected: u64) -> BoxFuture<'_, StoreResult<()>> {
        self.replaces.fetch_add(1, Ordering::SeqCst);
        self.inner.replace(record, expected)
    }
    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, StoreResult<Vec<String>>> {
        self.inner.delete_expired(now_ms, limit)
    }
}

#[tokio::test(start_paused = true)]
async fn a_handler_setting_messages_in_a_tight_loop_costs_a_bounded_number_of_writes() {
    let store = Arc::new(Counting::default());
    let h = Harness::on(Arc::clone(&store));
    // 10 000 messages over 10 s of (paused) time.
    let n = 10_000;
    let started = tokio::time::Instant::now();
    let id = h.start("chatty", json!({"n": n})).await;
    let last = format!("tick {}", n - 1);
    h.message_until(&id, &last).await;
    let writes = store.replaces.load(Ordering::SeqCst);
    let elapsed = started.elapsed();
    // At most one write per 250 ms, one more at the start, and the lease
    // heartbeat (a third of the 30 s lease) besides.
    let bound = 1 + (elapsed.as_millis() / 250) as usize + 1 + (elapsed.as_secs() / 10) as usize;
    assert!(
        writes <= bound,
        "{writes} store writes for {n} messages in {elapsed:?}; at most {bound} expected"
    );
    assert!(
        writes >= 20,
        "the messages were written as they came ({writes} writes in {elapsed:?})"
    );
    h.gate.add_permits(1);
    h.get_until(&id, "completed", |b| b["status"] == "completed")
        .await;
}
