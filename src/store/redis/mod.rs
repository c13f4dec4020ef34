//! [`RedisStore`]: tasks in Redis (or Valkey), shared by every replica.
//!
//! The files: `options.rs` ([`RedisOptions`] and the URL options),
//! `keys.rs` (key names and list members), `fields.rs` (a record as script
//! arguments), `scripts.rs` (the Lua scripts, with the key layout),
//! `batch.rs` and `writes.rs` (the writes made at the same time, sent as
//! one call), `feed.rs` (the pub/sub change feed), `listing.rs` (the client's listing and one
//! bounded call of the `list` script), `operator.rs` (the operator API),
//! `chunks.rs` (its counts, a chunk a call), `tools.rs` (the tool
//! indexes).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, RedisResult};
use tokio::sync::broadcast;

use crate::store::{
    BoxFuture, ClaimQuery, Error, ListQuery, Result, TaskChange, TaskRecord, TaskStore,
};

mod batch;
mod chunks;
mod feed;
mod fields;
mod keys;
mod listing;
mod operator;
mod options;
mod scripts;
mod tools;
mod writes;

use batch::Batches;
use feed::Feed;
use fields::{decode, Fields};
use keys::Keys;
pub use options::{InvalidPrefix, RedisOptions, DEFAULT_PREFIX};
use scripts::{Scripts, SCAN_CAP};

/// How long a claim holds the runnable records it read while it writes its
/// claims (`scripts.rs`, `CLAIM`): records a claimer that died meanwhile
/// wait this long.
const CLAIM_HOLD_MS: i64 = 5_000;

/// Tasks in Redis or Valkey, shared by every replica that connects to the
/// same database with the same key prefix (feature `redis`).
///
/// - Every write is run by a Lua script, a compare-and-set on the stored
///   version (`create` only if the id is absent), by `EVALSHA`, loaded
///   again after a server restart or failover. The writes a process makes
///   at the same time go in one call of it, each applied as if alone.
/// - Expiring tasks are indexed in a sorted set by expiry time;
///   `delete_expired` deletes a batch in one script, so replicas reaping at
///   once each report disjoint ids. A task's key also gets a Redis TTL of
///   its remaining lifetime plus a minute, as a safety net only: reads
///   compare the expiry with the layer's `now_ms`, so a record reads as
///   expired exactly when the layer says so.
/// - `list` walks a sorted set per owner and era, newest first, with the
///   SQL stores' `(created_at_ms, id)` cursor; `orphans` a sorted set of
///   lease ends.
/// - [`claim_runnable`](TaskStore::claim_runnable) reads the oldest
///   runnable records in one script, which claims the queued ones itself
///   when the round says how ([`ClaimQuery::queued`]): one round trip for
///   a batch. Others it holds (concurrent claims read disjoint ones); the
///   claims `pick` makes of those are written next, each a compare-and-set
///   (all in one call), and those passed by are given back. None is lost
///   to another worker.
/// - [`changes`](TaskStore::changes) is pub/sub on `<prefix>:changes`: the
///   scripts publish every write a client can see (not lease renewals);
///   after every (re)subscription the feed says
///   [`Missed`](TaskChange::Missed).
///
/// # Keys
///
/// A task is one hash, `<prefix>:task:{<id>}` (the id is its hash tag).
/// The indexes are one key each, shared by all tasks: `<prefix>:expiry`,
/// `<prefix>:leases`, and `<prefix>:list:<era>:=<owner>` (or
/// `<prefix>:list:<era>:-` for tasks without an owner), and the operator's:
/// `<prefix>:ops:st:<status>`, `<prefix>:ops:tool:<tool>` and
/// `<prefix>:ops:ended` (`scripts.rs`). The scripts touch a
/// task and the indexes together, which are in different hash slots: the
/// store needs a standalone server (with replicas and Sentinel if you
/// like), not Redis Cluster, and this crate has no cluster client.
///
/// # Requirements
///
/// - `maxmemory-policy noeviction`: an evicted task would vanish, an
///   evicted index hide tasks from reaping or recovery. `connect` reads the
///   policy and refuses any other unless
///   [`RedisOptions::with_eviction_allowed`] (`?allow_eviction=true`) says
///   so; where `CONFIG` is disabled (managed services) it warns and goes
///   on.
/// - Persistence (`appendonly yes`, or RDB snapshots at least): a server
///   restarted without it has lost every task. `connect` warns when both
///   are off.
///
/// The URL is the `redis` crate's (`redis://[user:password@]host[:port][/db]`,
/// `rediss://` needs its TLS features in your own `Cargo.toml`), plus this
/// crate's `prefix=NAME` and `allow_eviction=true` query options.
///
/// ```no_run
/// use mcp_task_layer::store::{RedisOptions, RedisStore};
/// use mcp_task_layer::TaskLayer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect_with(
///     "redis://redis.internal:6379/0",
///     RedisOptions::new().with_prefix("mcp_tasks")?,
/// )
/// .await?;
/// let layer = TaskLayer::new(store);
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    conn: ConnectionManager,
    keys: Keys,
    scripts: Scripts,
    feed: Feed,
    batches: Batches,
    /// The runtime the connection was made on: it sends the write batches
    /// (`writes.rs`), whatever executor a caller polls from.
    runtime: tokio::runtime::Handle,
    closed: AtomicBool,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.keys.prefix)
            .finish_non_exhaustive()
    }
}

fn backend(e: RedisError) -> Error {
    Error::Backend(Box::new(e))
}

impl RedisStore {
    /// Connect to `url` with the default [`RedisOptions`] (those in the
    /// URL's query aside).
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// [`connect`](Self::connect) with options; `prefix=` and
    /// `allow_eviction=` in the URL override them.
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self> {
        let (options, url) = options
            .with_url_options(url)
            .map_err(|e| Error::Backend(e.into()))?;
        let client = redis::Client::open(url.as_str()).map_err(backend)?;
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|e| Error::Backend(e.into()))?;
        let config = ConnectionManagerConfig::new()
            .set_max_delay(Duration::from_secs(1))
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(10)));
        let mut conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(backend)?;
        check_server(&mut conn, options.allow_eviction).await?;
        let scripts = Scripts::new();
        for script in scripts.all() {
            script.load_async(&mut conn).await.map_err(backend)?;
        }
        let store = RedisStore {
            inner: Arc::new(Inner {
                client,
                conn,
                keys: Keys::new(&options.prefix),
                scripts,
                feed: Feed::default(),
                batches: Batches::default(),
                runtime,
                closed: AtomicBool::new(false),
            }),
        };
        store.index_tools().await?;
        Ok(store)
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.keys.prefix
    }

    /// Stop the change feed; later calls on this store (and its clones)
    /// fail. Commands already sent still complete.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.feed.stop.cancel();
    }

    fn conn(&self) -> Result<ConnectionManager> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Backend("the Redis task store was closed".into()));
        }
        Ok(self.inner.conn.clone())
    }

    /// A read, tried again once if the connection broke (the manager has
    /// reconnected by then, or is reconnecting).
    async fn read<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match op(self.conn()?).await {
            Err(e) if e.is_io_error() || e.is_connection_dropped() => {
                op(self.conn()?).await.map_err(backend)
            }
            other => other.map_err(backend),
        }
    }

    /// Create `record` (no `expected_version`), or write it over that
    /// version: the `WRITE` script's number (`scripts.rs`), sent with the
    /// writes made at the same time (`batch.rs`).
    async fn write(&self, record: &TaskRecord, expected_version: Option<u64>) -> Result<i64> {
        let (k, f) = (&self.inner.keys, Fields::of(record)?);
        let mode = expected_version.map_or_else(|| "c".to_owned(), |v| v.to_string());
        self.write_batched([
            mode,
            k.task(&record.id),
            k.list(record.owner.as_deref(), record.era),
            record.id.clone(),
            f.version,
            f.record,
            f.expires,
            f.lease,
            f.status.to_owned(),
            f.updated,
            f.member,
            f.key_ttl,
            f.holder,
            k.tool(&record.tool_name),
        ])
        .await
    }

    async fn create_record(&self, record: &TaskRecord) -> Result<()> {
        match self.write(record, None).await? {
            0 => Err(Error::AlreadyExists),
            _ => Ok(()),
        }
    }

    async fn replace_record(&self, record: &TaskRecord, expected_version: u64) -> Result<()> {
        match self.write(record, Some(expected_version)).await? {
            0 => Err(Error::NotFound),
            1 => Err(Error::Conflict),
            _ => Ok(()),
        }
    }

    async fn get_record(&self, id: &str, now_ms: i64) -> Result<Option<Arc<TaskRecord>>> {
        let key = self.inner.keys.task(id);
        let (json, expires): (Option<String>, Option<String>) = self
            .read(|mut conn| {
                let key = key.clone();
                async move {
                    redis::cmd("HMGET")
                        .arg(key)
                        .arg("rec")
                        .arg("exp")
                        .query_async(&mut conn)
                        .await
                }
            })
            .await?;
        let Some(json) = json else { return Ok(None) };
        let expired = match expires.as_deref() {
            None | Some("") => false,
            Some(at) => at
                .parse::<i64>()
                .map_err(|e| Error::Decode(Box::new(e)))?
                .le(&now_ms),
        };
        if expired {
            return Ok(None);
        }
        decode(&json).map(|r| Some(Arc::new(r)))
    }

    async fn reap(&self, now_ms: i64, limit: usize) -> Result<Vec<String>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = &self.inner.keys;
        self.inner
            .scripts
            .reap
            .key(&k.expiry)
            .key(&k.leases)
            .key(&k.all)
            .key(&k.ended)
            .arg(now_ms)
            .arg(limit)
            .arg(&k.task_head)
            .arg(&k.status_head)
            .invoke_async(&mut self.conn()?)
            .await
            .map_err(backend)
    }

    async fn orphan_records(&self, now_ms: i64, limit: usize) -> Result<Vec<Arc<TaskRecord>>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = &self.inner.keys;
        let rows: Vec<String> = self
            .read(|mut conn| {
                let mut invocation = self.inner.scripts.orphans.key(&k.leases);
                invocation
                    .arg(now_ms)
                    .arg(limit)
                    .arg(&k.task_head)
                    .arg(SCAN_CAP);
                async move { invocation.invoke_async(&mut conn).await }
            })
            .await?;
        rows.iter().map(|json| decode(json).map(Arc::new)).collect()
    }
}

impl RedisStore {
    /// [`TaskStore::claim_runnable`]: the `CLAIM` script reads up to `limit`
    /// runnable records and claims the queued ones itself when the round
    /// says how (`ClaimQuery::queued`), holding the others; the claims
    /// `pick` makes of those are written at once (each a compare-and-set on
    /// the version read, as `replace`), and the records passed by are given
    /// back.
    async fn claim_records(&self, round: ClaimQuery<'_>) -> Result<Vec<Arc<TaskRecord>>> {
        let ClaimQuery {
            now_ms,
            limit,
            pick,
            queued,
        } = round;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let k = &self.inner.keys;
        let mut invocation = self.inner.scripts.claim.key(&k.leases);
        invocation
            .arg(now_ms)
            .arg(limit)
            .arg(&k.task_head)
            .arg(now_ms.saturating_add(CLAIM_HOLD_MS))
            .arg(SCAN_CAP);
        match queued {
            Some(q) => {
                let quoted =
                    serde_json::to_string(q.holder).map_err(|e| Error::Encode(Box::new(e)))?;
                invocation.arg(q.holder).arg(quoted).arg(q.until_ms);
                for id in q.skip {
                    invocation.arg(id);
                }
            }
            None => {
                invocation.arg("").arg("").arg(0);
            }
        }
        let rows: Vec<String> = invocation
            .invoke_async(&mut self.conn()?)
            .await
            .map_err(backend)?;
        let (mut won, mut claims, mut passed) = (Vec::new(), Vec::new(), Vec::new());
        for pair in rows.chunks(2) {
            let [kind, json] = pair else {
                return Err(Error::Decode(
                    "the Redis CLAIM script answered an odd number of values".into(),
                ));
            };
            let record = decode(json)?;
            if kind == "c" {
                // Claimed by the script, as `queued` says `pick` would.
                won.push(Arc::new(record));
                continue;
            }
            match pick(&record) {
                Some(next) => claims.push((Arc::new(next), record.version)),
                None => passed.push((record.id, record.version)),
            }
        }
        let writes = claims
            .iter()
            .map(|(next, expected)| self.replace_record(next, *expected));
        let (written, released) = tokio::join!(join_all(writes), self.release(&passed));
        if let Err(e) = released {
            // Runnable again when the hold ends.
            tracing::warn!(error = %e, "cannot give back runnable tasks a claim passed by");
        }
        let mut failed = None;
        for ((next, _), outcome) in claims.into_iter().zip(written) {
            match outcome {
                Ok(()) => won.push(next),
                // Cancelled, or deleted, since the read.
                Err(Error::Conflict | Error::NotFound) => {}
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        match failed {
            Some(e) if won.is_empty() => Err(e),
            _ => Ok(won),
        }
    }

    /// Give back the records (id, version) a claim held and passed by.
    async fn release(&self, passed: &[(String, u64)]) -> Result<()> {
        if passed.is_empty() {
            return Ok(());
        }
        let k = &self.inner.keys;
        let mut invocation = self.inner.scripts.release.key(&k.leases);
        invocation.arg(&k.task_head);
        for (id, version) in passed {
            invocation.arg(id).arg(version.to_string());
        }
        invocation
            .invoke_async::<i64>(&mut self.conn()?)
            .await
            .map(drop)
            .map_err(backend)
    }
}

/// Refuse a server that may evict keys (unless allowed), and warn about
/// one that keeps nothing across a restart.
async fn check_server(conn: &mut ConnectionManager, allow_eviction: bool) -> Result<()> {
    let setting = |name: &'static str| {
        let mut conn = conn.clone();
        async move {
            let found: RedisResult<HashMap<String, String>> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async(&mut conn)
                .await;
            found.map(|mut m| m.remove(name).unwrap_or_default())
        }
    };
    match setting("maxmemory-policy").await {
        Ok(policy) if policy == "noeviction" => {}
        Ok(policy) if allow_eviction => tracing::warn!(
            policy,
            "the Redis server may evict task keys (allowed by the store's options)"
        ),
        Ok(policy) => {
            return Err(Error::Backend(
                format!(
                    "the Redis server's maxmemory-policy is {policy:?}: it may evict tasks and \
                     the store's indexes. Set `maxmemory-policy noeviction`, or allow eviction \
                     (RedisOptions::with_eviction_allowed, or ?allow_eviction=true in the URL)"
                )
                .into(),
            ))
        }
        Err(e) => {
            tracing::warn!(
                error = %e,
                "cannot read the Redis server's maxmemory-policy (CONFIG GET refused); the task \
                 store needs `noeviction`"
            );
            return Ok(());
        }
    }
    if let (Ok(aof), Ok(save)) = (setting("appendonly").await, setting("save").await) {
        if aof == "no" && save.trim().is_empty() {
            tracing::warn!(
                "the Redis server persists nothing (appendonly no, no save points): \
                 a restart of it loses every task"
            );
        }
    }
    Ok(())
}

impl TaskStore for RedisStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.create_record(&record).await })
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        Box::pin(self.get_record(id, now_ms))
    }

    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.replace_record(&record, expected_version).await })
    }

    fn create_shared(&self, record: Arc<TaskRecord>) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.create_record(&record).await })
    }

    fn replace_shared(
        &self,
        record: Arc<TaskRecord>,
        expected_version: u64,
    ) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.replace_record(&record, expected_version).await })
    }

    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(self.reap(now_ms, limit))
    }

    fn list<'a>(&'a self, query: ListQuery<'a>) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(self.list_records(query))
    }

    fn orphans(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(self.orphan_records(now_ms, limit))
    }

    fn claim_runnable<'a>(
        &'a self,
        round: ClaimQuery<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(self.claim_records(round))
    }

    fn operator(&self) -> Option<&dyn crate::store::OperatorStore> {
        Some(self)
    }

    fn changes(&self) -> Option<broadcast::Receiver<TaskChange>> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return None;
        }
        self.inner
            .feed
            .subscribe(&self.inner.client, &self.inner.keys.channel)
    }
}
