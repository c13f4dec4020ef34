//! What the 2025-11-25 `tasks/list` asks a store for: one page of one
//! owner's tasks of one era ([`TaskStore::list`](super::TaskStore::list)).

use super::Era;

/// One page of the tasks of one owner (or of those without one) created in
/// one era, newest first, strictly older than a `(created_at_ms, id)`
/// position, hiding those expired at `now_ms`.
///
/// ```
/// use mcp_task_layer::store::{Era, ListQuery};
///
/// let first = ListQuery::new(Some("alice"), Era::Legacy, 50, 1_767_225_600_000);
/// let next = first.after(1_767_225_599_000, "f3a1");
/// assert_eq!(next.after, Some((1_767_225_599_000, "f3a1")));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListQuery<'a> {
    /// Whose tasks; `None` for the tasks created without an owner.
    pub owner: Option<&'a str>,
    /// The era the tasks were created in.
    pub era: Era,
    /// The exclusive `(created_at_ms, id)` position the page starts below;
    /// `None` for the newest.
    pub after: Option<(i64, &'a str)>,
    /// The most records the page holds (0: none).
    pub limit: usize,
    /// The time the page is read at: records expired then are hidden.
    pub now_ms: i64,
}

impl<'a> ListQuery<'a> {
    /// The newest `limit` live tasks of `owner` in `era` at `now_ms`.
    pub fn new(owner: Option<&'a str>, era: Era, limit: usize, now_ms: i64) -> Self {
        ListQuery {
            owner,
            era,
            after: None,
            limit,
            now_ms,
        }
    }

    /// The page strictly older than the task `id` created at
    /// `created_at_ms` (the last of the page before).
    #[must_use]
    pub fn after(self, created_at_ms: i64, id: &'a str) -> Self {
        ListQuery {
            after: Some((created_at_ms, id)),
            ..self
        }
    }
}
