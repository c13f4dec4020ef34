//! Claim rounds (`TaskStore::claim_runnable`), and the connection a store's
//! rounds run on where the engine can keep one for them (PostgreSQL,
//! issue 33).
//!
//! A round holds the oldest runnable rows, lets `pick` claim them and
//! writes the claims, in one transaction. On a pooled connection that is
//! five round trips: `BEGIN` with the planner settings, the read, the
//! `UPDATE` of the claimed rows, `COMMIT`, and the test (a lone `Sync`)
//! sqlx makes of every connection given back to its pool. A
//! [`ClaimLine`] keeps one connection for claims, whose session holds the
//! settings, the read and the `UPDATE` as prepared statements: a round is
//! `BEGIN` and the read in one round trip, then the `UPDATE` (its
//! parameters as literals, `literal.rs`) and `COMMIT` in another.
//!
//! That connection is not the pool's (its session differs from the pool's
//! connections', and a pool could not lend it to anyone else while a
//! worker waits for work): it is one connection beyond `max_connections`,
//! opened with the pool's options at a process's first claim round, and
//! its statements are not logged (the `UPDATE`'s text holds the records,
//! arguments included; the pool's statements are logged without their
//! parameters). It is
//! never reused after anything went wrong: an error, or a round whose
//! caller went away, drops it, and PostgreSQL rolls back what it had
//! open. One round at a time has it; a round that finds it out runs on
//! the pool as before.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::{
    AssertSqlSafe, ColumnIndex, ConnectOptions, Connection, Database, Decode, Encode, Executor,
    IntoArguments, Pool, Row, Transaction, Type,
};

use super::dialect::Engine;
use super::row::{backend, bind_row, records, to_i64, Columns};
use super::statements::{sql, Statements};
use crate::store::{ClaimQuery, Result, TaskRecord};

/// A held connection idle for longer is tested before a round (as
/// `postgres.rs` tests a pooled one).
const TEST_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The connection claim rounds run on.
pub(super) struct ClaimLine<DB: Database> {
    pool: Pool<DB>,
    /// Run once on a new connection: its session's settings, and the
    /// read prepared.
    setup: String,
    /// `BEGIN` and the prepared read: `{now}` and `{limit}` are integers.
    start: &'static str,
    /// The prepared write of the claims and `COMMIT`: `{arrays}` are the
    /// write's parameters as literals.
    finish: Option<&'static str>,
    state: Mutex<State<DB>>,
}

enum State<DB: Database> {
    /// None is open: the next round opens one.
    Closed,
    /// Between rounds, since the instant.
    Idle(DB::Connection, Instant),
    /// A round has it (or is opening it).
    Out,
    /// The store was closed: none is opened again.
    Released,
}

impl<DB: Database> std::fmt::Debug for ClaimLine<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimLine").finish_non_exhaustive()
    }
}

/// A round's hold on the line's connection (which the round has beside
/// it). Dropped without [`Out::give_back`] (an error, or the round's
/// caller gone, which drops the connection too), the line is closed and
/// the next round opens another connection.
struct Out<'l, DB: Database> {
    line: &'l ClaimLine<DB>,
    back: bool,
}

impl<DB: Database> Out<'_, DB> {
    /// Keep `conn` for the next round: this one ended with `COMMIT` or
    /// `ROLLBACK`.
    fn give_back(mut self, conn: DB::Connection) {
        let mut state = self.line.state();
        if !matches!(*state, State::Released) {
            *state = State::Idle(conn, Instant::now());
        }
        drop(state);
        self.back = true;
    }
}

impl<DB: Database> Drop for Out<'_, DB> {
    fn drop(&mut self) {
        let mut state = self.line.state();
        if !self.back && !matches!(*state, State::Released) {
            *state = State::Closed;
        }
    }
}

impl<DB: Database> ClaimLine<DB> {
    fn state(&self) -> std::sync::MutexGuard<'_, State<DB>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Close the connection, and the one a round has when it ends; open
    /// none again ([`PostgresStore::close`]).
    ///
    /// [`PostgresStore::close`]: super::PostgresStore::close
    pub(super) fn release(&self) {
        *self.state() = State::Released;
    }
}

impl<DB> ClaimLine<DB>
where
    DB: Engine,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    /// A line over `pool` where the engine has one (`Dialect::claim_line`,
    /// which prepares `claim_update`) for the statements `sql_of` of the
    /// table `table` (its bare name, a validated one).
    pub(super) fn new(pool: &Pool<DB>, sql_of: &Statements, table: &str) -> Option<Self> {
        let line = DB::DIALECT.claim_line.as_ref()?;
        let update = sql_of.claim_update.as_deref()?;
        Some(ClaimLine {
            pool: pool.clone(),
            setup: line
                .setup
                .replace("{n}", table)
                .replace("{claimable}", &sql_of.claimable)
                .replace("{update}", update),
            start: line.start,
            finish: line.finish,
            state: Mutex::new(State::Closed),
        })
    }

    /// The connection, if no round has it: tested if it sat idle, opened
    /// and set up if none is open. `None` while another round has it.
    async fn lend(
        &self,
    ) -> std::result::Result<Option<(Out<'_, DB>, DB::Connection)>, sqlx::Error> {
        let idle = {
            let mut state = self.state();
            match std::mem::replace(&mut *state, State::Out) {
                held @ (State::Out | State::Released) => {
                    *state = held;
                    return Ok(None);
                }
                State::Idle(conn, since) => Some((conn, since)),
                State::Closed => None,
            }
        };
        // From here, dropped unreturned, the line is closed again.
        let out = Out {
            line: self,
            back: false,
        };
        if let Some((mut conn, since)) = idle {
            if since.elapsed() < TEST_AFTER_IDLE || conn.ping().await.is_ok() {
                return Ok(Some((out, conn)));
            }
        }
        // Its statements are not logged: the claims' `UPDATE` carries the
        // records (arguments included) in its text.
        let options = (*self.pool.connect_options())
            .clone()
            .disable_statement_logging();
        let mut conn = DB::Connection::connect_with(&options).await?;
        sqlx::raw_sql(AssertSqlSafe(self.setup.clone()))
            .execute(&mut conn)
            .await?;
        Ok(Some((out, conn)))
    }
}

/// Where a round runs: the line's connection, or a transaction of the
/// pool.
enum On<'l, DB: Database> {
    Line(Out<'l, DB>, DB::Connection),
    Pool(Transaction<'static, DB>),
}

impl<DB: Database> On<'_, DB> {
    fn conn(&mut self) -> &mut DB::Connection {
        match self {
            On::Line(_, conn) => conn,
            On::Pool(tx) => tx,
        }
    }
}

/// [`TaskStore::claim_runnable`](crate::store::TaskStore::claim_runnable)
/// over `pool` and the statements `sql_of`: one transaction that holds
/// the runnable rows it reads and writes the claims `pick` makes of them;
/// on `line`'s connection if there is one and no other round has it.
pub(super) async fn claim_round<DB>(
    pool: &Pool<DB>,
    line: Option<&ClaimLine<DB>>,
    sql_of: &Statements,
    round: ClaimQuery<'_>,
) -> Result<Vec<Arc<TaskRecord>>>
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
    // Every claim goes through `pick` (`queued` is for stores whose read
    // cannot call it).
    let ClaimQuery {
        now_ms,
        limit,
        pick,
        queued: _,
    } = round;
    if limit == 0 {
        return Ok(Vec::new());
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let lent = match line {
        Some(line) => line.lend().await.map_err(backend)?,
        None => None,
    };
    let (mut on, rows) = match lent {
        Some((out, mut conn)) => {
            // Two integers in the text: nothing to quote.
            let start = out
                .line
                .start
                .replace("{now}", &now_ms.to_string())
                .replace("{limit}", &limit.to_string());
            let rows = sqlx::raw_sql(AssertSqlSafe(start))
                .fetch_all(&mut conn)
                .await
                .map_err(backend)?;
            (On::Line(out, conn), rows)
        }
        None => {
            let mut tx = pool
                .begin_with(DB::DIALECT.begin_claim)
                .await
                .map_err(backend)?;
            let rows = sqlx::query(sql(&sql_of.claimable))
                .bind(now_ms)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await
                .map_err(backend)?;
            (On::Pool(tx), rows)
        }
    };
    let mut picked = Vec::new();
    for record in records(&rows)? {
        let Some(next) = pick(&record) else { continue };
        picked.push((Arc::new(next), to_i64(record.version, "expected version")?));
    }
    let (mut won, mut committed) = (Vec::new(), false);
    match &sql_of.claim_update {
        Some(update) if !picked.is_empty() => {
            let rows = picked
                .iter()
                .map(|(next, _)| Columns::of(TaskRecord::clone(next)))
                .collect::<Result<Vec<_>>>()?;
            let rows: Vec<&Columns> = rows.iter().collect();
            let expected: Vec<i64> = picked.iter().map(|(_, v)| *v).collect();
            // On the line, the write and its `COMMIT` go as one query.
            let fused = match &on {
                On::Line(out, _) => out.line.finish.and_then(|finish| {
                    DB::claim_literals(&rows, &expected)
                        .map(|arrays| finish.replace("{arrays}", &arrays))
                }),
                On::Pool(_) => None,
            };
            committed = fused.is_some();
            let written = match fused {
                Some(text) => sqlx::raw_sql(AssertSqlSafe(text))
                    .fetch_all(on.conn())
                    .await
                    .map_err(backend)?,
                None => DB::bind_claims(sqlx::query(sql(update)), &rows, &expected)
                    .fetch_all(on.conn())
                    .await
                    .map_err(backend)?,
            };
            let written = written
                .iter()
                .map(|row| row.try_get::<String, _>(0).map_err(backend))
                .collect::<Result<std::collections::HashSet<_>>>()?;
            // Held since the read, every row still has the version read.
            won.extend(
                picked
                    .into_iter()
                    .filter(|(next, _)| written.contains(&next.id))
                    .map(|(next, _)| next),
            );
        }
        _ => {
            for (next, expected) in picked {
                let c = Columns::of(TaskRecord::clone(&next))?;
                let done = bind_row(sqlx::query(sql(&sql_of.replace)), &c)
                    .bind(expected)
                    .execute(on.conn())
                    .await
                    .map_err(backend)?;
                // Held since the read, the row still has the version read.
                if DB::rows_affected(&done) > 0 {
                    won.push(next);
                }
            }
        }
    }
    match on {
        On::Line(out, mut conn) => {
            if !committed {
                let end = if won.is_empty() { "ROLLBACK" } else { "COMMIT" };
                sqlx::raw_sql(end)
                    .execute(&mut conn)
                    .await
                    .map_err(backend)?;
            }
            out.give_back(conn);
        }
        On::Pool(tx) if won.is_empty() => tx.rollback().await.map_err(backend)?,
        On::Pool(tx) => tx.commit().await.map_err(backend)?,
    }
    Ok(won)
}
