//! What each engine (`sqlite.rs`, `postgres.rs`) gives the shared core.

use sqlx::Database;

/// What differs between the engines' SQL.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// Schema migrations, oldest first. In each statement `{t}` is the
    /// quoted table name and `{n}` the bare one (for index names).
    pub(crate) migrations: &'static [&'static [&'static str]],
    /// The `<table>_migrations` table; `{m}` is its quoted name.
    pub(crate) migrations_table: &'static str,
    /// How a transaction that writes (a migration, a group) starts.
    pub(crate) begin_write: &'static str,
    /// How a claim's transaction starts, and a group's that writes its
    /// compare-and-sets as one `claim_update` (`group.rs`).
    pub(crate) begin_claim: &'static str,
    /// How an operator's page starts when the engine can bound its time:
    /// `{ms}` is the bound. A page that runs past it is read again as a
    /// bounded walk (`begin_walk`). `None`: pages are read as they come.
    pub(crate) begin_timed_page: Option<&'static str>,
    /// How that bounded walk's transaction starts: index walks only, no
    /// bitmap of every candidate.
    pub(crate) begin_walk: &'static str,
    /// The error code of a statement cancelled by the time bound.
    pub(crate) timed_out: &'static str,
    /// A statement taking a transaction-scoped lock keyed by `$1`
    /// (an `i64`), if `begin_write` is not enough for a migration.
    pub(crate) lock_migration: Option<&'static str>,
    /// Appended to the parameter that carries the record JSON.
    pub(crate) json_param: &'static str,
    /// The expression that reads the record JSON as text.
    pub(crate) json_column: &'static str,
    /// `delete_expired`: delete at most `$2` rows with
    /// `expires_at_ms <= $1`, returning their ids; `{t}` is the quoted
    /// table name.
    pub(crate) reap: &'static str,
    /// Appended to the query of runnable rows a claim reads: holds them
    /// for the claim's transaction, passing by rows another claim holds.
    pub(crate) claim_lock: &'static str,
    /// The claims of one round written in one statement, where the engine
    /// binds arrays: `{t}` is the quoted table name; the parameters are
    /// [`Engine::bind_claims`]'s, and the statement returns the ids of the
    /// rows it wrote. `None`: one compare-and-set per claimed row.
    pub(crate) claim_update: Option<&'static str>,
    /// A connection kept for claim rounds (`claims.rs`), where the engine
    /// can. `None`: claims run on the pool, as `begin_claim` says.
    pub(crate) claim_line: Option<ClaimLineSql>,
    /// The expression that reads the lease holder of a row.
    pub(crate) lease_holder: &'static str,
    /// The condition of a search in the arguments stored in clear: `{p}`
    /// is the placeholder of the pattern [`search_pattern`](Self::search_pattern)
    /// makes, `{t}` the quoted table name and `{n}` the bare one. It reads
    /// an index of the arguments' text (trigrams), not every row.
    pub(crate) search: &'static str,
    /// The same condition read on each row (`arguments`), for a walk:
    /// the rows are few, and an index of the text would read every
    /// candidate.
    pub(crate) search_row: &'static str,
    /// The pattern `search` matches against, of the text searched for:
    /// the text with the engine's wildcards escaped, between wildcards.
    pub(crate) search_pattern: fn(&str) -> String,
    /// A delete of the rows whose ids `{ids}` selects, from `{t}`.
    pub(crate) delete_ids: &'static str,
    /// Whether concurrent inserts and updates commit together
    /// (`group.rs`).
    pub(crate) group_writes: bool,
}

/// The SQL of the connection kept for claim rounds (`claims.rs`).
#[derive(Debug)]
pub(crate) struct ClaimLineSql {
    /// Run once on a new connection: `{n}` is the bare table name,
    /// `{claimable}` the read of a round (`$1` now, `$2` the limit) and
    /// `{update}` the claims' write (`claim_update`).
    pub(crate) setup: &'static str,
    /// A round's start, `BEGIN` and that read in one round trip: `{now}`
    /// and `{limit}` are the integers.
    pub(crate) start: &'static str,
    /// The claims' write and `COMMIT` in one round trip: `{arrays}` are
    /// [`Engine::claim_literals`]. `None`: the write is bound, then
    /// committed.
    pub(crate) finish: Option<&'static str>,
}

/// An engine the store runs on.
pub(crate) trait Engine: Database {
    const DIALECT: Dialect;
    fn rows_affected(result: &Self::QueryResult) -> u64;

    /// Bind the claimed rows `rows` and the versions they were read at
    /// (`expected`, one for each) to `DIALECT.claim_update`. Called only
    /// where that is `Some`.
    fn bind_claims<'q>(
        query: sqlx::query::Query<'q, Self, Self::Arguments>,
        rows: &'q [&'q super::row::Columns],
        expected: &'q [i64],
    ) -> sqlx::query::Query<'q, Self, Self::Arguments> {
        let _ = (rows, expected);
        query
    }

    /// `claim_update`'s parameters for `rows` and `expected` as literals
    /// (`literal.rs`) for `ClaimLineSql::finish`; `None` where one cannot
    /// be written (or the engine has no `finish`).
    fn claim_literals(rows: &[&super::row::Columns], expected: &[i64]) -> Option<String> {
        let _ = (rows, expected);
        None
    }

    /// Interrupt the statements `conn` runs from now on once `limit` has
    /// passed, failing them with `DIALECT.timed_out`, while `armed` holds
    /// (the caller clears it when its page is read, or dropped), where
    /// the engine bounds time per connection rather than per transaction
    /// (`begin_timed_page`).
    fn limit_time(
        conn: &mut Self::Connection,
        limit: std::time::Duration,
        armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> crate::store::BoxFuture<'_, Result<(), sqlx::Error>> {
        let _ = (conn, limit, armed);
        Box::pin(std::future::ready(Ok(())))
    }
}
