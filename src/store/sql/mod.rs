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

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod core;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod dialect;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod options;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod row;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod statements;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub use options::{InvalidTableName, SqlOptions, DEFAULT_TABLE};

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::SqliteStore;
