//! The operator's tool indexes (`<prefix>:ops:tool:<tool>`): filled at
//! connect for tasks stored before they existed, and read for a listing
//! that names a tool when no other index the query names is smaller.

use super::keys::STATUSES;
use super::{backend, RedisStore};
use crate::store::operator::TaskQuery;
use crate::store::{Era, Result};

/// Tasks put in their tool's index per script call while filling them.
const INDEX_BATCH: usize = 500;

impl RedisStore {
    /// Put every task stored before the tool indexes existed into its
    /// tool's index, once per prefix: a batch per script call (each
    /// atomic, so a task deleted meanwhile leaves no member behind), then
    /// the `tools_indexed` mark. Replicas connecting at once may both fill
    /// them; a member is added once whoever adds it.
    pub(super) async fn index_tools(&self) -> Result<()> {
        let k = &self.inner.keys;
        let mut conn = self.conn()?;
        let done: bool = redis::cmd("EXISTS")
            .arg(&k.tools_indexed)
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        if done {
            return Ok(());
        }
        let mut from = "-".to_owned();
        let mut batches = 0_u64;
        loop {
            let last: String = self
                .inner
                .scripts
                .index_tools
                .key(&k.all)
                .arg(&k.task_head)
                .arg(&k.tool_head)
                .arg(&from)
                .arg(INDEX_BATCH)
                .invoke_async(&mut conn)
                .await
                .map_err(backend)?;
            batches += 1;
            if last.is_empty() {
                break;
            }
            from = format!("({last}");
        }
        if batches > 1 {
            tracing::info!(prefix = %k.prefix, batches, "redis store: tool indexes filled");
        }
        redis::cmd("SET")
            .arg(&k.tools_indexed)
            .arg(1)
            .query_async::<()>(&mut conn)
            .await
            .map_err(backend)
    }

    /// The indexes a listing for `query` walks (their members merged): of
    /// those the query names (its statuses' indexes, one tool's, one
    /// owner's two listing sets), the one with the fewest members; every
    /// status's (together, every task) if it names none.
    pub(super) async fn narrowest(&self, query: &TaskQuery) -> Result<Vec<String>> {
        let k = &self.inner.keys;
        let mut named: Vec<Vec<String>> = Vec::new();
        if !query.statuses().is_empty() {
            named.push(query.statuses().iter().map(|s| k.status(*s)).collect());
        }
        if let Some(tool) = query.tool_name() {
            named.push(vec![k.tool(tool)]);
        }
        if let Some(owner) = query.owner_key() {
            named.push(vec![
                k.list(Some(owner), Era::Modern),
                k.list(Some(owner), Era::Legacy),
            ]);
        }
        if named.len() < 2 {
            return Ok(named
                .pop()
                .unwrap_or_else(|| STATUSES.iter().map(|s| k.status(*s)).collect()));
        }
        let mut pipe = redis::pipe();
        for key in named.iter().flatten() {
            pipe.cmd("ZCARD").arg(key);
        }
        let sizes: Vec<u64> = self
            .read(|mut conn| {
                let pipe = pipe.clone();
                async move { pipe.query_async(&mut conn).await }
            })
            .await?;
        let mut sizes = sizes.into_iter();
        let mut best: Option<(u64, Vec<String>)> = None;
        for keys in named {
            let size: u64 = sizes.by_ref().take(keys.len()).sum();
            if best.as_ref().is_none_or(|(b, _)| size < *b) {
                best = Some((size, keys));
            }
        }
        Ok(best.map(|(_, keys)| keys).unwrap_or_default())
    }
}
