//! Queued execution ([`Execution::Queued`]): runs written to the store as
//! runnable, claimed by a worker under a new fence, and handed back when a
//! runner shuts down before its handler answered.

use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::cas::{CasError, Decision, Outcome, Reader};
use super::engine::Engine;
use super::transition::{self, LeaseTerms};
use super::worker::DrainReport;
use crate::config::{Execution, Recovery};
use crate::protocol::TaskStatus;
use crate::store::{Lease, TaskRecord};

/// What a drain did with a task still running when its deadline came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandedBack {
    /// Runnable again, under a new fence ([`Recovery::Rerun`]).
    Requeued,
    /// Failed with the shutdown message ([`Recovery::Fail`]).
    Failed,
    /// Not this replica's to hand back any more (ended, cancelled, taken
    /// over, gone).
    NotHere,
}

impl Engine {
    /// Whether task handlers run on workers rather than here.
    pub(crate) fn queued(&self) -> bool {
        self.cfg.execution == Execution::Queued
    }

    /// The lease of a run written runnable: held by no replica, ended a
    /// millisecond before now, so that workers find it at once and take
    /// the oldest first.
    pub(crate) fn queue_terms(&self) -> LeaseTerms<'static> {
        LeaseTerms {
            holder: Lease::QUEUED,
            until_ms: self.now_ms().saturating_sub(1),
        }
    }

    /// The lease a run that starts now takes: this replica's when it runs
    /// the handler itself, the queue's otherwise.
    pub(crate) fn run_terms(&self) -> LeaseTerms<'_> {
        if self.queued() {
            self.queue_terms()
        } else {
            self.lease_terms()
        }
    }

    /// Wake this process's idle workers: a run was queued (here, or by
    /// another replica as the change feed says), or may have been.
    pub(crate) fn wake_workers(&self) {
        self.hub.queue.notify_waiters();
    }

    /// Whether a worker of this replica may claim `record` now: queued, or
    /// orphaned (its runner's lease ran out) when orphans are re-run.
    pub(crate) fn claimable(&self, record: &TaskRecord) -> bool {
        match &record.lease {
            Some(lease) if record.status == TaskStatus::Working => {
                lease.is_queued()
                    || (self.cfg.recovery == Recovery::Rerun && lease.until_ms < self.now_ms())
            }
            _ => false,
        }
    }

    /// Claim `record` for a run here: one compare-and-set from the version
    /// read, so that of several workers exactly one wins.
    /// A queued run keeps its round; an orphan's is a run again from the
    /// top.
    pub(crate) async fn claim(&self, record: &TaskRecord) -> Option<Arc<TaskRecord>> {
        let queued = record.lease.as_ref().is_some_and(Lease::is_queued);
        let next = Arc::new(if queued {
            transition::claimed(record, self.lease_terms())
        } else {
            transition::orphan_rerun(record, self.now_ms(), self.lease_terms())
        });
        self.store
            .replace_shared(Arc::clone(&next), record.version)
            .await
            .ok()?;
        Some(next)
    }

    /// Drain this replica's inline runs: let the handlers it runs finish
    /// for up to `deadline`, then hand back the tasks of those still
    /// running. A replica with queued execution runs none.
    pub(crate) async fn drain(&self, deadline: Duration) -> DrainReport {
        let mut report = DrainReport::default();
        if self.queued() {
            return report;
        }
        let until = tokio::time::Instant::now() + deadline;
        let mut events = self.events().subscribe();
        let at_start = self.registry.working().len();
        loop {
            let left = self.registry.working();
            if left.is_empty() || tokio::time::Instant::now() >= until {
                report.finished = at_start.saturating_sub(left.len());
                for id in left {
                    report.count(self.hand_back(&id, None).await);
                }
                return report;
            }
            // Every write here is an event; a lagging receiver re-checks.
            tokio::select! {
                _ = events.recv() => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// Hand back a task whose handler this replica still runs (under
    /// `fence`, or any when `None`) because a drain's deadline came:
    /// runnable again at once with a new fence, or failed, by the recovery
    /// policy. Its handler here is cancelled.
    pub(crate) async fn hand_back(&self, id: &str, fence: Option<u64>) -> HandedBack {
        let written = self
            .compare_and_set(id, Reader::Runner, |record| {
                let ours = record.lease.as_ref().is_some_and(|l| {
                    l.holder == self.replica && fence.is_none_or(|f| f == l.fence)
                });
                if record.status != TaskStatus::Working || !ours {
                    return Ok(Decision::Keep(HandedBack::NotHere));
                }
                Ok::<_, ()>(match self.cfg.recovery {
                    Recovery::Rerun => Decision::Write(
                        transition::orphan_rerun(record, self.now_ms(), self.queue_terms()),
                        HandedBack::Requeued,
                    ),
                    _ => Decision::Write(
                        transition::shut_down(record, self.now_ms()),
                        HandedBack::Failed,
                    ),
                })
            })
            .await;
        let local = self.registry.forget(id);
        if let Some(local) = &local {
            local.token.cancel();
        }
        match written {
            Ok(Outcome::Wrote { prev, next, then }) => {
                info!(task_id = %id, requeued = (then == HandedBack::Requeued), "task handed back at shutdown");
                self.publish(prev.status, &next, local.as_ref());
                if then == HandedBack::Requeued {
                    self.wake_workers();
                }
                then
            }
            Ok(Outcome::Kept(then)) => then,
            Err(CasError::Gone | CasError::TooFast | CasError::Refused(())) => HandedBack::NotHere,
            Err(CasError::Read(e) | CasError::Write(e)) => {
                tracing::warn!(error = %e, "cannot hand a task back at shutdown; its lease will run out");
                HandedBack::NotHere
            }
        }
    }
}
