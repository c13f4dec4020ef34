//! [`connect`]: open the store a URL names.

use std::sync::Arc;

#[cfg(feature = "postgres")]
use super::PostgresStore;
#[cfg(feature = "redis")]
use super::RedisStore;
#[cfg(feature = "sqlite")]
use super::SqliteStore;
use super::{Error, MemoryStore, Result, TaskStore};

/// The default SQL options with those `url` carries, and the URL left.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn sql_options(url: &str) -> Result<(super::SqlOptions, String)> {
    super::SqlOptions::default()
        .with_url_options(url)
        .map_err(|e| Error::Backend(e.into()))
}

/// Open the store a URL names, with the default options:
///
/// | URL | store | feature |
/// |---|---|---|
/// | `memory` | [`MemoryStore`] | — |
/// | `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:` | `SqliteStore` (the file is created if missing) | `sqlite` |
/// | `postgres://…`, `postgresql://…` | `PostgresStore` | `postgres` |
/// | `redis://HOST[:PORT][/DB][?prefix=NAME]`, `rediss://…`, `valkey://…` | `RedisStore` | `redis` |
///
/// A SQL store's URL may name its table: `?table=NAME` (default
/// `mcp_tasks`; the other query parameters go to the driver).
///
/// SQL stores are migrated before this returns; a Redis store has checked
/// the server's eviction policy and loaded its scripts. A URL scheme this build has
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
        {
            let (options, url) = sql_options(url)?;
            return Ok(Arc::new(SqliteStore::connect_with(&url, options).await?));
        }
        #[cfg(not(feature = "sqlite"))]
        return Err(Error::Unsupported(
            "sqlite: URLs in a build without the `sqlite` feature",
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            let (options, url) = sql_options(url)?;
            return Ok(Arc::new(PostgresStore::connect_with(&url, options).await?));
        }
        #[cfg(not(feature = "postgres"))]
        return Err(Error::Unsupported(
            "postgres:// URLs in a build without the `postgres` feature",
        ));
    }
    if [
        "redis://",
        "rediss://",
        "valkey://",
        "valkeys://",
        "redis+unix://",
        "valkey+unix://",
    ]
    .iter()
    .any(|scheme| url.starts_with(scheme))
    {
        #[cfg(feature = "redis")]
        return Ok(Arc::new(RedisStore::connect(url).await?));
        #[cfg(not(feature = "redis"))]
        return Err(Error::Unsupported(
            "redis:// URLs in a build without the `redis` feature",
        ));
    }
    Err(Error::Unsupported(
        "URLs other than memory, sqlite:PATH, postgres://… and redis://…",
    ))
}
