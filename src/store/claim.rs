//! What a worker's claim round asks a store for
//! ([`TaskStore::claim_runnable`](super::TaskStore::claim_runnable)).

use std::fmt;

use super::TaskRecord;

/// What makes a runnable record's claim while the store holds it: the
/// record to write in its place, or `None` to pass it by. It must not wait.
pub type Pick<'a> = &'a mut (dyn FnMut(&TaskRecord) -> Option<TaskRecord> + Send);

/// One claim round: at most `limit` records runnable at `now_ms`, each
/// offered to `pick` while it is held.
///
/// ```
/// use mcp_task_layer::store::{ClaimQuery, TaskRecord};
///
/// let mut pass_by = |_: &TaskRecord| None;
/// let round = ClaimQuery::new(1_767_225_600_000, 16, &mut pass_by);
/// assert_eq!((round.now_ms, round.limit), (1_767_225_600_000, 16));
/// ```
pub struct ClaimQuery<'a> {
    /// The time of the round: a record is runnable when its lease ended by
    /// then (a queued record's lease has).
    pub now_ms: i64,
    /// The most records offered to `pick` (0: none).
    pub limit: usize,
    /// Called for each record offered, oldest lease end first.
    pub pick: Pick<'a>,
}

impl<'a> ClaimQuery<'a> {
    /// At most `limit` records runnable at `now_ms`, claimed as `pick`
    /// makes them.
    pub fn new(now_ms: i64, limit: usize, pick: Pick<'a>) -> Self {
        ClaimQuery {
            now_ms,
            limit,
            pick,
        }
    }
}

impl fmt::Debug for ClaimQuery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimQuery")
            .field("now_ms", &self.now_ms)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}
