//! [`connect`]: open the store a URL names; [`redacted`]: that URL as it
//! may be shown.

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

/// `url` as it may be shown in a message or a log: the password of
/// `scheme://user:password@host…` and the value of a `password=` query
/// parameter are `***`; the rest is kept, so that the reader still sees
/// which store was meant.
///
/// ```
/// use mcp_task_layer::store::redacted;
/// assert_eq!(
///     redacted("postgres://app:s3cret@db:5432/tasks?sslmode=require"),
///     "postgres://app:***@db:5432/tasks?sslmode=require"
/// );
/// assert_eq!(redacted("redis://:s3cret@cache/0"), "redis://:***@cache/0");
/// assert_eq!(redacted("sqlite:tasks.db"), "sqlite:tasks.db");
/// ```
pub fn redacted(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let rest = match url.find("://") {
        Some(at) => {
            let (scheme, after) = url.split_at(at + 3);
            out.push_str(scheme);
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            let (authority, rest) = after.split_at(end);
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => {
                    match userinfo.split_once(':') {
                        Some((user, _)) => {
                            out.push_str(user);
                            out.push_str(":***");
                        }
                        None => out.push_str(userinfo),
                    }
                    out.push('@');
                    out.push_str(host);
                }
                None => out.push_str(authority),
            }
            rest
        }
        None => url,
    };
    let Some((path, query)) = rest.split_once('?') else {
        out.push_str(rest);
        return out;
    };
    out.push_str(path);
    out.push('?');
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                out.push_str(key);
                out.push_str("=***");
            }
            _ => out.push_str(pair),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_are_hidden_and_the_rest_is_kept() {
        for (url, shown) in [
            ("memory", "memory"),
            ("sqlite:/tmp/a:b@c.db", "sqlite:/tmp/a:b@c.db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://u:p@ss@h:1/db", "postgres://u:***@h:1/db"),
            (
                "postgresql://h/db?user=u&Password=p&sslmode=disable",
                "postgresql://h/db?user=u&Password=***&sslmode=disable",
            ),
            (
                "rediss://default:p@h:6380/2?prefix=x",
                "rediss://default:***@h:6380/2?prefix=x",
            ),
            ("redis://h?password=p", "redis://h?password=***"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }
}
