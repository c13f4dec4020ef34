//! Several replicas (layers with their own runners) over one shared store:
//! exactly-once resume, cross-replica cancel through the lease heartbeat,
//! and fenced recovery of a task whose runner went silent.

mod common;

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{accept, ok, Client};
use mcp_task_layer::store::{BoxFuture, Error, Result, TaskRecord};
use mcp_task_layer::{MemoryStore, Recovery, TaskStatus, TaskStore};
use serde_json::json;

/// A shared store whose writes can be cut off for one replica, and which
/// can find orphans (a durable store's job; here a scan of known ids).
#[derive(Clone, Debug)]
struct Shared {
    inner: MemoryStore,
    ids: Arc<Mutex<HashSet<String>>>,
    cut: Arc<AtomicBool>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            inner: MemoryStore::new(),
            ids: Arc::default(),
            cut: Arc::default(),
        }
    }
    /// The same tasks, seen through another replica's connection.
    fn connection(&self) -> Self {
        Shared {
            inner: self.inner.clone(),
            ids: Arc::clone(&self.ids),
            cut: Arc::default(),
        }
    }
    fn check(&self) -> Result<()> {
        if self.cut.load(Ordering::SeqCst) {
            Err(Error::Backend("partitioned".into()))
        } else {
            Ok(())
        }
    }
}

impl TaskStore for Shared {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        if let Err(e) = self.check() {
            return Box::pin(async { Err(e) });
        }
        self.ids.lock().unwrap().insert(record.id.clone());
        self.inner.create(record)
    }
    fn get<'a>(&'a self, id: &'a str, now: i64) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        if let Err(e) = self.check() {
            return Box::pin(async { Err(e) });
        }
        self.inner.get(id, now)
    }
    fn replace(&self, record: TaskRecord, v: u64) -> BoxFuture<'_, Result<()>> {
        if let Err(e) = self.check() {
            return Box::pin(async { Err(e) });
        }
        self.inner.replace(record, v)
    }
    fn delete_expired(&self, now: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        self.inner.delete_expired(now, limit)
    }
    fn orphans(&self, now: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        let ids: Vec<String> = self.ids.lock().unwrap().iter().cloned().collect();
        Box::pin(async move {
            self.check()?;
            let mut out = Vec::new();
            for id in ids {
                if let Some(r) = self.inner.get(&id, now).await? {
                    let dead = r.lease.as_ref().is_some_and(|l| l.until_ms < now);
                    if r.status == TaskStatus::Working && dead && out.len() < limit {
                        out.push(r);
                    }
                }
            }
            Ok(out)
        })
    }
}

fn replica(store: Shared) -> Client {
    let mut c = Client::new(common::layer_on(store).with_lease_ttl(Duration::from_secs(3)));
    c.owner = Some("alice".into());
    c
}

/// Poll `client` until the task is in `status`: at most 30 s of tokio time
/// (virtual under a paused clock, real otherwise).
async fn poll_until(client: &Client, id: &str, status: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let body = client.get_ok(id).await;
        if body["status"] == status {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {status}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A task created on `a` is read on `b`; all three replicas receive the
/// same answer at once; the handler resumes exactly once.
async fn created_read_answered_on_three_replicas(a: &Client, b: &Client, c: &Client) {
    let id = a.start("ask", json!({})).await;
    poll_until(b, &id, "input_required").await;
    let answer = json!({"name": accept("name", "Ada")});
    let (ra, rb, rc) = tokio::join!(
        a.update(&id, answer.clone()),
        b.update(&id, answer.clone()),
        c.update(&id, answer)
    );
    for r in [ra, rb, rc] {
        assert_eq!(ok(&r), &json!({"resultType": "complete"}));
    }
    let done = poll_until(c, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada!");
    let runs = a.seen.calls("ask") + b.seen.calls("ask") + c.seen.calls("ask");
    assert_eq!(
        runs, 2,
        "one first run (on a) and exactly one resume, on whichever replica won"
    );
}

#[tokio::test(start_paused = true)]
async fn created_on_one_read_on_another_answered_on_a_third_resumed_once() {
    let store = Shared::new();
    let (a, b, c) = (
        replica(store.connection()),
        replica(store.connection()),
        replica(store.connection()),
    );
    created_read_answered_on_three_replicas(&a, &b, &c).await;
}

/// Without a change feed, a 2025-11-25 `tasks/result` blocked on one
/// replica still returns when the task completes on another: it re-reads
/// every third of the lease TTL (1 s here).
#[tokio::test(start_paused = true)]
async fn tasks_result_on_another_replica_returns_without_a_change_feed() {
    let store = Shared::new();
    let (a, b) = (replica(store.connection()), replica(store.connection()));
    let started = a
        .send(
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 5_000}, "task": {}}),
        )
        .await;
    let id = ok(&started)["task"]["taskId"].as_str().unwrap().to_owned();
    let asked = tokio::time::Instant::now();
    let r = b.send("tasks/result", json!({"taskId": id})).await;
    assert_eq!(ok(&r)["content"][0]["text"], "slept 5000");
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_secs(5) && took <= Duration::from_secs(6),
        "answered {took:?} after the call: at the first re-read after the end"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancel_on_one_replica_stops_the_handler_on_another_within_two_seconds() {
    let store = Shared::new();
    let (a, b) = (replica(store.connection()), replica(store.connection()));
    let id = a.start("hang", json!({})).await;
    let cancelled_at = tokio::time::Instant::now();
    ok(&b.cancel(&id).await);
    assert_eq!(a.get_ok(&id).await["status"], "cancelled");
    common::eventually(
        || a.seen.cancelled_handlers.load(Ordering::SeqCst) == 1,
        "the handler on a stops",
    )
    .await;
    let took = cancelled_at.elapsed();
    assert!(
        took <= Duration::from_secs(2),
        "stopped after {took:?} (heartbeat every second)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_silent_runner_is_fenced_off_and_its_task_recovered() {
    let store = Shared::new();
    let a_conn = store.connection();
    let cut = Arc::clone(&a_conn.cut);
    // The task is created under `Rerun` (its policy is stored with it)...
    let mut a = Client::new(
        common::layer_on(a_conn)
            .with_lease_ttl(Duration::from_secs(3))
            .with_recovery(Recovery::Rerun),
    );
    a.owner = Some("alice".into());
    // ...and b recovers it so, by re-running it.
    let mut b = Client::new(
        common::layer_on(store.connection())
            .with_lease_ttl(Duration::from_secs(3))
            .with_recovery(Recovery::Rerun),
    );
    b.owner = Some("alice".into());
    // b must have seen one request to know its inner service.
    let _ = b.call("slow", json!({"ms": 10})).await;

    let started = tokio::time::Instant::now();
    let id = a.start("slow", json!({"ms": 20_000})).await;
    // a is partitioned from the store: it can neither renew nor write.
    cut.store(true, Ordering::SeqCst);
    // Once b has taken the task over (fence 2), a can reach the store
    // again, but its fence is stale.
    let fence = || {
        let r = futures_lite_get(&store, &id);
        r.and_then(|r| r.lease.as_ref().map(|l| l.fence))
            .unwrap_or(0)
    };
    common::eventually(|| fence() == 2, "b takes the task over").await;
    cut.store(false, Ordering::SeqCst);
    let done = b.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 20000");
    assert_eq!(
        b.seen.calls("slow"),
        2,
        "b re-ran the orphan once (plus its own call)"
    );
    // a's handler answered at 20 s, while b's run was still going: had a's
    // write been taken, the task would have completed then.
    assert!(
        started.elapsed() > Duration::from_secs(21),
        "a's stale answer was fenced off"
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(b.get_ok(&id).await, done, "nothing changes afterwards");
}

/// Read a record straight from the shared memory store (it answers at once).
fn futures_lite_get(store: &Shared, id: &str) -> Option<Arc<TaskRecord>> {
    let fut = store.inner.get(id, 0);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(r) => r.ok().flatten(),
        std::task::Poll::Pending => None,
    }
}

#[tokio::test(start_paused = true)]
async fn orphans_fail_honestly_by_default() {
    let store = Shared::new();
    let a_conn = store.connection();
    let cut = Arc::clone(&a_conn.cut);
    let a = replica(a_conn);
    let mut b = replica(store.connection());
    let _ = b.call("slow", json!({"ms": 10})).await;
    let id = a.start("slow", json!({"ms": 20_000})).await;
    cut.store(true, Ordering::SeqCst);
    let failed = b.wait_for(&id, TaskStatus::Failed).await;
    assert_eq!(failed["error"]["code"], -32603);
    assert!(failed["error"]["message"]
        .as_str()
        .unwrap()
        .contains("stopped or restarted before the task finished"));
}

/// The recovery policy is the task's, stored when it is created: a replica
/// configured to fail orphans re-runs one created under `Rerun`, and the
/// other way round (issue 31: a front left at the default `Fail` next to
/// workers started with `--recovery rerun` failed some tasks and re-ran
/// others, by whichever process reaped each first).
#[tokio::test(start_paused = true)]
async fn a_task_is_recovered_by_its_own_policy_not_the_reapers() {
    for (created_under, reaper, ends) in [
        (Recovery::Rerun, Recovery::Fail, TaskStatus::Completed),
        (Recovery::Fail, Recovery::Rerun, TaskStatus::Failed),
    ] {
        let store = Shared::new();
        let a_conn = store.connection();
        let cut = Arc::clone(&a_conn.cut);
        let with = |conn: Shared, recovery: Recovery| {
            let layer = common::layer_on(conn)
                .with_lease_ttl(Duration::from_secs(3))
                .with_recovery(recovery);
            let mut client = Client::new(layer);
            client.owner = Some("alice".into());
            client
        };
        let a = with(a_conn, created_under);
        let mut b = with(store.connection(), reaper);
        // b has seen a request: it knows its inner service.
        let _ = b.call("slow", json!({"ms": 10})).await;
        let id = a.start("slow", json!({"ms": 20_000})).await;
        // a dies as far as the store can tell: its lease runs out, b reaps.
        cut.store(true, Ordering::SeqCst);
        let end = b.wait_for(&id, ends).await;
        match ends {
            TaskStatus::Completed => {
                assert_eq!(end["result"]["content"][0]["text"], "slept 20000");
                assert_eq!(b.seen.calls("slow"), 2, "re-run once on b: {end}");
            }
            _ => {
                assert!(end["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("stopped or restarted before the task finished"));
                assert_eq!(b.seen.calls("slow"), 1, "never re-run on b: {end}");
            }
        }
    }
}

/// With workers: a worker started with `Fail` claims and re-runs the
/// orphan of a task the front (`Rerun`) queued, once the worker that ran
/// it went silent; before, it failed it.
#[tokio::test(start_paused = true)]
async fn a_worker_recovers_a_task_by_the_fronts_policy_not_its_own() {
    use mcp_task_layer::Execution;
    let store = Shared::new();
    let queued = |conn: Shared, recovery: Recovery| {
        common::layer_on(conn)
            .with_lease_ttl(Duration::from_secs(3))
            .with_recovery(recovery)
            .with_execution(Execution::Queued)
    };
    let mut front = Client::new(queued(store.connection(), Recovery::Rerun));
    front.owner = Some("alice".into());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = |conn: Shared, recovery: Recovery| {
        let seen = Arc::new(common::Seen::default());
        let run = queued(conn, recovery)
            .worker(common::server(Arc::clone(&seen)))
            .with_poll_interval(Duration::from_millis(50))
            .run(
                {
                    let mut stopped = stopped.clone();
                    async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    }
                },
                Duration::from_secs(1),
            );
        (seen, tokio::spawn(run))
    };
    let first_conn = store.connection();
    let cut = Arc::clone(&first_conn.cut);
    let (first, _) = worker(first_conn, Recovery::Rerun);
    let id = front.start("slow", json!({"ms": 20_000})).await;
    common::eventually(|| first.calls("slow") == 1, "the first worker runs it").await;
    cut.store(true, Ordering::SeqCst);
    let (second, _) = worker(store.connection(), Recovery::Fail);
    let done = poll_until(&front, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 20000");
    assert_eq!(second.calls("slow"), 1, "re-run on the second worker");
    let _ = stop.send(true);
}

/// The same promises with three replicas on one shared durable store, each
/// with its own connections, in real time: the bodies here, one module per
/// engine below.
#[cfg(any(feature = "postgres", feature = "redis"))]
mod shared {
    use std::time::Instant;

    use super::*;

    /// Three replicas, each a layer over its own connection to one store.
    pub(super) fn replicas<S: TaskStore>(stores: [S; 3], lease_ttl: Duration) -> [Client; 3] {
        stores.map(|store| {
            let mut client = Client::new(common::layer_on(store).with_lease_ttl(lease_ttl));
            client.owner = Some("alice".into());
            client
        })
    }

    /// A 2025-11-25 `tasks/result` blocked on one replica returns when the
    /// task completes on another: woken by the change feed, not a poll.
    pub(super) async fn tasks_result_returns_when_another_finishes(a: &Client, b: &Client) {
        let started = a
            .send(
                "tools/call",
                json!({"name": "slow", "arguments": {"ms": 800}, "task": {}}),
            )
            .await;
        let id = ok(&started)["task"]["taskId"].as_str().unwrap().to_owned();
        let asked = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            b.send("tasks/result", json!({"taskId": id})),
        )
        .await
        .expect("tasks/result returns within 5 s");
        assert_eq!(ok(&r)["content"][0]["text"], "slept 800");
        assert!(asked.elapsed() < Duration::from_secs(5));
        assert_eq!(b.seen.calls("slow"), 0, "it ran on a");
    }

    /// The lease heartbeat comes every 10 s here (30 s leases): only the
    /// store's change feed can stop the handler within two seconds.
    pub(super) async fn cancel_stops_the_handler_on_another_within_two_seconds(
        a: &Client,
        b: &Client,
    ) {
        let id = a.start("hang", json!({})).await;
        let cancelled_at = Instant::now();
        ok(&b.cancel(&id).await);
        let deadline = cancelled_at + Duration::from_secs(2);
        while a.seen.cancelled_handlers.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "the handler on a still runs 2 s after the cancel on b"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(poll_until(a, &id, "cancelled").await["status"], "cancelled");
        eprintln!(
            "handler stopped {:?} after the cancel",
            cancelled_at.elapsed()
        );
    }
}

/// Three replicas on one PostgreSQL table (`LISTEN`/`NOTIFY` feed).
#[cfg(feature = "postgres")]
mod postgres {
    use super::common::pg::{url, Tables};
    use super::shared::*;
    use super::*;

    async fn three(tables: &Tables, lease_ttl: Duration) -> [Client; 3] {
        let table = tables.next();
        let (a, b, c) = tokio::join!(
            tables.store(&table),
            tables.store(&table),
            tables.store(&table)
        );
        replicas([a, b, c], lease_ttl)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_created_on_one_read_on_another_answered_on_a_third_resumed_once() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "rep3");
        let [a, b, c] = three(&tables, Duration::from_secs(3)).await;
        created_read_answered_on_three_replicas(&a, &b, &c).await;
        tables.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_tasks_result_on_one_replica_returns_when_another_finishes() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "represult");
        let [a, b, _c] = three(&tables, Duration::from_secs(30)).await;
        tasks_result_returns_when_another_finishes(&a, &b).await;
        tables.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_cancel_on_one_replica_stops_the_handler_on_another_within_two_seconds() {
        let Some(url) = url() else { return };
        let tables = Tables::new(&url, "repcancel");
        let [a, b, _c] = three(&tables, Duration::from_secs(30)).await;
        cancel_stops_the_handler_on_another_within_two_seconds(&a, &b).await;
        tables.drop_all().await;
    }
}

/// Three replicas on one Redis (pub/sub feed), under one key prefix.
#[cfg(feature = "redis")]
mod redis {
    use super::common::redis_db::{url, Prefixes};
    use super::shared::*;
    use super::*;

    async fn three(prefixes: &Prefixes, lease_ttl: Duration) -> [Client; 3] {
        let prefix = prefixes.next();
        let (a, b, c) = tokio::join!(
            prefixes.store(&prefix),
            prefixes.store(&prefix),
            prefixes.store(&prefix)
        );
        replicas([a, b, c], lease_ttl)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_created_on_one_read_on_another_answered_on_a_third_resumed_once() {
        let Some(url) = url() else { return };
        let prefixes = Prefixes::new(&url, "rep3");
        let [a, b, c] = three(&prefixes, Duration::from_secs(3)).await;
        created_read_answered_on_three_replicas(&a, &b, &c).await;
        prefixes.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_tasks_result_on_one_replica_returns_when_another_finishes() {
        let Some(url) = url() else { return };
        let prefixes = Prefixes::new(&url, "represult");
        let [a, b, _c] = three(&prefixes, Duration::from_secs(30)).await;
        tasks_result_returns_when_another_finishes(&a, &b).await;
        prefixes.drop_all().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_cancel_on_one_replica_stops_the_handler_on_another_within_two_seconds() {
        let Some(url) = url() else { return };
        let prefixes = Prefixes::new(&url, "repcancel");
        let [a, b, _c] = three(&prefixes, Duration::from_secs(30)).await;
        cancel_stops_the_handler_on_another_within_two_seconds(&a, &b).await;
        prefixes.drop_all().await;
    }
}

/// Defect 2: tasks made on replica A and ended on replica B (cancelled,
/// finished) or reaped by B stop counting against their owner on A, with
/// no change feed between them. (Before the fix A kept them as unfinished
/// forever and refused the owner's next task at the bound.)
#[tokio::test(start_paused = true)]
async fn tasks_ended_or_reaped_on_another_replica_stop_counting_here() {
    let store = MemoryStore::new();
    let limits = mcp_task_layer::Limits {
        max_tasks_per_owner: 2,
        ..mcp_task_layer::Limits::default()
    };
    let mut a =
        Client::new(common::layer_on(store.clone()).with_limits(limits.clone())).as_owner("ann");
    let mut b =
        Client::new(common::layer_on(store.clone()).with_limits(limits.clone())).as_owner("ann");
    let t1 = a.start("ask", json!({})).await;
    let t2 = a.start("ask", json!({})).await;
    a.wait_for(&t1, TaskStatus::InputRequired).await;
    a.wait_for(&t2, TaskStatus::InputRequired).await;
    let refused = a.call("ask", json!({})).await;
    assert_eq!(common::err(&refused).code, -32602, "at the bound");

    // Both end on B: one cancelled, one answered and finished there.
    ok(&b.cancel(&t1).await);
    ok(&b
        .update(&t2, json!({ "name": accept("name", "Ada") }))
        .await);
    b.wait_for(&t2, TaskStatus::Completed).await;
    // A counts neither any more.
    let t3 = a.start("ask", json!({})).await;
    let t4 = a.start("ask", json!({})).await;
    assert_ne!(t3, t4);

    // Reaped by B (short TTL, B's reaper; A's never runs in this test).
    let short = Duration::from_secs(2);
    let mut a = Client::new(
        common::layer_on(store.clone())
            .with_limits(limits.clone())
            .with_default_ttl(Some(short))
            .with_reap_interval(Duration::from_secs(3600)),
    )
    .as_owner("bea");
    let b = Client::new(
        common::layer_on(store.clone())
            .with_limits(limits)
            .with_reap_interval(Duration::from_millis(100)),
    )
    .as_owner("bea");
    let r1 = a.start("ask", json!({})).await;
    let r2 = a.start("ask", json!({})).await;
    a.wait_for(&r1, TaskStatus::InputRequired).await;
    a.wait_for(&r2, TaskStatus::InputRequired).await;
    assert_eq!(common::err(&a.call("ask", json!({})).await).code, -32602);
    // B's reaper runs once B has served a task request.
    b.get(&r1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(common::err(&b.get(&r1).await).code, -32602, "reaped");
    a.start("ask", json!({})).await;
}
