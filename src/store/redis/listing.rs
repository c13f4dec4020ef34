//! One call of the `list` script (`scripts.rs`): a bounded step of a walk
//! down one or several list indexes, which the client's listing and the
//! operator's walk repeat below the last member it examined.

use std::sync::Arc;

use super::fields::decode;
use super::keys::{member, unmember};
use super::scripts::SCAN_CAP;
use super::RedisStore;
use crate::store::{ListQuery, Result, TaskCursor, TaskRecord};

/// What one `list` call reads: indexes `keys`, below the exclusive bound
/// `max` (`+` or `(<member>`), down to the inclusive bound `min` (`-` or
/// `[<member>`).
pub(super) struct ListCall<'a> {
    pub(super) keys: &'a [String],
    pub(super) max: &'a str,
    pub(super) min: &'a str,
    /// The most live records to answer.
    pub(super) limit: usize,
    /// The most members to examine (at most [`SCAN_CAP`]).
    pub(super) cap: usize,
    pub(super) now_ms: i64,
}

/// What one `list` call found.
pub(super) struct Listed {
    /// The live records, newest first.
    pub(super) records: Vec<TaskRecord>,
    /// The last member examined (live, expired or gone), if any.
    pub(super) last: Option<String>,
    /// How many members the call examined.
    pub(super) seen: usize,
    /// Every index was read to its end (or to `min`).
    pub(super) done: bool,
}

impl Listed {
    /// The exclusive upper bound of the next call: below the last member
    /// examined.
    pub(super) fn next_max(&self) -> Option<String> {
        self.last.as_ref().map(|m| format!("({m}"))
    }

    /// The cursor at the last member examined.
    pub(super) fn cursor(&self) -> Option<TaskCursor> {
        let (created, id) = unmember(self.last.as_deref()?)?;
        Some(TaskCursor::at(created, id))
    }
}

impl RedisStore {
    /// One call of the `list` script.
    pub(super) async fn list_call(&self, call: ListCall<'_>) -> Result<Listed> {
        let cap = call.cap.clamp(1, SCAN_CAP);
        let (rows, last, seen, done): (Vec<String>, String, usize, u8) = self
            .read(|mut conn| {
                let mut invocation = self.inner.scripts.list.prepare_invoke();
                for key in call.keys {
                    invocation.key(key);
                }
                invocation
                    .arg(call.now_ms)
                    .arg(call.limit)
                    .arg(call.max)
                    .arg(&self.inner.keys.task_head)
                    .arg(call.min)
                    .arg(cap);
                async move { invocation.invoke_async(&mut conn).await }
            })
            .await?;
        Ok(Listed {
            records: rows
                .iter()
                .map(|json| decode(json))
                .collect::<Result<_>>()?,
            last: (!last.is_empty()).then_some(last),
            seen,
            done: done == 1,
        })
    }

    /// The client's listing: `list` calls of at most [`SCAN_CAP`] members
    /// each, until the page is full or the index ends, so that no call
    /// walks an index of dead members whole.
    pub(super) async fn list_records(&self, q: ListQuery<'_>) -> Result<Vec<Arc<TaskRecord>>> {
        let k = &self.inner.keys;
        let keys = [k.list(q.owner, q.era)];
        let mut max = q
            .after
            .map_or_else(|| "+".to_owned(), |(c, id)| format!("({}", member(c, id)));
        let mut out = Vec::new();
        while out.len() < q.limit {
            let listed = self
                .list_call(ListCall {
                    keys: &keys,
                    max: &max,
                    min: "-",
                    limit: q.limit - out.len(),
                    cap: SCAN_CAP,
                    now_ms: q.now_ms,
                })
                .await?;
            let next = listed.next_max();
            out.extend(listed.records.into_iter().map(Arc::new));
            match next {
                Some(next) if !listed.done => max = next,
                _ => break,
            }
        }
        Ok(out)
    }
}
