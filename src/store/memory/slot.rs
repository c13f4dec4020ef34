//! [`Slot`]: what a shard's map holds for one task.

use std::sync::Arc;

use super::compact::Done;
use crate::protocol::TaskStatus;
use crate::store::{Era, TaskRecord, TaskView};

/// A stored record: as the layer wrote it, or compact once finished.
#[derive(Debug)]
pub(super) enum Slot {
    Full(Arc<TaskRecord>),
    Done(Done),
}

impl Slot {
    pub(super) fn new(record: Arc<TaskRecord>) -> Self {
        match Done::of(&record) {
            Some(done) => Slot::Done(done),
            None => Slot::Full(record),
        }
    }

    pub(super) fn version(&self) -> u64 {
        match self {
            Slot::Full(r) => r.version,
            Slot::Done(d) => d.version,
        }
    }

    pub(super) fn created_at_ms(&self) -> i64 {
        match self {
            Slot::Full(r) => r.created_at_ms,
            Slot::Done(d) => d.created_at_ms,
        }
    }

    pub(super) fn era(&self) -> Era {
        match self {
            Slot::Full(r) => r.era,
            Slot::Done(d) => d.era,
        }
    }

    pub(super) fn owner(&self) -> Option<&str> {
        match self {
            Slot::Full(r) => r.owner.as_deref(),
            Slot::Done(d) => d.owner(),
        }
    }

    pub(super) fn tool_name(&self) -> &str {
        match self {
            Slot::Full(r) => &r.tool_name,
            Slot::Done(d) => d.tool(),
        }
    }

    pub(super) fn expires_at_ms(&self) -> Option<i64> {
        let (created, ttl) = match self {
            Slot::Full(r) => (r.created_at_ms, r.ttl_ms),
            Slot::Done(d) => (d.created_at_ms, d.ttl_ms),
        };
        ttl.map(|ttl| created.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
    }

    /// When the task was queued for a worker, if it waits for one.
    pub(super) fn queued_at(&self) -> Option<i64> {
        match self {
            Slot::Full(r) => queued_at(r),
            Slot::Done(_) => None,
        }
    }

    pub(super) fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms().is_some_and(|at| at <= now_ms)
    }

    /// What a read hands out; rebuilt outside the shard lock for a compact
    /// record.
    pub(super) fn share(&self) -> SlotCopy {
        match self {
            Slot::Full(r) => SlotCopy::Full(Arc::clone(r)),
            Slot::Done(d) => SlotCopy::Done(d.clone()),
        }
    }

    /// What a view is shown from: as [`share`](Slot::share), without a
    /// compact record's history.
    pub(super) fn share_for_view(&self) -> SlotCopy {
        match self {
            Slot::Full(r) => SlotCopy::Full(Arc::clone(r)),
            Slot::Done(d) => SlotCopy::Done(d.without_history()),
        }
    }
}

/// A record taken out of a shard under its lock.
pub(super) enum SlotCopy {
    Full(Arc<TaskRecord>),
    Done(Done),
}

impl SlotCopy {
    // Inlined into `MemoryStore::get_now` (see `Done::record`).
    #[inline]
    pub(super) fn into_record(self, id: &str) -> Arc<TaskRecord> {
        match self {
            SlotCopy::Full(r) => r,
            SlotCopy::Done(d) => Arc::new(d.into_record(id)),
        }
    }

    /// `show` called with the view of this record (see `Done::view`).
    #[inline]
    pub(super) fn view<R>(&self, id: &str, show: impl FnOnce(TaskView<'_>) -> R) -> R {
        match self {
            SlotCopy::Full(r) => show(r.view()),
            SlotCopy::Done(d) => d.view(id, show),
        }
    }
}

/// The queue position of a record that waits for a worker: its lease end.
pub(super) fn queued_at(r: &TaskRecord) -> Option<i64> {
    match &r.lease {
        Some(l) if r.status == TaskStatus::Working && l.is_queued() => Some(l.until_ms),
        _ => None,
    }
}
