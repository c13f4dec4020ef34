//! The one compare-and-set loop every writer of a task goes through: read,
//! decide, write if the version is still the one read, retry on a lost
//! race, give up after [`MAX_CAS_RETRIES`].

use std::sync::Arc;

use super::engine::{may_see, Engine};
use super::errors::{changing_too_fast, store_failure, task_not_found};
use crate::jsonrpc::JsonRpcError;
use crate::store::{self, Era, TaskRecord, TaskStore};

/// Bound on compare-and-set retries; each retry means another writer won.
const MAX_CAS_RETRIES: usize = 64;

/// Who reads the task, and so which records it may see.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Reader<'a> {
    /// A client: only its own tasks of its era (R51).
    Caller { owner: Option<&'a str>, era: Era },
    /// This replica's runner of the task.
    Runner,
    /// An operator ([`Operator`](crate::Operator)): any task, read as
    /// stored (a record sealed at rest with its sealed fields, not as
    /// unreadable).
    Operator,
}

/// What a writer decided after reading the record.
// The record goes straight into the `Arc` the store keeps: boxing it here
// would cost one more allocation per write.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decision<T> {
    /// Write this next version.
    Write(TaskRecord, T),
    /// Write nothing.
    Keep(T),
}

/// What came of a compare-and-set.
pub(crate) enum Outcome<T> {
    /// `next` replaced `prev`.
    Wrote {
        prev: Arc<TaskRecord>,
        next: Arc<TaskRecord>,
        then: T,
    },
    /// The writer decided to write nothing.
    Kept(T),
}

/// Why a compare-and-set did not end in a decision.
#[derive(Debug)]
pub(crate) enum CasError<E> {
    /// The task is absent, expired, or not the reader's to see.
    Gone,
    /// The store failed to read it.
    Read(store::Error),
    /// The store failed to write it.
    Write(store::Error),
    /// Every retry lost to another writer.
    TooFast,
    /// The writer refused the change.
    Refused(E),
}

impl From<CasError<JsonRpcError>> for JsonRpcError {
    fn from(e: CasError<JsonRpcError>) -> Self {
        match e {
            CasError::Gone => task_not_found(),
            CasError::Read(e) | CasError::Write(e) => store_failure(&e),
            CasError::TooFast => changing_too_fast(),
            CasError::Refused(e) => e,
        }
    }
}

impl Engine {
    /// Read task `id` as `reader`, let `decide` choose its next version,
    /// and write it only over the version read; on a lost race, read and
    /// decide again.
    pub(crate) async fn compare_and_set<T, E>(
        &self,
        id: &str,
        reader: Reader<'_>,
        decide: impl FnMut(&TaskRecord) -> Result<Decision<T>, E>,
    ) -> Result<Outcome<T>, CasError<E>> {
        self.compare_and_set_from(id, reader, None, decide).await
    }

    /// [`compare_and_set`](Self::compare_and_set) that decides first on
    /// `known`, a version of the task this replica wrote (a worker's
    /// claim), instead of reading it: one round trip fewer when no one
    /// wrote since. The write is still over `known`'s version, so a lost
    /// race (a cancel, a renewal) reads and decides again as usual.
    pub(crate) async fn compare_and_set_from<T, E>(
        &self,
        id: &str,
        reader: Reader<'_>,
        mut known: Option<Arc<TaskRecord>>,
        mut decide: impl FnMut(&TaskRecord) -> Result<Decision<T>, E>,
    ) -> Result<Outcome<T>, CasError<E>> {
        for _ in 0..MAX_CAS_RETRIES {
            let record = match known.take() {
                Some(record) if record.id == id => record,
                _ => self.read_as(id, reader).await?,
            };
            let (next, then) = match decide(&record).map_err(CasError::Refused)? {
                Decision::Keep(then) => return Ok(Outcome::Kept(then)),
                Decision::Write(mut next, then) => {
                    TaskRecord::note_status_change(&mut next, &record);
                    (Arc::new(next), then)
                }
            };
            match self
                .store_for(reader)
                .replace_shared(Arc::clone(&next), record.version)
                .await
            {
                Ok(()) => {
                    return Ok(Outcome::Wrote {
                        prev: record,
                        next,
                        then,
                    })
                }
                Err(store::Error::Conflict) => continue,
                Err(store::Error::NotFound) => return Err(CasError::Gone),
                Err(e) => return Err(CasError::Write(e)),
            }
        }
        Err(CasError::TooFast)
    }

    /// Where `reader` reads and writes: an operator, the records as stored
    /// (under a `SealedStore`, sealed: a cancel needs no key).
    fn store_for(&self, reader: Reader<'_>) -> &dyn TaskStore {
        match reader {
            Reader::Operator => self
                .store
                .operator()
                .and_then(|ops| ops.as_stored())
                .unwrap_or(&*self.store),
            _ => &*self.store,
        }
    }

    /// Task `id` as `reader` may see it.
    async fn read_as<E>(
        &self,
        id: &str,
        reader: Reader<'_>,
    ) -> Result<Arc<TaskRecord>, CasError<E>> {
        let found = self.store_for(reader).get(id, self.now_ms()).await;
        let found = match reader {
            Reader::Operator => found,
            _ => store::opened_found(found),
        }
        .map_err(CasError::Read)?;
        match (found, reader) {
            (Some(r), Reader::Runner | Reader::Operator) => Ok(r),
            (Some(r), Reader::Caller { owner, era }) if may_see(&r, owner, era) => Ok(r),
            _ => Err(CasError::Gone),
        }
    }
}
