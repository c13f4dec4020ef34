//! The SQL stores' one implementation over two engines.
//!
//! What a user reads about them is `README.md` here, shown as the "SQL
//! stores" section of the `store` docs. The files: `options.rs`
//! ([`SqlOptions`]), `dialect.rs` (what each engine supplies), `statements.rs`
//! (the SQL of one table), `row.rs` (a record as a row and back), `core.rs`
//! (the store primitives over an engine's pools), `sqlite.rs` and
//! `postgres.rs` (each engine's dialect, connection and store type).

/// `migrate`, `table` and `TaskStore` for a store type whose `core` field is
/// an `Arc<SqlCore<_>>`.
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
                query: $crate::store::ListQuery<'a>,
            ) -> $crate::store::BoxFuture<
                'a,
                $crate::store::Result<Vec<std::sync::Arc<$crate::store::TaskRecord>>>,
            > {
                Box::pin(self.core.list(query))
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

            fn claim_runnable<'a>(
                &'a self,
                round: $crate::store::ClaimQuery<'a>,
            ) -> $crate::store::BoxFuture<
                'a,
                $crate::store::Result<Vec<std::sync::Arc<$crate::store::TaskRecord>>>,
            > {
                Box::pin(self.core.claim_runnable(round))
            }

            fn changes(
                &self,
            ) -> Option<tokio::sync::broadcast::Receiver<$crate::store::TaskChange>> {
                self.change_feed()
            }

            fn operator(&self) -> Option<&dyn $crate::store::OperatorStore> {
                Some(self)
            }
        }

        impl $crate::store::OperatorStore for $store {
            fn find<'a>(
                &'a self,
                query: &'a $crate::store::TaskQuery,
                now_ms: i64,
            ) -> $crate::store::BoxFuture<'a, $crate::store::Result<$crate::store::Found>> {
                Box::pin(self.core.find(query, now_ms))
            }

            fn stats(
                &self,
                now_ms: i64,
            ) -> $crate::store::BoxFuture<'_, $crate::store::Result<$crate::store::TaskStats>> {
                Box::pin(self.core.stats(now_ms))
            }

            fn purge<'a>(
                &'a self,
                query: &'a $crate::store::TaskQuery,
                now_ms: i64,
            ) -> $crate::store::BoxFuture<'a, $crate::store::Result<$crate::store::Purged>> {
                Box::pin(self.core.purge(query, now_ms))
            }

            fn ended(
                &self,
                query: $crate::store::EndedQuery,
            ) -> $crate::store::BoxFuture<'_, $crate::store::Result<$crate::store::EndedCounts>>
            {
                Box::pin(self.core.ended(query))
            }
        }
    };
}

mod claims;
mod core;
mod dialect;
mod group;
#[cfg(feature = "postgres")]
mod literal;
mod operator;
mod options;
#[cfg(feature = "postgres")]
mod postgres;
mod row;
#[cfg(feature = "sqlite")]
mod sqlite;
mod statements;

pub use options::{InvalidTableName, SqlOptions, DEFAULT_PAGE_TIME, DEFAULT_TABLE};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
