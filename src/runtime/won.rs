//! What a worker's claim round won, until each task is run: put back in
//! the queue if it is never run. A round runs in a task of its own; if the
//! worker stops or its future is dropped while a round is out, the round
//! still commits its claims. No handler ran them, so whatever the recovery
//! policy they are runnable again at once, not left to their lease (which
//! would fail them under [`Recovery::Fail`](crate::Recovery::Fail)).

use std::sync::Arc;

use tracing::{info, warn};

use super::cas::{CasError, Decision, Outcome, Reader};
use super::drain::HandedBack;
use super::engine::Engine;
use super::transition;
use crate::store::TaskRecord;

/// Claims a round won, each as written; put back in the queue when dropped
/// unless [`take`](Won::take)n to be run.
#[derive(Default)]
pub(super) struct Won {
    records: Vec<Arc<TaskRecord>>,
    /// `None` only while `records` is empty.
    engine: Option<Arc<Engine>>,
}

impl Won {
    pub(super) fn new(engine: &Arc<Engine>, records: Vec<Arc<TaskRecord>>) -> Self {
        Won {
            records,
            engine: Some(Arc::clone(engine)),
        }
    }

    /// The claims, to be run: no longer put back.
    pub(super) fn take(mut self) -> Vec<Arc<TaskRecord>> {
        std::mem::take(&mut self.records)
    }

    /// Put every claim back in the queue now: how each went.
    pub(super) async fn give_back(mut self) -> Vec<HandedBack> {
        let records = std::mem::take(&mut self.records);
        match &self.engine {
            Some(engine) => engine.unclaim_all(&records).await,
            None => Vec::new(),
        }
    }
}

impl Drop for Won {
    fn drop(&mut self) {
        if self.records.is_empty() {
            return;
        }
        let (Some(engine), Ok(runtime)) =
            (self.engine.clone(), tokio::runtime::Handle::try_current())
        else {
            // No runtime left to write with: the leases run out instead.
            return;
        };
        let records = std::mem::take(&mut self.records);
        runtime.spawn(async move {
            engine.unclaim_all(&records).await;
        });
    }
}

impl Engine {
    /// [`unclaim`](Self::unclaim) each of `claimed`, one after the other.
    async fn unclaim_all(&self, claimed: &[Arc<TaskRecord>]) -> Vec<HandedBack> {
        let mut handed = Vec::with_capacity(claimed.len());
        for record in claimed {
            handed.push(self.unclaim(record).await);
        }
        handed
    }

    /// Put `claimed`, a task a worker here claimed and never ran, back in
    /// the queue: runnable at once under a new fence, the same run (a
    /// rerun's round stays), whatever its recovery policy. Nothing if the
    /// claim is no longer this worker's (cancelled, taken over, gone).
    pub(crate) async fn unclaim(&self, claimed: &TaskRecord) -> HandedBack {
        let fence = claimed.lease.as_ref().map_or(0, |l| l.fence);
        let written = self
            .compare_and_set(&claimed.id, Reader::Runner, |record| {
                if !transition::runs_under(record, &self.replica, fence) {
                    return Ok::<_, ()>(Decision::Keep(HandedBack::NotHere));
                }
                Ok(Decision::Write(
                    transition::unclaimed(record, self.queue_terms()),
                    HandedBack::Requeued,
                ))
            })
            .await;
        match written {
            Ok(Outcome::Wrote { then, .. }) => {
                info!(task_id = %claimed.id, "task claimed but not run: queued again");
                self.wake_workers();
                then
            }
            Ok(Outcome::Kept(then)) => then,
            Err(CasError::Gone | CasError::TooFast | CasError::Refused(())) => HandedBack::NotHere,
            Err(CasError::Read(e) | CasError::Write(e)) => {
                warn!(error = %e, "cannot queue an unrun claim again; its lease will run out");
                HandedBack::NotHere
            }
        }
    }
}
