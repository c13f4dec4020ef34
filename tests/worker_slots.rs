//! A worker's slot is free once its handler has answered (issue 33): the
//! next run starts while the last answer is still being written, and at
//! most as many answers are written at once as the worker has slots. A
//! handler that answers `requestState` alone, and is called again, keeps
//! its slot. In one process, on a `MemoryStore` whose writes of a task's
//! end wait until the test lets them through, under paused tokio time.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{layer_on, server, Client, Seen};
use mcp_task_layer::store::{BoxFuture, Result, TaskRecord, TaskStore};
use mcp_task_layer::{Execution, MemoryStore, Recovery, TaskLayer, TaskStatus};
use serde_json::json;
use tokio::sync::Semaphore;

/// A `MemoryStore` whose writes of an ended task wait for a permit before
/// they are made.
#[derive(Debug)]
struct EndsHeld {
    inner: MemoryStore,
    permits: Arc<Semaphore>,
    /// Writes of an end waiting for their permit now.
    waiting: Arc<AtomicUsize>,
}

impl TaskStore for EndsHeld {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        self.inner.create(record)
    }
    fn get<'a>(&'a self, id: &'a str, now: i64) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        self.inner.get(id, now)
    }
    fn replace(&self, record: TaskRecord, v: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if record.status.is_terminal() {
                self.waiting.fetch_add(1, Ordering::SeqCst);
                let permit = self.permits.acquire().await;
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                permit.expect("the semaphore stays open").forget();
            }
            self.inner.replace(record, v).await
        })
    }
    fn delete_expired(&self, now: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        self.inner.delete_expired(now, limit)
    }
    fn runnable(&self, now: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        self.inner.runnable(now, limit)
    }
}

struct Fixture {
    layer: TaskLayer,
    front: Client,
    /// What the worker's handlers were called with.
    seen: Arc<Seen>,
    permits: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
}

fn fixture() -> Fixture {
    let permits = Arc::new(Semaphore::new(0));
    let waiting = Arc::new(AtomicUsize::new(0));
    let store = EndsHeld {
        inner: MemoryStore::new(),
        permits: Arc::clone(&permits),
        waiting: Arc::clone(&waiting),
    };
    let layer = layer_on(store)
        .with_execution(Execution::Queued)
        .with_recovery(Recovery::Fail);
    Fixture {
        front: Client::new(layer.clone()),
        layer,
        seen: Arc::new(Seen::default()),
        permits,
        waiting,
    }
}

impl Fixture {
    /// A worker of one slot that never looks unwoken within a test.
    fn start_worker(&self) -> common::Worker {
        let inner = server(Arc::clone(&self.seen));
        common::start_worker(&self.layer, inner, 1, Duration::from_secs(10))
    }

    /// Let every held write through, see each of `ids` end `completed`,
    /// and stop the worker: it drains with nothing to hand back.
    async fn finish(&mut self, ids: &[&str], worker: common::Worker) {
        self.permits.add_permits(ids.len());
        common::finish(&mut self.front, ids, worker).await;
    }

    async fn ends_waiting(&self, n: usize) {
        let waiting = Arc::clone(&self.waiting);
        common::eventually(
            move || waiting.load(Ordering::SeqCst) == n,
            &format!("{n} writes of an end wait"),
        )
        .await;
    }

    async fn calls(&self, tool: &str, n: usize) {
        let seen = Arc::clone(&self.seen);
        let tool = tool.to_owned();
        common::eventually(
            move || seen.calls(&tool) == n,
            &format!("{n} calls of the handler"),
        )
        .await;
    }

    async fn status(&self, id: &str) -> String {
        self.front.get_ok(id).await["status"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// The one slot of a worker runs the next task while the last task's
/// result is still being written; both end `completed`.
#[tokio::test(start_paused = true)]
async fn a_slot_serves_the_next_run_while_the_last_answer_is_written() {
    let mut f = fixture();
    let worker = f.start_worker();
    let a = f.front.start("slow", json!({ "ms": 10 })).await;
    let b = f.front.start("slow", json!({ "ms": 10 })).await;
    // `a`'s result is not written (no write of an end is let through), and
    // `b`'s handler ran in the one slot meanwhile.
    f.calls("slow", 2).await;
    f.ends_waiting(2).await;
    assert_eq!(f.status(&a).await, "working");
    f.finish(&[&a, &b], worker).await;
}

/// Answers being written hold slots of their own, as many as the worker
/// has: with one slot and two answers waiting to be written, a third task
/// is not run until one of them is written.
#[tokio::test(start_paused = true)]
async fn answers_being_written_take_at_most_as_many_runs_as_slots() {
    let mut f = fixture();
    let worker = f.start_worker();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(f.front.start("slow", json!({ "ms": 10 })).await);
    }
    f.ends_waiting(2).await;
    // Twenty seconds of (paused) time, within the leases: the third run
    // waits all of them.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        f.seen.calls("slow"),
        2,
        "a third run while two answers wait"
    );
    assert_eq!(f.status(&ids[2]).await, "working");
    f.permits.add_permits(1);
    f.calls("slow", 3).await;
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    f.finish(&ids, worker).await;
}

/// A handler that answers `requestState` alone is called again in the
/// same slot: no other run starts until its last answer (the `state` tool
/// answers so twice, then finishes).
#[tokio::test(start_paused = true)]
async fn a_handler_called_again_keeps_its_slot_until_its_last_answer() {
    let mut f = fixture();
    let worker = f.start_worker();
    // Each of its three calls works a second before it answers.
    let s = f.front.start("state", json!({ "delay_ms": 1000 })).await;
    f.calls("state", 1).await;
    let b = f.front.start("slow", json!({ "ms": 10 })).await;
    f.calls("slow", 1).await;
    assert_eq!(
        f.seen.calls("state"),
        3,
        "another run started before the handler's last answer"
    );
    f.ends_waiting(2).await;
    f.finish(&[&s, &b], worker).await;
}

/// A drain waits for the answers still being written, as for the runs:
/// both tasks end `completed` and none is handed back.
#[tokio::test(start_paused = true)]
async fn a_drain_waits_for_the_answers_being_written() {
    let mut f = fixture();
    let (stop, done) = f.start_worker();
    let a = f.front.start("slow", json!({ "ms": 10 })).await;
    let b = f.front.start("slow", json!({ "ms": 1000 })).await;
    f.ends_waiting(1).await;
    f.calls("slow", 2).await;
    let _ = stop.send(());
    f.permits.add_permits(2);
    let report = done.await.unwrap();
    assert_eq!(
        (report.finished, report.requeued, report.failed),
        (2, 0, 0),
        "{report:?}"
    );
    f.front.wait_for(&a, TaskStatus::Completed).await;
    f.front.wait_for(&b, TaskStatus::Completed).await;
}
