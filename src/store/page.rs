//! Pages of an operator's listing: the [`TaskCursor`] a page ends at, what
//! a store [`Found`] for one (and where a bounded walk stopped), the
//! [`TaskPage`] an operator gets, and what a purge did ([`Purged`]).
//!
//! A store that filters by walking an index (the memory store for a
//! search; Redis for every listing, whose indexes also hold the members of
//! expired and deleted tasks) reads at most [`WALK_BUDGET`] records (on
//! Redis, index members, live or not) for one page: a page's
//! cost is bounded however rare the matches are, as Redis's own `SCAN`
//! and the job queues' web UIs on Redis bound theirs. Where it stops
//! without a full page, it says where ([`Found::walked_to`]), and the next
//! page goes on from there.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::TaskRecord;

/// The most records a store reads for one page of a listing (or of a
/// purge) when it filters by walking an index: 2,000 records cost a Redis
/// page about 25 ms, a PostgreSQL walk about 10 ms, on a loaded 2-core
/// machine (5,000 cost Redis 57-68 ms; BENCHMARKS.md, issue 30).
pub const WALK_BUDGET: usize = 2_000;

/// Where a page of a listing ends: an opaque text to hand back in
/// [`TaskQuery::after`](super::TaskQuery::after) (`Display` writes it, `FromStr` reads it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskCursor {
    created_at_ms: i64,
    id: String,
}

impl TaskCursor {
    /// The cursor just after `record` (newest first).
    pub fn after_record(record: &TaskRecord) -> Self {
        TaskCursor {
            created_at_ms: record.created_at_ms,
            id: record.id.clone(),
        }
    }

    /// The cursor at position `(created_at_ms, id)`: the next page holds
    /// the tasks strictly below it.
    pub fn at(created_at_ms: i64, id: impl Into<String>) -> Self {
        TaskCursor {
            created_at_ms,
            id: id.into(),
        }
    }

    /// The `(created_at_ms, id)` position: the next page holds tasks
    /// strictly below it.
    pub fn position(&self) -> (i64, &str) {
        (self.created_at_ms, &self.id)
    }
}

impl fmt::Display for TaskCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::with_capacity(17 + 2 * self.id.len());
        crate::hex::push_hex(&mut text, &self.created_at_ms.to_be_bytes());
        text.push('.');
        crate::hex::push_hex(&mut text, self.id.as_bytes());
        f.write_str(&text)
    }
}

/// A text that is not a [`TaskCursor`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidCursor;

impl fmt::Display for InvalidCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a task listing cursor")
    }
}

impl std::error::Error for InvalidCursor {}

impl FromStr for TaskCursor {
    type Err = InvalidCursor;

    fn from_str(text: &str) -> std::result::Result<Self, InvalidCursor> {
        let (time, id) = text.split_once('.').ok_or(InvalidCursor)?;
        let time: [u8; 8] = crate::hex::decode_hex(time)
            .and_then(|b| b.try_into().ok())
            .ok_or(InvalidCursor)?;
        let id = crate::hex::decode_hex(id)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or(InvalidCursor)?;
        Ok(TaskCursor {
            created_at_ms: i64::from_be_bytes(time),
            id,
        })
    }
}

/// One page of a listing.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskPage {
    /// The tasks, newest first.
    pub tasks: Vec<Arc<TaskRecord>>,
    /// Where the next page starts; `None` when this one is the last. A
    /// page may hold fewer tasks than asked for (even none) and still name
    /// a next one: the store stopped its walk at [`WALK_BUDGET`] records
    /// (or index members) read, and the next page goes on from where it
    /// stopped.
    pub next: Option<TaskCursor>,
}

/// What a store found for one page of a query.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Found {
    /// The matching tasks, newest first, at most the page size.
    pub tasks: Vec<Arc<TaskRecord>>,
    /// Where a walk that stopped at [`WALK_BUDGET`] before the page was
    /// full stopped (the position of the last record or index member it
    /// read, perhaps of a task since gone): the next page starts after
    /// it. `None` when the walk reached the page's end or the index's.
    pub walked_to: Option<TaskCursor>,
}

impl Found {
    /// Tasks found by a walk that did not stop early.
    pub fn all(tasks: Vec<Arc<TaskRecord>>) -> Self {
        Found {
            tasks,
            walked_to: None,
        }
    }

    /// Tasks found by a walk that stopped at its budget, after reading
    /// the record at `at`.
    pub fn stopped(tasks: Vec<Arc<TaskRecord>>, at: TaskCursor) -> Self {
        Found {
            tasks,
            walked_to: Some(at),
        }
    }

    /// The page of `page_size` tasks these make: the next cursor is after
    /// the last task when the page is full, else where the walk stopped.
    pub(crate) fn into_page(self, page_size: usize) -> TaskPage {
        let next = if self.tasks.len() >= page_size {
            self.tasks.last().map(|r| TaskCursor::after_record(r))
        } else {
            self.walked_to
        };
        TaskPage {
            tasks: self.tasks,
            next,
        }
    }
}

/// What one purge call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Purged {
    /// How many tasks it deleted.
    pub deleted: u64,
    /// Where its walk stopped at [`WALK_BUDGET`], as [`Found::walked_to`]:
    /// the next call goes on after it.
    pub walked_to: Option<TaskCursor>,
}

impl Purged {
    /// `deleted` tasks, by a walk that did not stop early.
    pub fn all(deleted: u64) -> Self {
        Purged {
            deleted,
            walked_to: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Era;

    #[test]
    fn cursors_read_back_and_refuse_junk() {
        let r = TaskRecord::new("id.é", Era::Modern, "t", serde_json::Value::Null, -5, None);
        let c = TaskCursor::after_record(&r);
        assert_eq!(c.to_string().parse::<TaskCursor>(), Ok(c));
        for junk in [
            "",
            ".",
            "zz.00",
            "0000000000000000",
            "00.00",
            "0000000000000000.f",
        ] {
            assert_eq!(junk.parse::<TaskCursor>(), Err(InvalidCursor), "{junk:?}");
        }
    }
}
