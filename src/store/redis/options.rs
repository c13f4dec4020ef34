//! [`RedisOptions`]: a store's key prefix and eviction check, and the URL
//! options that set them.

use std::fmt;

use crate::store::Result;

/// The key prefix [`RedisOptions`] starts with: `mcp_tasks`.
pub const DEFAULT_PREFIX: &str = "mcp_tasks";

/// The longest prefix accepted.
const MAX_PREFIX_LEN: usize = 64;

/// Options of [`RedisStore`](super::RedisStore).
#[derive(Clone, Debug)]
pub struct RedisOptions {
    pub(crate) prefix: String,
    pub(crate) allow_eviction: bool,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: DEFAULT_PREFIX.to_owned(),
            allow_eviction: false,
        }
    }
}

impl RedisOptions {
    /// The defaults: prefix [`DEFAULT_PREFIX`], eviction refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keep tasks under keys `<prefix>:…`, so several layers or tests can
    /// share one database. A prefix is 1 to 64 ASCII letters, digits and
    /// `_ - . :`; URL option `?prefix=NAME`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Result<Self, InvalidPrefix> {
        let prefix = prefix.into();
        let ok = !prefix.is_empty()
            && prefix.len() <= MAX_PREFIX_LEN
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
        if !ok {
            return Err(InvalidPrefix(prefix));
        }
        self.prefix = prefix;
        Ok(self)
    }

    /// Connect even if the server may evict keys (a `maxmemory-policy`
    /// other than `noeviction`). An evicted task is lost without a trace,
    /// and an evicted index hides tasks from listing, reaping or recovery:
    /// only for caches of tasks nobody minds losing. URL option
    /// `?allow_eviction=true`.
    #[must_use]
    pub fn with_eviction_allowed(mut self, allow: bool) -> Self {
        self.allow_eviction = allow;
        self
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Take this crate's options (`prefix`, `allow_eviction`) out of a
    /// URL's query; the rest of the URL is the client's.
    pub(crate) fn with_url_options(mut self, url: &str) -> Result<(Self, String), String> {
        let url = crate::store::url::take_params(url, |name, value| {
            match name {
                "prefix" => {
                    self.prefix = RedisOptions::new()
                        .with_prefix(value)
                        .map_err(|e| e.to_string())?
                        .prefix;
                }
                "allow_eviction" => {
                    self.allow_eviction = match value {
                        "true" | "1" | "yes" => true,
                        "false" | "0" | "no" => false,
                        _ => return Err(format!("allow_eviction={value:?}: use true or false")),
                    }
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok((self, url))
    }
}

/// A key prefix [`RedisOptions::with_prefix`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidPrefix(pub String);

impl fmt::Display for InvalidPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid task key prefix {:?}: use 1 to {MAX_PREFIX_LEN} ASCII letters, digits, \
             and _ - . :",
            self.0
        )
    }
}

impl std::error::Error for InvalidPrefix {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_options_are_taken_out() {
        let (o, url) = RedisOptions::new()
            .with_url_options("redis://h:1/2?prefix=a:b&protocol=resp3&allow_eviction=true")
            .unwrap();
        assert_eq!((o.prefix(), o.allow_eviction), ("a:b", true));
        assert_eq!(url, "redis://h:1/2?protocol=resp3");
        let (o, url) = RedisOptions::new().with_url_options("redis://h/").unwrap();
        assert_eq!((o.prefix(), url.as_str()), (DEFAULT_PREFIX, "redis://h/"));
        for bad in ["?prefix=", "?prefix=a{b}", "?allow_eviction=maybe"] {
            assert!(RedisOptions::new()
                .with_url_options(&format!("redis://h/{bad}"))
                .is_err());
        }
    }
}
