//! [`TaskView`]: a task as a store can show it without building a
//! [`TaskRecord`], and [`ViewQuery`], the read that hands one over
//! ([`TaskStore::view_ready`](super::TaskStore::view_ready)).

use std::collections::BTreeMap;

use super::{Era, PendingInput, TaskOutcome, TaskRecord};
use crate::jsonrpc::JsonRpcError;
use crate::protocol::TaskStatus;

/// What a client may be shown of a task, borrowed from wherever the store
/// keeps it: everything `tasks/get` answers with, and what decides who may
/// see it (owner, era). [`TaskRecord::view`] gives the view of a record.
#[derive(Clone, Copy, Debug)]
pub struct TaskView<'a> {
    /// Task id.
    pub id: &'a str,
    /// The owner key the task is bound to, if any.
    pub owner: Option<&'a str>,
    /// The era of the request that created the task.
    pub era: Era,
    /// Current status.
    pub status: TaskStatus,
    /// Note on the current status.
    pub status_message: Option<&'a str>,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
    /// Time of the last change, Unix milliseconds.
    pub updated_at_ms: i64,
    /// Lifetime from creation in milliseconds; `None` is unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval in milliseconds.
    pub poll_interval_ms: Option<u64>,
    /// Outstanding input requests by their task-unique key.
    pub input_requests: &'a BTreeMap<String, PendingInput>,
    /// How the task ended, once terminal.
    pub outcome: Option<OutcomeView<'a>>,
    /// Whether the record still holds sealed fields
    /// ([`TaskRecord::sealed`] not empty): the layer then reads it again
    /// with [`get`](super::TaskStore::get), to answer as for any sealed
    /// record.
    pub sealed: bool,
}

/// [`TaskOutcome`], borrowed.
#[derive(Clone, Copy, Debug)]
pub enum OutcomeView<'a> {
    /// The tool's result, as JSON text.
    Result(&'a str),
    /// The tool's error.
    Error(&'a JsonRpcError),
}

impl TaskRecord {
    /// This record as a [`TaskView`].
    pub fn view(&self) -> TaskView<'_> {
        TaskView {
            id: &self.id,
            owner: self.owner.as_deref(),
            era: self.era,
            status: self.status,
            status_message: self.status_message.as_deref(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            input_requests: &self.input_requests,
            outcome: self.outcome.as_ref().map(|o| match o {
                TaskOutcome::Result(text) => OutcomeView::Result(text.get()),
                TaskOutcome::Error(e) => OutcomeView::Error(e),
            }),
            sealed: !self.sealed.is_empty(),
        }
    }
}

/// A read of one task that hands it to `show` instead of returning it
/// ([`TaskStore::view_ready`](super::TaskStore::view_ready)): `show` is
/// called once, with what [`get`](super::TaskStore::get) would answer at
/// `now_ms` (`None`: absent or expired).
pub struct ViewQuery<'a> {
    /// The task's id.
    pub id: &'a str,
    /// The time of the read: a record expired then reads as absent.
    pub now_ms: i64,
    /// Called once with the task's view, or `None`.
    pub show: &'a mut dyn FnMut(Option<TaskView<'_>>),
}

impl std::fmt::Debug for ViewQuery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewQuery")
            .field("id", &self.id)
            .field("now_ms", &self.now_ms)
            .finish_non_exhaustive()
    }
}
