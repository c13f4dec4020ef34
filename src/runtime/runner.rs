//! The runner: drives a task's handler (the inner service's future) to its
//! answer, renews the lease meanwhile, honours cancellation with a grace
//! period, writes the answer ([`Engine::settle`]) and calls the handler
//! again when it asked to be.

use std::future::Future;
use std::sync::Arc;

use tower::ServiceExt;
use tracing::{debug, warn, Instrument};

use super::answer::HandlerAnswer;
use super::cas::{CasError, Decision, Outcome, Reader};
use super::engine::{Engine, InnerService};
use super::registry::LocalTask;
use super::running::Running;
use super::slot::Slot;
use super::transition;
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::store::{BoxFuture, Era, TaskRecord};

/// A handler's future, boxed.
pub(crate) type InnerFuture<E> = BoxFuture<'static, Result<JsonRpcResponse, E>>;

/// How a runner takes a task's handler over: the lease fence it writes
/// under, when the task was resumed (for the resume-latency metric), and how
/// many rounds in a row the handler has answered with `requestState` alone.
#[derive(Clone, Debug)]
pub(crate) struct HandlerRun {
    fence: u64,
    resumed_at: Option<tokio::time::Instant>,
    state_only: u32,
    /// The record as this replica last wrote it (a worker's claim): the
    /// first write of the answer starts from it instead of a read.
    known: Option<Arc<TaskRecord>>,
    /// A worker's slot, freed when the handler's answer ends its turn,
    /// before that answer is written.
    slot: Option<Slot>,
}

impl HandlerRun {
    /// A run writing under lease `fence`.
    pub(crate) fn fenced(fence: u64) -> Self {
        HandlerRun {
            fence,
            resumed_at: None,
            state_only: 0,
            known: None,
            slot: None,
        }
    }

    /// The same run, in a worker's `slot`.
    pub(crate) fn in_slot(self, slot: Slot) -> Self {
        HandlerRun {
            slot: Some(slot),
            ..self
        }
    }

    /// The same run, whose task is `record` as this replica just wrote it.
    pub(crate) fn known(self, record: Arc<TaskRecord>) -> Self {
        HandlerRun {
            known: Some(record),
            ..self
        }
    }

    /// The same run, timed from now for the resume-latency metric.
    pub(crate) fn resumed_now(self) -> Self {
        HandlerRun {
            resumed_at: Some(tokio::time::Instant::now()),
            ..self
        }
    }
}

/// What the runner does after writing a handler's answer.
pub(crate) enum AfterSettle {
    Done,
    Reinvoke(JsonRpcRequest),
}

impl Engine {
    /// Run a handler on a runner task of its own.
    pub(crate) fn spawn_runner<S>(
        self: &Arc<Self>,
        svc: S,
        id: String,
        local: LocalTask,
        first: InnerFuture<S::Error>,
        run: HandlerRun,
    ) where
        S: InnerService,
    {
        let engine = Arc::clone(self);
        let span = local.span.clone();
        tokio::spawn(engine.run(svc, id, local, first, run).instrument(span));
    }

    /// Run a task's handler: when `first` answers on its first poll, write
    /// the answer here and now (no runner, no handler task, no heartbeat);
    /// otherwise hand it to a runner. 2025-11-25 tasks always get a runner:
    /// their status notifications must not reach the client on the
    /// request that made (or answered) the task.
    pub(crate) async fn drive<S>(
        self: &Arc<Self>,
        svc: S,
        id: String,
        local: LocalTask,
        mut first: InnerFuture<S::Error>,
        run: HandlerRun,
        era: Era,
    ) where
        S: InnerService,
    {
        let ready = match era {
            Era::Legacy => None,
            _ => poll_once(&mut first).await,
        };
        let Some(out) = ready else {
            self.spawn_runner(svc, id, local, first, run);
            return;
        };
        drop(first);
        let mut run = run;
        let next = Box::pin(self.settle_run(&id, out, &local, &mut run))
            .instrument(local.span.clone())
            .await;
        if let AfterSettle::Reinvoke(req) = next {
            let again: InnerFuture<S::Error> = Box::pin(svc.clone().oneshot(req));
            self.spawn_runner(svc, id, local, again, run);
        }
    }

    /// Drive the handler until the task is terminal or waits for input,
    /// counted among the handlers running here from this call on (before
    /// the caller spawns the run).
    pub(super) fn run<S>(
        self: Arc<Self>,
        svc: S,
        id: String,
        local: LocalTask,
        first: InnerFuture<S::Error>,
        run: HandlerRun,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        S: InnerService,
    {
        let running = self.running.start(&id);
        self.run_counted(svc, id, local, first, run, running)
    }

    /// [`run`](Self::run), counted while `_running` lives. A tripped
    /// token gives the handler the cancel grace to stop on its own; then
    /// its future is dropped (aborted).
    async fn run_counted<S>(
        self: Arc<Self>,
        svc: S,
        id: String,
        local: LocalTask,
        first: InnerFuture<S::Error>,
        run: HandlerRun,
        _running: Running,
    ) where
        S: InnerService,
    {
        let token = local.token.clone();
        let mut run = run;
        let grace = self.cfg.cancel_grace;
        let mut cancelled_at: Option<tokio::time::Instant> = None;
        let mut first = first;
        // A handler that answers on its first poll (a panic in it reads as
        // the handler dying) is written here: no task of its own, no
        // heartbeat. A worker's run is already a task of its own, as a
        // runner is (`drive` does the same for inline runs).
        let ready = if token.is_cancelled() {
            None
        } else {
            poll_once(&mut first).await
        };
        // Otherwise the handler runs as a task of its own, so a panic in
        // it fails the task instead of leaving it `working` forever.
        let mut handler = match ready {
            None => tokio::spawn(first),
            Some(out) => {
                drop(first);
                match self.settle_run(&id, out, &local, &mut run).await {
                    AfterSettle::Done => return,
                    AfterSettle::Reinvoke(req) => tokio::spawn(svc.clone().oneshot(req)),
                }
            }
        };
        let period = self.cfg.heartbeat_period();
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let give_up = async {
                match cancelled_at {
                    Some(at) => tokio::time::sleep_until(at + grace).await,
                    None => std::future::pending().await,
                }
            };
            let out = tokio::select! {
                // Notice the cancellation before the handler's answer to it.
                biased;
                () = token.cancelled(), if cancelled_at.is_none() => {
                    cancelled_at = Some(tokio::time::Instant::now());
                    continue;
                }
                joined = &mut handler => match joined {
                    Ok(out) => out,
                    Err(e) => {
                        warn!(panicked = e.is_panic(), "the tool's handler died");
                        Ok(JsonRpcResponse::error(None, JsonRpcError::internal("the tool's handler died")))
                    }
                },
                _ = beat.tick(), if cancelled_at.is_none() => {
                    // A renewal writes a version `known` is not.
                    run.known = None;
                    if !self.heartbeat(&id, run.fence).await {
                        // Cancelled or taken over elsewhere: stop here too.
                        token.cancel();
                    }
                    continue;
                }
                () = give_up => {
                    debug!("the handler outlived its cancel grace; aborting it");
                    handler.abort();
                    crate::metrics::cancel_stopped(grace);
                    // Cancelled, ended or taken over: not run here any more.
                    self.registry.forget_run(&id, &local);
                    return;
                }
            };
            if let Some(at) = cancelled_at {
                crate::metrics::cancel_stopped(at.elapsed());
            }
            match self.settle_run(&id, out, &local, &mut run).await {
                AfterSettle::Done => return,
                AfterSettle::Reinvoke(req) => handler = tokio::spawn(svc.clone().oneshot(req)),
            }
        }
    }

    /// [`settle`](Self::settle) an answer of `run`'s handler, then time
    /// the resume it answered (once: a re-invocation is no resume).
    async fn settle_run<E>(
        &self,
        id: &str,
        out: Result<JsonRpcResponse, E>,
        local: &LocalTask,
        run: &mut HandlerRun,
    ) -> AfterSettle {
        let next = self.settle(id, out, local, run).await;
        if let Some(at) = run.resumed_at.take() {
            crate::metrics::resumed(at.elapsed());
        }
        next
    }

    /// Write what the handler answered. Loses every race to a terminal
    /// state written first (a cancel, an expiry). A worker's `slot` is
    /// freed first, unless the answer is `requestState` alone (which may
    /// call the handler again).
    async fn settle<E>(
        &self,
        id: &str,
        out: Result<JsonRpcResponse, E>,
        local: &LocalTask,
        run: &mut HandlerRun,
    ) -> AfterSettle {
        let answer = HandlerAnswer::from_output(out).bounded(self.cfg.limits.max_result_bytes);
        if !matches!(answer, HandlerAnswer::StateOnly(_)) {
            if let Some(slot) = run.slot.take() {
                slot.free();
            }
        }
        let (fence, rounds) = (run.fence, run.state_only);
        let settled = self
            .compare_and_set_from(id, Reader::Runner, run.known.take(), |record| {
                if !self.runs_here(record, fence) {
                    return Ok(Decision::Keep(false));
                }
                let (next, reinvoke) = transition::after_answer(
                    record,
                    &answer,
                    self.now_ms(),
                    rounds,
                    self.lease_terms(),
                );
                Ok::<_, ()>(Decision::Write(next, reinvoke))
            })
            .await;
        match settled {
            Ok(Outcome::Wrote {
                next, then: true, ..
            }) => {
                run.state_only += 1;
                AfterSettle::Reinvoke(self.resume_request(&next, &local.token))
            }
            Ok(Outcome::Wrote { prev, next, .. }) => {
                let local = if next.status.is_terminal() {
                    self.registry.forget(id)
                } else {
                    self.registry.get(id)
                };
                self.publish(prev.status, &next, local.as_ref());
                AfterSettle::Done
            }
            // Ended, gone or taken over elsewhere: forgotten here.
            Ok(Outcome::Kept(_)) | Err(CasError::Gone) => {
                self.registry.forget_run(id, local);
                AfterSettle::Done
            }
            Err(CasError::TooFast) => AfterSettle::Done,
            Err(CasError::Read(e)) => {
                warn!(error = %e, "cannot read the task to record the handler's answer");
                AfterSettle::Done
            }
            Err(CasError::Write(e)) => {
                warn!(error = %e, "cannot record the handler's answer");
                AfterSettle::Done
            }
            Err(CasError::Refused(())) => AfterSettle::Done,
        }
    }
}

/// Poll a handler's future once on the current task: its output if it is
/// ready. A panic in it reads as the handler dying, as in a runner.
async fn poll_once<E>(fut: &mut InnerFuture<E>) -> Option<Result<JsonRpcResponse, E>> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::Poll;
    std::future::poll_fn(|cx| {
        Poll::Ready(
            match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Ready(out)) => Some(out),
                Ok(Poll::Pending) => None,
                Err(_) => {
                    warn!(panicked = true, "the tool's handler died");
                    Some(Ok(JsonRpcResponse::error(
                        None,
                        JsonRpcError::internal("the tool's handler died"),
                    )))
                }
            },
        )
    })
    .await
}
