//! How workers wake for queued runs when the store has a change feed
//! (issue 33): one idle worker per queued run, not every worker of the
//! process, and no wake lost while every worker is busy (a run that ends
//! does not look for work when a feed is up, so a lost wake would leave a
//! queued run until the idle poll, an hour here). In one process, on a
//! `MemoryStore` that reports a (silent) change feed, under paused tokio
//! time.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fed::FedStore;
use common::{layer_on, server, Client, Seen};
use mcp_task_layer::store::TaskChange;
use mcp_task_layer::{DrainReport, Execution, MemoryStore, Recovery, TaskLayer, TaskStatus};
use serde_json::json;
use tokio::sync::broadcast;

/// A queued layer over a [`FedStore`] store, and its claim-round counter.
fn fed_layer() -> (TaskLayer, Arc<AtomicUsize>) {
    let (layer, rounds, _) = fed_layer_on(MemoryStore::new());
    (layer, rounds)
}

/// A queued layer over a [`FedStore`] store around `inner`, its claim-round
/// counter and its feed.
fn fed_layer_on(
    inner: MemoryStore,
) -> (TaskLayer, Arc<AtomicUsize>, broadcast::Sender<TaskChange>) {
    let (store, feed, rounds) = FedStore::new(inner);
    let layer = layer_on(store)
        .with_execution(Execution::Queued)
        .with_recovery(Recovery::Fail);
    (layer, rounds, feed)
}

/// A worker that never looks unwoken within a test (an hour's poll).
fn start_worker(layer: &TaskLayer, concurrency: usize) -> common::Worker {
    let inner = server(Arc::new(Seen::default()));
    common::start_worker(layer, inner, concurrency, Duration::from_secs(1))
}

/// Runs queued while the only worker's one slot is taken are each claimed
/// as soon as the slot frees, not at the next idle poll: the wakes sent
/// while it was busy are kept for it.
#[tokio::test(start_paused = true)]
async fn runs_queued_while_every_worker_is_busy_are_claimed_as_slots_free() {
    let (layer, _) = fed_layer();
    let mut front = Client::new(layer.clone());
    let (stop, done) = start_worker(&layer, 1);
    let start = tokio::time::Instant::now();
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(front.start("slow", json!({ "ms": 500 })).await);
    }
    for id in &ids {
        front.wait_for(id, TaskStatus::Completed).await;
    }
    // Six runs of 500 ms, one at a time: an idle poll would be an hour.
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "the queued runs waited for the idle poll: {:?}",
        start.elapsed()
    );
    let _ = stop.send(());
    assert_eq!(done.await.unwrap(), DrainReport::default());
}

/// One queued run wakes one of four idle workers of the process for a
/// claim round, not all four.
#[tokio::test(start_paused = true)]
async fn one_queued_run_wakes_one_idle_worker() {
    let (layer, rounds) = fed_layer();
    let mut front = Client::new(layer.clone());
    let workers: Vec<_> = (0..4).map(|_| start_worker(&layer, 4)).collect();
    // Each worker's first round, at its start, finds nothing.
    common::eventually(
        || rounds.load(Ordering::SeqCst) == 4,
        "every worker looked once",
    )
    .await;
    let id = front.start("slow", json!({ "ms": 500 })).await;
    front.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(
        rounds.load(Ordering::SeqCst),
        5,
        "one claim round for one queued run"
    );
    for (stop, done) in workers {
        let _ = stop.send(());
        assert_eq!(done.await.unwrap(), DrainReport::default());
    }
}

/// A wake that reaches one worker, whose round finds more than it can
/// take, reaches the other idle workers of the process too: two runs
/// queued by another replica (announced by one `Missed`) run at once on
/// two workers of one slot each, not one after the other.
#[tokio::test(start_paused = true)]
async fn a_round_that_finds_more_than_it_takes_wakes_the_other_idle_workers() {
    let shared = MemoryStore::new();
    let (workers_layer, rounds, feed) = fed_layer_on(shared.clone());
    let workers: Vec<_> = (0..2).map(|_| start_worker(&workers_layer, 1)).collect();
    // Each worker's first round, at its start, finds nothing.
    common::eventually(
        || rounds.load(Ordering::SeqCst) == 2,
        "every worker looked once",
    )
    .await;
    // Another replica's front: its wakes reach its own workers (none).
    let front = Client::new(
        layer_on(shared)
            .with_execution(Execution::Queued)
            .with_recovery(Recovery::Fail),
    );
    let ten_minutes = 600_000;
    let a = front.start("slow", json!({ "ms": ten_minutes })).await;
    let b = front.start("slow", json!({ "ms": ten_minutes })).await;
    let start = tokio::time::Instant::now();
    feed.send(TaskChange::Missed).unwrap();
    // The front hears of the workers' writes only by reading (no feed):
    // bounded polling, a second of paused time apart.
    for id in [&a, &b] {
        let mut polls = 0;
        while front.get_ok(id).await["status"] != TaskStatus::Completed.as_str() {
            polls += 1;
            assert!(polls < 7200, "task {id} never completed");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    assert!(
        start.elapsed() < Duration::from_secs(15 * 60),
        "the two runs ran one after the other: {:?}",
        start.elapsed()
    );
    for (stop, done) in workers {
        let _ = stop.send(());
        assert_eq!(done.await.unwrap(), DrainReport::default());
    }
}

/// Short runs behind a backlog are claimed in rounds for the slots that
/// free together: when the first of a round's runs ends a little before
/// the others, the next round waits (at most as long as a round takes)
/// for them instead of claiming one run for the first slot and the rest in
/// a round after it (issue 33: rounds of 4.7–5.3 rows for 16 slots on
/// PostgreSQL). Here a round takes 5 ms and the runs 2–3 ms.
#[tokio::test(start_paused = true)]
async fn short_runs_behind_a_backlog_are_claimed_for_the_slots_that_free_together() {
    let limits = claim_limits([2, 3, 3, 3, 2, 3, 3, 3]).await;
    assert!(
        limits.iter().all(|&l| l == 4),
        "a claim round for fewer than the slots that freed together: {limits:?}"
    );
}

/// A long run's slot is claimed for as soon as it frees, backlog or not:
/// a 100 ms run does not wait for a 5 ms round (a held round cost a
/// slot-bound fleet 3–4%, `fleet9` in BENCHMARKS.md). The round is for
/// that one slot and two claims ahead (half the worker's four slots: 100
/// ms is 20 rounds of 5 ms, within the 32 that claims are held ahead for);
/// a round that waited for the other slots would be for more.
#[tokio::test(start_paused = true)]
async fn a_long_runs_slot_is_claimed_for_at_once_behind_a_backlog() {
    let limits = claim_limits([100, 101, 101, 101, 100, 100, 100, 100]).await;
    assert_eq!(
        limits.get(..2),
        Some(&[4, 3][..]),
        "the first slot to free waited for others: {limits:?}"
    );
}

/// The `limit` of each claim round of one worker of four slots running
/// tasks of `ms` milliseconds each (queued in that order before it
/// starts), on a store whose reads take 5 ms.
async fn claim_limits(ms: [u64; 8]) -> Vec<usize> {
    let (store, _feed, _rounds) = FedStore::new(MemoryStore::new());
    let store = store.with_read_delay(Duration::from_millis(5));
    let limits = store.limits();
    let layer = layer_on(store)
        .with_execution(Execution::Queued)
        .with_recovery(Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let mut ids = Vec::new();
    for ms in ms {
        ids.push(front.start("slow", json!({ "ms": ms })).await);
    }
    let (stop, done) = start_worker(&layer, 4);
    for id in &ids {
        front.wait_for(id, TaskStatus::Completed).await;
    }
    let _ = stop.send(());
    assert_eq!(done.await.unwrap(), DrainReport::default());
    let limits = limits.lock().unwrap().clone();
    limits
}

/// A claim round still out when the future of the worker's `run` is
/// dropped commits its claims after the worker is gone. They are queued
/// again, not left to their lease: under `Recovery::Fail` a task no handler
/// ran is never failed for it, and the next worker runs it. (Before, the
/// claim stayed the dropped worker's until its lease ran out, then the
/// task failed as interrupted.)
#[tokio::test(start_paused = true)]
async fn the_claims_of_a_round_out_when_a_worker_is_dropped_are_queued_again() {
    let (store, _feed, rounds) = FedStore::new(MemoryStore::new());
    let store = store.with_read_delay(Duration::from_secs(5));
    let layer = layer_on(store)
        .with_execution(Execution::Queued)
        .with_recovery(Recovery::Fail);
    let mut front = Client::new(layer.clone());
    let id = front.start("slow", json!({ "ms": 10 })).await;
    let (_stop, dropped) = start_worker(&layer, 1);
    common::eventually(|| rounds.load(Ordering::SeqCst) == 1, "a claim round out").await;
    // The future of `run` is dropped while its round reads the store.
    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());
    let (stop, done) = start_worker(&layer, 1);
    let body = front.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(body["status"], "completed", "{body}");
    stop.send(()).unwrap();
    let report = done.await.unwrap();
    assert_eq!((report.failed, report.requeued), (0, 0), "{report:?}");
}

/// A queued run's wake that reaches a worker's loop together with two
/// other events of it (a handler's answer freeing its slot, then its run
/// ending) is not lost: the run queued by the handler of the run before,
/// as it answers, is claimed at once, not at the idle poll (an hour here).
/// (The loop's listener took the kept wake and was dropped for the run's
/// end: the run waited for the idle poll.)
#[tokio::test(start_paused = true)]
async fn a_wake_that_comes_with_other_events_of_the_worker_is_not_lost() {
    let (layer, _) = fed_layer();
    let mut front = Client::new(layer.clone());
    let creator = Arc::new(Client::new(layer.clone()));
    let (queued, mut ids) = tokio::sync::mpsc::unbounded_channel();
    // `trigger` queues another `trigger` (marked `last`) as it answers.
    let handler = tower::service_fn(move |req: mcp_task_layer::JsonRpcRequest| {
        let params = req.params.clone().map(mcp_task_layer::Params::into_value);
        let last = params.is_some_and(|p| p["arguments"]["last"] == json!(true));
        if !last {
            let (creator, queued) = (Arc::clone(&creator), queued.clone());
            tokio::spawn(async move {
                let id = creator.start("trigger", json!({ "last": true })).await;
                let _ = queued.send(id);
            });
        }
        let result = json!({ "content": [{ "type": "text", "text": "done" }] });
        std::future::ready(Ok::<_, std::convert::Infallible>(
            mcp_task_layer::JsonRpcResponse::result(req.id, result),
        ))
    });
    let (stop, done) = common::start_worker(&layer, handler, 2, Duration::from_secs(1));
    let first = front.start("trigger", json!({})).await;
    front.wait_for(&first, TaskStatus::Completed).await;
    let next = ids.recv().await.expect("the handler queued a run");
    let completed = front.wait_for(&next, TaskStatus::Completed);
    tokio::time::timeout(Duration::from_secs(60), completed)
        .await
        .expect("the run queued as the last answered waited for the idle poll");
    let _ = stop.send(());
    assert_eq!(done.await.unwrap(), DrainReport::default());
}
