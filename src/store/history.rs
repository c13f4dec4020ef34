//! A task's status history: each change of status after its creation,
//! with its time, kept in the record (so every store keeps it with no
//! schema of its own) and bounded.

use serde::{Deserialize, Serialize};

use super::TaskRecord;
use crate::protocol::TaskStatus;

/// The most changes a record keeps; older ones are dropped first (the
/// creation time stays in `created_at_ms`).
pub const MAX_HISTORY: usize = 32;

/// One change of a task's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    /// The status it changed to.
    pub status: TaskStatus,
    /// When, Unix milliseconds (the write's `updated_at_ms`).
    pub at_ms: i64,
}

impl TaskRecord {
    /// Note in `next`'s history that its status changed from `prev`'s (at
    /// `next.updated_at_ms`); nothing if it did not.
    pub(crate) fn note_status_change(next: &mut TaskRecord, prev: &TaskRecord) {
        if next.status == prev.status {
            return;
        }
        if next.history.len() >= MAX_HISTORY {
            next.history.remove(0);
        }
        next.history.push(StatusChange {
            status: next.status,
            at_ms: next.updated_at_ms,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_change_is_kept_with_its_time_and_the_oldest_go_first() {
        let prev = TaskRecord::new("t", crate::store::Era::Modern, "x", json!({}), 1, None);
        let mut next = prev.clone();
        next.updated_at_ms = 5;
        TaskRecord::note_status_change(&mut next, &prev);
        assert!(next.history.is_empty(), "no change of status");
        next.status = TaskStatus::InputRequired;
        TaskRecord::note_status_change(&mut next, &prev);
        assert_eq!(
            next.history,
            [StatusChange {
                status: TaskStatus::InputRequired,
                at_ms: 5
            }]
        );
        let mut r = next.clone();
        for i in 0..40 {
            let before = r.clone();
            r.status = if i % 2 == 0 {
                TaskStatus::Working
            } else {
                TaskStatus::InputRequired
            };
            r.updated_at_ms = 10 + i;
            TaskRecord::note_status_change(&mut r, &before);
        }
        assert_eq!(r.history.len(), MAX_HISTORY);
        assert_eq!(r.history.last().map(|c| c.at_ms), Some(49));
        // A record written before the field existed reads with none.
        let mut old = serde_json::to_value(&prev).unwrap();
        old.as_object_mut().unwrap().remove("history");
        let back: TaskRecord = serde_json::from_value(old).unwrap();
        assert!(back.history.is_empty());
    }
}
