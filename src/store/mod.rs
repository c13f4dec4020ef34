//! Where tasks live: the [`TaskStore`] trait, its record and errors, and the
//! conformance suite every backend must pass.
//!
//! Stores are small and dumb on purpose. They keep [`TaskRecord`]s and offer
//! a handful of typed primitives, every write a compare-and-set on the
//! record's `version`. The state machine, the key rules, bounds and the era
//! logic live once, in the layer.
//!
//! # Implementing a store
//!
//! - [`create`](TaskStore::create) inserts only if the id is absent.
//! - [`get`](TaskStore::get) hides records whose TTL has run out at `now_ms`.
//! - [`replace`](TaskStore::replace) writes a record only if the stored one
//!   still has `expected_version`; the new record carries
//!   `expected_version + 1`.
//! - [`delete_expired`](TaskStore::delete_expired) removes at most `limit`
//!   expired records and returns their ids; it must be cheap when nothing has
//!   expired and safe to run from several places at once.
//! - [`list`](TaskStore::list) (optional) returns one owner's records of one
//!   era, never anyone else's.
//! - [`operator`](TaskStore::operator) (optional, but the conformance suite
//!   asks for it) hands out the store's [`OperatorStore`]: every record,
//!   across owners and eras, by a [`TaskQuery`], newest first and paged by
//!   keyset on an index; counts ([`TaskStats`]); purges of finished
//!   records.
//!
//! A store shared by several replicas may also report changes written by
//! any of them ([`changes`](TaskStore::changes)); the layer then stops a
//! cancelled task's handler and updates subscribers at once instead of at
//! the next lease heartbeat. A store that reads without waiting (in memory)
//! may answer [`get_ready`](TaskStore::get_ready) and
//! [`view_ready`](TaskStore::view_ready), and the layer then answers
//! `tasks/get` inside `Service::call`.
//!
//! A [`TaskRecord`] serializes with serde, so a backend may keep it as one
//! blob next to the few columns it indexes (`id`, `owner`, `era`, `status`,
//! [`expires_at_ms`](TaskRecord::expires_at_ms), `version`). Its arguments,
//! `_meta` and result are [`JsonText`]: they serialize as the JSON they
//! hold, and must be read back with `serde_json`'s deserializer (as
//! `serde_json::from_str` does). Run [`conformance::run`] against your
//! store in a test.
#![cfg_attr(
    any(feature = "sqlite", feature = "postgres"),
    doc = include_str!("sql/README.md")
)]
// The README links both SQL stores; one whose feature is off links to the
// crate's feature table instead.
#![cfg_attr(feature = "sqlite", doc = "[`SqliteStore`]: SqliteStore")]
#![cfg_attr(
    all(feature = "postgres", not(feature = "sqlite")),
    doc = "[`SqliteStore`]: crate#feature-flags"
)]
#![cfg_attr(feature = "postgres", doc = "[`PostgresStore`]: PostgresStore")]
#![cfg_attr(
    all(feature = "sqlite", not(feature = "postgres")),
    doc = "[`PostgresStore`]: crate#feature-flags"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Recovery;
use crate::json::JsonText;
use crate::jsonrpc::JsonRpcError;
use crate::protocol::{InputRequest, InputResponses, TaskStatus};

mod claim;
pub mod conformance;
mod connect;
mod ended;
mod history;
mod listing;
mod memory;
mod operator;
mod page;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "seal")]
mod sealed;
mod shared;
mod span;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "redis"))]
mod url;
mod view;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::{InvalidPrefix, RedisOptions, RedisStore, DEFAULT_PREFIX};
pub use claim::{ClaimQuery, Pick, QueuedClaim};
pub use connect::{connect, redacted};
pub use ended::{EndedCounts, EndedQuery, MAX_SPANS};
pub use history::{StatusChange, MAX_HISTORY};
pub use listing::ListQuery;
pub use memory::MemoryStore;
pub use operator::{
    OperatorStore, TaskQuery, TaskStats, WaitingTask, DEFAULT_PAGE, LONGEST_WAITING, MAX_PAGE,
};
pub use page::{Found, InvalidCursor, Purged, TaskCursor, TaskPage, WALK_BUDGET};
#[cfg(feature = "seal")]
#[cfg_attr(docsrs, doc(cfg(feature = "seal")))]
pub use sealed::{SealKeyError, SealKeyRing, SealedStore, SEAL_KEY_BYTES};
pub use span::{Relative, Span};
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use sql::PostgresStore;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sql::SqliteStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "sqlite", feature = "postgres"))))]
pub use sql::{InvalidTableName, SqlOptions, DEFAULT_PAGE_TIME, DEFAULT_TABLE};
pub use view::{OutcomeView, TaskView, ViewQuery};

/// A change a store reports through [`TaskStore::changes`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskChange {
    /// Task `id` was written, by any replica, at `version` with `status`.
    /// Lease renewals, which change nothing a client sees, need not be
    /// reported.
    Updated {
        /// The task id.
        id: String,
        /// The version written.
        version: u64,
        /// The status written.
        status: TaskStatus,
    },
    /// Changes may have been lost (the store's notification connection
    /// dropped, say): re-read whatever is being watched.
    Missed,
}

/// A change as the stores that announce them write it,
/// `"<version> <status> <id>"` (PostgreSQL's trigger, Redis's scripts).
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn parse_change(payload: &str) -> Option<TaskChange> {
    let mut parts = payload.splitn(3, ' ');
    let version = parts.next()?.parse().ok()?;
    let status = TaskStatus::from_wire(parts.next()?)?;
    let id = parts.next()?.to_owned();
    Some(TaskChange::Updated {
        id,
        version,
        status,
    })
}

/// A boxed, `Send` future: what the object-safe [`TaskStore`] methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A boxed error source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The result of a store operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in a store.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `create` found a record with the same id.
    AlreadyExists,
    /// `replace` found no record with that id.
    NotFound,
    /// `replace` found a record whose version was not the expected one.
    Conflict,
    /// The store does not offer this operation.
    Unsupported(&'static str),
    /// A record could not be encoded.
    Encode(BoxError),
    /// A stored record could not be decoded.
    Decode(BoxError),
    /// The backend failed.
    Backend(BoxError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::AlreadyExists => f.write_str("a task with this id already exists"),
            Error::NotFound => f.write_str("no such task"),
            Error::Conflict => f.write_str("the task changed concurrently"),
            Error::Unsupported(what) => write!(f, "the store does not support {what}"),
            Error::Encode(e) => write!(f, "cannot encode a task record: {e}"),
            Error::Decode(e) => write!(f, "cannot decode a task record: {e}"),
            Error::Backend(e) => write!(f, "task store failure: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Encode(e) | Error::Decode(e) | Error::Backend(e) => Some(&**e),
            _ => None,
        }
    }
}

/// Which protocol era created a task; wire shapes follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Era {
    /// The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`).
    Modern,
    /// The 2025-11-25 experimental tasks.
    Legacy,
}

/// An input request the task is waiting on, under its task-unique key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingInput {
    /// The key the inner service used; answers are handed back under it.
    pub inner_key: String,
    /// The request as the client sees it.
    pub request: InputRequest,
}

/// How a task ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskOutcome {
    /// The inner service returned this result object, kept as JSON text
    /// (serialized once; every read copies it out as it is).
    Result(JsonText),
    /// The inner service returned this JSON-RPC error.
    Error(JsonRpcError),
}

/// Everything stored about one task.
///
/// The layer builds and changes records; a store only keeps them. Fields
/// needed only to resume the handler (arguments, `_meta`, answers, request
/// state) are cleared when the task ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskRecord {
    /// Task id: at least 128 random bits.
    pub id: String,
    /// The owner key the task is bound to, if the caller had one.
    pub owner: Option<String>,
    /// The era of the request that created the task.
    pub era: Era,
    /// Current status.
    pub status: TaskStatus,
    /// Note on the current status.
    pub status_message: Option<String>,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
    /// Time of the last change, Unix milliseconds; never goes backwards.
    pub updated_at_ms: i64,
    /// Lifetime from creation in milliseconds; `None` is unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested polling interval in milliseconds.
    pub poll_interval_ms: Option<u64>,
    /// The tool being run.
    pub tool_name: String,
    /// The original arguments, unchanged, as JSON text (`None` once the
    /// task has ended: only a resume needs them).
    pub arguments: Option<JsonText>,
    /// The original request `_meta`, as JSON text.
    pub meta: Option<JsonText>,
    /// The latest MRTR `requestState` the handler returned; never shown to
    /// clients.
    pub request_state: Option<String>,
    /// How many times the handler has been resumed.
    pub round: u32,
    /// Outstanding input requests by their task-unique key.
    pub input_requests: BTreeMap<String, PendingInput>,
    /// Every key ever shown to the client for this task.
    pub issued_keys: BTreeSet<String>,
    /// Every answer so far, keyed by the handler's own keys.
    pub input_responses: InputResponses,
    /// How the task ended, once terminal (`cancelled` has none).
    pub outcome: Option<TaskOutcome>,
    /// Whether a client asked to cancel.
    pub cancel_requested: bool,
    /// What becomes of the task if its runner dies or shuts down while it
    /// is `working`: the policy of the layer that created it, applied by
    /// whichever replica recovers it. `None` in records written before the
    /// field existed (the recovering replica's own policy applies) and once
    /// the task has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// Each change of status after creation, oldest first, at most
    /// [`MAX_HISTORY`] (empty in records written before the field existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<StatusChange>,
    /// Fields a sealing store wrapper (`SealedStore`, feature `seal`)
    /// encrypted before they reached the store, by field name. Only the
    /// wrapper reads or writes it: empty in every record the layer sees.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sealed: BTreeMap<String, String>,
    /// Compare-and-set version; every write increments it by one.
    ///
    /// `version` and `lease` are the last fields, so that they are the end
    /// of the record's JSON: Redis's claim script rewrites only that end
    /// (`store/redis/scripts.rs`, `CLAIM`).
    pub version: u64,
    /// Who runs the handler while the task is `working`: a lease with a
    /// fencing token, renewed by the runner's heartbeat. A runner whose
    /// fence is no longer the record's writes nothing.
    #[serde(default)]
    pub lease: Option<Lease>,
}

/// The right to run a task's handler, held by one replica at a time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The holder's replica id.
    pub holder: String,
    /// Fencing token: grows by one with every new holder.
    pub fence: u64,
    /// Until when the lease holds without renewal (Unix milliseconds).
    pub until_ms: i64,
}

impl Lease {
    /// The holder of a task queued for a worker
    /// ([`Execution::Queued`](crate::Execution::Queued)): no replica runs
    /// it, and its `until_ms` (already past: the time it was queued, less
    /// one millisecond) orders the queue. A store may index it to answer
    /// [`TaskStore::runnable`] without a scan.
    pub const QUEUED: &'static str = "~queued";

    /// Whether the task waits in the queue for a worker.
    pub fn is_queued(&self) -> bool {
        self.holder == Self::QUEUED
    }
}

impl TaskRecord {
    /// A new `working` record at version 1 (`null` arguments are kept as
    /// none).
    pub fn new(
        id: impl Into<String>,
        era: Era,
        tool_name: impl Into<String>,
        arguments: Value,
        now_ms: i64,
        ttl_ms: Option<u64>,
    ) -> Self {
        TaskRecord {
            id: id.into(),
            owner: None,
            era,
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            ttl_ms,
            poll_interval_ms: None,
            version: 1,
            tool_name: tool_name.into(),
            arguments: (!arguments.is_null()).then(|| JsonText::from_value(&arguments)),
            meta: None,
            request_state: None,
            round: 0,
            input_requests: BTreeMap::new(),
            issued_keys: BTreeSet::new(),
            input_responses: InputResponses::new(),
            outcome: None,
            cancel_requested: false,
            lease: None,
            recovery: None,
            history: Vec::new(),
            sealed: BTreeMap::new(),
        }
    }

    /// Bind the record to an owner.
    #[must_use]
    pub fn with_owner(mut self, owner: Option<String>) -> Self {
        self.owner = owner;
        self
    }

    /// When the record expires (Unix milliseconds), if it ever does.
    pub fn expires_at_ms(&self) -> Option<i64> {
        self.ttl_ms.map(|ttl| {
            self.created_at_ms
                .saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX))
        })
    }

    /// Whether the record has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at_ms().is_some_and(|at| at <= now_ms)
    }

    /// What the layer reads instead of a record whose private fields cannot
    /// be opened: `failed` with `-32603`, its error and status message
    /// saying `why`, none of its private fields; the same id, owner, era,
    /// times and version. Never written back.
    pub(crate) fn unreadable(&self, why: &str) -> TaskRecord {
        let message = format!("the task's stored data could not be opened: {why}");
        let mut failed = TaskRecord::new(
            self.id.clone(),
            self.era,
            self.tool_name.clone(),
            Value::Null,
            self.created_at_ms,
            self.ttl_ms,
        )
        .with_owner(self.owner.clone());
        failed.status = TaskStatus::Failed;
        failed.status_message = Some(message.clone());
        failed.outcome = Some(TaskOutcome::Error(JsonRpcError::internal(message)));
        failed.updated_at_ms = self.updated_at_ms;
        failed.poll_interval_ms = self.poll_interval_ms;
        failed.version = self.version;
        failed.round = self.round;
        failed.cancel_requested = self.cancel_requested;
        failed
    }

    /// A copy prepared as the next version: `version + 1` and
    /// `updated_at_ms` moved to `now_ms` (never backwards).
    pub fn next_version(&self, now_ms: i64) -> TaskRecord {
        let mut next = self.clone();
        next.version = self.version + 1;
        next.updated_at_ms = self.updated_at_ms.max(now_ms);
        next
    }
}

/// `record` as the layer may use it: itself, unless it still holds sealed
/// fields (a store written through a `SealedStore` read without one), which
/// reads as [`unreadable`](TaskRecord::unreadable): never as a task without
/// its arguments or result.
pub(crate) fn opened(record: Arc<TaskRecord>) -> Arc<TaskRecord> {
    if record.sealed.is_empty() {
        return record;
    }
    Arc::new(record.unreadable(
        "its private fields are sealed, and this server has no key ring to open them (wrap the store in a SealedStore)",
    ))
}

/// [`opened`] for what a read found.
pub(crate) fn opened_found(
    found: Result<Option<Arc<TaskRecord>>>,
) -> Result<Option<Arc<TaskRecord>>> {
    found.map(|r| r.map(opened))
}

/// A pluggable task store. Object-safe, so the layer holds an
/// `Arc<dyn TaskStore>`; see the [module docs](self) for the contract.
pub trait TaskStore: fmt::Debug + Send + Sync + 'static {
    /// Insert `record` if no record has its id; otherwise
    /// [`Error::AlreadyExists`].
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>>;

    /// The record with `id`, unless it is absent or expired at `now_ms`.
    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>>;

    /// Replace the record with `record.id` by `record` if the stored version
    /// is `expected_version`: [`Error::Conflict`] if it is not,
    /// [`Error::NotFound`] if there is no such record.
    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>>;

    /// Delete at most `limit` records expired at `now_ms`; their ids.
    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>>;

    /// [`create`](TaskStore::create) of a record the caller keeps using.
    /// A store that holds records in memory can keep this very `Arc`
    /// instead of a copy; by default the record is copied if the caller
    /// still holds it, and `create` is called.
    fn create_shared(&self, record: Arc<TaskRecord>) -> BoxFuture<'_, Result<()>> {
        self.create(Arc::unwrap_or_clone(record))
    }

    /// [`replace`](TaskStore::replace) with a record the caller keeps
    /// using; see [`create_shared`](TaskStore::create_shared).
    fn replace_shared(
        &self,
        record: Arc<TaskRecord>,
        expected_version: u64,
    ) -> BoxFuture<'_, Result<()>> {
        self.replace(Arc::unwrap_or_clone(record), expected_version)
    }

    /// At most `query.limit` records of `query.owner` created in
    /// `query.era`, newest first, strictly older than the
    /// `(created_at_ms, id)` position `query.after`, hiding those expired
    /// at `query.now_ms`. Used by the 2025-11-25 `tasks/list`; optional.
    ///
    /// Only records whose owner and era are exactly the ones asked for may
    /// come back: the layer makes its cursor of the last record of a page,
    /// so a record of another owner or era here would leak its id.
    /// Expired records are skipped, not counted: a page holds `limit`
    /// records whenever that many live ones are older than `after`.
    fn list<'a>(&'a self, query: ListQuery<'a>) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        let _ = query;
        Box::pin(std::future::ready(Err(Error::Unsupported("listing tasks"))))
    }

    /// At most `limit` `working` records whose lease ran out before `now_ms`
    /// (their runner died), hiding expired ones. Shared, durable stores
    /// offer it so another replica can recover such tasks; optional.
    fn orphans(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        let _ = (now_ms, limit);
        Box::pin(std::future::ready(Err(Error::Unsupported(
            "finding orphaned tasks",
        ))))
    }

    /// At most `limit` `working` records a worker may claim now, oldest
    /// lease end first: those queued for a worker
    /// ([`Lease::QUEUED`]) and, in a shared store, those whose runner died.
    /// By default the [`orphans`](TaskStore::orphans), which include both
    /// (a queued record's lease has already run out). A store that cannot
    /// find orphans (it lives in one process) may answer with its queued
    /// records alone.
    fn runnable(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        self.orphans(now_ms, limit)
    }

    /// Claim runnable records in one atomic step: of at most `limit`
    /// records [`runnable`](TaskStore::runnable) would answer, oldest lease
    /// end first and none another claimer holds at the moment, write in
    /// place of each the record `pick` makes of it (its claim), or pass it
    /// by when `pick` answers `None`; answer the records written. Each
    /// write is conditional on the version read, like
    /// [`replace`](TaskStore::replace), and no two concurrent claimers are
    /// handed the same record, so none loses a claim to another.
    ///
    /// Optional: a worker over a store without it ([`Error::Unsupported`],
    /// the default) reads [`runnable`](TaskStore::runnable) and claims each
    /// record with its own compare-and-set, which is exact too, but may
    /// lose some to other workers. The SQL stores claim in one transaction
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`). `pick` runs while the
    /// records are held: it must not wait.
    fn claim_runnable<'a>(
        &'a self,
        round: ClaimQuery<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<TaskRecord>>>> {
        let _ = round;
        Box::pin(std::future::ready(Err(Error::Unsupported(
            "claiming runnable tasks",
        ))))
    }

    /// A feed of the changes written to this store by every replica, for
    /// stores shared between processes that can report them (PostgreSQL's
    /// `LISTEN`/`NOTIFY`, Redis pub/sub); `None` (the default) when they
    /// cannot. Called from inside a tokio runtime, once per layer. A
    /// receiver that lags behind should act as on [`TaskChange::Missed`].
    /// Optional: the lease heartbeat reaches the same state, only later.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<TaskChange>> {
        None
    }

    /// What [`get`](TaskStore::get) would answer, if this store can tell
    /// without waiting (an in-memory store); `None` otherwise. The layer
    /// then answers `tasks/get` inside `Service::call`, with no future to
    /// allocate. Optional; a store that does not wait must answer exactly
    /// as `get` does.
    fn get_ready(&self, id: &str, now_ms: i64) -> Option<Result<Option<Arc<TaskRecord>>>> {
        let _ = (id, now_ms);
        None
    }

    /// [`get_ready`](TaskStore::get_ready), with the task handed to the
    /// query's `show` as a [`TaskView`] instead of returned: a store that
    /// keeps tasks in another form (the memory store's finished tasks)
    /// shows them without building a [`TaskRecord`]. `None` when this store
    /// cannot read without waiting (`show` is then not called); otherwise
    /// `show` is called once, with what `get` would answer. The layer
    /// answers `tasks/get` with it. Optional: the default reads with
    /// `get_ready`.
    fn view_ready(&self, query: ViewQuery<'_>) -> Option<Result<()>> {
        let found = self.get_ready(query.id, query.now_ms)?;
        Some(found.map(|record| (query.show)(record.as_deref().map(TaskRecord::view))))
    }

    /// What this store offers an operator (every task, across owners and
    /// eras: list, count, purge), if it offers it; `None` by default. See
    /// [`OperatorStore`] and [`Operator`](crate::Operator).
    fn operator(&self) -> Option<&dyn OperatorStore> {
        None
    }
}
