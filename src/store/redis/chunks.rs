//! The operator's reads that walk a whole index (counts, the waiting
//! tasks, the fleet, the ended tasks) do so a chunk of [`CHUNK`] members
//! per script call, by rank, so that no call holds the server for the
//! length of an index (after a long pause, every expired task is still in
//! `expiry`; a backlog puts every queued task in `leases`). The calls are
//! not one snapshot: a member that moves meanwhile may be read twice or
//! not at all, as the moment's counts allow.

use redis::Script;

use super::RedisStore;
use crate::store::{Error, Result};

/// The members one call reads.
pub(super) const CHUNK: usize = 1_000;

impl RedisStore {
    /// `script` on `keys` with `args`, then a chunk's first rank and
    /// [`CHUNK`], a chunk after another until one reads fewer; `each` is
    /// given every call's answer after its first element (how many
    /// members it read).
    pub(super) async fn chunks(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
        mut each: impl FnMut(&[String]) -> Result<()>,
    ) -> Result<()> {
        let mut first = 0;
        loop {
            let answer: Vec<String> = self
                .read(|mut conn| {
                    let mut invocation = script.prepare_invoke();
                    for key in keys {
                        invocation.key(*key);
                    }
                    for arg in args {
                        invocation.arg(*arg);
                    }
                    invocation.arg(first).arg(CHUNK);
                    async move { invocation.invoke_async(&mut conn).await }
                })
                .await?;
            let Some((read, rest)) = answer.split_first() else {
                return Err(Error::Decode("an operator script answered nothing".into()));
            };
            each(rest)?;
            let read: usize = number(read)?;
            if read < CHUNK {
                return Ok(());
            }
            first += read;
        }
    }
}

/// A number a script wrote as text.
pub(super) fn number<T: std::str::FromStr>(text: &str) -> Result<T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.parse().map_err(|e| Error::Decode(Box::new(e)))
}
