//! The operator API of [`MemoryStore`]: listings walk each shard's
//! creation index newest first, counts read every record.
//!
//! The creation indexes are built at the first operator call (one pass
//! over every record, about 100 ms per million) and kept from then on, so
//! that a store no operator reads spends no memory on them (about 75
//! bytes per task).

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::id::Id;
use super::slot::Slot;
use super::{read, write, Gone, MemoryStore, Shard, LIST_SLACK};
use crate::store::operator::{OperatorStore, TaskQuery, TaskStats};
use crate::store::{BoxFuture, EndedCounts, EndedQuery, Result, TaskRecord};

impl MemoryStore {
    /// The next at most `want` `(created_at_ms, id)` positions below
    /// `upper`, newest first, across shards: each shard's newest `want`,
    /// merged.
    /// Make sure every record is in its shard's creation index, and that
    /// writes keep it so: the first call indexes what is stored; later
    /// ones return at once.
    fn index_created(&self) {
        self.inner.created_ready.get_or_init(|| {
            // Writes index their records from now on (they check under the
            // shard lock); each shard is then filled under the same lock,
            // so no record is missed whichever comes first.
            self.inner.keep_created.store(true, Ordering::Release);
            for lock in self.inner.shards.iter() {
                let mut shard = write(lock);
                let Shard { tasks, created, .. } = &mut *shard;
                for (id, slot) in tasks.iter() {
                    created.insert((slot.created_at_ms(), id.clone()));
                }
            }
        });
    }

    fn positions_below(&self, upper: Option<&(i64, Id)>, want: usize) -> Vec<(i64, Id)> {
        let end = upper.cloned().map_or(Bound::Unbounded, Bound::Excluded);
        let mut batch = Vec::new();
        for lock in self.inner.shards.iter() {
            let shard = read(lock);
            let newest = shard.created.range((Bound::Unbounded, end.clone())).rev();
            batch.extend(newest.take(want).cloned());
        }
        batch.sort_unstable_by(|a, b| b.cmp(a));
        batch.truncate(want);
        batch
    }

    /// The records `query` matches, newest first, walked a batch at a time
    /// from its cursor (or its `created_before`) down to its
    /// `created_after`.
    fn find_now(&self, query: &TaskQuery, now_ms: i64) -> Vec<Arc<TaskRecord>> {
        self.index_created();
        let limit = query.page_size();
        let mut upper = query.cursor().map(|c| {
            let (created, id) = c.position();
            (created, Id::new(id))
        });
        if let Some(before) = query.created_before() {
            // `(before, "")` is the first position at `before`.
            let bound = (before, Id::new(""));
            if upper.as_ref().is_none_or(|u| bound < *u) {
                upper = Some(bound);
            }
        }
        let mut out = Vec::new();
        loop {
            let want = (limit - out.len()).saturating_add(LIST_SLACK);
            let batch = self.positions_below(upper.as_ref(), want);
            for (created, id) in &batch {
                if query.created_after().is_some_and(|after| *created < after) {
                    return out;
                }
                // The index is written apart from the record: check the
                // record found against the query.
                match self.get_now(id.as_str(), now_ms) {
                    Some(r) if query.matches(&r, now_ms) => out.push(r),
                    _ => continue,
                }
                if out.len() == limit {
                    return out;
                }
            }
            if batch.len() < want {
                return out;
            }
            upper = batch.last().cloned();
        }
    }

    fn stats_now(&self, now_ms: i64) -> TaskStats {
        let mut stats = TaskStats {
            at_ms: now_ms,
            ..TaskStats::default()
        };
        for lock in self.inner.shards.iter() {
            let shard = read(lock);
            for slot in shard.tasks.values() {
                if slot.is_expired(now_ms) {
                    continue;
                }
                match slot {
                    Slot::Full(r) => stats.saw(r, now_ms),
                    Slot::Done(d) => stats.count_status(d.status),
                }
            }
        }
        stats
    }

    /// Every ended task's status and end, tallied.
    fn ended_now(&self, query: EndedQuery) -> EndedCounts {
        let mut counts = query.counts();
        for lock in self.inner.shards.iter() {
            let shard = read(lock);
            for slot in shard.tasks.values() {
                if slot.is_expired(query.now_ms) {
                    continue;
                }
                match slot {
                    Slot::Full(r) => counts.add(r.status, r.updated_at_ms),
                    Slot::Done(d) => counts.add(d.status, d.updated_at_ms),
                }
            }
        }
        counts
    }

    /// Delete what `query` (terminal statuses only) matches, one page.
    fn purge_now(&self, query: &TaskQuery, now_ms: i64) -> u64 {
        let Some(query) = query.terminal_only() else {
            return 0;
        };
        let mut gone: Vec<Gone> = Vec::new();
        for record in self.find_now(&query, now_ms) {
            let id = Id::new(&record.id);
            let mut shard = write(self.shard(&id));
            // Terminal records never change: the one found is the one
            // stored, unless another purge or the reaper took it first.
            if let Some(slot) = shard.remove(&id) {
                drop(shard);
                gone.push(self.gone(&slot, id));
            }
        }
        self.unindex_owners(gone).len() as u64
    }
}

impl OperatorStore for MemoryStore {
    fn find<'a>(
        &'a self,
        query: &'a TaskQuery,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(std::future::ready(Ok(self.find_now(query, now_ms))))
    }

    /// Reads every record: a scan, in memory (about 10 ms per million
    /// tasks).
    fn stats(&self, now_ms: i64) -> BoxFuture<'_, Result<TaskStats>> {
        Box::pin(std::future::ready(Ok(self.stats_now(now_ms))))
    }

    fn purge<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<u64>> {
        Box::pin(std::future::ready(Ok(self.purge_now(query, now_ms))))
    }

    /// Reads every record, as `stats` does.
    fn ended(&self, query: EndedQuery) -> BoxFuture<'_, Result<EndedCounts>> {
        Box::pin(std::future::ready(Ok(self.ended_now(query))))
    }
}
