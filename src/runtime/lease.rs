//! Leases: which replica runs a task, fenced so that a stale runner's
//! writes lose, and renewed by a heartbeat while the handler runs.

use tracing::warn;

use super::cas::{CasError, Decision, Outcome, Reader};
use super::engine::Engine;
use super::transition::{self, LeaseTerms};
use crate::protocol::TaskStatus;
use crate::store::{Lease, TaskRecord};

impl Engine {
    /// This replica's lease from now on.
    pub(crate) fn lease_terms(&self) -> LeaseTerms<'_> {
        LeaseTerms {
            holder: &self.replica,
            until_ms: self.now_ms().saturating_add(self.cfg.lease_ms()),
        }
    }

    /// A lease for this replica, taking over from `prev`.
    pub(crate) fn new_lease(&self, prev: Option<&Lease>) -> Lease {
        self.lease_terms().take_over(prev)
    }

    /// Whether this replica's runner under `fence` still runs `record`: it
    /// is `working` and the lease is still this runner's (not fenced off by
    /// another replica that took the task over).
    pub(crate) fn runs_here(&self, record: &TaskRecord, fence: u64) -> bool {
        if transition::runs_under(record, &self.replica, fence) {
            return true;
        }
        if record.status == TaskStatus::Working {
            crate::metrics::lease_lost();
            warn!("another replica took this task over; stopping its handler here");
        }
        false
    }

    /// Renew the runner's lease. `false` when the runner must stop: the
    /// task ended or left `working` (a cancel on any replica), expired, or
    /// another replica took it over.
    pub(crate) async fn heartbeat(&self, id: &str, fence: u64) -> bool {
        let renewed = self
            .compare_and_set(id, Reader::Runner, |record| {
                if !self.runs_here(record, fence) {
                    return Ok(Decision::Keep(false));
                }
                Ok::<_, ()>(Decision::Write(
                    transition::renewed(record, self.lease_terms()),
                    true,
                ))
            })
            .await;
        match renewed {
            Ok(Outcome::Wrote { then, .. } | Outcome::Kept(then)) => then,
            Err(CasError::Gone) => false,
            Err(CasError::Read(e)) => {
                warn!(error = %e, "heartbeat cannot read the task; will retry");
                true
            }
            Err(CasError::Write(e)) => {
                warn!(error = %e, "cannot renew the task's lease; will retry");
                true
            }
            Err(CasError::TooFast | CasError::Refused(())) => true,
        }
    }
}
