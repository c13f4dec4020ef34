//! [`SqliteStore`]: tasks in a SQLite file.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions,
    SqliteQueryResult, SqliteSynchronous,
};
use sqlx::Sqlite;

use super::core::SqlCore;
use super::dialect::{Dialect, Engine};
use super::options::SqlOptions;
use crate::store::{BoxFuture, Error, Result};

/// How long a statement waits for another connection's (or process's) write
/// lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default size of the reader pool.
const READERS: u32 = 4;

impl Engine for Sqlite {
    const DIALECT: Dialect = Dialect {
        migrations: &[
            &[
                "CREATE TABLE IF NOT EXISTS {t} (
                id TEXT PRIMARY KEY NOT NULL,
                owner TEXT,
                era TEXT NOT NULL,
                status TEXT NOT NULL,
                created_at_ms INTEGER NOT NULL,
                updated_at_ms INTEGER NOT NULL,
                expires_at_ms INTEGER,
                version INTEGER NOT NULL,
                record TEXT NOT NULL
            )",
                "CREATE INDEX IF NOT EXISTS \"{n}_owner_idx\" ON {t} (owner, created_at_ms, id)",
                "CREATE INDEX IF NOT EXISTS \"{n}_expiry_idx\" ON {t} (expires_at_ms) \
             WHERE expires_at_ms IS NOT NULL",
            ],
            &[
                // 2: the lease of a `working` task, for finding orphans.
                "ALTER TABLE {t} ADD COLUMN lease_until_ms INTEGER",
                "UPDATE {t} SET lease_until_ms = json_extract(record, '$.lease.until_ms') \
             WHERE status = 'working'",
                "CREATE INDEX IF NOT EXISTS \"{n}_lease_idx\" ON {t} (lease_until_ms) \
             WHERE lease_until_ms IS NOT NULL",
            ],
            &[
                // 3: listings are of one owner and one era; the index walks
                // only those rows.
                "CREATE INDEX IF NOT EXISTS \"{n}_owner_era_idx\" \
                 ON {t} (owner, era, created_at_ms, id)",
                "DROP INDEX IF EXISTS \"{n}_owner_idx\"",
            ],
            &[
                // 4: the operator API lists every task newest first, maybe
                // of one status or one tool: an index for each.
                "ALTER TABLE {t} ADD COLUMN tool_name TEXT",
                "UPDATE {t} SET tool_name = json_extract(record, '$.tool_name')",
                "CREATE INDEX IF NOT EXISTS \"{n}_created_idx\" ON {t} (created_at_ms, id)",
                "CREATE INDEX IF NOT EXISTS \"{n}_status_idx\" \
                 ON {t} (status, created_at_ms, id)",
                "CREATE INDEX IF NOT EXISTS \"{n}_tool_idx\" \
                 ON {t} (tool_name, created_at_ms, id)",
            ],
            &[
                // 5: an operator's search in the arguments reads a trigram
                // index (FTS5) of their text, not every row. The store
                // writes the text in `arguments` with each row (`NULL` when
                // dropped or sealed; before, only unfinished tasks had
                // any). `{n}_search` holds each task's under a rowid of its
                // own (`VACUUM` keeps an `INTEGER PRIMARY KEY`, not the
                // implicit rowid of the task table); `{n}_search_fts`
                // indexes them, case-sensitive, for `GLOB`. Triggers keep
                // both in step with the task table.
                "ALTER TABLE {t} ADD COLUMN arguments TEXT",
                "UPDATE {t} SET arguments = record -> '$.arguments' \
                 WHERE json_type(record, '$.arguments') <> 'null'",
                "CREATE TABLE IF NOT EXISTS \"{n}_search\" ( \
                 seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, arguments TEXT NOT NULL)",
                "CREATE VIRTUAL TABLE IF NOT EXISTS \"{n}_search_fts\" USING fts5( \
                 arguments, content = '{n}_search', content_rowid = 'seq', \
                 tokenize = 'trigram case_sensitive 1', detail = 'none')",
                "CREATE TRIGGER IF NOT EXISTS \"{n}_search_in\" AFTER INSERT ON \"{n}_search\" \
                 BEGIN INSERT INTO \"{n}_search_fts\" (rowid, arguments) \
                 VALUES (NEW.seq, NEW.arguments); END",
                "CREATE TRIGGER IF NOT EXISTS \"{n}_search_out\" AFTER DELETE ON \"{n}_search\" \
                 BEGIN INSERT INTO \"{n}_search_fts\" (\"{n}_search_fts\", rowid, arguments) \
                 VALUES ('delete', OLD.seq, OLD.arguments); END",
                "CREATE TRIGGER IF NOT EXISTS \"{n}_args_in\" AFTER INSERT ON {t} \
                 WHEN NEW.arguments IS NOT NULL \
                 BEGIN INSERT INTO \"{n}_search\" (id, arguments) \
                 VALUES (NEW.id, NEW.arguments); END",
                "CREATE TRIGGER IF NOT EXISTS \"{n}_args_out\" AFTER DELETE ON {t} \
                 WHEN OLD.arguments IS NOT NULL \
                 BEGIN DELETE FROM \"{n}_search\" WHERE id = OLD.id; END",
                "CREATE TRIGGER IF NOT EXISTS \"{n}_args_change\" AFTER UPDATE OF arguments ON {t} \
                 WHEN OLD.arguments IS NOT NEW.arguments \
                 BEGIN DELETE FROM \"{n}_search\" WHERE id = OLD.id; \
                 INSERT INTO \"{n}_search\" (id, arguments) \
                 SELECT NEW.id, NEW.arguments WHERE NEW.arguments IS NOT NULL; END",
                "INSERT INTO \"{n}_search\" (id, arguments) \
                 SELECT id, arguments FROM {t} WHERE arguments IS NOT NULL",
            ],
            &[
                // 6: the ended tasks by the time they ended (their last
                // write): what counts them minute by minute reads.
                "CREATE INDEX IF NOT EXISTS \"{n}_ended_idx\" ON {t} (updated_at_ms) \
                 WHERE status IN ('completed', 'failed', 'cancelled')",
            ],
        ],
        migrations_table: "CREATE TABLE IF NOT EXISTS {m} (
            version INTEGER PRIMARY KEY NOT NULL,
            applied_at_ms INTEGER NOT NULL
        )",
        // Takes the write lock at once: two processes opening one file
        // migrate one after the other.
        begin_write: "BEGIN IMMEDIATE",
        begin_claim: "BEGIN IMMEDIATE",
        // An operator's page is bounded by a progress handler instead
        // (`limit_time`).
        begin_timed_page: None,
        begin_walk: "BEGIN",
        // SQLITE_INTERRUPT
        timed_out: "9",
        lock_migration: None,
        json_param: "",
        json_column: "record",
        // One writer at a time: nothing to lock or skip.
        reap: "DELETE FROM {t} WHERE id IN (SELECT id FROM {t} WHERE expires_at_ms <= $1 \
               ORDER BY expires_at_ms LIMIT $2) RETURNING id",
        // A claim's `BEGIN IMMEDIATE` holds the file's write lock: no other
        // claim reads until it commits.
        claim_lock: "",
        // The claimed rows are few and the file is local: one `UPDATE`
        // each, in the claim's transaction.
        claim_update: None,
        claim_line: None,
        lease_holder: "json_extract(record, '$.lease.holder')",
        search: "id IN (SELECT id FROM \"{n}_search\" WHERE seq IN \
                 (SELECT rowid FROM \"{n}_search_fts\" WHERE arguments GLOB {p}))",
        search_row: "arguments GLOB {p}",
        search_pattern: glob_pattern,
        delete_ids: "DELETE FROM {t} WHERE id IN ({ids})",
        // One writer at a time holds the file anyway.
        group_writes: false,
    };

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    /// A progress handler, called every 1,000 virtual machine steps, that
    /// interrupts the statement once `limit` has passed while `armed`
    /// holds. Disarmed, it lets everything run until the next page's
    /// handler replaces it: a page dropped halfway leaves no bound on the
    /// pooled connection.
    fn limit_time(
        conn: &mut SqliteConnection,
        limit: Duration,
        armed: Arc<AtomicBool>,
    ) -> BoxFuture<'_, std::result::Result<(), sqlx::Error>> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            conn.lock_handle()
                .await?
                .set_progress_handler(1_000, move || {
                    !armed.load(Ordering::Relaxed) || started.elapsed() < limit
                });
            Ok(())
        })
    }
}

/// `*text*`, with `GLOB`'s wildcards (`*`, `?`, `[`) in `text` each in a
/// bracket of its own, so that it matches exactly where `text` occurs.
fn glob_pattern(text: &str) -> String {
    let mut p = String::with_capacity(text.len() + 2);
    p.push('*');
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[') {
            p.push('[');
            p.push(c);
            p.push(']');
        } else {
            p.push(c);
        }
    }
    p.push('*');
    p
}

/// Tasks in a SQLite database: durable on one machine, shared by the
/// processes that open the same local file (feature `sqlite`).
///
/// Files are opened in WAL mode with `synchronous = NORMAL` (a commit
/// survives a process crash; a power loss may lose the last commits) and a
/// 5 s `busy_timeout`. Writes go through one pooled connection, so writers
/// in this process queue instead of contending for SQLite's lock; reads use
/// a pool of their own (4 connections unless
/// [`SqlOptions::with_max_connections`] says otherwise). Never put the file
/// on a network file system, and use [`PostgresStore`] for replicas on
/// several machines.
///
/// `sqlite::memory:` opens a private in-memory database on one connection,
/// kept open as long as the store lives: for tests.
///
/// See [SQL stores](crate::store#sql-stores) for the schema and the
/// statements.
///
/// ```no_run
/// use mcp_task_layer::store::{SqlOptions, SqliteStore};
/// use mcp_task_layer::TaskLayer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = SqliteStore::connect_with(
///     "sqlite:/var/lib/my-server/tasks.db",
///     SqlOptions::new().with_table("mcp_tasks")?,
/// )
/// .await?;
/// let layer = TaskLayer::new(store);
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
///
// Without the `postgres` feature, the link goes to the crate's feature table.
#[cfg_attr(feature = "postgres", doc = "[`PostgresStore`]: super::PostgresStore")]
#[cfg_attr(
    not(feature = "postgres"),
    doc = "[`PostgresStore`]: crate#feature-flags"
)]
#[derive(Clone)]
pub struct SqliteStore {
    core: Arc<SqlCore<Sqlite>>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("table", &self.core.table)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Open (creating it if missing) the database at `url` (`sqlite:PATH`,
    /// `sqlite://PATH` or `sqlite::memory:`) with the default
    /// [`SqlOptions`], and migrate its schema.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, SqlOptions::default()).await
    }

    /// [`connect`](Self::connect) with options.
    pub async fn connect_with(url: &str, options: SqlOptions) -> Result<Self> {
        let backend = |e: sqlx::Error| Error::Backend(Box::new(e));
        let connect = SqliteConnectOptions::from_str(url)
            .map_err(backend)?
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT);
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let (reads, writes) = if in_memory {
            // One connection that never closes: the database lives as long
            // as some connection to it does.
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .test_before_acquire(false)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(connect)
                .await
                .map_err(backend)?;
            (pool.clone(), pool)
        } else {
            let connect = connect
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            // No ping before each use: a local file's connection does not
            // go stale, and the ping is a round trip to its worker thread.
            let writes = SqlitePoolOptions::new()
                .max_connections(1)
                .test_before_acquire(false)
                .connect_with(connect.clone())
                .await
                .map_err(backend)?;
            let reads = SqlitePoolOptions::new()
                .max_connections(options.max_connections.unwrap_or(READERS))
                .test_before_acquire(false)
                .connect_with(connect)
                .await
                .map_err(backend)?;
            (reads, writes)
        };
        let store = SqliteStore {
            core: Arc::new(
                SqlCore::new(reads, writes, options.table).with_page_time(options.page_time),
            ),
        };
        if options.migrate {
            store.migrate().await?;
        }
        Ok(store)
    }

    /// Close every connection, waiting for the ones in use. Later calls on
    /// this store (and its clones) fail.
    pub async fn close(&self) {
        self.core.close().await;
    }

    /// SQLite cannot tell one process of another's writes: no feed (the
    /// lease heartbeat and subscribers' re-reads cover it).
    #[allow(clippy::unused_self)]
    fn change_feed(&self) -> Option<tokio::sync::broadcast::Receiver<crate::store::TaskChange>> {
        None
    }
}

sql_task_store!(SqliteStore);
