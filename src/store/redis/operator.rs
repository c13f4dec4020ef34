//! The operator API of [`RedisStore`]: listings walk the sorted set of
//! every task, of one status, of one tool, or (for one owner) the owner's
//! listing sets of both eras merged (the smallest the query names), newest
//! first by their members, which sort as `(created_at_ms, id)`; the `list`
//! script reads a batch, the rest of the query is applied here, and a walk
//! examines at most [`WALK_BUDGET`] members a page, live or not.

use std::collections::HashMap;
use std::sync::Arc;

use super::chunks::number;
use super::keys::{member, STATUSES};
use super::listing::ListCall;
use super::scripts::SCAN_CAP;
use super::{backend, RedisStore};
use crate::protocol::TaskStatus;
use crate::store::operator::{queued_since_ms, OperatorStore, TaskQuery, TaskStats};
use crate::store::{
    BoxFuture, EndedCounts, EndedQuery, Error, Found, Lease, Purged, Result, WALK_BUDGET,
};

/// Members read per `list` call beyond what a page still lacks.
const SLACK: usize = 16;

/// The most records one `list` call reads.
const MAX_BATCH: usize = 1_000;

impl RedisStore {
    async fn find_records(&self, query: &TaskQuery, now_ms: i64) -> Result<Found> {
        let indexes = self.narrowest(query).await?;
        // Exclusive upper bounds; the smaller one holds.
        let mut max = "+".to_owned();
        let bounds = [
            query.cursor().map(|c| {
                let (created, id) = c.position();
                member(created, id)
            }),
            query.created_before().map(|at| member(at, "")),
        ];
        for bound in bounds.into_iter().flatten() {
            if max == "+" || format!("({bound}") < max {
                max = format!("({bound}");
            }
        }
        let min = query
            .created_after()
            .map_or_else(|| "-".to_owned(), |at| format!("[{}", member(at, "")));
        let limit = query.page_size();
        let mut out = Vec::new();
        // Members examined, live or not: a page examines at most
        // `WALK_BUDGET`, each call at most `SCAN_CAP`.
        let mut read = 0;
        // Batches grow while they find little, up to `MAX_BATCH`.
        let mut grow = 0;
        loop {
            let want = (limit - out.len()).saturating_add(SLACK).max(grow);
            let listed = self
                .list_call(ListCall {
                    keys: &indexes,
                    max: &max,
                    min: &min,
                    limit: want,
                    cap: (WALK_BUDGET - read).min(SCAN_CAP),
                    now_ms,
                })
                .await?;
            read += listed.seen;
            let (next, at) = (listed.next_max(), listed.cursor());
            for record in listed.records {
                if query.matches(&record, now_ms) {
                    out.push(Arc::new(record));
                    if out.len() == limit {
                        return Ok(Found::all(out));
                    }
                }
            }
            let (Some(next), false) = (next, listed.done) else {
                return Ok(Found::all(out));
            };
            if read >= WALK_BUDGET {
                let at = at.ok_or_else(|| Error::Decode("a list member of no task".into()))?;
                return Ok(Found::stopped(out, at));
            }
            max = next;
            grow = (want * 2).min(MAX_BATCH);
        }
    }

    async fn stats_now(&self, now_ms: i64) -> Result<TaskStats> {
        let k = &self.inner.keys;
        let scripts = &self.inner.scripts;
        let (now, head) = (now_ms.to_string(), k.task_head.as_str());
        let mut stats = TaskStats {
            at_ms: now_ms,
            ..TaskStats::default()
        };
        let mut pipe = redis::pipe();
        for status in STATUSES {
            pipe.cmd("ZCARD").arg(k.status(status));
        }
        let sizes: Vec<u64> = self
            .read(|mut conn| {
                let pipe = pipe.clone();
                async move { pipe.query_async(&mut conn).await }
            })
            .await?;
        let mut counts: HashMap<String, u64> = STATUSES
            .iter()
            .zip(sizes)
            .map(|(status, n)| (status.as_str().to_owned(), n))
            .collect();
        // Less the expired tasks each index still holds (reaped soon).
        self.chunks(&scripts.expired, &[&k.expiry], &[&now, head], |pairs| {
            for pair in pairs.chunks_exact(2) {
                if let Some(n) = counts.get_mut(&pair[0]) {
                    *n = n.saturating_sub(number(&pair[1])?);
                }
            }
            Ok(())
        })
        .await?;
        stats.by_status = counts.into_iter().filter(|(_, n)| *n > 0).collect();
        let waiting = k.status(TaskStatus::InputRequired);
        self.chunks(&scripts.waiting, &[&waiting], &[&now, head], |pairs| {
            for pair in pairs.chunks_exact(2) {
                stats.waiting(&pair[0], number(&pair[1])?);
            }
            Ok(())
        })
        .await?;
        let queue = Lease::QUEUED;
        self.chunks(
            &scripts.fleet,
            &[&k.leases],
            &[&now, head, queue],
            |fleet| {
                let [queued, first, first_at, holders @ ..] = fleet else {
                    return Err(Error::Decode("a short answer from `fleet`".into()));
                };
                stats.queued += number::<u64>(queued)?;
                if !first.is_empty() {
                    stats.queued_since(first, queued_since_ms(number(first_at)?));
                }
                for pair in holders.chunks_exact(2) {
                    *stats.running_by_holder.entry(pair[0].clone()).or_default() +=
                        number::<u64>(&pair[1])?;
                }
                Ok(())
            },
        )
        .await?;
        Ok(stats)
    }

    async fn ended_records(&self, query: EndedQuery) -> Result<EndedCounts> {
        let k = &self.inner.keys;
        let (since, now) = (query.since_ms.to_string(), query.now_ms.to_string());
        let args = [since.as_str(), &now, &k.task_head];
        let mut counts = query.counts();
        self.chunks(&self.inner.scripts.ended, &[&k.ended], &args, |pairs| {
            for pair in pairs.chunks_exact(2) {
                let (Some(status), Ok(at)) =
                    (TaskStatus::from_wire(&pair[0]), pair[1].parse::<f64>())
                else {
                    continue;
                };
                // Scores are whole milliseconds, exact in a double.
                #[allow(clippy::cast_possible_truncation)]
                counts.add(status, at as i64);
            }
            Ok(())
        })
        .await?;
        Ok(counts)
    }

    async fn purge_records(&self, query: &TaskQuery, now_ms: i64) -> Result<Purged> {
        let Some(query) = query.terminal_only() else {
            return Ok(Purged::default());
        };
        let Found { tasks, walked_to } = self.find_records(&query, now_ms).await?;
        if tasks.is_empty() {
            return Ok(Purged {
                deleted: 0,
                walked_to,
            });
        }
        let k = &self.inner.keys;
        let mut invocation = self.inner.scripts.purge.key(&k.expiry);
        invocation
            .key(&k.leases)
            .key(&k.all)
            .key(&k.ended)
            .arg(&k.task_head)
            .arg(&k.status_head);
        for record in &tasks {
            invocation.arg(&record.id);
        }
        let deleted = invocation
            .invoke_async(&mut self.conn()?)
            .await
            .map_err(backend)?;
        Ok(Purged { deleted, walked_to })
    }
}

/// Counts are the status indexes' sizes less their expired members; the
/// queue and the running tasks read the holder and lease end of every
/// `working` task under a lease, in the server.
impl OperatorStore for RedisStore {
    fn find<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Found>> {
        Box::pin(self.find_records(query, now_ms))
    }

    fn stats(&self, now_ms: i64) -> BoxFuture<'_, Result<TaskStats>> {
        Box::pin(self.stats_now(now_ms))
    }

    fn purge<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Purged>> {
        Box::pin(self.purge_records(query, now_ms))
    }

    /// Reads `<prefix>:ops:ended` over the spans: the tasks that ended in
    /// them, not the store. Tasks that ended before this version wrote
    /// the index are not in it.
    fn ended(&self, query: EndedQuery) -> BoxFuture<'_, Result<EndedCounts>> {
        Box::pin(self.ended_records(query))
    }
}
