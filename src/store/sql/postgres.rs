//! [`PostgresStore`]: tasks in PostgreSQL, shared by every replica.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use sqlx::pool::PoolConnectionMetadata;
use sqlx::postgres::{PgArguments, PgConnection, PgListener, PgPoolOptions, PgQueryResult};
use sqlx::{Connection, Postgres};

use super::core::SqlCore;
use super::dialect::{ClaimLineSql, Dialect, Engine};
use super::literal::{claim_arrays, Arrays, Literals};
use super::options::SqlOptions;
use super::row::Columns;
use crate::store::{parse_change, BoxFuture, Error, Result, TaskChange};

/// Default pool size.
const CONNECTIONS: u32 = 10;

/// A pooled connection idle for longer is pinged before use.
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Check a connection that sat idle (the server may have restarted or a
/// proxy may have cut it since), but not one in steady use: pinging on every
/// acquire, sqlx's default, costs a round trip per statement, which halved
/// `get` throughput in benches/stores.rs. HikariCP does the same (its
/// `aliveBypassWindowMs`). A connection that fails the ping is closed and
/// another one used.
fn ping_if_idle(
    conn: &mut PgConnection,
    meta: PoolConnectionMetadata,
) -> BoxFuture<'_, Result<bool, sqlx::Error>> {
    Box::pin(async move {
        if meta.idle_for >= PING_AFTER_IDLE {
            conn.ping().await?;
        }
        Ok(true)
    })
}

/// The planner settings of a claim (`begin_claim`'s, and the session's of
/// the claims' own connection), each after `$set`.
macro_rules! claim_settings {
    ($set:literal) => {
        concat!(
            $set,
            " enable_bitmapscan = off; ",
            $set,
            " enable_seqscan = off; ",
            $set,
            " enable_hashjoin = off; ",
            $set,
            " enable_mergejoin = off; ",
            $set,
            " plan_cache_mode = force_generic_plan"
        )
    };
}

impl Engine for Postgres {
    const DIALECT: Dialect = Dialect {
        migrations: &[
            &[
                // `COLLATE "C"`: ids and owners compare byte by byte, as in
                // every other store, whatever the database's locale.
                // `record` is `json`, not `jsonb`: kept exactly as written, and
                // `\u0000` in a tool's result stays storable.
                "CREATE TABLE IF NOT EXISTS {t} (
                id text COLLATE \"C\" PRIMARY KEY,
                owner text COLLATE \"C\",
                era text NOT NULL,
                status text NOT NULL,
                created_at_ms bigint NOT NULL,
                updated_at_ms bigint NOT NULL,
                expires_at_ms bigint,
                version bigint NOT NULL,
                record json NOT NULL
            )",
                "CREATE INDEX IF NOT EXISTS \"{n}_owner_idx\" ON {t} (owner, created_at_ms, id) \
             WHERE owner IS NOT NULL",
                // PostgreSQL orders by the columns after `owner` only under
                // `owner = …`, not under `owner IS NULL`: ownerless tasks get an
                // index of their own, or listing them would sort them all.
                "CREATE INDEX IF NOT EXISTS \"{n}_unowned_idx\" ON {t} (created_at_ms, id) \
             WHERE owner IS NULL",
                "CREATE INDEX IF NOT EXISTS \"{n}_expiry_idx\" ON {t} (expires_at_ms) \
             WHERE expires_at_ms IS NOT NULL",
            ],
            &[
                // 2: the lease of a `working` task, for finding orphans.
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS lease_until_ms bigint",
                "UPDATE {t} SET lease_until_ms = (record->'lease'->>'until_ms')::bigint \
             WHERE status = 'working'",
                "CREATE INDEX IF NOT EXISTS \"{n}_lease_idx\" ON {t} (lease_until_ms) \
             WHERE lease_until_ms IS NOT NULL",
            ],
            &[
                // 3: every change a client can see (not a lease renewal) is
                // announced on channel `<table>_changes` as
                // "<version> <status> <id>", delivered at commit.
                "CREATE OR REPLACE FUNCTION \"{n}_notify\"() RETURNS trigger \
                 LANGUAGE plpgsql AS $f$ BEGIN \
                 PERFORM pg_notify('{n}_changes', \
                     NEW.version::text || ' ' || NEW.status || ' ' || NEW.id); \
                 RETURN NULL; END $f$",
                "DROP TRIGGER IF EXISTS \"{n}_changes\" ON {t}",
                "CREATE TRIGGER \"{n}_changes\" AFTER UPDATE ON {t} FOR EACH ROW \
                 WHEN (OLD.status IS DISTINCT FROM NEW.status \
                 OR OLD.updated_at_ms IS DISTINCT FROM NEW.updated_at_ms) \
                 EXECUTE FUNCTION \"{n}_notify\"()",
            ],
            &[
                // 4: listings are of one owner and one era; the indexes walk
                // only those rows.
                "CREATE INDEX IF NOT EXISTS \"{n}_owned_list\" \
                 ON {t} (owner, era, created_at_ms, id) WHERE owner IS NOT NULL",
                "CREATE INDEX IF NOT EXISTS \"{n}_unowned_list\" \
                 ON {t} (era, created_at_ms, id) WHERE owner IS NULL",
                "DROP INDEX IF EXISTS \"{n}_owner_idx\"",
                "DROP INDEX IF EXISTS \"{n}_unowned_idx\"",
                // Migration 3 skipped every write that kept `status` and
                // `updated_at_ms`, and so a partial answer in the same
                // millisecond. Skip only what a renewal is: a write that
                // moves the lease and nothing a client sees.
                "DROP TRIGGER IF EXISTS \"{n}_changes\" ON {t}",
                "CREATE TRIGGER \"{n}_changes\" AFTER UPDATE ON {t} FOR EACH ROW \
                 WHEN (OLD.status IS DISTINCT FROM NEW.status \
                 OR OLD.updated_at_ms IS DISTINCT FROM NEW.updated_at_ms \
                 OR OLD.lease_until_ms IS NOT DISTINCT FROM NEW.lease_until_ms) \
                 EXECUTE FUNCTION \"{n}_notify\"()",
            ],
            &[
                // 5: a task created queued for a worker (its lease ended
                // before it was made) is announced, so idle workers wake at
                // once; other inserts stay silent, as before.
                "DROP TRIGGER IF EXISTS \"{n}_queued\" ON {t}",
                "CREATE TRIGGER \"{n}_queued\" AFTER INSERT ON {t} FOR EACH ROW \
                 WHEN (NEW.lease_until_ms < NEW.created_at_ms) \
                 EXECUTE FUNCTION \"{n}_notify\"()",
            ],
            &[
                // 6: the operator API lists every task newest first, maybe
                // of one status or one tool: an index for each, walked
                // backwards from a page's cursor.
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS tool_name text COLLATE \"C\"",
                "UPDATE {t} SET tool_name = record->>'tool_name' WHERE tool_name IS NULL",
                "CREATE INDEX IF NOT EXISTS \"{n}_created_idx\" ON {t} (created_at_ms, id)",
                "CREATE INDEX IF NOT EXISTS \"{n}_status_idx\" \
                 ON {t} (status, created_at_ms, id)",
                "CREATE INDEX IF NOT EXISTS \"{n}_tool_idx\" \
                 ON {t} (tool_name, created_at_ms, id)",
            ],
            &[
                // 7: an operator's search in the arguments reads a trigram
                // index (`pg_trgm`) of a column of their text, not every
                // row. The store writes the column with each row (`NULL`
                // when the arguments are dropped or sealed): PostgreSQL's
                // own JSON operators refuse some texts a task may hold
                // (`\u0000`), so an index over them could refuse a write.
                // Before, only unfinished tasks had arguments; each is
                // copied on its own, passing by one whose text those
                // operators refuse.
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS arguments text",
                "DO $do$ DECLARE r record; BEGIN \
                 FOR r IN SELECT id FROM {t} WHERE status IN ('working', 'input_required') LOOP \
                 BEGIN UPDATE {t} SET arguments = (record->'arguments')::text \
                 WHERE id = r.id AND json_typeof(record->'arguments') <> 'null'; \
                 EXCEPTION WHEN OTHERS THEN NULL; END; END LOOP; END $do$",
                // The extension ships with PostgreSQL (contrib) and is
                // trusted: the database's owner may create it. Where it
                // cannot be had, searches stay correct and walk the rows;
                // `CREATE EXTENSION pg_trgm` and this index made later by
                // hand are used from then on.
                "DO $do$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm; \
                 EXCEPTION WHEN OTHERS THEN \
                 RAISE WARNING 'pg_trgm unavailable, task searches will scan: %', SQLERRM; \
                 END $do$",
                "DO $do$ DECLARE s text; BEGIN \
                 SELECT n.nspname INTO s FROM pg_extension e \
                 JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'; \
                 IF s IS NOT NULL THEN EXECUTE format('CREATE INDEX IF NOT EXISTS \"{n}_search_idx\" \
                 ON {t} USING gin (arguments %I.gin_trgm_ops)', s); \
                 END IF; END $do$",
            ],
            &[
                // 8: the ended tasks by the time they ended (their last
                // write): what counts them minute by minute reads.
                "CREATE INDEX IF NOT EXISTS \"{n}_ended_idx\" ON {t} (updated_at_ms) \
                 WHERE status IN ('completed', 'failed', 'cancelled')",
            ],
            &[
                // 9: the claim's index (issue 33). Claims, orphan scans and
                // the operator's counts of `working` rows walk it in lease
                // order; it holds `working` rows only, so a claim reads
                // the few oldest entries whatever the backlog or the
                // history, instead of a bitmap scan of the status index
                // that visits every entry `working` rows ever left there
                // (dead until vacuum: 0.8 ms a claim after 10k tasks, 0.03
                // ms with this index). It replaces the lease index: a row
                // has a lease end exactly while it is `working`.
                "CREATE INDEX IF NOT EXISTS \"{n}_runnable_idx\" ON {t} (lease_until_ms) \
                 WHERE status = 'working'",
                "DROP INDEX IF EXISTS \"{n}_lease_idx\"",
            ],
        ],
        migrations_table: "CREATE TABLE IF NOT EXISTS {m} (
            version bigint PRIMARY KEY,
            applied_at_ms bigint NOT NULL
        )",
        begin_write: "BEGIN",
        // A claim walks the runnable index in lease order and stops at its
        // limit. Without statistics (a young table) or with stale ones
        // the planner estimates a few runnable rows and takes a bitmap
        // scan instead, which reads and sorts every runnable row: 3–5 ms
        // a claim with 1,000 queued (auto_explain, issue 33), growing
        // with the backlog. One statement more in the same round trip.
        // The claim's `UPDATE … FROM unnest(…)` joins the claimed rows
        // to the table: planned on a young table (the first claim of a
        // connection prepares it, and its plan is kept) the join is a hash
        // join over a sequential scan, whose cost grows with the table
        // (2 ms at 12,000 rows; `EXPLAIN ANALYZE`, issue 33). A claim
        // plans it as a nested loop over the primary key, once per
        // connection (a custom plan per execution was made at 1,657 of
        // 2,869 claims).
        begin_claim: concat!("BEGIN; ", claim_settings!("SET LOCAL")),
        // An operator's page that a search (or a sort of many rows) makes
        // long is cancelled and read again as a walk of at most
        // WALK_BUDGET rows of the creation index (issue 30).
        begin_timed_page: Some("BEGIN READ ONLY; SET LOCAL statement_timeout = {ms}"),
        begin_walk: "BEGIN READ ONLY; SET LOCAL enable_bitmapscan = off",
        // query_canceled
        timed_out: "57014",
        // Replicas starting together take turns; released at commit.
        lock_migration: Some("SELECT pg_advisory_xact_lock($1)"),
        json_param: "::json",
        json_column: "record::text",
        // Concurrent reapers take disjoint batches instead of waiting on
        // (and then double-reporting) each other's rows. `= ANY(ARRAY(…))`
        // rather than `IN (…)`: the generic plan of `IN` hash-joins against
        // a scan of the whole table; this one probes the primary key.
        reap: "DELETE FROM {t} WHERE id = ANY(ARRAY(SELECT id FROM {t} \
               WHERE expires_at_ms <= $1 ORDER BY expires_at_ms LIMIT $2 \
               FOR UPDATE SKIP LOCKED)) RETURNING id",
        // Concurrent workers claim disjoint rows, each the oldest no other
        // claim holds, and none waits on another's.
        claim_lock: " FOR UPDATE SKIP LOCKED",
        // A claim of k rows is one `UPDATE` of them all (issue 33): the
        // round is `BEGIN`, the read, this and `COMMIT` whatever k, where
        // it was k + 3 statements. Still a compare-and-set on the version
        // each row was read at; the rows are held since the read.
        claim_update: Some(
            "UPDATE {t} AS t SET owner = u.owner, era = u.era, status = u.status, \
             created_at_ms = u.created_at_ms, updated_at_ms = u.updated_at_ms, \
             expires_at_ms = u.expires_at_ms, version = u.version, record = u.record::json, \
             lease_until_ms = u.lease_until_ms, tool_name = u.tool_name, \
             arguments = u.arguments \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], \
             $6::int8[], $7::int8[], $8::int8[], $9::text[], $10::int8[], $11::text[], \
             $12::text[], $13::int8[]) AS u(id, owner, era, status, created_at_ms, \
             updated_at_ms, expires_at_ms, version, record, lease_until_ms, tool_name, \
             arguments, expected) \
             WHERE t.id = u.id COLLATE \"C\" AND t.version = u.expected RETURNING t.id",
        ),
        // `begin_claim`'s settings for the session of the claims' own
        // connection, the read and the claims' `UPDATE` prepared: a round
        // is `BEGIN` with the read, then the `UPDATE` with its `COMMIT`,
        // two round trips where it was five (issue 33). Named for
        // operators (`pg_stat_activity`); `standard_conforming_strings`
        // is what `literal.rs` writes for.
        claim_line: Some(ClaimLineSql {
            // `mcp_claimed`'s parameter types are the casts in
            // `claim_update`.
            setup: concat!(
                "SET application_name = 'mcp-task-layer claims {n}'; \
                 SET standard_conforming_strings = on; ",
                claim_settings!("SET"),
                "; PREPARE mcp_claim (int8, int8) AS {claimable}; \
                 PREPARE mcp_claimed AS {update}"
            ),
            start: "BEGIN; EXECUTE mcp_claim ({now}, {limit})",
            finish: Some("EXECUTE mcp_claimed ({arrays}); COMMIT"),
        }),
        lease_holder: "(record->'lease'->>'holder')",
        // The indexed column (migration 7), as `LIKE '%…%'`.
        search: "arguments LIKE {p}",
        search_row: "arguments LIKE {p}",
        search_pattern: like_pattern,
        // `= ANY(ARRAY(…))`, as `reap`: a probe of the primary key.
        delete_ids: "DELETE FROM {t} WHERE id = ANY(ARRAY({ids}))",
        // Notifying commits are serialized until flushed: writes that
        // come together commit together (issue 33).
        group_writes: true,
    };

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn bind_claims<'q>(
        query: sqlx::query::Query<'q, Postgres, PgArguments>,
        rows: &'q [&'q Columns],
        expected: &'q [i64],
    ) -> sqlx::query::Query<'q, Postgres, PgArguments> {
        claim_arrays(rows, expected, Binder(query)).0
    }

    fn claim_literals(rows: &[&Columns], expected: &[i64]) -> Option<String> {
        claim_arrays(rows, expected, Literals::default()).finish()
    }
}

/// `claim_update`'s arrays bound as its parameters.
struct Binder<'q>(sqlx::query::Query<'q, Postgres, PgArguments>);

impl<'q> Arrays<'q> for Binder<'q> {
    fn texts(self, values: Vec<Option<&'q str>>) -> Self {
        Binder(self.0.bind(values))
    }

    fn ints(self, values: Vec<Option<i64>>) -> Self {
        Binder(self.0.bind(values))
    }
}

/// `%text%`, with `LIKE`'s wildcards and escape (`%`, `_`, `\`) in `text`
/// escaped, so that it matches exactly where `text` occurs.
fn like_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// Tasks in PostgreSQL, shared by every replica that connects to the same
/// database and table (feature `postgres`).
///
/// Every write is one statement, a compare-and-set on the row's version,
/// and expired rows are reaped in `FOR UPDATE SKIP LOCKED` batches, so any
/// number of replicas can use one table at once. Connect to the primary (a
/// task must be readable everywhere as soon as it is created). The
/// connection is plain TCP unless the application enables one of sqlx's TLS
/// features (for example `sqlx = { version = "0.9", features =
/// ["tls-rustls"] }` in its own `Cargo.toml`) and asks for it in the URL
/// (`sslmode=require`).
///
/// See [SQL stores](crate::store#sql-stores) for the schema and the
/// statements.
///
/// ```no_run
/// use mcp_task_layer::store::{PostgresStore, SqlOptions};
/// use mcp_task_layer::TaskLayer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = PostgresStore::connect_with(
///     "postgres://mcp@db.internal/mcp",
///     SqlOptions::new().with_table("mcp_tasks")?.with_max_connections(20),
/// )
/// .await?;
/// let layer = TaskLayer::new(store);
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    core: Arc<SqlCore<Postgres>>,
    feed: Arc<Feed>,
}

/// The change feed of one store and its clones: started by the first
/// `changes()`, stopped when the last clone is dropped.
#[derive(Debug, Default)]
struct Feed {
    tx: OnceLock<broadcast::Sender<TaskChange>>,
    stop: CancellationToken,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("table", &self.core.table)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connect to `url` (`postgres://user:password@host:port/database`)
    /// with the default [`SqlOptions`] and migrate the schema.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, SqlOptions::default()).await
    }

    /// [`connect`](Self::connect) with options.
    pub async fn connect_with(url: &str, options: SqlOptions) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.unwrap_or(CONNECTIONS))
            .test_before_acquire(false)
            .before_acquire(ping_if_idle)
            .connect(url)
            .await
            .map_err(|e| Error::Backend(Box::new(e)))?;
        let store = PostgresStore {
            core: Arc::new(
                SqlCore::new(pool.clone(), pool, options.table).with_page_time(options.page_time),
            ),
            feed: Arc::default(),
        };
        if options.migrate {
            store.migrate().await?;
        }
        Ok(store)
    }

    /// Close every connection, waiting for the ones in use. Later calls on
    /// this store (and its clones) fail.
    pub async fn close(&self) {
        self.feed.stop.cancel();
        self.core.close().await;
    }

    /// [`TaskStore::changes`]: the table's `NOTIFY`s, through one
    /// `LISTEN`ing connection of the pool per store (and its clones).
    fn change_feed(&self) -> Option<broadcast::Receiver<TaskChange>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        // The first receiver exists before the listener starts: subscribed
        // after the spawn, it could miss the first `Missed` (sent by another
        // worker thread once `LISTEN` is up).
        let mut first = None;
        let tx = self.feed.tx.get_or_init(|| {
            let (tx, rx) = broadcast::channel(FEED_CAPACITY);
            first = Some(rx);
            let channel = format!("{}_changes", self.core.table);
            let pool = self.core.reads.clone();
            runtime.spawn(listen(pool, channel, tx.clone(), self.feed.stop.clone()));
            tx
        });
        Some(first.unwrap_or_else(|| tx.subscribe()))
    }
}

/// Changes buffered per receiver before it lags (and re-reads).
const FEED_CAPACITY: usize = 4096;

/// Forward the table's notifications to `tx` until `stop`. After every
/// (re)connection receivers are told that changes may have been missed.
async fn listen(
    pool: sqlx::PgPool,
    channel: String,
    tx: broadcast::Sender<TaskChange>,
    stop: CancellationToken,
) {
    let mut listener: Option<PgListener> = None;
    loop {
        let Some(conn) = listener.as_mut() else {
            let connected = async {
                let mut l = PgListener::connect_with(&pool).await?;
                l.listen(&channel).await?;
                Ok::<_, sqlx::Error>(l)
            };
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                outcome = connected => outcome,
            };
            match outcome {
                Ok(l) => {
                    listener = Some(l);
                    let _ = tx.send(TaskChange::Missed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot LISTEN for task changes; retrying in 1 s");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
            continue;
        };
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = conn.try_recv() => next,
        };
        match next {
            Ok(Some(n)) => {
                if let Some(change) = parse_change(n.payload()) {
                    let _ = tx.send(change);
                }
            }
            // The connection dropped. Reconnect here rather than inside
            // `try_recv`, so that `Missed` goes out only once `LISTEN` is
            // back: a re-read before that could miss a change.
            Ok(None) => {
                tracing::warn!("the task change feed lost its connection; reconnecting");
                listener = None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the task change feed failed; reconnecting");
                listener = None;
            }
        }
    }
}

sql_task_store!(PostgresStore);
