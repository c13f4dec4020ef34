//! [`SqlOptions`]: the table and pool of a SQL store, and its name's rules.

use std::fmt;
use std::time::Duration;

use crate::store::Result;

/// The table name [`SqlOptions`] starts with: `mcp_tasks`.
pub const DEFAULT_TABLE: &str = "mcp_tasks";

/// The longest table name accepted: PostgreSQL cuts identifiers at 63
/// bytes, and the store derives `<table>_migrations` and index names.
const MAX_TABLE_LEN: usize = 48;

/// Options of [`SqliteStore`] and [`PostgresStore`].
///
// A store whose feature is off links to the crate's feature table.
#[cfg_attr(feature = "sqlite", doc = "[`SqliteStore`]: super::SqliteStore")]
#[cfg_attr(not(feature = "sqlite"), doc = "[`SqliteStore`]: crate#feature-flags")]
#[cfg_attr(feature = "postgres", doc = "[`PostgresStore`]: super::PostgresStore")]
#[cfg_attr(
    not(feature = "postgres"),
    doc = "[`PostgresStore`]: crate#feature-flags"
)]
#[derive(Clone, Debug)]
pub struct SqlOptions {
    pub(crate) table: String,
    pub(crate) max_connections: Option<u32>,
    pub(crate) migrate: bool,
    pub(crate) page_time: Duration,
}

/// How long an operator's page may read the database by default before
/// it is read as a bounded walk instead.
pub const DEFAULT_PAGE_TIME: Duration = Duration::from_millis(30);

impl Default for SqlOptions {
    fn default() -> Self {
        SqlOptions {
            table: DEFAULT_TABLE.to_owned(),
            max_connections: None,
            migrate: true,
            page_time: DEFAULT_PAGE_TIME,
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
    /// writes always go through one connection of their own). A
    /// PostgreSQL store that claims tasks (a worker's) keeps one
    /// connection for its claims beside the pool, from its first claim
    /// until [`PostgresStore::close`](super::PostgresStore::close).
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

    /// How long one page of an operator's listing may read the database
    /// (default [`DEFAULT_PAGE_TIME`], 30 ms) before it is cancelled
    /// (PostgreSQL: `statement_timeout`; SQLite: a progress handler that
    /// interrupts it) and read instead as a walk of at most
    /// [`WALK_BUDGET`](crate::store::WALK_BUDGET) rows of the creation
    /// index, which may end short of a full page and says where
    /// ([`Found::walked_to`](crate::store::Found::walked_to)): the plans
    /// a search or a large owner can take (every candidate of the trigram
    /// index, sorted) are not bounded by the page. `Duration::ZERO` walks
    /// at once.
    #[must_use]
    pub fn with_page_time_limit(mut self, limit: Duration) -> Self {
        self.page_time = limit;
        self
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// These options with those a `--store` URL carries, and the URL
    /// without them: `table=NAME` ([`with_table`](Self::with_table)).
    pub(crate) fn with_url_options(mut self, url: &str) -> Result<(Self, String), String> {
        let url = crate::store::url::take_params(url, |name, value| {
            if name != "table" {
                return Ok(false);
            }
            self.table = SqlOptions::new()
                .with_table(value)
                .map_err(|e| e.to_string())?
                .table;
            Ok(true)
        })?;
        Ok((self, url))
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
