//! [`SqlCore`]: the store primitives, written once for both engines.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::{
    AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type,
};

use super::claims::{self, ClaimLine};
use super::dialect::Engine;
use super::group::{Group, GroupSql, Write};
use super::operator::{self, Arg, Sql, StatsSql};
use super::options::DEFAULT_PAGE_TIME;
use super::row::{backend, bind_row, decode, era_name, records, to_i64, Columns};
use super::statements::{sql, Statements};
use crate::clock::unix_now_ms;
use crate::protocol::TaskStatus;
use crate::store::operator::{TaskQuery, TaskStats, WaitingTask};
use crate::store::{ClaimQuery, Error, Result, TaskRecord};
use crate::store::{EndedCounts, EndedQuery, Found, ListQuery, Purged, TaskCursor};

/// The store primitives over one engine's pools.
#[derive(Debug)]
pub(crate) struct SqlCore<DB: Database> {
    /// Reads (`get`, `list`).
    pub(crate) reads: Pool<DB>,
    /// Writes and migrations; the same pool as `reads` except on SQLite.
    pub(crate) writes: Pool<DB>,
    pub(crate) table: String,
    sql: Statements,
    stats: StatsSql,
    /// Concurrent writes committed together, where the engine does.
    group: Option<Arc<Group<DB>>>,
    /// How long an operator's page may read before it is walked instead.
    page_time: Duration,
    /// The connection claim rounds run on, where the engine keeps one.
    claims: Option<ClaimLine<DB>>,
}

impl<DB> SqlCore<DB>
where
    DB: Engine,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
    for<'a> String: Encode<'a, DB> + Decode<'a, DB> + Type<DB>,
    for<'a> Option<&'a str>: Encode<'a, DB> + Type<DB>,
    for<'a> i64: Encode<'a, DB> + Decode<'a, DB> + Type<DB>,
    for<'a> Option<i64>: Encode<'a, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    /// How long an operator's page may read before it is read as a
    /// bounded walk instead (`SqlOptions::with_page_time_limit`).
    pub(crate) fn with_page_time(mut self, limit: Duration) -> Self {
        self.page_time = limit;
        self
    }

    pub(crate) fn new(reads: Pool<DB>, writes: Pool<DB>, table: String) -> Self {
        let sql = Statements::new(&DB::DIALECT, &table);
        let stats = StatsSql::new(&DB::DIALECT, &table);
        let group = DB::DIALECT.group_writes.then(|| {
            let sql = GroupSql {
                insert: Arc::clone(&sql.insert),
                replace: Arc::clone(&sql.replace),
                exists: Arc::clone(&sql.exists),
                replace_many: sql.claim_update.clone(),
            };
            Arc::new(Group::new(writes.clone(), sql))
        });
        let claims = ClaimLine::new(&writes, &sql, &table);
        SqlCore {
            claims,
            reads,
            writes,
            table,
            sql,
            stats,
            group,
            page_time: DEFAULT_PAGE_TIME,
        }
    }

    /// Close every connection: the claims' own, then the pools (waiting
    /// for the connections in use).
    pub(crate) async fn close(&self) {
        if let Some(line) = &self.claims {
            line.release();
        }
        self.reads.close().await;
        self.writes.close().await;
    }

    /// Apply the migrations this table has not had yet.
    pub(crate) async fn migrate(&self) -> Result<()> {
        let d = &DB::DIALECT;
        let mut tx = self
            .writes
            .begin_with(d.begin_write)
            .await
            .map_err(backend)?;
        if let Some(lock) = d.lock_migration {
            sqlx::query(lock)
                .bind(lock_key(&self.table))
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
        }
        sqlx::query(AssertSqlSafe(self.sql.migrations_table.as_str()))
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        let done: i64 = sqlx::query(AssertSqlSafe(self.sql.migrations_version.as_str()))
            .fetch_one(&mut *tx)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(backend)?;
        let known = self.sql.migrations.len();
        let done = usize::try_from(done).unwrap_or(0);
        if done > known {
            tracing::warn!(
                table = %self.table,
                schema = done,
                known,
                "task table has a newer schema than this build knows; using it as is"
            );
        }
        for (i, step) in self.sql.migrations.iter().enumerate().skip(done) {
            for statement in step {
                sqlx::query(AssertSqlSafe(statement.as_str()))
                    .execute(&mut *tx)
                    .await
                    .map_err(backend)?;
            }
            let version = i64::try_from(i + 1).unwrap_or(i64::MAX);
            sqlx::query(AssertSqlSafe(self.sql.migrations_insert.as_str()))
                .bind(version)
                .bind(unix_now_ms())
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            tracing::info!(table = %self.table, version, "task table migrated");
        }
        tx.commit().await.map_err(backend)
    }

    pub(crate) async fn create(&self, record: TaskRecord) -> Result<()> {
        let c = Columns::of(record)?;
        if let Some(group) = &self.group {
            return group.write(Write::Insert(c)).await;
        }
        let done = bind_row(sqlx::query(sql(&self.sql.insert)), &c)
            .execute(&self.writes)
            .await
            .map_err(backend)?;
        match DB::rows_affected(&done) {
            0 => Err(Error::AlreadyExists),
            _ => Ok(()),
        }
    }

    pub(crate) async fn get(&self, id: &str, now_ms: i64) -> Result<Option<Arc<TaskRecord>>> {
        let row = sqlx::query(sql(&self.sql.get))
            .bind(id)
            .bind(now_ms)
            .fetch_optional(&self.reads)
            .await
            .map_err(backend)?;
        match row {
            None => Ok(None),
            Some(row) => {
                let json: String = row.try_get(0).map_err(backend)?;
                Ok(Some(Arc::new(decode(&json)?)))
            }
        }
    }

    pub(crate) async fn replace(&self, record: TaskRecord, expected_version: u64) -> Result<()> {
        let expected = to_i64(expected_version, "expected version")?;
        let c = Columns::of(record)?;
        if let Some(group) = &self.group {
            return group.write(Write::Replace(c, expected)).await;
        }
        let done = bind_row(sqlx::query(sql(&self.sql.replace)), &c)
            .bind(expected)
            .execute(&self.writes)
            .await
            .map_err(backend)?;
        if DB::rows_affected(&done) > 0 {
            return Ok(());
        }
        // Lost: tell a missing row from a changed one. Another writer
        // may delete the row in between; either answer is then true.
        let exists = sqlx::query(sql(&self.sql.exists))
            .bind(c.id)
            .fetch_optional(&self.writes)
            .await
            .map_err(backend)?;
        Err(if exists.is_some() {
            Error::Conflict
        } else {
            Error::NotFound
        })
    }

    pub(crate) async fn delete_expired(&self, now_ms: i64, limit: usize) -> Result<Vec<String>> {
        let rows = self
            .up_to(&self.sql.reap, &self.writes, now_ms, limit)
            .await?;
        rows.iter()
            .map(|row| row.try_get::<String, _>(0).map_err(backend))
            .collect()
    }

    pub(crate) async fn orphans(&self, now_ms: i64, limit: usize) -> Result<Vec<Arc<TaskRecord>>> {
        let rows = self
            .up_to(&self.sql.orphans, &self.reads, now_ms, limit)
            .await?;
        records(&rows)
    }

    /// [`TaskStore::claim_runnable`](crate::store::TaskStore::claim_runnable):
    /// one transaction that holds the runnable rows it reads and writes the
    /// claims `pick` makes of them (`claims.rs`).
    pub(crate) async fn claim_runnable(
        &self,
        round: ClaimQuery<'_>,
    ) -> Result<Vec<Arc<TaskRecord>>> {
        claims::claim_round(&self.writes, self.claims.as_ref(), &self.sql, round).await
    }

    /// The rows of `query` bound to `(now_ms, limit)`: at most `limit`.
    async fn up_to(
        &self,
        query: &Arc<str>,
        pool: &Pool<DB>,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<DB::Row>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        sqlx::query(sql(query))
            .bind(now_ms)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(pool)
            .await
            .map_err(backend)
    }

    pub(crate) async fn list(&self, q: ListQuery<'_>) -> Result<Vec<Arc<TaskRecord>>> {
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        let statement =
            &self.sql.list[usize::from(q.owner.is_some())][usize::from(q.after.is_some())];
        let mut query = sqlx::query(sql(statement)).bind(q.now_ms);
        if let Some(owner) = q.owner {
            query = query.bind(owner);
        }
        query = query.bind(era_name(q.era));
        if let Some((created, id)) = q.after {
            query = query.bind(created).bind(id);
        }
        let rows = query
            .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
            .fetch_all(&self.reads)
            .await
            .map_err(backend)?;
        records(&rows)
    }

    // The operator API (`operator.rs` writes the SQL).

    /// `s` with its parameters bound.
    fn bound(s: &Sql) -> sqlx::query::Query<'_, DB, DB::Arguments> {
        // Built from a validated table name, constants and placeholders.
        let mut query = sqlx::query(AssertSqlSafe(s.text.as_str()));
        for arg in &s.args {
            query = match arg {
                Arg::Int(n) => query.bind(*n),
                Arg::Text(text) => query.bind(text.as_str()),
            };
        }
        query
    }

    /// One page of `query`, read within [`page_time`](Self::with_page_time)
    /// (PostgreSQL: a `statement_timeout`; SQLite: a progress handler); a
    /// page that runs past it (a search many old rows match, a sort of
    /// many rows) is read again as a bounded walk of the creation index.
    pub(crate) async fn find(&self, query: &TaskQuery, now_ms: i64) -> Result<Found> {
        let d = &DB::DIALECT;
        if self.page_time.is_zero() {
            return self.walk(query, now_ms).await;
        }
        let s = operator::find(d, &self.table, query, now_ms);
        let read = match d.begin_timed_page {
            Some(begin) => self.timed_transaction(begin, &s).await,
            None => self.timed_connection(&s).await,
        };
        match read {
            Ok(rows) => records(&rows).map(Found::all),
            Err(e) if is_code(&e, d.timed_out) => self.walk(query, now_ms).await,
            Err(e) => Err(backend(e)),
        }
    }

    /// `s` in a transaction that `begin` (with `{ms}`) bounds in time.
    async fn timed_transaction(
        &self,
        begin: &str,
        s: &Sql,
    ) -> std::result::Result<Vec<DB::Row>, sqlx::Error> {
        let ms = self.page_time.as_millis().max(1).to_string();
        let begin = AssertSqlSafe(begin.replace("{ms}", &ms));
        let mut tx = self.reads.begin_with(begin).await?;
        // An error drops the transaction, which rolls it back.
        let rows = Self::bound(s).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// `s` on a connection the engine bounds in time (`limit_time`).
    async fn timed_connection(&self, s: &Sql) -> std::result::Result<Vec<DB::Row>, sqlx::Error> {
        let mut conn = self.reads.acquire().await?;
        let armed = Arc::new(AtomicBool::new(true));
        // Disarmed however this ends: read, failed or dropped.
        let _disarm = Disarm(Arc::clone(&armed));
        DB::limit_time(&mut conn, self.page_time, armed).await?;
        Self::bound(s).fetch_all(&mut *conn).await
    }

    /// The page of `query` among the next `WALK_BUDGET` rows of the
    /// creation index below its cursor, and where that walk ended if the
    /// page is short of full.
    async fn walk(&self, query: &TaskQuery, now_ms: i64) -> Result<Found> {
        let d = &DB::DIALECT;
        let mut tx = self.reads.begin_with(d.begin_walk).await.map_err(backend)?;
        let end = operator::walk_end(&self.table, query);
        let end: Option<(i64, String)> = match Self::bound(&end)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?
        {
            Some(row) => Some((
                row.try_get(0).map_err(backend)?,
                row.try_get(1).map_err(backend)?,
            )),
            None => None,
        };
        let bound = end.as_ref().map(|(at, id)| (*at, id.as_str()));
        let s = operator::find_down_to(d, &self.table, query, now_ms, bound);
        let rows = Self::bound(&s).fetch_all(&mut *tx).await.map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        let tasks = records(&rows)?;
        Ok(match end {
            Some((at, id)) if tasks.len() < query.page_size() => {
                Found::stopped(tasks, TaskCursor::at(at, id))
            }
            _ => Found::all(tasks),
        })
    }

    pub(crate) async fn purge(&self, query: &TaskQuery, now_ms: i64) -> Result<Purged> {
        let Some(s) = operator::purge(&DB::DIALECT, &self.table, query, now_ms) else {
            return Ok(Purged::default());
        };
        let done = Self::bound(&s)
            .execute(&self.writes)
            .await
            .map_err(backend)?;
        Ok(Purged::all(DB::rows_affected(&done)))
    }

    /// The `(text, number)` rows of statement `text` at `now_ms`.
    async fn pairs(&self, text: &str, now_ms: i64) -> Result<Vec<(String, i64)>> {
        let rows = sqlx::query(AssertSqlSafe(text))
            .bind(now_ms)
            .fetch_all(&self.reads)
            .await
            .map_err(backend)?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get(0).map_err(backend)?,
                    row.try_get(1).map_err(backend)?,
                ))
            })
            .collect()
    }

    /// The `(key, count)` rows of statement `text` at `now_ms`, as a map.
    async fn counts(&self, text: &str, now_ms: i64) -> Result<BTreeMap<String, u64>> {
        let rows = self.pairs(text, now_ms).await?;
        Ok(rows
            .into_iter()
            .map(|(key, n)| (key, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    pub(crate) async fn ended(&self, query: EndedQuery) -> Result<EndedCounts> {
        let rows: Vec<(String, i64, i64)> =
            sqlx::query_as(AssertSqlSafe(self.stats.ended.as_str()))
                .bind(query.now_ms)
                .bind(query.since_ms)
                .bind(query.bucket_ms.max(1))
                .fetch_all(&self.reads)
                .await
                .map_err(backend)?;
        let mut counts = query.counts();
        for (status, span, n) in rows {
            let Some(status) = TaskStatus::from_wire(&status) else {
                continue;
            };
            let at = query
                .since_ms
                .saturating_add(span.saturating_mul(query.bucket_ms.max(1)));
            counts.add_n(status, at, u64::try_from(n).unwrap_or(0));
        }
        Ok(counts)
    }

    pub(crate) async fn stats(&self, now_ms: i64) -> Result<TaskStats> {
        let q = &self.stats;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let waiting = |rows: Vec<(String, i64)>, shift: i64| {
            rows.into_iter().next().map(|(id, at)| WaitingTask {
                id,
                since_ms: at.saturating_add(shift),
            })
        };
        let queued: i64 = sqlx::query(AssertSqlSafe(q.queued.as_str()))
            .bind(now_ms)
            .fetch_one(&self.reads)
            .await
            .and_then(|row| row.try_get(0))
            .map_err(backend)?;
        let longest = self.pairs(&q.oldest_input, now_ms).await?;
        Ok(TaskStats {
            at_ms: now_ms,
            by_status: self.counts(&q.by_status, now_ms).await?,
            queued: count(queued),
            // A queued task's lease ended one millisecond before it was
            // queued.
            oldest_queued: waiting(self.pairs(&q.oldest_queued, now_ms).await?, 1),
            oldest_input_required: waiting(longest.clone(), 0),
            longest_input_required: longest
                .into_iter()
                .map(|(id, since_ms)| WaitingTask { id, since_ms })
                .collect(),
            running_by_holder: self.counts(&q.running, now_ms).await?,
        })
    }
}

/// Clears a time bound's flag when dropped.
struct Disarm(Arc<AtomicBool>);

impl Drop for Disarm {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Whether `e` is the database's error `code`.
fn is_code(e: &sqlx::Error, code: &str) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == code)
}

/// A stable 64-bit key for the migration lock of `table` (FNV-1a).
fn lock_key(table: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "mcp_task_layer:".bytes().chain(table.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(h.to_ne_bytes())
}
