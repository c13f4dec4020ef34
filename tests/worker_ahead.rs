//! A worker holds claims ahead of its free slots while a backlog lasts
//! (issue 33, `TaskWorker::with_claims_ahead`): a slot that frees starts
//! its next run at once. A held claim is this worker's run in every other
//! way: a cancel reaches it (it never runs), a drain puts it back in the
//! queue unrun, and so does a hold of a heartbeat period. In one process,
//! on a `MemoryStore` read directly for the leases, under paused tokio
//! time.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{layer_on, server, Client, Seen, Worker};
use mcp_task_layer::store::TaskStore;
use mcp_task_layer::{Execution, MemoryStore, TaskLayer};
use serde_json::json;

struct Fixture {
    store: MemoryStore,
    layer: TaskLayer,
    front: Client,
    seen: Arc<Seen>,
}

fn fixture() -> Fixture {
    let store = MemoryStore::new();
    let layer = layer_on(store.clone()).with_execution(Execution::Queued);
    Fixture {
        store,
        front: Client::new(layer.clone()),
        layer,
        seen: Arc::new(Seen::default()),
    }
}

impl Fixture {
    /// `n` tasks of the `slow` tool, each working `ms`, queued in order.
    async fn queue(&self, n: usize, ms: u64) -> Vec<String> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(self.front.start("slow", json!({ "ms": ms })).await);
        }
        ids
    }

    /// A worker of one slot holding up to `ahead` claims for it, that
    /// never looks unwoken within a test.
    fn start_worker(&self, ahead: usize) -> Worker {
        let worker = common::worker_of(&self.layer, server(Arc::clone(&self.seen)), 1);
        common::run_worker(worker.with_claims_ahead(ahead), Duration::from_secs(60))
    }

    /// Of `ids`, which are claimed (under a lease of a worker, not queued).
    async fn claimed(&self, ids: &[String]) -> Vec<bool> {
        let mut claimed = Vec::new();
        for id in ids {
            let record = self.store.get(id, 0).await.unwrap().expect("stored");
            claimed.push(record.lease.as_ref().is_some_and(|l| !l.is_queued()));
        }
        claimed
    }

    /// Until `ids` are claimed as `want` says.
    async fn until_claimed(&self, ids: &[String], want: &[bool]) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let claimed = self.claimed(ids).await;
            if claimed == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "claimed {claimed:?}, want {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Four tasks of a second queued, and a worker of one slot holding two
    /// claims ahead: once the first runs, the next two are held.
    async fn two_held(&self) -> (Vec<String>, Worker) {
        let ids = self.queue(4, 1000).await;
        let worker = self.start_worker(2);
        self.calls(1).await;
        self.until_claimed(&ids, &[true, true, true, false]).await;
        (ids, worker)
    }

    async fn calls(&self, n: usize) {
        let seen = Arc::clone(&self.seen);
        common::eventually(
            move || seen.calls("slow") == n,
            &format!("{n} calls of the handler"),
        )
        .await;
    }
}

/// Behind a backlog, a worker of one slot holds two more claims while its
/// first run works; they run one after the other as the slot frees, and
/// the fourth task waits in the queue until a held claim is taken.
#[tokio::test(start_paused = true)]
async fn a_backlog_is_claimed_ahead_of_the_free_slots() {
    let mut f = fixture();
    let (ids, worker) = f.two_held().await;
    assert_eq!(f.seen.calls("slow"), 1, "a held claim ran without a slot");
    common::finish(&mut f.front, &ids, worker).await;
    assert_eq!(f.seen.calls("slow"), 4);
}

/// `with_claims_ahead(0)`: nothing beyond the free slot is claimed.
#[tokio::test(start_paused = true)]
async fn no_claims_are_held_ahead_when_the_worker_holds_none() {
    let mut f = fixture();
    let ids = f.queue(3, 1000).await;
    let worker = f.start_worker(0);
    f.calls(1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(f.claimed(&ids).await, [true, false, false]);
    common::finish(&mut f.front, &ids, worker).await;
}

/// A held claim whose task is cancelled never runs: the handler is called
/// for the other three tasks only, and the cancelled one stays cancelled.
#[tokio::test(start_paused = true)]
async fn a_held_claim_cancelled_meanwhile_never_runs() {
    let mut f = fixture();
    let (ids, worker) = f.two_held().await;
    common::ok(&f.front.cancel(&ids[1]).await);
    common::finish(&mut f.front, [&ids[0], &ids[2], &ids[3]], worker).await;
    assert_eq!(f.seen.calls("slow"), 3, "the cancelled task's handler ran");
    assert_eq!(f.front.get_ok(&ids[1]).await["status"], "cancelled");
}

/// A drain puts the held claims back in the queue unrun (and counts them
/// requeued); another worker then runs them.
#[tokio::test(start_paused = true)]
async fn a_drain_puts_held_claims_back_in_the_queue() {
    let mut f = fixture();
    let (ids, (stop, done)) = f.two_held().await;
    let _ = stop.send(());
    let report = done.await.unwrap();
    assert_eq!(
        (report.finished, report.requeued, report.failed),
        (1, 2, 0),
        "{report:?}"
    );
    assert_eq!(f.seen.calls("slow"), 1, "a held claim ran in the drain");
    assert_eq!(f.claimed(&ids[1..]).await, [false, false, false]);
    let worker = f.start_worker(0);
    common::finish(&mut f.front, &ids, worker).await;
    assert_eq!(f.seen.calls("slow"), 4);
}

/// A claim held for a heartbeat period (a third of the 30 s lease) while
/// the slot's run goes on goes back to the queue, and is not claimed ahead
/// again until a round finds a backlog; it runs once the slot frees.
#[tokio::test(start_paused = true)]
async fn a_claim_held_a_heartbeat_period_goes_back_to_the_queue() {
    let mut f = fixture();
    let ids = f.queue(1, 25_000).await;
    let more = f.queue(1, 10).await;
    let worker = f.start_worker(1);
    f.calls(1).await;
    f.until_claimed(&more, &[true]).await;
    let held = tokio::time::Instant::now();
    f.until_claimed(&more, &[false]).await;
    let waited = held.elapsed();
    assert!(
        waited >= Duration::from_secs(9) && waited <= Duration::from_secs(11),
        "given back after {waited:?}"
    );
    // Ten more seconds of the first run: not claimed ahead again.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(f.claimed(&more).await, [false]);
    assert_eq!(f.seen.calls("slow"), 1);
    common::finish(&mut f.front, ids.iter().chain(&more), worker).await;
}
