//! Queued execution ([`Execution::Queued`]): runs written to the store as
//! runnable and claimed by a worker under a new fence.

use std::sync::Arc;

use super::engine::Engine;
use super::transition::{self, LeaseTerms};
use crate::config::{Execution, Recovery};
use crate::store::{Lease, TaskRecord};

/// The lease of a run written runnable at `now_ms`: ended a millisecond
/// before. A task created queued takes it from its own `created_at_ms`,
/// not from a second reading of the clock: the stores announce a create to
/// the workers of other processes only when its lease ended before it was
/// made (PostgreSQL's trigger of migration 5, Redis's `WRITE` script), and
/// a clock read a millisecond later would end the lease as the task was
/// made, so no worker elsewhere would hear of it.
pub(crate) fn queue_terms_at(now_ms: i64) -> LeaseTerms<'static> {
    LeaseTerms {
        holder: Lease::QUEUED,
        until_ms: now_ms.saturating_sub(1),
    }
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
        queue_terms_at(self.now_ms())
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

    /// Wake one idle worker of this process: a run was queued (here, or by
    /// another replica as the change feed says), or may have been. One
    /// wake per run, not every worker for each: a worker whose round finds
    /// more than it can take passes the work on (`wake_idle_workers`). With no
    /// worker waiting the wake is kept (a permit) for the next one that
    /// waits, so a wake that comes while every worker is busy, or between
    /// two turns of a worker's loop, is not lost.
    pub(crate) fn wake_workers(&self) {
        self.hub.queue.notify_one();
    }

    /// Wake the workers of this process waiting now, keeping no permit: a
    /// worker whose round found more than it could take passes the work
    /// on to the idle ones. (A permit would come back to that worker,
    /// which looks again anyway, and cost it a round more.)
    pub(crate) fn wake_idle_workers(&self) {
        self.hub.queue.notify_waiters();
    }

    /// The recovery policy of `record`: the one stored with it by the layer
    /// that created it, or (a record written before tasks carried theirs)
    /// this replica's.
    pub(crate) fn recovery_of(&self, record: &TaskRecord) -> Recovery {
        record.recovery.unwrap_or(self.cfg.recovery)
    }

    /// Whether a worker of this replica may claim `record` now: queued, or
    /// orphaned (its runner's lease ran out) when the task's policy re-runs
    /// orphans.
    pub(crate) fn claimable(&self, record: &TaskRecord) -> bool {
        let rerun = self.recovery_of(record) == Recovery::Rerun;
        transition::claimable(record, self.now_ms(), rerun)
    }

    /// What `record` becomes when a worker here claims it: held under this
    /// replica's lease with a new fence. A queued run keeps its round; an
    /// orphan's is a run again from the top.
    pub(crate) fn claimed(&self, record: &TaskRecord) -> TaskRecord {
        transition::claim(record, self.now_ms(), self.lease_terms())
    }

    /// Claim `record` for a run here: one compare-and-set from the version
    /// read, so that of several workers exactly one wins (for stores
    /// without [`TaskStore::claim_runnable`](crate::store::TaskStore::claim_runnable)).
    pub(crate) async fn claim(&self, record: &TaskRecord) -> Option<Arc<TaskRecord>> {
        let mut next = self.claimed(record);
        TaskRecord::note_status_change(&mut next, record);
        let next = Arc::new(next);
        self.store
            .replace_shared(Arc::clone(&next), record.version)
            .await
            .ok()?;
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task created queued at `t` has a lease that ended before `t`: the
    /// condition on which PostgreSQL's trigger and Redis's `WRITE` script
    /// announce a create to the workers of other processes. (The lease
    /// came from a second reading of the clock before, which now and then
    /// read a millisecond later; no test can make the clock tick between
    /// the two readings, so this checks the lease of the one reading.)
    #[test]
    fn a_queued_create_takes_a_lease_that_ended_before_it_was_made() {
        for t in [1, 1_796_526_955_000, i64::MAX] {
            let lease = queue_terms_at(t).take_over(None);
            assert!(lease.is_queued());
            assert!(lease.until_ms < t, "{} at {t}", lease.until_ms);
        }
    }
}
