//! [`Operator`]: what an operator may do to every task of a store.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::cas::{CasError, Decision, Outcome, Reader};
use super::engine::Engine;
use super::hub::TaskEvent;
use super::transition;
use crate::config::Config;
use crate::protocol::TaskStatus;
use crate::store::{
    self, Error, OperatorStore, TaskChange, TaskPage, TaskQuery, TaskRecord, TaskStats, TaskStore,
    MAX_PAGE,
};

/// An operator's handle on every task of a store, whoever owns it and
/// whichever protocol era made it: list, show, count, cancel and purge.
///
/// It is a Rust API and nothing else: no MCP request reaches it, and it
/// never checks an owner. Hand it only to code that acts for the people
/// who run the server (an admin page behind their own sign-in, the
/// `mcp-tasks` command).
///
/// Make one from a [`TaskLayer`](crate::TaskLayer)
/// ([`TaskLayer::operator`](crate::TaskLayer::operator)) or from a store
/// alone ([`Operator::new`]):
///
/// - Cancelling writes the same compare-and-set as `tasks/cancel`. From a
///   layer's operator, a handler running in this process has its
///   cancellation token tripped at once.
/// - A handler running in another process (a replica, a worker) stops
///   when that process hears of the cancel: at once on a store with a
///   change feed (PostgreSQL, Redis), at its next lease heartbeat
///   otherwise (a third of the lease TTL, 10 s by default). This is all a
///   store-only operator (the `mcp-tasks cancel` command) can do too: it
///   runs no handler itself, so it stops none but through the store.
/// - Records come back as the store holds them: a record sealed at rest
///   keeps its sealed fields, and shows no arguments or result, unless the
///   store is a `SealedStore` with the keys. Cancelling a sealed task
///   needs no key (a cancelled task keeps none of its private fields):
///   through a `SealedStore`, the cancel reads and writes the store
///   underneath ([`OperatorStore::as_stored`](crate::store::OperatorStore::as_stored)),
///   so a task its keys do not open (read as `failed`) is cancelled all
///   the same, and every replica reads the cancel whatever its keys.
///
/// ```
/// use mcp_task_layer::store::TaskQuery;
/// use mcp_task_layer::{MemoryStore, TaskLayer, TaskStatus};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), mcp_task_layer::store::Error> {
/// let layer = TaskLayer::new(MemoryStore::new());
/// let operator = layer.operator();
/// let page = operator
///     .list(&TaskQuery::new().status(TaskStatus::InputRequired).limit(20))
///     .await?;
/// for task in &page.tasks {
///     println!("{} {} {}", task.id, task.tool_name, task.status);
/// }
/// let stats = operator.stats().await?;
/// println!("{} working", stats.count(TaskStatus::Working));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Operator {
    engine: Arc<Engine>,
}

impl fmt::Debug for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operator")
            .field("store", &self.engine.store)
            .finish_non_exhaustive()
    }
}

/// What came of cancelling one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The task was `working` or `input_required`, and is now `cancelled`.
    Cancelled,
    /// The task had already ended, in this status; nothing was written.
    AlreadyEnded(TaskStatus),
}

impl Operator {
    /// An operator over `store` alone (see the type's docs for what it can
    /// and cannot stop).
    pub fn new(store: impl TaskStore) -> Self {
        Operator::from_shared(Arc::new(store))
    }

    /// [`new`](Self::new) over a shared store, such as
    /// [`store::connect`](crate::store::connect) opens.
    pub fn from_shared(store: Arc<dyn TaskStore>) -> Self {
        let (events, _) = broadcast::channel(16);
        Operator {
            engine: Engine::new(store, Config::default(), events),
        }
    }

    /// The operator of a layer's engine: its cancels trip the tokens of the
    /// handlers it runs.
    pub(crate) fn of(engine: Arc<Engine>) -> Self {
        Operator { engine }
    }

    fn ops(&self) -> store::Result<&dyn OperatorStore> {
        self.engine
            .store
            .operator()
            .ok_or(Error::Unsupported("the operator API"))
    }

    fn now_ms(&self) -> i64 {
        self.engine.now_ms()
    }

    /// One page of the tasks `query` asks for, newest first; hand
    /// [`TaskPage::next`] to [`TaskQuery::after`] for the next one.
    pub async fn list(&self, query: &TaskQuery) -> store::Result<TaskPage> {
        let found = self.ops()?.find(query, self.now_ms()).await?;
        Ok(found.into_page(query.page_size()))
    }

    /// Task `id`, whoever's it is; `None` if it is unknown or expired.
    pub async fn get(&self, id: &str) -> store::Result<Option<Arc<TaskRecord>>> {
        self.engine.store.get(id, self.now_ms()).await
    }

    /// Counts by status, the oldest waiting tasks and the running ones by
    /// holder.
    pub async fn stats(&self) -> store::Result<TaskStats> {
        self.ops()?.stats(self.now_ms()).await
    }

    /// How many tasks ended in each span of `query` (see
    /// [`EndedQuery::last`](crate::store::EndedQuery::last) for the last
    /// hour by minute), by how they ended.
    pub async fn ended(&self, query: store::EndedQuery) -> store::Result<store::EndedCounts> {
        self.ops()?.ended(query).await
    }

    /// The status changes this operator's engine writes: a layer's
    /// (every write of its services, as
    /// [`TaskLayer::subscribe`](crate::TaskLayer::subscribe)) and this
    /// operator's cancels. Writes of other processes come through
    /// [`store_changes`](Self::store_changes).
    pub fn subscribe(&self) -> broadcast::Receiver<TaskEvent> {
        self.engine.events().subscribe()
    }

    /// The store's feed of changes written by every process
    /// ([`TaskStore::changes`]), if it has one (PostgreSQL, Redis); `None`
    /// otherwise: then only a re-read shows other processes' writes.
    /// Call it inside a tokio runtime.
    pub fn store_changes(&self) -> Option<broadcast::Receiver<TaskChange>> {
        self.engine.store.changes()
    }

    /// Whether the store's search ([`TaskQuery::search`]) can match its
    /// tasks (`false` for a store sealing arguments at rest).
    pub fn searches_arguments(&self) -> bool {
        self.ops().is_ok_and(|ops| ops.searches_arguments())
    }

    /// Cancel task `id` as `tasks/cancel` does, whoever's it is:
    /// [`Error::NotFound`] if it is unknown or expired.
    pub async fn cancel(&self, id: &str) -> store::Result<CancelOutcome> {
        let written = self
            .engine
            .compare_and_set(id, Reader::Operator, |record| {
                if record.status.is_terminal() {
                    return Ok::<_, ()>(Decision::Keep(record.status));
                }
                let next = transition::cancelled_by_operator(record, self.now_ms());
                Ok(Decision::Write(next, TaskStatus::Cancelled))
            })
            .await;
        match written {
            Ok(Outcome::Wrote { prev, next, .. }) => {
                self.engine.after_cancel(&prev, &next);
                Ok(CancelOutcome::Cancelled)
            }
            Ok(Outcome::Kept(status)) => Ok(CancelOutcome::AlreadyEnded(status)),
            Err(CasError::Gone) => Err(Error::NotFound),
            Err(CasError::Read(e) | CasError::Write(e)) => Err(e),
            Err(CasError::TooFast | CasError::Refused(())) => Err(Error::Conflict),
        }
    }

    /// Cancel every unfinished task `query` matches (its page size and
    /// cursor aside); how many this call cancelled. Tasks that end or are
    /// created meanwhile may be left, as a concurrent finish wins.
    pub async fn cancel_matching(&self, query: &TaskQuery) -> store::Result<u64> {
        let Some(mut page) = query.unfinished_only() else {
            return Ok(0);
        };
        page = page.limit(MAX_PAGE);
        let mut cancelled = 0;
        loop {
            let found = self.list(&page).await?;
            for task in &found.tasks {
                match self.cancel(&task.id).await {
                    Ok(CancelOutcome::Cancelled) => cancelled += 1,
                    Ok(CancelOutcome::AlreadyEnded(_)) | Err(Error::NotFound) => {}
                    Err(e) => return Err(e),
                }
            }
            match found.next {
                Some(next) => page = page.after(next),
                None => return Ok(cancelled),
            }
        }
    }

    /// Delete every terminal task `query` matches (its page size and
    /// cursor aside); how many were deleted. Tasks still `working` or
    /// `input_required` are never deleted.
    pub async fn purge_matching(&self, query: &TaskQuery) -> store::Result<u64> {
        let Some(batch) = query.terminal_only() else {
            return Ok(0);
        };
        let mut batch = batch.limit(MAX_PAGE);
        let ops = self.ops()?;
        let mut purged = 0;
        loop {
            let done = ops.purge(&batch, self.now_ms()).await?;
            purged += done.deleted;
            match done.walked_to {
                // The walk stopped at its budget: go on below where it
                // stopped (what it passed matched nothing left).
                Some(at) => batch = batch.after(at),
                None if done.deleted < batch.page_size() as u64 => return Ok(purged),
                None => {}
            }
        }
    }

    /// Delete the terminal tasks created longer than `age` ago; how many.
    pub async fn purge_older_than(&self, age: Duration) -> store::Result<u64> {
        let cutoff = self.now_ms().saturating_sub(crate::clock::ms(age));
        self.purge_matching(&TaskQuery::new().created_before_ms(cutoff))
            .await
    }
}
