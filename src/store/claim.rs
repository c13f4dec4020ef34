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
    /// How `pick` claims a queued record, where it claims every one it is
    /// offered alike; `None` (the default) when it may not.
    pub queued: Option<QueuedClaim<'a>>,
}

/// The claim `pick` makes of every queued record it is offered
/// ([`ClaimQuery::queued`]): `working`, its lease [`Lease::QUEUED`]'s, no
/// sealed fields, its id not in `skip`. Such a record becomes its next
/// version under the lease `{holder, fence + 1, until_ms}`, nothing else
/// changed, and `pick` takes each one up to the round's `limit`. A store
/// may then write those claims itself, in the read that finds them, and
/// answer them without offering them to `pick` (Redis: one script call a
/// round instead of a read, the claims' write and a give-back); a store is
/// free to ignore it.
///
/// [`Lease::QUEUED`]: super::Lease::QUEUED
#[derive(Clone, Copy, Debug)]
pub struct QueuedClaim<'a> {
    /// The new lease's holder: the claiming replica.
    pub holder: &'a str,
    /// The new lease's end (Unix milliseconds).
    pub until_ms: i64,
    /// Ids of the runs the claimer holds: offered to `pick`, never claimed
    /// by the store.
    pub skip: &'a [String],
}

impl<'a> ClaimQuery<'a> {
    /// At most `limit` records runnable at `now_ms`, claimed as `pick`
    /// makes them.
    pub fn new(now_ms: i64, limit: usize, pick: Pick<'a>) -> Self {
        ClaimQuery {
            now_ms,
            limit,
            pick,
            queued: None,
        }
    }

    /// The same round, where `pick` claims every queued record it is
    /// offered as `queued` says.
    #[must_use]
    pub fn with_queued(mut self, queued: QueuedClaim<'a>) -> Self {
        self.queued = Some(queued);
        self
    }
}

impl fmt::Debug for ClaimQuery<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClaimQuery")
            .field("now_ms", &self.now_ms)
            .field("limit", &self.limit)
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}
