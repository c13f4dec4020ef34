//! Faults injected into the store (`common::faults::FaultyStore`): a store
//! outage longer than a lease, and a caller's future dropped right after
//! its write committed. Each test failed on the code before its fix.

mod common;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::faults::FaultyStore;
use common::{accept, eventually, ok, Client};
use mcp_task_layer::{JsonRpcRequest, Recovery, TaskStatus};
use serde_json::json;
use tower::ServiceExt;

/// Poll `fut` until the store has committed a write and holds its answer,
/// then drop it: the caller has gone (a client disconnect, a timeout
/// layer) right after the write.
async fn drop_after_write<F: Future>(store: &FaultyStore, fut: F) {
    tokio::pin!(fut);
    tokio::select! {
        _ = &mut fut => panic!("the request answered although its write is held"),
        () = store.written.notified() => {}
    }
}

fn request(c: &Client, id: i64, method: &str, mut params: serde_json::Value) -> JsonRpcRequest {
    params["_meta"] = common::meta(true);
    let _ = c;
    JsonRpcRequest::new(id, method, params)
}

/// Defect 8, `tasks/update`: the answer that resumes a task is written,
/// then the caller's future is dropped. The handler still resumes and the
/// task completes (before the fix the resume lived in the dropped future:
/// the task stayed `working` and the handler never ran again).
#[tokio::test(start_paused = true)]
async fn an_answer_accepted_before_the_caller_left_still_resumes_the_task() {
    let store = FaultyStore::new();
    let mut c = Client::new(common::layer_on(Arc::clone(&store)));
    let task = c.start("ask", json!({})).await;
    c.wait_for(&task, TaskStatus::InputRequired).await;
    assert_eq!(c.seen.calls("ask"), 1);

    store.close();
    let update = request(
        &c,
        900,
        "tasks/update",
        json!({ "taskId": task, "inputResponses": { "name": accept("name", "Ada") } }),
    );
    drop_after_write(&store, c.svc.clone().oneshot(update)).await;
    store.open();

    let done = c.wait_for(&task, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
    assert_eq!(c.seen.calls("ask"), 2, "resumed exactly once");
}

/// Defect 8, creation: the task is written, then the caller's future is
/// dropped before the answer. The handler still runs: the task goes on to
/// ask for input (before the fix the handler's future was dropped with the
/// request, and the task stayed `working` with no handler).
#[tokio::test(start_paused = true)]
async fn a_task_written_before_the_caller_left_still_runs() {
    let store = FaultyStore::new();
    let mut c = Client::new(common::layer_on(Arc::clone(&store)));
    store.close();
    let call = request(
        &c,
        901,
        "tools/call",
        json!({ "name": "ask", "arguments": {} }),
    );
    drop_after_write(&store, c.svc.clone().oneshot(call)).await;
    store.open();
    let task = store.ids().pop().expect("the task was written");
    let asked = c.wait_for(&task, TaskStatus::InputRequired).await;
    assert!(asked["inputRequests"]["name"].is_object(), "{asked}");
    let resp = c
        .update(&task, json!({ "name": accept("name", "Ada") }))
        .await;
    ok(&resp);
    c.wait_for(&task, TaskStatus::Completed).await;
}

/// Defect 8, cancel: the cancel is written, then the caller's future is
/// dropped. The handler's token is still tripped at once (before the fix
/// it ran on until its heartbeat noticed, a third of the lease later).
#[tokio::test(start_paused = true)]
async fn a_cancel_written_before_the_caller_left_still_stops_the_handler() {
    let store = FaultyStore::new();
    let c =
        Client::new(common::layer_on(Arc::clone(&store)).with_lease_ttl(Duration::from_secs(3600)));
    let task = c.start("hang", json!({})).await;
    store.close();
    let cancel = request(&c, 902, "tasks/cancel", json!({ "taskId": task }));
    drop_after_write(&store, c.svc.clone().oneshot(cancel)).await;
    store.open();
    let start = tokio::time::Instant::now();
    let seen = Arc::clone(&c.seen);
    eventually(
        || seen.cancelled_handlers.load(Ordering::SeqCst) == 1,
        "the handler is cancelled",
    )
    .await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "stopped at once, not at a heartbeat of a 1 h lease"
    );
}

/// Defect 7: a store outage outlasts a runner's lease while its handler is
/// alive; recovery re-runs the task in the same process. The re-run has a
/// token of its own: the old runner's next heartbeat (which finds itself
/// fenced off) stops only the old handler, and the task keeps running
/// (before the fix both runs shared one token, the re-run was cancelled
/// with the old one and the task ended instead of re-running).
#[tokio::test(start_paused = true)]
async fn a_rerun_is_not_cancelled_by_the_run_it_replaced() {
    let store = FaultyStore::new();
    let layer = common::layer_on(Arc::clone(&store))
        .with_lease_ttl(Duration::from_secs(3))
        .with_reap_interval(Duration::from_millis(100))
        .with_recovery(Recovery::Rerun);
    let c = Client::new(layer);
    let task = c.start("hang", json!({})).await;
    assert_eq!(c.seen.calls("hang"), 1);

    // The outage: every renewal fails until the lease (3 s) has run out.
    store.fail_replace.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    store.fail_replace.store(false, Ordering::SeqCst);

    // Recovery re-runs it; a heartbeat of the old runner (every 1 s) finds
    // the lease taken over and stops the old handler.
    let seen = Arc::clone(&c.seen);
    eventually(
        || seen.calls("hang") == 2 && seen.cancelled_handlers.load(Ordering::SeqCst) == 1,
        "re-run and the old handler stopped",
    )
    .await;
    assert_eq!(c.seen.calls("hang"), 2, "re-run once");
    assert_eq!(
        c.seen.cancelled_handlers.load(Ordering::SeqCst),
        1,
        "only the old handler stopped"
    );
    // Long after, the re-run still runs and the task is still working.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(c.get_ok(&task).await["status"], "working");
    assert_eq!(c.seen.cancelled_handlers.load(Ordering::SeqCst), 1);
    ok(&c.cancel(&task).await);
    eventually(
        || seen.cancelled_handlers.load(Ordering::SeqCst) == 2,
        "the cancel stops the re-run",
    )
    .await;
}
