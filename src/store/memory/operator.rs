//! The operator API of [`MemoryStore`]: listings walk each shard's
//! creation index (or one tool's, or one owner's listing index, the
//! smallest the query names) newest first, at most [`WALK_BUDGET`] records
//! a page; counts read every record.
//!
//! The creation and tool indexes are built at the first operator call (one
//! pass over every record, about 100 ms per million) and kept from then
//! on, so that a store no operator reads spends no memory on them (about
//! 150 bytes per task).

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;

use super::id::Id;
use super::slot::Slot;
use super::{index_for_operator, read, write, Gone, MemoryStore, Shard, LIST_SLACK};
use crate::store::operator::{OperatorStore, TaskQuery, TaskStats};
use crate::store::Era;
use crate::store::{
    BoxFuture, EndedCounts, EndedQuery, Found, Purged, Result, TaskCursor, WALK_BUDGET,
};

impl MemoryStore {
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
                let Shard {
                    tasks,
                    created,
                    tools,
                    ..
                } = &mut *shard;
                for (id, slot) in tasks.iter() {
                    let at = (slot.created_at_ms(), id.clone());
                    index_for_operator(created, tools, slot.tool_name(), at);
                }
            }
        });
    }

    /// The index a listing for `query` walks: of those the query names
    /// (one tool's, one owner's), the one with the fewest entries; every
    /// task's if it names none.
    fn narrowest<'q>(&self, query: &'q TaskQuery) -> Walk<'q> {
        let mut best = (usize::MAX, Walk::All);
        if let Some(tool) = query.tool_name() {
            let size = self
                .inner
                .shards
                .iter()
                .map(|lock| read(lock).tools.get(tool).map_or(0, BTreeSet::len));
            best = (size.sum(), Walk::Tool(tool));
        }
        if let Some(owner) = query.owner_key() {
            let owners = read(self.owner_shard(Some(owner)));
            let size: usize = [Era::Modern, Era::Legacy]
                .into_iter()
                .filter_map(|era| owners.get(&(Some(owner.to_owned()), era)))
                .map(BTreeSet::len)
                .sum();
            if size < best.0 {
                best = (size, Walk::Owner(owner));
            }
        }
        best.1
    }

    /// The next at most `want` `(created_at_ms, id)` positions of index
    /// `walk` below `upper`, newest first: each set's newest `want`,
    /// merged.
    fn positions_below(
        &self,
        walk: Walk<'_>,
        upper: Option<&(i64, Id)>,
        want: usize,
    ) -> Vec<(i64, Id)> {
        let end = upper.cloned().map_or(Bound::Unbounded, Bound::Excluded);
        let mut batch = Vec::new();
        let mut take = |set: &BTreeSet<(i64, Id)>| {
            let newest = set.range((Bound::Unbounded, end.clone())).rev();
            batch.extend(newest.take(want).cloned());
        };
        match walk {
            Walk::All | Walk::Tool(_) => {
                for lock in self.inner.shards.iter() {
                    let shard = read(lock);
                    match walk {
                        Walk::Tool(tool) => shard.tools.get(tool).into_iter().for_each(&mut take),
                        _ => take(&shard.created),
                    }
                }
            }
            Walk::Owner(owner) => {
                let owners = read(self.owner_shard(Some(owner)));
                for era in [Era::Modern, Era::Legacy] {
                    owners
                        .get(&(Some(owner.to_owned()), era))
                        .into_iter()
                        .for_each(&mut take);
                }
            }
        }
        batch.sort_unstable_by(|a, b| b.cmp(a));
        batch.truncate(want);
        batch
    }

    /// The records `query` matches, newest first, walked a batch at a time
    /// from its cursor (or its `created_before`) down to its
    /// `created_after`, reading at most [`WALK_BUDGET`] records.
    fn find_now(&self, query: &TaskQuery, now_ms: i64) -> Found {
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
        let walk = self.narrowest(query);
        let mut out = Vec::new();
        let mut read = 0;
        loop {
            let want = (limit - out.len())
                .saturating_add(LIST_SLACK)
                .min(WALK_BUDGET - read);
            let batch = self.positions_below(walk, upper.as_ref(), want);
            for (created, id) in &batch {
                if query.created_after().is_some_and(|after| *created < after) {
                    return Found::all(out);
                }
                read += 1;
                // The index is written apart from the record: check the
                // record found against the query.
                if let Some(r) = self.get_now(id.as_str(), now_ms) {
                    if query.matches(&r, now_ms) {
                        out.push(r);
                        if out.len() == limit {
                            return Found::all(out);
                        }
                    }
                }
                if read == WALK_BUDGET {
                    return Found::stopped(out, TaskCursor::at(*created, id.as_str()));
                }
            }
            if batch.len() < want {
                return Found::all(out);
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
    fn purge_now(&self, query: &TaskQuery, now_ms: i64) -> Purged {
        let Some(query) = query.terminal_only() else {
            return Purged::default();
        };
        let found = self.find_now(&query, now_ms);
        let mut gone: Vec<Gone> = Vec::new();
        for record in found.tasks {
            let id = Id::new(&record.id);
            let mut shard = write(self.shard(&id));
            // Terminal records never change: the one found is the one
            // stored, unless another purge or the reaper took it first.
            if let Some(slot) = shard.remove(&id) {
                drop(shard);
                gone.push(self.gone(&slot, id));
            }
        }
        Purged {
            deleted: self.unindex_owners(gone).len() as u64,
            walked_to: found.walked_to,
        }
    }
}

/// Which index a listing walks.
#[derive(Clone, Copy)]
enum Walk<'q> {
    /// Every record's, by creation.
    All,
    /// One tool's records'.
    Tool(&'q str),
    /// One owner's records' (both eras).
    Owner(&'q str),
}

impl OperatorStore for MemoryStore {
    fn find<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Found>> {
        Box::pin(std::future::ready(Ok(self.find_now(query, now_ms))))
    }

    /// Reads every record: a scan, in memory (about 10 ms per million
    /// tasks).
    fn stats(&self, now_ms: i64) -> BoxFuture<'_, Result<TaskStats>> {
        Box::pin(std::future::ready(Ok(self.stats_now(now_ms))))
    }

    fn purge<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Purged>> {
        Box::pin(std::future::ready(Ok(self.purge_now(query, now_ms))))
    }

    /// Reads every record, as `stats` does.
    fn ended(&self, query: EndedQuery) -> BoxFuture<'_, Result<EndedCounts>> {
        Box::pin(std::future::ready(Ok(self.ended_now(query))))
    }
}
