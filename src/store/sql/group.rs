//! Group commit: the inserts and compare-and-set updates that callers make
//! at the same time go out in one transaction (PostgreSQL, issue 33).
//!
//! Every write that a client can see fires the table's `NOTIFY` trigger,
//! and PostgreSQL serializes the commits of notifying transactions under
//! one lock held until the commit is flushed: one fsync after another, so
//! a fleet's writes could not outrun the disk however many workers it
//! had. Writes that arrive while a group is out wait for the next one and
//! go together: one commit, one flush, for all of them. Each is still its
//! own statement (an insert or a compare-and-set on the version read), and
//! each caller's answer comes after the commit, so nothing a caller is
//! told differs from a write of its own. A write alone goes out alone,
//! without a transaction, as before.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use sqlx::pool::PoolConnection;
use sqlx::{
    ColumnIndex, Connection, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type,
};
use tokio::sync::oneshot;

use super::dialect::Engine;
use super::row::{backend, bind_row, Columns};
use crate::store::{Error, Result};

/// The most writes one transaction carries.
const MAX_GROUP: usize = 64;

/// One write: an insert, or an update over the expected version.
pub(super) enum Write {
    Insert(Columns),
    Replace(Columns, i64),
}

impl Write {
    fn id(&self) -> &str {
        match self {
            Write::Insert(c) | Write::Replace(c, _) => &c.id,
        }
    }
}

type Waiting = (Write, oneshot::Sender<Result<()>>);

/// The connection a run of groups writes on, taken from the pool at its
/// first write and given back when no write waits: sqlx tests every
/// connection given back to its pool with a round trip (a `Sync`), which
/// cost one more round trip per group.
type Held<DB> = Option<PoolConnection<DB>>;

/// The SQL a group runs.
#[derive(Clone, Debug)]
pub(super) struct GroupSql {
    pub(super) insert: Arc<str>,
    pub(super) replace: Arc<str>,
    pub(super) exists: Arc<str>,
    /// The compare-and-set of many rows in one statement (the claim's,
    /// `Dialect::claim_update`), where the engine has one.
    pub(super) replace_many: Option<Arc<str>>,
}

/// The writes to one pool that wait for the next group, and whether a
/// group is out.
pub(super) struct Group<DB: Database> {
    pool: Pool<DB>,
    sql: GroupSql,
    queue: Mutex<(Vec<Waiting>, bool)>,
}

impl<DB: Database> std::fmt::Debug for Group<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").finish_non_exhaustive()
    }
}

impl<DB> Group<DB>
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
    pub(super) fn new(pool: Pool<DB>, sql: GroupSql) -> Self {
        Group {
            pool,
            sql,
            queue: Mutex::default(),
        }
    }

    /// Write `write` with the next group and wait for its outcome. The
    /// first writer while no group is out starts the loop that writes
    /// groups until none waits (a task of its own, so that a caller that
    /// goes away strands no one).
    pub(super) async fn write(self: &Arc<Self>, write: Write) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.0.push((write, tx));
            !std::mem::replace(&mut queue.1, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).drain());
        }
        rx.await.unwrap_or_else(|_| {
            Err(Error::Backend(
                "the group commit stopped before answering".into(),
            ))
        })
    }

    async fn drain(self: Arc<Self>) {
        let mut held: Held<DB> = None;
        loop {
            let batch: Vec<Waiting> = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if queue.0.is_empty() {
                    queue.1 = false;
                    return;
                }
                let n = queue.0.len().min(MAX_GROUP);
                queue.0.drain(..n).collect()
            };
            let (writes, answers): (Vec<Write>, Vec<_>) = batch.into_iter().unzip();
            let results = if writes.len() == 1 {
                vec![self.one(&mut held, &writes[0]).await]
            } else {
                let together = self.together(&mut held, &writes).await;
                if together.is_err() {
                    // The connection may be broken: a fresh one next.
                    held = None;
                }
                match together {
                    Ok(results) => results,
                    // The commit failed: it may have happened, so each
                    // caller hears the failure, as of a write of its own.
                    Err(Failed::Commit(e)) => {
                        let e = Arc::new(e);
                        writes
                            .iter()
                            .map(|_| Err(Error::Backend(Box::new(SharedError(Arc::clone(&e))))))
                            .collect()
                    }
                    // Rolled back before the commit (one write's statement
                    // failed, or the connection): each alone, so that each
                    // caller hears its own outcome.
                    Err(Failed::Before) => {
                        let mut results = Vec::with_capacity(writes.len());
                        for w in &writes {
                            results.push(self.one(&mut held, w).await);
                        }
                        results
                    }
                }
            };
            for (answer, result) in answers.into_iter().zip(results) {
                let _ = answer.send(result);
            }
        }
    }

    /// Run `w` on `exec`: its outcome as the store reports it, or the
    /// database's error.
    async fn apply(
        &self,
        exec: &mut DB::Connection,
        w: &Write,
    ) -> std::result::Result<Result<()>, sqlx::Error> {
        let q = |s: &Arc<str>| sqlx::query(sqlx::AssertSqlSafe(Arc::clone(s)));
        match w {
            Write::Insert(c) => {
                let done = bind_row(q(&self.sql.insert), c).execute(&mut *exec).await?;
                Ok(match DB::rows_affected(&done) {
                    0 => Err(Error::AlreadyExists),
                    _ => Ok(()),
                })
            }
            Write::Replace(c, expected) => {
                let done = bind_row(q(&self.sql.replace), c)
                    .bind(*expected)
                    .execute(&mut *exec)
                    .await?;
                if DB::rows_affected(&done) > 0 {
                    return Ok(Ok(()));
                }
                self.lost(exec, &c.id).await
            }
        }
    }

    /// A compare-and-set of row `id` that changed no row: tell a missing
    /// row from a changed one.
    async fn lost(
        &self,
        exec: &mut DB::Connection,
        id: &str,
    ) -> std::result::Result<Result<()>, sqlx::Error> {
        let exists = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&self.sql.exists)))
            .bind(id)
            .fetch_optional(&mut *exec)
            .await?;
        Ok(Err(if exists.is_some() {
            Error::Conflict
        } else {
            Error::NotFound
        }))
    }

    /// The held connection, taken from the pool if none is.
    async fn connection<'h>(
        &self,
        held: &'h mut Held<DB>,
    ) -> std::result::Result<&'h mut PoolConnection<DB>, sqlx::Error> {
        Ok(match held {
            Some(conn) => conn,
            None => held.insert(self.pool.acquire().await?),
        })
    }

    /// `w` alone, on the held connection, outside a transaction.
    async fn one(&self, held: &mut Held<DB>, w: &Write) -> Result<()> {
        let conn = self.connection(held).await.map_err(backend)?;
        match self.apply(conn, w).await {
            Ok(outcome) => outcome,
            Err(e) => {
                // The connection may be broken: a fresh one next.
                *held = None;
                Err(backend(e))
            }
        }
    }

    /// `writes` in one transaction, in order; their outcomes once committed.
    async fn together(
        &self,
        held: &mut Held<DB>,
        writes: &[Write],
    ) -> std::result::Result<Vec<Result<()>>, Failed> {
        let conn = self.connection(held).await.map_err(|_| Failed::Before)?;
        // Rows are locked in the order of their ids (the writes to one row
        // in the order they came), so that two groups, of this process or
        // another, never wait on each other in a cycle.
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by(|&a, &b| writes[a].id().cmp(writes[b].id()));
        if let Some(many) = &self.sql.replace_many {
            if let Some(rows) = replaces_of_distinct_rows(writes, &order) {
                return self.replaced_together(conn, many, writes, &rows).await;
            }
        }
        let mut tx = conn
            .begin_with(DB::DIALECT.begin_write)
            .await
            .map_err(|_| Failed::Before)?;
        let mut results: Vec<Option<Result<()>>> = (0..writes.len()).map(|_| None).collect();
        for i in order {
            let outcome = self.apply(&mut tx, &writes[i]).await;
            results[i] = Some(outcome.map_err(|_| Failed::Before)?);
        }
        tx.commit().await.map_err(Failed::Commit)?;
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or(Err(Error::Conflict)))
            .collect())
    }

    /// A group of compare-and-sets of distinct rows (`rows`: each with the
    /// version it expects, in id order) as one statement, the claim's: a
    /// transaction of three round trips whatever its size, where one
    /// statement a write made it two more than the writes (issue 33).
    /// Each write still changes its row only at the version it expects,
    /// the rows are locked in id order (the statement's plan is a nested
    /// loop over the rows given, pinned as the claim's), and every caller
    /// hears its own outcome after the commit.
    async fn replaced_together(
        &self,
        conn: &mut PoolConnection<DB>,
        many: &Arc<str>,
        writes: &[Write],
        rows: &[(&Columns, i64)],
    ) -> std::result::Result<Vec<Result<()>>, Failed> {
        let mut tx = conn
            .begin_with(DB::DIALECT.begin_claim)
            .await
            .map_err(|_| Failed::Before)?;
        let (columns, expected): (Vec<&Columns>, Vec<i64>) = rows.iter().copied().unzip();
        let written = DB::bind_claims(
            sqlx::query(sqlx::AssertSqlSafe(Arc::clone(many))),
            &columns,
            &expected,
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(|_| Failed::Before)?;
        let written = written
            .iter()
            .map(|row| row.try_get::<String, _>(0))
            .collect::<std::result::Result<HashSet<String>, _>>()
            .map_err(|_| Failed::Before)?;
        let mut results = Vec::with_capacity(writes.len());
        for w in writes {
            let outcome = if written.contains(w.id()) {
                Ok(())
            } else {
                self.lost(&mut tx, w.id())
                    .await
                    .map_err(|_| Failed::Before)?
            };
            results.push(outcome);
        }
        tx.commit().await.map_err(Failed::Commit)?;
        Ok(results)
    }
}

/// Each of `writes` (in id order, `order`) with the version it expects,
/// when all are compare-and-sets and no two are of one row (two of one
/// row go one after the other, as they came).
fn replaces_of_distinct_rows<'w>(
    writes: &'w [Write],
    order: &[usize],
) -> Option<Vec<(&'w Columns, i64)>> {
    let mut rows: Vec<(&Columns, i64)> = Vec::with_capacity(order.len());
    for &i in order {
        let Write::Replace(c, expected) = &writes[i] else {
            return None;
        };
        if rows.last().is_some_and(|(last, _)| last.id == c.id) {
            return None;
        }
        rows.push((c, *expected));
    }
    Some(rows)
}

/// How a group's transaction failed.
enum Failed {
    /// Before its commit: nothing of it was written.
    Before,
    /// At its commit: it may or may not have been written.
    Commit(sqlx::Error),
}

/// One commit's failure, told to each of its writers.
#[derive(Debug)]
struct SharedError(Arc<sqlx::Error>);

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the commit of a group of writes failed: {}", self.0)
    }
}

impl std::error::Error for SharedError {}
