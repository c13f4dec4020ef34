//! [`TaskWorker`]: runs the handlers of tasks queued by layers with
//! [`Execution::Queued`](crate::Execution::Queued), on any process that
//! shares their store, and drains gracefully.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tower::ServiceExt;
use tower_service::Service;
use tracing::{info, warn, Instrument};

use super::drain::DrainReport;
use super::engine::Engine;
use super::runner::{HandlerRun, InnerFuture};
use crate::context::TaskResumeContext;
use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse};
use crate::store;

/// Runs queued tasks' handlers: claims runnable tasks from the store with a
/// lease and a new fence, calls the inner service with the same request,
/// [`TaskResumeContext`], cancellation token and extensions as inline
/// execution, writes the outcome under the fence, and is free again as
/// soon as the handler answers or asks for input.
///
/// Made by [`TaskLayer::worker`](crate::TaskLayer::worker); a process may
/// run workers and serve requests (one layer for both), or only one of
/// the two. Claims go oldest first; [`with_owner_concurrency`](Self::with_owner_concurrency)
/// keeps one owner from filling a worker. A worker wakes at once for runs
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
    poll_interval: Duration,
}

impl<S> fmt::Debug for TaskWorker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskWorker")
            .field("concurrency", &self.concurrency)
            .field("owner_concurrency", &self.owner_concurrency)
            .field("poll_interval", &self.poll_interval)
            .finish_non_exhaustive()
    }
}

/// A run this worker holds.
struct Claimed {
    task_id: String,
    owner: Option<String>,
    fence: u64,
}

/// Runnable records read per claim round, beyond the free capacity: some
/// belong to owners at their cap, and other workers win some claims.
const CLAIM_SLACK: usize = 16;

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
            poll_interval: Duration::from_secs(1),
        }
    }

    /// How many handlers this worker runs at once (default 16, at least 1).
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

    /// How often an idle worker looks for runnable tasks when nothing woke
    /// it (default 1 s): the bound on a claim's delay without a change
    /// feed, and the only store query an idle worker makes.
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
    pub async fn run(self, shutdown: impl Future<Output = ()>, deadline: Duration) -> DrainReport {
        let engine = Arc::clone(&self.engine);
        engine.ensure_background();
        let mut runs: JoinSet<()> = JoinSet::new();
        let mut claimed: HashMap<tokio::task::Id, Claimed> = HashMap::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            // Listening before the store is read: a run queued meanwhile
            // still wakes this loop.
            let wake = engine.hub.queue.notified();
            let mut wake = std::pin::pin!(wake);
            wake.as_mut().enable();
            self.claim_round(&mut runs, &mut claimed).await;
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                Some(done) = runs.join_next_with_id(), if !runs.is_empty() => {
                    claimed.remove(&done.map_or_else(|e| e.id(), |(id, ())| id));
                }
                () = &mut wake => {}
                () = tokio::time::sleep(self.poll_interval) => {}
            }
        }
        info!(running = claimed.len(), "worker draining");
        let mut report = DrainReport::default();
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

    /// Claim runnable tasks up to the free capacity and start their runs.
    async fn claim_round(
        &self,
        runs: &mut JoinSet<()>,
        claimed: &mut HashMap<tokio::task::Id, Claimed>,
    ) {
        let engine = &self.engine;
        let free = self.concurrency.saturating_sub(claimed.len());
        if free == 0 {
            return;
        }
        let found = match engine
            .store
            .runnable(engine.now_ms(), free + CLAIM_SLACK)
            .await
        {
            Ok(found) => found,
            Err(e) => {
                warn!(error = %e, "cannot look for runnable tasks; will retry");
                return;
            }
        };
        for record in found.into_iter().map(store::opened) {
            if claimed.len() >= self.concurrency {
                break;
            }
            if !engine.claimable(&record) || claimed.values().any(|c| c.task_id == record.id) {
                continue;
            }
            if let Some(cap) = self.owner_concurrency {
                let owners = claimed.values().filter(|c| c.owner == record.owner).count();
                if owners >= cap {
                    continue;
                }
            }
            // Another worker won it: on to the next.
            let Some(next) = engine.claim(&record).await else {
                continue;
            };
            let local = engine.registry.rerun(&next);
            let mut request = engine.resume_request(&next, &local.token);
            if next.round == 0 {
                // A first run is no resume, as inline.
                request.extensions.remove::<TaskResumeContext>();
            }
            let fence = next.lease.as_ref().map_or(0, |l| l.fence);
            let span = local.span.clone();
            info!(parent: &span, fence, "task claimed");
            let fut: InnerFuture<S::Error> = Box::pin(self.inner.clone().oneshot(request));
            let run = Arc::clone(engine).run(
                self.inner.clone(),
                next.id.clone(),
                local,
                fut,
                HandlerRun::fenced(fence),
            );
            let handle = runs.spawn(run.instrument(span));
            claimed.insert(
                handle.id(),
                Claimed {
                    task_id: next.id.clone(),
                    owner: next.owner.clone(),
                    fence,
                },
            );
        }
    }
}
