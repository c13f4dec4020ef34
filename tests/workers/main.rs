//! Queued execution: a front that runs no handler, workers that claim
//! runnable tasks from the store, and graceful drains (issue #18). In one
//! process, on `MemoryStore`, under paused tokio time; the processes on
//! PostgreSQL and SQLite are `tests/worker_fleet.rs`.

#[path = "../common/mod.rs"]
mod common;
mod r58;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::fed::FedStore;
use common::peer::{send_with_peer, TestPeer};
use common::{accept, eventually, layer_on, ok, server, Client, Seen};
use mcp_task_layer::store::{self, BoxFuture, TaskChange, TaskRecord, TaskStore};
use mcp_task_layer::JsonRpcResponse;
use mcp_task_layer::{DrainReport, Execution, MemoryStore, Recovery, TaskLayer, TaskStatus};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A queued layer over `store`: the front's and its workers' settings.
fn queued(store: MemoryStore, recovery: Recovery) -> TaskLayer {
    layer_on(store)
        .with_execution(Execution::Queued)
        .with_recovery(recovery)
}

/// A worker of `layer` running the fixture server, with what it saw and a
/// way to make it drain.
struct Worker {
    seen: Arc<Seen>,
    stop: Option<oneshot::Sender<()>>,
    done: JoinHandle<DrainReport>,
}

impl Worker {
    fn start(layer: &TaskLayer, concurrency: usize, owner_cap: Option<usize>) -> Self {
        let seen = Arc::new(Seen::default());
        let mut worker = layer
            .worker(server(Arc::clone(&seen)))
            .with_concurrency(concurrency)
            .with_poll_interval(Duration::from_millis(50));
        if let Some(cap) = owner_cap {
            worker = worker.with_owner_concurrency(cap);
        }
        let (stop, stopped) = oneshot::channel();
        let done = tokio::spawn(worker.run(
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
        ));
        Worker {
            seen,
            stop: Some(stop),
            done,
        }
    }

    async fn drain(mut self) -> DrainReport {
        let _ = self.stop.take().map(|s| s.send(()));
        self.done.await.unwrap()
    }
}

/// Poll `tasks/get` (every 100 ms of paused time, at most an hour of it)
/// until the task has `status`: a worker of another replica writes to the
/// store, and without a change feed the front hears of it only by reading.
async fn poll_until(front: &Client, id: &str, status: TaskStatus) -> serde_json::Value {
    for _ in 0..36_000 {
        let body = front.get_ok(id).await;
        if body["status"] == status.as_str() {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} never reached {status}");
}

/// R28, R19: with no worker, a queued task stays `working` and its handler
/// never runs on the front; once a worker starts, it completes there.
#[tokio::test(start_paused = true)]
async fn a_queued_task_waits_for_a_worker_then_completes_on_it() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let id = front.start("slow", json!({ "ms": 50 })).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(front.get_ok(&id).await["status"], "working");
    assert_eq!(front.seen.calls("slow"), 0, "the front runs no handler");
    let worker = Worker::start(&layer, 4, None);
    let done = front.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 50");
    assert_eq!(worker.seen.calls("slow"), 1);
    assert_eq!(front.seen.calls("slow"), 0);
    assert_eq!(worker.drain().await, DrainReport::default());
}

/// The worker's loop is a task of the runtime, but it belongs to the
/// future of `TaskWorker::run`: dropping that future stops the loop, which
/// claims nothing more.
#[tokio::test(start_paused = true)]
async fn dropping_the_future_of_a_workers_run_stops_the_worker() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let Worker { seen, stop, done } = Worker::start(&layer, 4, None);
    let first = front.start("slow", json!({ "ms": 5000 })).await;
    front.wait_for(&first, TaskStatus::Completed).await;
    done.abort();
    assert!(done.await.unwrap_err().is_cancelled());
    let second = front.start("slow", json!({ "ms": 5000 })).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        front.get_ok(&second).await["status"],
        "working",
        "no worker claimed it"
    );
    assert_eq!(seen.calls("slow"), 1);
    // Not sent: a drain would stop the loop too.
    drop(stop);
}

/// `Auto { within }` keeps its meaning: a worker that finishes within the
/// window gives a synchronous answer (R19: the result a synchronous call
/// would have had); one that does not gives a task.
#[tokio::test(start_paused = true)]
async fn an_auto_call_is_synchronous_when_a_worker_finishes_in_time() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let front = Client::new(layer.clone());
    let worker = Worker::start(&layer, 4, None);
    let quick = front.call("slow", json!({ "ms": 10 })).await;
    assert_eq!(ok(&quick)["content"][0]["text"], "slept 10", "{quick:?}");
    let long = front.call("slow", json!({ "ms": 5000 })).await;
    assert_eq!(ok(&long)["resultType"], "task");
    assert_eq!(worker.seen.calls("slow"), 2);
    worker.drain().await;
}

/// 200 tasks over two workers of two replicas sharing one store: each run
/// exactly once, both workers used.
#[tokio::test(start_paused = true)]
async fn two_workers_run_each_of_200_tasks_exactly_once() {
    let store = MemoryStore::new();
    let front_layer = queued(store.clone(), Recovery::Fail);
    let front = Client::new(front_layer.clone());
    // Two more replicas: their workers hear of runs only by polling.
    let a = Worker::start(&queued(store.clone(), Recovery::Fail), 8, None);
    let b = Worker::start(&queued(store.clone(), Recovery::Fail), 8, None);
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(front.start("slow", json!({ "ms": 200 + i })).await);
    }
    for id in &ids {
        poll_until(&front, id, TaskStatus::Completed).await;
    }
    let (ran_a, ran_b) = (a.seen.calls("slow"), b.seen.calls("slow"));
    assert_eq!(ran_a + ran_b, 200, "each task ran exactly once");
    assert!(
        ran_a > 0 && ran_b > 0,
        "both workers ran tasks: {ran_a}, {ran_b}"
    );
    a.drain().await;
    b.drain().await;
}

/// R35: an input round answered on the front resumes on a worker, from the
/// top, with every accumulated answer; the worker was free meanwhile.
#[tokio::test(start_paused = true)]
async fn an_answer_given_on_the_front_resumes_the_task_on_a_worker() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let worker = Worker::start(&layer, 1, None);
    let id = front.start("ask", json!({})).await;
    front.wait_for(&id, TaskStatus::InputRequired).await;
    // The only slot is free while the task waits for a human.
    let other = front.start("slow", json!({ "ms": 5000 })).await;
    eventually(
        || worker.seen.calls("slow") == 1,
        "the waiting task freed the worker",
    )
    .await;
    front.cancel(&other).await;
    ok(&front
        .update(&id, json!({ "name": accept("name", "Ada") }))
        .await);
    let done = front.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
    assert_eq!(worker.seen.calls("ask"), 2);
    assert_eq!(front.seen.calls("ask"), 0);
    let (_, resume, token) = worker.seen.last("ask");
    let resume = resume.expect("a resumed run carries its TaskResumeContext");
    assert_eq!(resume.input_responses["name"], accept("name", "Ada"));
    assert!(token, "the run has the task's cancellation token");
    worker.drain().await;
}

/// R44: a queued task cancelled before any worker claimed it never runs.
#[tokio::test(start_paused = true)]
async fn a_queued_task_cancelled_before_a_claim_never_runs() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let id = front.start("hang", json!({})).await;
    ok(&front.cancel(&id).await);
    let worker = Worker::start(&layer, 4, None);
    let later = front.start("slow", json!({ "ms": 500 })).await;
    front.wait_for(&later, TaskStatus::Completed).await;
    assert_eq!(front.get_ok(&id).await["status"], "cancelled");
    assert_eq!(worker.seen.calls("hang"), 0, "the cancelled task never ran");
    worker.drain().await;
}

/// R44: a cancel on the front reaches the handler running on a worker of
/// another replica (through the store, as across replicas today).
#[tokio::test(start_paused = true)]
async fn a_cancel_reaches_a_handler_running_on_a_worker() {
    let store = MemoryStore::new();
    let front = Client::new(queued(store.clone(), Recovery::Fail));
    let worker = Worker::start(&queued(store, Recovery::Fail), 4, None);
    let id = front.start("hang", json!({})).await;
    eventually(|| worker.seen.calls("hang") == 1, "a worker runs the task").await;
    ok(&front.cancel(&id).await);
    eventually(
        || worker.seen.cancelled_handlers.load(Ordering::SeqCst) == 1,
        "the handler saw its cancellation",
    )
    .await;
    worker.drain().await;
}

/// Drain with `Rerun`: the task a worker still runs at the deadline is
/// runnable again at once (a new fence), and another worker completes it.
#[tokio::test(start_paused = true)]
async fn a_drained_worker_hands_its_task_to_another_with_rerun() {
    let store = MemoryStore::new();
    let layer = queued(store.clone(), Recovery::Rerun);
    let front = Client::new(layer.clone());
    let first = Worker::start(&layer, 4, None);
    let id = front.start("slow", json!({ "ms": 30_000 })).await;
    eventually(|| first.seen.calls("slow") == 1, "the first worker runs it").await;
    let report = first.drain().await;
    assert_eq!(report.requeued, 1, "{report:?}");
    assert_eq!(front.get_ok(&id).await["status"], "working");
    let second = Worker::start(&queued(store, Recovery::Rerun), 4, None);
    let done = poll_until(&front, &id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 30000");
    assert_eq!(second.seen.calls("slow"), 1);
    second.drain().await;
}

/// Drain with `Fail`: the task fails at once with a message that says the
/// server shut down (R20); a task waiting for input is untouched.
#[tokio::test(start_paused = true)]
async fn a_drained_worker_fails_its_task_with_fail() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let worker = Worker::start(&layer, 4, None);
    let waiting = front.start("ask", json!({})).await;
    front.wait_for(&waiting, TaskStatus::InputRequired).await;
    let id = front.start("slow", json!({ "ms": 30_000 })).await;
    eventually(|| worker.seen.calls("slow") == 1, "the worker runs it").await;
    let report = worker.drain().await;
    assert_eq!(report.failed, 1, "{report:?}");
    let failed = front.wait_for(&id, TaskStatus::Failed).await;
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("shut down"), "{message}");
    assert_eq!(front.get_ok(&waiting).await["status"], "input_required");
}

/// A worker runs at most `with_owner_concurrency` handlers of one owner:
/// another owner's later task is claimed past the capped one's.
#[tokio::test(start_paused = true)]
async fn one_owner_cannot_fill_a_worker() {
    let layer = queued(MemoryStore::new(), Recovery::Fail);
    let front = Client::new(layer.clone());
    let alice = front.as_owner("alice");
    let bob = front.as_owner("bob");
    let worker = Worker::start(&layer, 4, Some(1));
    for _ in 0..3 {
        alice.start("hang", json!({})).await;
    }
    let bobs = bob.start("slow", json!({ "ms": 500 })).await;
    let mut bob = bob;
    bob.wait_for(&bobs, TaskStatus::Completed).await;
    assert_eq!(
        worker.seen.calls("hang"),
        1,
        "one of alice's tasks at a time"
    );
    worker.drain().await;
}

/// An inline layer's drain: a handler still running at the deadline fails
/// its task at once with `Fail` instead of waiting for its lease.
#[tokio::test(start_paused = true)]
async fn an_inline_drain_fails_what_still_runs_at_the_deadline() {
    let layer = layer_on(MemoryStore::new());
    let mut client = Client::new(layer.clone());
    let quick = client.start("slow", json!({ "ms": 500 })).await;
    let long = client.start("slow", json!({ "ms": 30_000 })).await;
    let report = layer.drain(Duration::from_secs(2)).await;
    assert_eq!((report.finished, report.failed), (1, 1), "{report:?}");
    client.wait_for(&quick, TaskStatus::Completed).await;
    let failed = client.wait_for(&long, TaskStatus::Failed).await;
    assert!(failed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("shut down"));
}

/// The TaskEvent-ordered ids of the first `n` tasks to complete.
async fn completion_order(
    events: &mut tokio::sync::broadcast::Receiver<mcp_task_layer::TaskEvent>,
    n: usize,
) -> Vec<String> {
    let mut done = Vec::new();
    while done.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(3600), events.recv())
            .await
            .expect("a task event")
            .expect("the event channel");
        if event.status == TaskStatus::Completed {
            done.push(event.task_id);
        }
    }
    done
}

/// Tasks queued a millisecond or more apart run in the order they were
/// queued, on a worker that runs one at a time (claims go oldest first).
async fn runs_in_queue_order(layer: TaskLayer) {
    let front = Client::new(layer.clone());
    let mut events = layer.subscribe();
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(front.start("slow", json!({ "ms": 5 })).await);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let worker = Worker::start(&layer, 1, None);
    assert_eq!(
        completion_order(&mut events, 6).await,
        ids,
        "first queued, first run"
    );
    worker.drain().await;
}

/// Over a store without an atomic claim: a compare-and-set per run.
#[tokio::test(start_paused = true)]
async fn runs_are_claimed_in_the_order_they_were_queued() {
    runs_in_queue_order(queued(MemoryStore::new(), Recovery::Fail)).await;
}

/// Over SQLite's claim in one transaction (`TaskStore::claim_runnable`).
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_claimed_in_the_order_they_were_queued_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("tasks.db").display());
    let store = mcp_task_layer::store::SqliteStore::connect(&url)
        .await
        .unwrap();
    let layer = layer_on(store)
        .with_execution(Execution::Queued)
        .with_recovery(Recovery::Fail);
    runs_in_queue_order(layer).await;
}

/// A store whose task creation takes 150 ms (a slow disk, a busy
/// database): the front's write of a queued task outlasts the window.
#[derive(Debug, Clone)]
struct SlowCreate(MemoryStore);

impl mcp_task_layer::TaskStore for SlowCreate {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, store::Result<()>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            self.0.create(record).await
        })
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
        now: i64,
    ) -> BoxFuture<'a, store::Result<Option<Arc<TaskRecord>>>> {
        self.0.get(id, now)
    }
    fn replace(&self, record: TaskRecord, version: u64) -> BoxFuture<'_, store::Result<()>> {
        self.0.replace(record, version)
    }
    fn delete_expired(&self, now: i64, limit: usize) -> BoxFuture<'_, store::Result<Vec<String>>> {
        self.0.delete_expired(now, limit)
    }
}

/// R19: `Auto { within }`'s window runs from the call, as inline: a front
/// whose write of the task takes longer than the window answers with the
/// task, however soon a worker then finishes it (the window used to start
/// after the write, so a front that stalled there answered synchronously
/// long past it).
#[tokio::test(start_paused = true)]
async fn an_auto_window_runs_from_the_call_not_from_the_write() {
    let store = MemoryStore::new();
    let front = Client::new(layer_on(SlowCreate(store.clone())).with_execution(Execution::Queued));
    let worker = Worker::start(&queued(store, Recovery::Fail), 1, None);
    let r = front.call("slow", json!({ "ms": 1 })).await;
    assert_eq!(ok(&r)["resultType"], "task", "{r:?}");
    worker.drain().await;
}

/// R19 across replicas: with a change feed the front hears of the worker's
/// completion through it (no re-reading), and answers within the window.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_call_is_synchronous_when_another_replicas_worker_finishes_in_time_over_redis() {
    use common::redis_db::{url, Prefixes};

    let Some(url) = url() else { return };
    let prefixes = Prefixes::new(&url, "autofeed");
    let prefix = prefixes.next();
    let (front_store, worker_store) =
        tokio::join!(prefixes.store(&prefix), prefixes.store(&prefix));
    let front = Client::new(layer_on(front_store).with_execution(Execution::Queued));
    let worker = Worker::start(
        &layer_on(worker_store).with_execution(Execution::Queued),
        2,
        None,
    );
    // The first call starts the front's feed; a window of 100 ms is long
    // for a 1 ms handler, but a loaded machine may miss one.
    let mut sync = 0;
    for _ in 0..5 {
        let r = front.call("slow", json!({ "ms": 1 })).await;
        if ok(&r)["content"][0]["text"] == "slept 1" {
            sync += 1;
        }
    }
    assert!(sync >= 1, "no call was answered within its window");
    worker.drain().await;
    prefixes.drop_all().await;
}
