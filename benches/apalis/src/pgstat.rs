//! With `FVA_PG_STATS=1` on PostgreSQL, a backlog drain also prints what
//! its statements were, from the `pg_stat_statements` extension (the
//! cluster must load it: `shared_preload_libraries`, then `CREATE
//! EXTENSION pg_stat_statements`), reset when the workers start: claim
//! rounds (the `… FOR UPDATE SKIP LOCKED` reads) and the rows a round
//! read, statements and `COMMIT`s a task (the bench's own counts left
//! out), and WAL flushes a task (`pg_stat_wal.wal_sync`, the cluster's).

use sqlx::{Connection, PgConnection, Row};

use crate::side::Engine;

/// The counters at a drain's start.
pub struct PgStats {
    conn: PgConnection,
    wal_sync: i64,
}

async fn wal_sync(conn: &mut PgConnection) -> i64 {
    sqlx::query("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(conn)
        .await
        .map_or(0, |row| row.get(0))
}

impl PgStats {
    /// Reset the statements' counters, if asked for on PostgreSQL.
    pub async fn start(engine: &Engine) -> Option<PgStats> {
        if !engine.is_postgres() || std::env::var("FVA_PG_STATS").as_deref() != Ok("1") {
            return None;
        }
        let mut conn = PgConnection::connect(&engine.url).await.expect("postgres");
        sqlx::query("SELECT pg_stat_statements_reset()")
            .execute(&mut conn)
            .await
            .expect("pg_stat_statements (FVA_PG_STATS=1)");
        let wal_sync = wal_sync(&mut conn).await;
        Some(PgStats { conn, wal_sync })
    }

    /// Print what `tasks` drained tasks took.
    pub async fn print(mut self, system: &str, tasks: usize) {
        let row = sqlx::query(
            "SELECT \
             coalesce(sum(calls) FILTER (WHERE query LIKE '%SKIP LOCKED%' \
               AND query NOT LIKE 'DELETE%'), 0)::int8, \
             coalesce(sum(rows) FILTER (WHERE query LIKE '%SKIP LOCKED%' \
               AND query NOT LIKE 'DELETE%'), 0)::int8, \
             coalesce(sum(calls) FILTER (WHERE query NOT LIKE '%count(*)%' \
               AND query NOT LIKE '%pg_stat%'), 0)::int8, \
             coalesce(sum(calls) FILTER (WHERE upper(query) LIKE 'COMMIT%'), 0)::int8 \
             FROM pg_stat_statements",
        )
        .fetch_one(&mut self.conn)
        .await
        .expect("pg_stat_statements");
        let (rounds, rows, statements, commits): (i64, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let flushes = wal_sync(&mut self.conn).await - self.wal_sync;
        let per = |n: i64| n as f64 / tasks as f64;
        println!(
            "  {system} statements: claim rounds {rounds} ({:.2} rows a round), \
             {:.2} statements a task, {:.2} COMMITs a task, {:.2} WAL flushes a task",
            rows as f64 / rounds.max(1) as f64,
            per(statements),
            per(commits),
            per(flushes)
        );
    }
}
