//! [`SealedStore`]: any [`TaskStore`] with the private parts of every
//! record encrypted before they reach it (feature `seal`).

mod envelope;
mod keyring;
mod operator;

use std::sync::Arc;

use tracing::warn;

use super::{BoxFuture, ClaimQuery, ListQuery, Result, TaskChange, TaskRecord, TaskStore};

pub use keyring::{SealKeyError, SealKeyRing, SEAL_KEY_BYTES};

/// A [`TaskStore`] whose records' private fields are sealed at rest.
///
/// A task record holds the tool's arguments, the request `_meta`, the
/// input requests and every answer the user gave, the handler's
/// `requestState`, the status message and the result or error: in a SQL
/// table, a Redis key or a backup, all of it readable by whoever can read
/// the store. Wrapped in a `SealedStore`, each of these fields is sealed on
/// its own with XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`) under
/// the newest key of a [`SealKeyRing`], a fresh random 192-bit nonce per
/// value, and the task id, the field name and the key id as associated data:
/// a sealed value copied into another task's record, or into another field,
/// does not open.
///
/// What stays in clear is what a store indexes or a layer must read without
/// the key, and none of it came from the user: the task id (random), the
/// owner key (the store finds a caller's tasks by it; make it a hash or an
/// opaque id), the era, the status, the timestamps, TTL and poll interval,
/// the version, the lease (holder replica and fence), the round count, the
/// cancel flag, the tool name, and the input keys the client was shown.
///
/// # Fail closed
///
/// A record whose sealed field does not open (its key is not in the ring,
/// or the value was altered or moved) reads as a `failed` task whose error
/// (`-32603`) and status message say that its stored data could not be
/// opened and why (which field, which key id; never any content). Nothing
/// is written back: the stored record is untouched, so putting the missing
/// key back in the ring makes the task readable again. The one exception
/// is an operator's cancel of such a task while it is unfinished: it is
/// written as stored, cancelled, and its private fields are gone with it,
/// as for any cancelled task. A record written
/// before sealing was turned on has no sealed field and reads as it is;
/// its next write seals it. A sealed record read by a layer whose store is
/// not wrapped in a `SealedStore` reads as failed the same way (no key
/// ring), never as a task without its arguments or result.
///
/// # Example
///
/// ```
/// use mcp_task_layer::store::{MemoryStore, SealKeyRing, SealedStore};
/// use mcp_task_layer::TaskLayer;
///
/// let ring = SealKeyRing::single("k1", [7; 32])?; // load real keys from a file
/// let layer = TaskLayer::new(SealedStore::new(MemoryStore::new(), ring));
/// # let _ = layer;
/// # Ok::<(), mcp_task_layer::store::SealKeyError>(())
/// ```
#[derive(Debug)]
pub struct SealedStore<S> {
    inner: S,
    ring: Arc<SealKeyRing>,
}

impl<S: TaskStore> SealedStore<S> {
    /// `inner`, sealing with the newest key of `ring`.
    pub fn new(inner: S, ring: SealKeyRing) -> Self {
        SealedStore {
            inner,
            ring: Arc::new(ring),
        }
    }

    /// The store underneath, holding sealed records.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn seal(&self, record: TaskRecord) -> Result<TaskRecord> {
        envelope::seal(&self.ring, record)
    }

    fn open(&self, record: Arc<TaskRecord>) -> Arc<TaskRecord> {
        if record.sealed.is_empty() {
            return record;
        }
        let mut record = Arc::unwrap_or_clone(record);
        match envelope::open(&self.ring, &mut record) {
            Ok(()) => Arc::new(record),
            Err(e) => {
                warn!(task_id = %record.id, field = %e.field, reason = %e.why, "a sealed task record does not open");
                Arc::new(record.unreadable(&format!("sealed field {}: {}", e.field, e.why)))
            }
        }
    }

    fn open_all(&self, records: Vec<Arc<TaskRecord>>) -> Vec<Arc<TaskRecord>> {
        records.into_iter().map(|r| self.open(r)).collect()
    }
}

impl<S: TaskStore> TaskStore for SealedStore<S> {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        match self.seal(record) {
            Ok(sealed) => self.inner.create(sealed),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        Box::pin(async move { Ok(self.inner.get(id, now_ms).await?.map(|r| self.open(r))) })
    }

    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>> {
        match self.seal(record) {
            Ok(sealed) => self.inner.replace(sealed, expected_version),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        self.inner.delete_expired(now_ms, limit)
    }

    fn list<'a>(&'a self, query: ListQuery<'a>) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(async move {
            let page = self.inner.list(query).await?;
            Ok(self.open_all(page))
        })
    }

    fn orphans(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(async move { Ok(self.open_all(self.inner.orphans(now_ms, limit).await?)) })
    }

    fn runnable(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(async move { Ok(self.open_all(self.inner.runnable(now_ms, limit).await?)) })
    }

    /// `pick` sees each record opened; what it makes is sealed before it
    /// is written. A record whose claim cannot be sealed is passed by.
    fn claim_runnable<'a>(
        &'a self,
        round: ClaimQuery<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(async move {
            let mut sealed_pick = |record: &TaskRecord| {
                let opened = self.open(Arc::new(record.clone()));
                let next = (round.pick)(&opened)?;
                match self.seal(next) {
                    Ok(sealed) => Some(sealed),
                    Err(e) => {
                        warn!(task_id = %record.id, error = %e, "cannot seal a claim; passed by");
                        None
                    }
                }
            };
            let won = self
                .inner
                .claim_runnable(ClaimQuery::new(round.now_ms, round.limit, &mut sealed_pick))
                .await?;
            Ok(self.open_all(won))
        })
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        self.inner.changes()
    }

    fn get_ready(&self, id: &str, now_ms: i64) -> Option<Result<Option<Arc<TaskRecord>>>> {
        self.inner
            .get_ready(id, now_ms)
            .map(|found| found.map(|r| r.map(|r| self.open(r))))
    }
    /// Offered when the store underneath offers it.
    fn operator(&self) -> Option<&dyn super::OperatorStore> {
        self.inner
            .operator()
            .map(|_| self as &dyn super::OperatorStore)
    }
}
