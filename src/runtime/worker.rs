//! [`TaskWorker`]: runs the handlers of tasks queued by layers with
//! [`Execution::Queued`](crate::Execution::Queued), on any process that
//! shares their store, and drains gracefully.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{info, warn, Instrument};

use super::drain::DrainReport;
use super::engine::Engine;
use super::hold::Hold;
use super::ready::Ready;
use super::registry::LocalTask;
use super::runner::{HandlerRun, InnerFuture};
use super::slot::Slot;
use super::won::Won;
use crate::context::TaskResumeContext;
use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse};
use crate::store::{self, ClaimQuery, QueuedClaim, TaskRecord};

/// Runs queued tasks' handlers: claims runnable tasks from the store with a
/// lease and a new fence, calls the inner service with the same request,
/// [`TaskResumeContext`], cancellation token and extensions as inline
/// execution, and writes the outcome under the fence. A slot is free again
/// as soon as the handler answers or asks for input: the outcome is
/// written while the slot runs the next task, and at most as many outcomes
/// are written at once as the worker has slots (a handler that answers
/// `requestState` alone, and is called again, keeps its slot). Behind a
/// backlog of runs a few claim rounds long it holds claims ahead of its
/// free slots, so a slot that frees starts its next run at once
/// ([`with_claims_ahead`](Self::with_claims_ahead)).
///
/// Made by [`TaskLayer::worker`](crate::TaskLayer::worker); a process may
/// run workers and serve requests (one layer for both), or only one of
/// the two. Claims go oldest first (in the order the runs were queued);
/// [`with_owner_concurrency`](Self::with_owner_concurrency) keeps one owner
/// from filling a worker. Where the store claims atomically
/// ([`TaskStore::claim_runnable`](crate::store::TaskStore::claim_runnable):
/// PostgreSQL with `FOR UPDATE SKIP LOCKED`, SQLite, Redis with a script
/// that holds what it reads) workers take disjoint runs; elsewhere each
/// claim is a compare-and-set that one worker wins. A worker wakes at once for runs
/// queued in its own process or announced by the store's change feed
/// (PostgreSQL), and otherwise looks every
/// [poll interval](Self::with_poll_interval).
///
/// ```no_run
/// # async fn doc(server: tower::util::BoxCloneService<mcp_task_layer::JsonRpcRequest, mcp_task_layer::JsonRpcResponse, std::convert::Infallible>) {
/// use std::time::Duration;
/// use mcp_task_layer::{Execution, MemoryStore, Recovery, TaskLayer};
///
/// let layer = TaskLayer::new(MemoryStore::new())
///     .with_execution(Execution::Queued)
///     .with_recovery(Recovery::Rerun);
/// let worker = layer.worker(server).with_concurrency(8);
/// let shutdown = async { let _ = tokio::signal::ctrl_c().await; };
/// let report = worker.run(shutdown, Duration::from_secs(10)).await;
/// println!("{report:?}");
/// # }
/// ```
pub struct TaskWorker<S> {
    engine: Arc<Engine>,
    inner: S,
    concurrency: usize,
    owner_concurrency: Option<usize>,
    ahead: Option<usize>,
    poll_interval: Duration,
}

impl<S> fmt::Debug for TaskWorker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskWorker")
            .field("concurrency", &self.concurrency)
            .field("owner_concurrency", &self.owner_concurrency)
            .field("ahead", &self.ahead)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

/// A run this worker holds.
struct Claimed {
    task_id: String,
    owner: Option<String>,
    fence: u64,
    /// When it was claimed (`Hold` weighs runs' lengths).
    since: tokio::time::Instant,
    /// Freed by the run when its handler is done.
    slot: Slot,
    /// Counted as writing its answer, no longer as running.
    writing: bool,
}

/// Runnable records read per claim round beyond the free capacity when
/// owners are capped: some belong to owners at their cap.
const CLAIM_SLACK: usize = 16;

/// What a claim round won, and whether more may be runnable now.
#[derive(Default)]
struct Round {
    /// Put back in the queue if not run (the worker stopped meanwhile).
    won: Won,
    more: bool,
    /// Runs passed by because their owner was at its cap here: one of
    /// this worker's runs that ends may free their turn.
    capped: bool,
}

/// Which runnable records a claim round takes, oldest first: those this
/// replica may claim, up to the free capacity, within the owners' caps.
struct Picker {
    free: usize,
    cap: Option<usize>,
    /// Id and owner of each run this worker holds.
    running: Vec<(String, Option<String>)>,
    /// Owner of each record taken so far.
    picked: Vec<Option<String>>,
    /// Whether a claimable record was passed by for its owner's cap.
    capped: bool,
}

impl Picker {
    fn take(&mut self, engine: &Engine, record: &TaskRecord) -> bool {
        // Sealed fields this layer cannot open: not a run it can make.
        if self.picked.len() >= self.free
            || !record.sealed.is_empty()
            || !engine.claimable(record)
            || self.running.iter().any(|(id, _)| *id == record.id)
        {
            return false;
        }
        if let Some(cap) = self.cap {
            let running = self.running.iter().filter(|(_, o)| *o == record.owner);
            let picked = self.picked.iter().filter(|o| **o == record.owner);
            if running.count() + picked.count() >= cap {
                self.capped = true;
                return false;
            }
        }
        self.picked.push(record.owner.clone());
        true
    }
}

impl<S> TaskWorker<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    pub(crate) fn new(engine: Arc<Engine>, inner: S) -> Self {
        TaskWorker {
            engine,
            inner,
            concurrency: 16,
            owner_concurrency: None,
            ahead: None,
            poll_interval: Duration::from_secs(1),
        }
    }

    /// How many handlers this worker runs at once (default 16, at least 1).
    /// The answers of as many more may be being written meanwhile, so a
    /// worker runs or writes at most twice this many tasks, besides the
    /// claims it holds ahead ([`with_claims_ahead`](Self::with_claims_ahead)).
    #[must_use]
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// How many handlers of one owner this worker runs at once (default:
    /// no cap below [`with_concurrency`](Self::with_concurrency)). Older
    /// runs of other owners are claimed past a capped owner's.
    #[must_use]
    pub fn with_owner_concurrency(mut self, n: usize) -> Self {
        self.owner_concurrency = Some(n.max(1));
        self
    }

    /// How many claims beyond its free slots this worker holds for them
    /// while a backlog lasts (the last claim round found as many runnable
    /// tasks as it asked for), so that a slot that frees starts its next
    /// run at once rather than after a claim round. By default it holds
    /// half its concurrency, and only while its recent runs are a few claim
    /// rounds long (a 10 ms run behind 2 ms rounds, say): a longer run
    /// loses little to a round, and a claim held for it waits while another
    /// worker might have started it. `0` holds none. Not with
    /// [`with_owner_concurrency`](Self::with_owner_concurrency), which
    /// holds none either.
    ///
    /// A held claim is a run of this worker's: a cancel reaches it (it is
    /// never run), a drain puts it back in the queue unrun, and so does a
    /// hold of a third of the lease TTL.
    #[must_use]
    pub fn with_claims_ahead(mut self, n: usize) -> Self {
        self.ahead = Some(n);
        self
    }

    /// How often an idle worker looks for runnable tasks when nothing woke
    /// it (default 1 s): the bound on a claim's delay without a change
    /// feed, and the only store query an idle worker makes. With a feed
    /// (PostgreSQL) queued runs wake the worker at once, and it looks
    /// unwoken only every third of the lease TTL, for orphans.
    #[must_use]
    pub fn with_poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }

    /// Claim and run tasks until `shutdown` completes, then drain: claim
    /// nothing more, let running handlers finish for up to `deadline`, and
    /// hand back the tasks of those still running by the layer's recovery
    /// policy (runnable again at once, or failed with a message that says
    /// the server shut down) instead of leaving them to their lease.
    ///
    /// The worker's loop is a task of the runtime `run` is called on (the
    /// future `run` returns only waits for it and tells it to drain): the
    /// runs it starts and the claim rounds it waits for are then woken on
    /// the runtime's own threads, not on a thread blocked in `block_on`
    /// (as under `#[tokio::main]`), which cost two thread wake-ups per run.
    /// Dropping the future `run` returns stops the loop and its runs, as
    /// before; a claim round out then still commits, and its claims are
    /// queued again, unrun, for another worker.
    pub async fn run(self, shutdown: impl Future<Output = ()>, deadline: Duration) -> DrainReport {
        let stop = CancellationToken::new();
        let mut worker = AbortOnDrop(tokio::spawn(
            self.work(stop.clone(), deadline).in_current_span(),
        ));
        tokio::select! {
            done = &mut worker.0 => return joined(done),
            () = shutdown => stop.cancel(),
        }
        joined((&mut worker.0).await)
    }

    /// [`run`](Self::run)'s loop, until `stop` is cancelled, then the drain.
    async fn work(self, stop: CancellationToken, deadline: Duration) -> DrainReport {
        let engine = Arc::clone(&self.engine);
        engine.ensure_background();
        let mut runs: JoinSet<()> = JoinSet::new();
        let mut claimed: HashMap<tokio::task::Id, Claimed> = HashMap::new();
        // Runs whose handler is done and whose answer is being written: their
        // slots serve other runs meanwhile, up to as many such runs as slots.
        let freed = Arc::new(Notify::new());
        let mut writing = 0;
        let mut shutdown = std::pin::pin!(stop.cancelled());
        // One claim round at a time, in the background: runs that end while
        // it is out are claimed for together by the next one.
        let mut round: Option<JoinHandle<Round>> = None;
        let mut look = true;
        // The last round passed runs by for their owners' caps.
        let mut capped = false;
        // Rounds for the slots that free together behind a backlog of
        // short runs (issue 33): see `Hold`.
        let mut hold = Hold::default();
        // Claims held for the slots that free next.
        let mut ready = Ready::new(&engine);
        loop {
            while self.free(claimed.len(), writing) > 0 {
                let Some((next, local)) = ready.next() else {
                    break;
                };
                self.start_run(next, local, &freed, &mut runs, &mut claimed);
            }
            let free = self.free(claimed.len(), writing);
            let ahead = if self.owner_concurrency.is_some() {
                0
            } else {
                hold.ahead(self.concurrency, self.ahead)
            };
            // A round for the free slots (nothing is held then) and as many
            // ahead; without free slots, once half of those held are taken.
            let want = if free > 0 {
                free + ahead
            } else if ready.len() * 2 <= ahead {
                ahead - ready.len()
            } else {
                0
            };
            // Listening before the round reads the store: a run queued
            // meanwhile still wakes this loop. Only a worker with room
            // listens: a wake is one worker's (`wake_workers`), and one
            // that reaches no worker is kept for the first that waits.
            let wake = engine.hub.queue.notified();
            let mut wake = std::pin::pin!(wake);
            let listening = want > 0;
            if listening {
                wake.as_mut().enable();
            }
            if look && round.is_none() && want > 0 && hold.ready(free, self.concurrency) {
                round = Some(tokio::spawn(self.claim_round(want, &claimed)));
                hold.started();
                look = false;
            }
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    // A wake `enable` took is another worker's now.
                    let took = std::future::poll_fn(|cx| {
                        std::task::Poll::Ready(listening && wake.as_mut().poll(cx).is_ready())
                    });
                    if took.await {
                        engine.wake_workers();
                    }
                    break;
                }
                // Before every other event: `enable` may have taken a wake
                // kept for this loop, and a `Notified` dropped unpolled
                // after that passes it on to no one.
                () = &mut wake, if listening => look = true,
                won = async { round.as_mut().expect("a round").await }, if round.is_some() => {
                    round = None;
                    let Round { won, more, capped: passed } = won.unwrap_or_default();
                    capped = passed;
                    hold.ended(more);
                    if more {
                        look = true;
                        // More than this worker took: the idle workers of
                        // this process may take the rest.
                        engine.wake_idle_workers();
                    }
                    // Run at the top of the loop, in the slots free then.
                    ready.hold(won);
                }
                () = freed.notified() => {
                    // Every run whose handler is done since: their slots
                    // free together, for one round.
                    for run in claimed.values_mut().filter(|r| !r.writing && r.slot.is_free()) {
                        run.writing = true;
                        writing += 1;
                        hold.run_ended(run.since);
                    }
                    look |= capped || !self.has_feed();
                }
                Some(done) = runs.join_next_with_id(), if !runs.is_empty() => {
                    // This run and every other that ended with it: their
                    // slots free together, for one round.
                    let mut next = Some(done);
                    while let Some(done) = next {
                        let id = done.map_or_else(|e| e.id(), |(id, ())| id);
                        match claimed.remove(&id) {
                            Some(run) if run.writing => writing -= 1,
                            Some(run) => hold.run_ended(run.since),
                            None => {}
                        }
                        next = runs.try_join_next_with_id();
                    }
                    // With a feed every queued run wakes a worker, so a run
                    // that ends looks only for the runs a cap passed by;
                    // without one, it looks at once rather than a poll
                    // later.
                    look |= capped || !self.has_feed();
                }
                () = hold.expired(), if look && round.is_none() && hold.is_holding() => {}
                () = ready.stale() => {
                    ready.drop_stale();
                    hold.stalled();
                }
                () = tokio::time::sleep(self.idle_poll()) => look = true,
            }
        }
        info!(running = claimed.len(), "worker draining");
        let mut report = DrainReport::default();
        for handed in ready.give_back().await {
            report.count(handed);
        }
        // What a round out at shutdown won is queued again unrun (and
        // would be if this future were dropped instead: see `Won`).
        if let Some(round) = round {
            for handed in round.await.unwrap_or_default().won.give_back().await {
                report.count(handed);
            }
        }
        let until = tokio::time::Instant::now() + deadline;
        while !runs.is_empty() {
            tokio::select! {
                Some(done) = runs.join_next_with_id() => {
                    claimed.remove(&done.map_or_else(|e| e.id(), |(id, ())| id));
                    report.finished += 1;
                }
                () = tokio::time::sleep_until(until) => break,
            }
        }
        for (_, run) in claimed.drain() {
            report.count(engine.hand_back(&run.task_id, Some(run.fence)).await);
        }
        // Their tasks are handed back: what is left of the runs stops now.
        runs.shutdown().await;
        info!(?report, "worker drained");
        report
    }

    /// How many runs a claim round may take when `held` runs hold slots, of
    /// which `writing` are writing their answers: a slot per handler, and at
    /// most as many answers being written as slots (the writes of a slow
    /// store do not pile up).
    fn free(&self, held: usize, writing: usize) -> usize {
        let running = held - writing;
        let total = 2 * self.concurrency;
        self.concurrency
            .saturating_sub(running)
            .min(total.saturating_sub(held))
    }

    /// How long an idle worker waits before it looks again unwoken: the
    /// poll interval, or with a change feed (which wakes it for every
    /// queued run) a heartbeat period, which only orphans need (a lease
    /// that runs out announces nothing).
    fn idle_poll(&self) -> Duration {
        if self.has_feed() {
            self.poll_interval.max(self.engine.cfg.heartbeat_period())
        } else {
            self.poll_interval
        }
    }

    /// Whether the store's change feed wakes this worker for runs queued
    /// by other processes.
    fn has_feed(&self) -> bool {
        self.engine
            .hub
            .has_feed
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// A claim round: up to `free` runnable tasks, oldest first, within the
    /// owners' caps, claimed at once (one transaction where the store
    /// claims atomically, one compare-and-set per task at once otherwise);
    /// the ones this worker won, and whether more may be runnable.
    fn claim_round(
        &self,
        free: usize,
        claimed: &HashMap<tokio::task::Id, Claimed>,
    ) -> impl Future<Output = Round> + Send + 'static {
        let engine = Arc::clone(&self.engine);
        let mut picker = Picker {
            free,
            cap: self.owner_concurrency,
            running: claimed
                .values()
                .map(|c| (c.task_id.clone(), c.owner.clone()))
                .collect(),
            picked: Vec::with_capacity(free),
            capped: false,
        };
        // Records past the free capacity are read only to pass by those of
        // capped owners: a store claiming atomically holds what it reads.
        let limit = free + self.owner_concurrency.map_or(0, |_| CLAIM_SLACK);
        // Without owner caps `pick` claims every queued record it is
        // offered, up to `free`, as `QueuedClaim` says: a store may write
        // those claims in its read (Redis).
        let uncapped = self.owner_concurrency.is_none();
        let skip: Vec<String> = picker.running.iter().map(|(id, _)| id.clone()).collect();
        async move {
            let now_ms = engine.now_ms();
            let terms = engine.lease_terms();
            let queued = QueuedClaim {
                holder: terms.holder,
                until_ms: terms.until_ms,
                skip: &skip,
            };
            let mut pick =
                |record: &TaskRecord| picker.take(&engine, record).then(|| engine.claimed(record));
            let mut query = ClaimQuery::new(now_ms, limit, &mut pick);
            if uncapped {
                query = query.with_queued(queued);
            }
            match engine.store.claim_runnable(query).await {
                Ok(won) => {
                    let more = won.len() >= free;
                    let capped = picker.capped;
                    let won = Won::new(&engine, won);
                    return Round { won, more, capped };
                }
                Err(store::Error::Unsupported(_)) => {}
                Err(e) => {
                    warn!(error = %e, "cannot claim runnable tasks; will retry");
                    return Round::default();
                }
            }
            let found = match engine.store.runnable(now_ms, limit).await {
                Ok(found) => found,
                Err(e) => {
                    warn!(error = %e, "cannot look for runnable tasks; will retry");
                    return Round::default();
                }
            };
            let mut claims = JoinSet::new();
            for record in found.into_iter().map(store::opened) {
                if picker.take(&engine, &record) {
                    let engine = Arc::clone(&engine);
                    claims.spawn(async move { engine.claim(&record).await });
                }
            }
            let tried = claims.len();
            let mut won = Vec::new();
            while let Some(claim) = claims.join_next().await {
                // Another worker won it, or the claim failed: a later round.
                if let Ok(Some(next)) = claim {
                    won.push(next);
                }
            }
            // Every worker tries the oldest runs: one that lost some to
            // others looks again at once for the ones after them.
            let more = won.len() >= free || won.len() < tried;
            let capped = picker.capped;
            let won = Won::new(&engine, won);
            Round { won, more, capped }
        }
    }

    /// Run a task this worker claimed.
    fn start_run(
        &self,
        next: Arc<TaskRecord>,
        local: LocalTask,
        freed: &Arc<Notify>,
        runs: &mut JoinSet<()>,
        claimed: &mut HashMap<tokio::task::Id, Claimed>,
    ) {
        let engine = &self.engine;
        let mut request = engine.resume_request(&next, &local.token);
        if next.round == 0 {
            // A first run is no resume, as inline.
            request.extensions.remove::<TaskResumeContext>();
        }
        let fence = next.lease.as_ref().map_or(0, |l| l.fence);
        let span = local.span.clone();
        info!(parent: &span, fence, "task claimed");
        let fut: InnerFuture<S::Error> = Box::pin(self.inner.clone().oneshot(request));
        let slot = Slot::new(freed);
        let run = Arc::clone(engine).run(
            self.inner.clone(),
            next.id.clone(),
            local,
            fut,
            // The answer is written over the claim without reading it
            // back first.
            HandlerRun::fenced(fence)
                .known(Arc::clone(&next))
                .in_slot(slot.clone()),
        );
        let handle = runs.spawn(run.instrument(span));
        claimed.insert(
            handle.id(),
            Claimed {
                task_id: next.id.clone(),
                owner: next.owner.clone(),
                fence,
                since: tokio::time::Instant::now(),
                slot,
                writing: false,
            },
        );
    }
}

/// The worker's loop task, aborted (with the runs it holds) if the future
/// of [`TaskWorker::run`] is dropped before it ends.
struct AbortOnDrop(JoinHandle<DrainReport>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The loop's report; a panic in it goes on in the caller, as when the
/// loop ran in the caller's future.
fn joined(done: Result<DrainReport, tokio::task::JoinError>) -> DrainReport {
    match done {
        Ok(report) => report,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Cancelled: the runtime is shutting down.
        Err(_) => DrainReport::default(),
    }
}
