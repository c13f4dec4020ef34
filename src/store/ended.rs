//! How many tasks ended, minute by minute: what the dashboard's chart of
//! throughput and failures reads ([`OperatorStore::ended`]).
//!
//! [`OperatorStore::ended`]: super::OperatorStore::ended

use crate::protocol::TaskStatus;

/// The most spans one query counts in (a week of minutes); spans past it
/// are not counted.
pub const MAX_SPANS: usize = 7 * 24 * 60;

/// The tasks that ended (`completed`, `failed`, `cancelled`) at or after
/// `since_ms` and before `now_ms`, counted in spans of `bucket_ms`, the
/// first starting at `since_ms`. A task ends at its last write
/// (`updated_at_ms`): an ended task is never written again. Tasks expired
/// at `now_ms`, purged or reaped are not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndedQuery {
    /// The start of the first span (inclusive, Unix milliseconds).
    pub since_ms: i64,
    /// The end of the last span (exclusive), and the time expiry is judged at.
    pub now_ms: i64,
    /// The length of each span (at least 1).
    pub bucket_ms: i64,
}

impl EndedQuery {
    /// The spans of `bucket_ms` in the `span_ms` before `now_ms`.
    pub fn last(span_ms: i64, bucket_ms: i64, now_ms: i64) -> Self {
        EndedQuery {
            since_ms: now_ms.saturating_sub(span_ms.max(0)),
            now_ms,
            bucket_ms: bucket_ms.max(1),
        }
    }

    /// How many spans there are (the last may be shorter), at most
    /// [`MAX_SPANS`].
    pub fn buckets(&self) -> usize {
        let span = self.now_ms.saturating_sub(self.since_ms).max(0);
        let bucket = self.bucket_ms.max(1);
        usize::try_from(span / bucket + i64::from(span % bucket != 0))
            .unwrap_or(MAX_SPANS)
            .min(MAX_SPANS)
    }

    /// Empty counts for this query, to [`add`](EndedCounts::add) to.
    pub fn counts(&self) -> EndedCounts {
        EndedCounts {
            query: *self,
            spans: vec![[0; 3]; self.buckets()],
        }
    }
}

/// Ended tasks per span, oldest span first: `[completed, failed,
/// cancelled]` each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndedCounts {
    /// What was asked.
    pub query: EndedQuery,
    /// `[completed, failed, cancelled]` per span, oldest first.
    pub spans: Vec<[u64; 3]>,
}

impl EndedCounts {
    /// Count a task that ended in `status` at `at_ms` (one that is not
    /// terminal, or ended outside the query's spans, is passed by).
    pub fn add(&mut self, status: TaskStatus, at_ms: i64) {
        self.add_n(status, at_ms, 1);
    }

    /// Count `n` such tasks.
    pub fn add_n(&mut self, status: TaskStatus, at_ms: i64, n: u64) {
        let column = match status {
            TaskStatus::Completed => 0,
            TaskStatus::Failed => 1,
            TaskStatus::Cancelled => 2,
            TaskStatus::Working | TaskStatus::InputRequired => return,
        };
        let q = &self.query;
        if at_ms < q.since_ms || at_ms >= q.now_ms {
            return;
        }
        let at = (at_ms - q.since_ms) / q.bucket_ms.max(1);
        if let Some(span) = usize::try_from(at).ok().and_then(|i| self.spans.get_mut(i)) {
            span[column] += n;
        }
    }

    /// The totals: `[completed, failed, cancelled]`.
    pub fn totals(&self) -> [u64; 3] {
        self.spans.iter().fold([0; 3], |acc, s| {
            [acc[0] + s[0], acc[1] + s[1], acc[2] + s[2]]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_fall_in_the_span_they_ended_in() {
        let q = EndedQuery::last(3_600_000, 60_000, 10_000_000);
        assert_eq!(q.buckets(), 60);
        let mut c = q.counts();
        c.add(TaskStatus::Completed, q.since_ms);
        c.add(TaskStatus::Failed, q.now_ms - 1);
        c.add(TaskStatus::Cancelled, q.now_ms); // not yet in the window
        c.add(TaskStatus::Completed, q.since_ms - 1); // before it
        c.add(TaskStatus::Working, q.since_ms); // not ended
        assert_eq!(c.spans[0], [1, 0, 0]);
        assert_eq!(c.spans[59], [0, 1, 0]);
        assert_eq!(c.totals(), [1, 1, 0]);
        // A query of every millisecond since 1970 is bounded.
        assert_eq!(
            EndedQuery::last(i64::MAX, 1, 10_000_000).buckets(),
            MAX_SPANS
        );
    }
}
