//! Graceful drains: a replica or worker that shuts down lets its running
//! handlers finish up to a deadline, then hands their tasks back by the
//! recovery policy instead of leaving them to their lease.

use std::time::Duration;

use tracing::info;

use super::cas::{CasError, Decision, Outcome, Reader};
use super::engine::Engine;
use super::transition;
use crate::config::Recovery;
use crate::protocol::TaskStatus;

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

/// What a worker's (or a layer's) drain did with the handlers it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Handlers that ended before the deadline (answered, asked for
    /// input, or stopped for a cancel), or whose task was no longer this
    /// process's to hand back.
    pub finished: usize,
    /// Tasks made runnable again at the deadline, under a new fence
    /// ([`Recovery::Rerun`](crate::Recovery::Rerun)): another worker starts
    /// them at once.
    pub requeued: usize,
    /// Tasks failed at the deadline with a message that says the server
    /// shut down ([`Recovery::Fail`](crate::Recovery::Fail)).
    pub failed: usize,
}

impl DrainReport {
    pub(super) fn count(&mut self, handed: HandedBack) {
        match handed {
            HandedBack::Requeued => self.requeued += 1,
            HandedBack::Failed => self.failed += 1,
            HandedBack::NotHere => self.finished += 1,
        }
    }
}

impl Engine {
    /// Drain this replica's inline runs: let the handlers running here
    /// finish for up to `deadline`, then hand back the tasks of those still
    /// running. Tasks this replica only waits on (run by another replica)
    /// are not waited for. A replica with queued execution runs none.
    pub(crate) async fn drain(&self, deadline: Duration) -> DrainReport {
        let mut report = DrainReport::default();
        if self.queued() {
            return report;
        }
        let until = tokio::time::Instant::now() + deadline;
        let at_start = self.running.tasks().len();
        loop {
            let stopped = self.running.stopped();
            let mut stopped = std::pin::pin!(stopped);
            stopped.as_mut().enable();
            let left = self.running.tasks();
            if left.is_empty() || tokio::time::Instant::now() >= until {
                report.finished = at_start.saturating_sub(left.len());
                for id in left {
                    report.count(self.hand_back(&id, None).await);
                }
                return report;
            }
            tokio::select! {
                () = stopped => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    /// Hand back a task whose handler this replica still runs (under
    /// `fence`, or any when `None`) because a drain's deadline came:
    /// runnable again at once with a new fence, or failed, by the task's
    /// recovery policy. Its handler here is cancelled.
    pub(crate) async fn hand_back(&self, id: &str, fence: Option<u64>) -> HandedBack {
        let written = self
            .compare_and_set(id, Reader::Runner, |record| {
                let ours = record.lease.as_ref().is_some_and(|l| {
                    l.holder == self.replica && fence.is_none_or(|f| f == l.fence)
                });
                if record.status != TaskStatus::Working || !ours {
                    return Ok(Decision::Keep(HandedBack::NotHere));
                }
                Ok::<_, ()>(match self.recovery_of(record) {
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
