//! SQL stores: [`SqliteStore`] and [`PostgresStore`], one implementation of
//! the store primitives over two engines, through [sqlx].
//!
//! Each task is one row: the columns the store filters and orders on (`id`,
//! `owner`, `era`, `status`, `created_at_ms`, `updated_at_ms`,
//! `expires_at_ms`, `version`) and the whole [`TaskRecord`] as JSON in
//! `record`, which is what the store hands back.
//!
//! - Every write is one statement. `create` is
//!   `INSERT … ON CONFLICT DO NOTHING`; `replace` is
//!   `UPDATE … WHERE id = $1 AND version = $2`, and only when that changes
//!   no row does a second query tell [`Error::NotFound`] from
//!   [`Error::Conflict`].
//! - `get` and `list` hide rows whose `expires_at_ms` has passed.
//!   `delete_expired` deletes at most `limit` of them, oldest expiry first,
//!   through a partial index on `expires_at_ms`. On PostgreSQL the batch is
//!   picked `FOR UPDATE SKIP LOCKED`, so every replica can reap at once and
//!   each expired id is reported by exactly one of them.
//! - `list` walks an index on `(owner, created_at_ms, id)` backwards from
//!   the `(created_at_ms, id)` position.
//! - `connect` creates the schema, and later migrates it, unless told not
//!   to ([`SqlOptions::with_migrations`]). Migrations are numbered and
//!   recorded in `<table>_migrations`; they run in one transaction under
//!   `BEGIN IMMEDIATE` (SQLite) or a transaction-scoped advisory lock
//!   (PostgreSQL), so replicas that start together migrate once.
//!
//! Times are the `now_ms` the layer passes in, never the database's clock.
//!
//! [sqlx]: https://docs.rs/sqlx
//! [`TaskRecord`]: super::TaskRecord
//! [`Error::NotFound`]: super::Error::NotFound
//! [`Error::Conflict`]: super::Error::Conflict
// Without both features some of the links above have nothing to point at.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(rustdoc::broken_intra_doc_links)
)]

use std::sync::Arc;

use super::{Error, MemoryStore, Result, TaskStore};

/// `migrate`, `table` and `TaskStore` for a store type whose `core` field is
/// an `Arc<SqlCore<_>>`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! sql_task_store {
    ($store:ty) => {
        impl $store {
            /// Apply the schema migrations the table has not had yet;
            /// `connect` does this unless
            /// [`SqlOptions::with_migrations`](super::SqlOptions::with_migrations)
            /// turned it off.
            pub async fn migrate(&self) -> $crate::store::Result<()> {
                self.core.migrate().await
            }

            /// The table the tasks are in.
            pub fn table(&self) -> &str {
                &self.core.table
            }
        }

        impl $crate::store::TaskStore for $store {
            fn create(
                &self,
                record: $crate::store::TaskRecord,
            ) -> $crate::store::BoxFuture<'_, $crate::store::Result<()>> {
                Box::pin(self.core.create(record))
            }

            fn get<'a>(
                &'a self,
                id: &'a str,
                now_ms: i64,
            ) -> $crate::store::BoxFuture<
                'a,
                $crate::store::Result<Option<std::sync::Arc<$crate::store::TaskRecord>>>,
            > {
                Box::pin(self.core.get(id, now_ms))
            }

            fn replace(
                &self,
                record: $crate::store::TaskRecord,
                expected_version: u64,
            ) -> $crate::store::BoxFuture<'_, $crate::store::Result<()>> {
                Box::pin(self.core.replace(record, expected_version))
            }

            fn delete_expired(
                &self,
                now_ms: i64,
                limit: usize,
            ) -> $crate::store::BoxFuture<'_, $crate::store::Result<Vec<String>>> {
                Box::pin(self.core.delete_expired(now_ms, limit))
            }

            fn list<'a>(
                &'a self,
                owner: Option<&'a str>,
                after: Option<(i64, &'a str)>,
                limit: usize,
                now_ms: i64,
            ) -> $crate::store::BoxFuture<
                'a,
                $crate::store::Result<Vec<std::sync::Arc<$crate::store::TaskRecord>>>,
            > {
                Box::pin(self.core.list(owner, after, limit, now_ms))
            }

            fn orphans(
                &self,
                now_ms: i64,
                limit: usize,
            ) -> $crate::store::BoxFuture<
                '_,
                $crate::store::Result<Vec<std::sync::Arc<$crate::store::TaskRecord>>>,
            > {
                Box::pin(self.core.orphans(now_ms, limit))
            }

            fn changes(
                &self,
            ) -> Option<tokio::sync::broadcast::Receiver<$crate::store::TaskChange>> {
                self.change_feed()
            }
        }
    };
}

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use shared::{Dialect, Engine, SqlCore};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub use shared::{InvalidTableName, SqlOptions, DEFAULT_TABLE};

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::SqliteStore;

/// Open the store a URL names, with the default options:
///
/// | URL | store | feature |
/// |---|---|---|
/// | `memory` | [`MemoryStore`] | — |
/// | `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:` | `SqliteStore` (the file is created if missing) | `sqlite` |
/// | `postgres://…`, `postgresql://…` | `PostgresStore` | `postgres` |
///
/// SQL stores are migrated before this returns. A URL scheme this build has
/// no feature for is [`Error::Unsupported`]; a database that cannot be
/// opened is [`Error::Backend`].
///
/// This is all a `--store` flag needs:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), mcp_task_layer::store::Error> {
/// let store = mcp_task_layer::store::connect("memory").await?;
/// let layer = mcp_task_layer::TaskLayer::new(store);
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
pub async fn connect(url: &str) -> Result<Arc<dyn TaskStore>> {
    let url = url.trim();
    if url == "memory" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if url.starts_with("sqlite:") {
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(SqliteStore::connect(url).await?));
        #[cfg(not(feature = "sqlite"))]
        return Err(Error::Unsupported(
            "sqlite: URLs in a build without the `sqlite` feature",
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(PostgresStore::connect(url).await?));
        #[cfg(not(feature = "postgres"))]
        return Err(Error::Unsupported(
            "postgres:// URLs in a build without the `postgres` feature",
        ));
    }
    Err(Error::Unsupported(
        "URLs other than memory, sqlite:PATH and postgres://…",
    ))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod shared {
    use std::fmt;
    use std::sync::Arc;

    use sqlx::{
        AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row,
        Type,
    };

    use crate::store::{Era, Error, Result, TaskRecord};
    use crate::TaskStatus;

    /// The table name [`SqlOptions`] starts with: `mcp_tasks`.
    pub const DEFAULT_TABLE: &str = "mcp_tasks";

    /// The longest table name accepted: PostgreSQL cuts identifiers at 63
    /// bytes, and the store derives `<table>_migrations` and index names.
    const MAX_TABLE_LEN: usize = 48;

    /// Options of [`SqliteStore`](super::SqliteStore) and
    /// [`PostgresStore`](super::PostgresStore).
    #[derive(Clone, Debug)]
    pub struct SqlOptions {
        pub(crate) table: String,
        pub(crate) max_connections: Option<u32>,
        pub(crate) migrate: bool,
    }

    impl Default for SqlOptions {
        fn default() -> Self {
            SqlOptions {
                table: DEFAULT_TABLE.to_owned(),
                max_connections: None,
                migrate: true,
            }
        }
    }

    impl SqlOptions {
        /// The defaults: table [`DEFAULT_TABLE`], the engine's pool size,
        /// migrations on connect.
        pub fn new() -> Self {
            Self::default()
        }

        /// Keep tasks in table `name` (and `<name>_migrations`), so several
        /// layers or tests can share one database.
        ///
        /// A name is 1 to 48 lowercase ASCII letters, digits and
        /// underscores, starting with a letter or underscore, and not
        /// starting with `sqlite_` or `pg_`. It is always quoted in SQL.
        pub fn with_table(mut self, name: impl Into<String>) -> Result<Self, InvalidTableName> {
            let name = name.into();
            validate_table(&name)?;
            self.table = name;
            Ok(self)
        }

        /// At most `n` (at least 1) pooled connections: PostgreSQL's pool
        /// (default 10), or the readers of a SQLite file (default 4; its
        /// writes always go through one connection of their own).
        #[must_use]
        pub fn with_max_connections(mut self, n: u32) -> Self {
            self.max_connections = Some(n.max(1));
            self
        }

        /// Whether `connect` applies pending schema migrations (the default).
        /// Turn it off when migrations run elsewhere, then call `migrate`.
        #[must_use]
        pub fn with_migrations(mut self, run: bool) -> Self {
            self.migrate = run;
            self
        }

        /// The table name.
        pub fn table(&self) -> &str {
            &self.table
        }
    }

    /// A table name [`SqlOptions::with_table`] refused.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct InvalidTableName(pub String);

    impl fmt::Display for InvalidTableName {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "invalid task table name {:?}: use 1 to {MAX_TABLE_LEN} lowercase ASCII letters, \
                 digits and underscores, starting with a letter or underscore \
                 (not sqlite_ or pg_)",
                self.0
            )
        }
    }

    impl std::error::Error for InvalidTableName {}

    fn validate_table(name: &str) -> Result<(), InvalidTableName> {
        let bytes = name.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.len() <= MAX_TABLE_LEN
            && (bytes[0].is_ascii_lowercase() || bytes[0] == b'_')
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
            && !name.starts_with("sqlite_")
            && !name.starts_with("pg_");
        if ok {
            Ok(())
        } else {
            Err(InvalidTableName(name.to_owned()))
        }
    }

    /// What differs between the engines' SQL.
    #[derive(Debug)]
    pub(crate) struct Dialect {
        /// Schema migrations, oldest first. In each statement `{t}` is the
        /// quoted table name and `{n}` the bare one (for index names).
        pub(crate) migrations: &'static [&'static [&'static str]],
        /// The `<table>_migrations` table; `{m}` is its quoted name.
        pub(crate) migrations_table: &'static str,
        /// How a migration transaction starts.
        pub(crate) begin_migration: &'static str,
        /// A statement taking a transaction-scoped lock keyed by `$1`
        /// (an `i64`), if `begin_migration` is not enough.
        pub(crate) lock_migration: Option<&'static str>,
        /// Appended to the parameter that carries the record JSON.
        pub(crate) json_param: &'static str,
        /// The expression that reads the record JSON as text.
        pub(crate) json_column: &'static str,
        /// `delete_expired`: delete at most `$2` rows with
        /// `expires_at_ms <= $1`, returning their ids; `{t}` is the quoted
        /// table name.
        pub(crate) reap: &'static str,
    }

    /// An engine the store runs on.
    pub(crate) trait Engine: Database {
        const DIALECT: Dialect;
        fn rows_affected(result: &Self::QueryResult) -> u64;
    }

    /// The statements of one table, built once.
    #[derive(Debug)]
    struct Statements {
        insert: Arc<str>,
        get: Arc<str>,
        replace: Arc<str>,
        exists: Arc<str>,
        reap: Arc<str>,
        orphans: Arc<str>,
        /// By owner (`Some`/`None`) and whether a position is given.
        list: [[Arc<str>; 2]; 2],
        migrations_table: String,
        migrations_version: String,
        migrations_insert: String,
        migrations: Vec<Vec<String>>,
    }

    fn quote(ident: &str) -> String {
        // Table names are validated, so there is nothing to escape.
        format!("\"{ident}\"")
    }

    impl Statements {
        fn new(d: &Dialect, table: &str) -> Self {
            let t = quote(table);
            let m = quote(&format!("{table}_migrations"));
            let (json, rec) = (d.json_param, d.json_column);
            let list = |owner: bool, after: bool| -> Arc<str> {
                let (mut sql, mut n) = (
                    format!(
                        "SELECT {rec} FROM {t} WHERE (expires_at_ms IS NULL OR expires_at_ms > $1)"
                    ),
                    2,
                );
                if owner {
                    sql += &format!(" AND owner = ${n}");
                    n += 1;
                } else {
                    sql += " AND owner IS NULL";
                }
                if after {
                    sql += &format!(" AND (created_at_ms, id) < (${}, ${})", n, n + 1);
                    n += 2;
                }
                sql += &format!(" ORDER BY created_at_ms DESC, id DESC LIMIT ${n}");
                sql.into()
            };
            Statements {
                insert: format!(
                    "INSERT INTO {t} (id, owner, era, status, created_at_ms, updated_at_ms, \
                     expires_at_ms, version, record, lease_until_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9{json}, $10) \
                     ON CONFLICT (id) DO NOTHING"
                )
                .into(),
                get: format!(
                    "SELECT {rec} FROM {t} WHERE id = $1 \
                     AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
                )
                .into(),
                replace: format!(
                    "UPDATE {t} SET owner = $2, era = $3, status = $4, created_at_ms = $5, \
                     updated_at_ms = $6, expires_at_ms = $7, version = $8, record = $9{json}, \
                     lease_until_ms = $10 WHERE id = $1 AND version = $11"
                )
                .into(),
                exists: format!("SELECT 1 FROM {t} WHERE id = $1").into(),
                reap: d.reap.replace("{t}", &t).into(),
                orphans: format!(
                    "SELECT {rec} FROM {t} WHERE lease_until_ms < $1 AND status = 'working' \
                     AND (expires_at_ms IS NULL OR expires_at_ms > $1) \
                     ORDER BY lease_until_ms LIMIT $2"
                )
                .into(),
                list: [
                    [list(false, false), list(false, true)],
                    [list(true, false), list(true, true)],
                ],
                migrations_table: d.migrations_table.replace("{m}", &m),
                migrations_version: format!("SELECT COALESCE(MAX(version), 0) FROM {m}"),
                migrations_insert: format!(
                    "INSERT INTO {m} (version, applied_at_ms) VALUES ($1, $2)"
                ),
                migrations: d
                    .migrations
                    .iter()
                    .map(|step| {
                        step.iter()
                            .map(|s| s.replace("{t}", &t).replace("{n}", table))
                            .collect()
                    })
                    .collect(),
            }
        }
    }

    fn sql(s: &Arc<str>) -> AssertSqlSafe<Arc<str>> {
        // Built from a validated table name and constants only.
        AssertSqlSafe(Arc::clone(s))
    }

    fn backend(e: sqlx::Error) -> Error {
        Error::Backend(Box::new(e))
    }

    fn decode(json: &str) -> Result<TaskRecord> {
        serde_json::from_str(json).map_err(|e| Error::Decode(Box::new(e)))
    }

    fn to_i64(n: u64, what: &'static str) -> Result<i64> {
        i64::try_from(n).map_err(|_| Error::Encode(format!("{what} {n} exceeds i64").into()))
    }

    fn era_name(era: Era) -> &'static str {
        match era {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }

    /// A record's row.
    struct Columns {
        id: String,
        owner: Option<String>,
        era: &'static str,
        status: &'static str,
        created_at_ms: i64,
        updated_at_ms: i64,
        expires_at_ms: Option<i64>,
        version: i64,
        record: String,
        /// Set while `working` under a lease: what `orphans` looks for.
        lease_until_ms: Option<i64>,
    }

    impl Columns {
        fn of(r: TaskRecord) -> Result<Self> {
            let record = serde_json::to_string(&r).map_err(|e| Error::Encode(Box::new(e)))?;
            Ok(Columns {
                era: era_name(r.era),
                status: r.status.as_str(),
                created_at_ms: r.created_at_ms,
                updated_at_ms: r.updated_at_ms,
                expires_at_ms: r.expires_at_ms(),
                version: to_i64(r.version, "version")?,
                lease_until_ms: match (&r.status, &r.lease) {
                    (TaskStatus::Working, Some(lease)) => Some(lease.until_ms),
                    _ => None,
                },
                id: r.id,
                owner: r.owner,
                record,
            })
        }
    }

    /// The store primitives over one engine's pools.
    #[derive(Debug)]
    pub(crate) struct SqlCore<DB: Database> {
        /// Reads (`get`, `list`).
        pub(crate) reads: Pool<DB>,
        /// Writes and migrations; the same pool as `reads` except on SQLite.
        pub(crate) writes: Pool<DB>,
        pub(crate) table: String,
        sql: Statements,
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
        pub(crate) fn new(reads: Pool<DB>, writes: Pool<DB>, table: String) -> Self {
            let sql = Statements::new(&DB::DIALECT, &table);
            SqlCore {
                reads,
                writes,
                table,
                sql,
            }
        }

        /// Apply the migrations this table has not had yet.
        pub(crate) async fn migrate(&self) -> Result<()> {
            let d = &DB::DIALECT;
            let mut tx = self
                .writes
                .begin_with(d.begin_migration)
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
                    .bind(wall_clock_ms())
                    .execute(&mut *tx)
                    .await
                    .map_err(backend)?;
                tracing::info!(table = %self.table, version, "task table migrated");
            }
            tx.commit().await.map_err(backend)
        }

        /// Bind a row's columns as `$1`..`$10`, in the order of `insert`
        /// (and of `replace`, whose `$11` is the expected version).
        fn bind_row<'q>(
            query: sqlx::query::Query<'q, DB, DB::Arguments>,
            c: &'q Columns,
        ) -> sqlx::query::Query<'q, DB, DB::Arguments> {
            query
                .bind(c.id.as_str())
                .bind(c.owner.as_deref())
                .bind(c.era)
                .bind(c.status)
                .bind(c.created_at_ms)
                .bind(c.updated_at_ms)
                .bind(c.expires_at_ms)
                .bind(c.version)
                .bind(c.record.as_str())
                .bind(c.lease_until_ms)
        }

        pub(crate) async fn create(&self, record: TaskRecord) -> Result<()> {
            let c = Columns::of(record)?;
            let done = Self::bind_row(sqlx::query(sql(&self.sql.insert)), &c)
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

        pub(crate) async fn replace(
            &self,
            record: TaskRecord,
            expected_version: u64,
        ) -> Result<()> {
            let expected = to_i64(expected_version, "expected version")?;
            let c = Columns::of(record)?;
            let done = Self::bind_row(sqlx::query(sql(&self.sql.replace)), &c)
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

        pub(crate) async fn delete_expired(
            &self,
            now_ms: i64,
            limit: usize,
        ) -> Result<Vec<String>> {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let rows = sqlx::query(sql(&self.sql.reap))
                .bind(now_ms)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(&self.writes)
                .await
                .map_err(backend)?;
            rows.iter()
                .map(|row| row.try_get::<String, _>(0).map_err(backend))
                .collect()
        }

        pub(crate) async fn orphans(
            &self,
            now_ms: i64,
            limit: usize,
        ) -> Result<Vec<Arc<TaskRecord>>> {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let rows = sqlx::query(sql(&self.sql.orphans))
                .bind(now_ms)
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(&self.reads)
                .await
                .map_err(backend)?;
            records(&rows)
        }

        pub(crate) async fn list(
            &self,
            owner: Option<&str>,
            after: Option<(i64, &str)>,
            limit: usize,
            now_ms: i64,
        ) -> Result<Vec<Arc<TaskRecord>>> {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let statement =
                &self.sql.list[usize::from(owner.is_some())][usize::from(after.is_some())];
            let mut query = sqlx::query(sql(statement)).bind(now_ms);
            if let Some(owner) = owner {
                query = query.bind(owner);
            }
            if let Some((created, id)) = after {
                query = query.bind(created).bind(id);
            }
            let rows = query
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .fetch_all(&self.reads)
                .await
                .map_err(backend)?;
            records(&rows)
        }
    }

    /// Decode rows whose first column is the record JSON.
    fn records<R: Row>(rows: &[R]) -> Result<Vec<Arc<TaskRecord>>>
    where
        for<'a> String: Decode<'a, R::Database> + Type<R::Database>,
        usize: ColumnIndex<R>,
    {
        rows.iter()
            .map(|row| {
                let json: String = row.try_get(0).map_err(backend)?;
                decode(&json).map(Arc::new)
            })
            .collect()
    }

    fn wall_clock_ms() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn table_names() {
            for ok in ["mcp_tasks", "_t", "t1", &"a".repeat(MAX_TABLE_LEN)] {
                assert!(validate_table(ok).is_ok(), "{ok}");
            }
            for bad in [
                "",
                "1t",
                "Tasks",
                "t-1",
                "t;drop",
                "\"t\"",
                "s.t",
                "sqlite_master",
                "pg_tasks",
                &"a".repeat(MAX_TABLE_LEN + 1),
            ] {
                assert!(validate_table(bad).is_err(), "{bad}");
            }
        }
    }
}
