//! The operator's view of a store: every task, across owners and eras.
//!
//! [`OperatorStore`] is what a store offers an operator, apart from what
//! MCP callers reach: list with a [`TaskQuery`], count, and purge. A store
//! hands it out through [`TaskStore::operator`](super::TaskStore::operator);
//! the [`Operator`](crate::Operator) handle is how an application (or the
//! `mcp-tasks` command) uses it, and adds cancelling through the layer's
//! compare-and-set.
//!
//! Listings are newest first, `(created_at_ms, id)` descending, and paged
//! by keyset: a [`TaskCursor`] names the last task of a page, and the next
//! page starts strictly after it. Tasks created or changed meanwhile never
//! move a task from one page to another, and no task is shown twice.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::page::{Found, Purged, TaskCursor};
use super::{BoxFuture, EndedCounts, EndedQuery, Result, TaskRecord};
use crate::protocol::TaskStatus;

/// The most tasks one page holds.
pub const MAX_PAGE: usize = 1000;

/// The page size of a [`TaskQuery`] that names none.
pub const DEFAULT_PAGE: usize = 50;

/// How many of the `input_required` tasks waiting longest
/// [`TaskStats::longest_input_required`] names.
pub const LONGEST_WAITING: usize = 10;

/// What an operator asks for: filters, a page size and where the page
/// starts. Every filter given must hold (an empty status set is any
/// status).
///
/// ```
/// use mcp_task_layer::store::TaskQuery;
/// use mcp_task_layer::TaskStatus;
///
/// let stuck = TaskQuery::new()
///     .status(TaskStatus::InputRequired)
///     .tool("build_report")
///     .created_before_ms(1_767_225_600_000)
///     .limit(20);
/// # let _ = stuck;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct TaskQuery {
    statuses: Vec<TaskStatus>,
    tool: Option<String>,
    owner: Option<String>,
    created_after_ms: Option<i64>,
    created_before_ms: Option<i64>,
    search: Option<String>,
    limit: usize,
    after: Option<TaskCursor>,
}

impl Default for TaskQuery {
    fn default() -> Self {
        TaskQuery::new()
    }
}

impl TaskQuery {
    /// Every task, [`DEFAULT_PAGE`] at a time.
    pub fn new() -> Self {
        TaskQuery {
            statuses: Vec::new(),
            tool: None,
            owner: None,
            created_after_ms: None,
            created_before_ms: None,
            search: None,
            limit: DEFAULT_PAGE,
            after: None,
        }
    }

    /// Tasks in `status` (or in any of the statuses given so far).
    pub fn status(mut self, status: TaskStatus) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    /// Tasks of tool `name`.
    pub fn tool(mut self, name: impl Into<String>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// Tasks of owner key `owner`.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Tasks created at or after `ms` (Unix milliseconds).
    pub fn created_after_ms(mut self, ms: i64) -> Self {
        self.created_after_ms = Some(ms);
        self
    }

    /// Tasks created strictly before `ms` (Unix milliseconds).
    pub fn created_before_ms(mut self, ms: i64) -> Self {
        self.created_before_ms = Some(ms);
        self
    }

    /// Tasks whose arguments, as the JSON text they are stored as, contain
    /// `text` (case-sensitive, every character as itself). Only arguments
    /// stored in clear are searched: a task sealed at rest (`SealedStore`)
    /// never matches, nor does a finished one (its arguments are dropped
    /// when it ends).
    ///
    /// The SQL stores read a trigram index (PostgreSQL's `pg_trgm`, where
    /// the database has it; SQLite's FTS5): a page costs what the tasks
    /// holding the text's trigrams cost, not the table. A text shorter
    /// than three characters, or one that most tasks contain, reads many
    /// of them. `MemoryStore` and `RedisStore` filter their walk of the
    /// creation index.
    pub fn search(mut self, text: impl Into<String>) -> Self {
        self.search = Some(text.into());
        self
    }

    /// At most `n` tasks per page (at least 1, at most [`MAX_PAGE`]).
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = n.clamp(1, MAX_PAGE);
        self
    }

    /// The page after `cursor` (from [`TaskPage::next`](super::TaskPage::next)).
    pub fn after(mut self, cursor: TaskCursor) -> Self {
        self.after = Some(cursor);
        self
    }

    /// The statuses asked for; empty is any.
    pub fn statuses(&self) -> &[TaskStatus] {
        &self.statuses
    }

    /// The tool asked for.
    pub fn tool_name(&self) -> Option<&str> {
        self.tool.as_deref()
    }

    /// The owner key asked for.
    pub fn owner_key(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The earliest creation time asked for (inclusive).
    pub fn created_after(&self) -> Option<i64> {
        self.created_after_ms
    }

    /// The creation time asked for tasks to be older than (exclusive).
    pub fn created_before(&self) -> Option<i64> {
        self.created_before_ms
    }

    /// The text searched for in the arguments.
    pub fn search_text(&self) -> Option<&str> {
        self.search.as_deref()
    }

    /// The page size.
    pub fn page_size(&self) -> usize {
        self.limit
    }

    /// Where the page starts (exclusive).
    pub fn cursor(&self) -> Option<&TaskCursor> {
        self.after.as_ref()
    }

    /// Whether `record` is one of the tasks asked for at `now_ms`: live
    /// (not expired), past the cursor, and every filter holding. Stores
    /// that filter in process use it, so that every store agrees.
    pub fn matches(&self, record: &TaskRecord, now_ms: i64) -> bool {
        !record.is_expired(now_ms)
            && self
                .after
                .as_ref()
                .is_none_or(|c| (record.created_at_ms, record.id.as_str()) < c.position())
            && (self.statuses.is_empty() || self.statuses.contains(&record.status))
            && self.tool.as_deref().is_none_or(|t| record.tool_name == t)
            && self
                .owner
                .as_deref()
                .is_none_or(|o| record.owner.as_deref() == Some(o))
            && self
                .created_after_ms
                .is_none_or(|at| record.created_at_ms >= at)
            && self
                .created_before_ms
                .is_none_or(|at| record.created_at_ms < at)
            && self.search.as_deref().is_none_or(|text| {
                record
                    .arguments
                    .as_ref()
                    .is_some_and(|a| a.get().contains(text))
            })
    }

    /// This query for what a purge may delete: its statuses narrowed to
    /// the terminal ones (all three if it names none), or `None` if it
    /// names only statuses that are not terminal.
    pub fn terminal_only(&self) -> Option<TaskQuery> {
        self.narrowed(true)
    }

    /// This query for what a cancel may change: its statuses narrowed to
    /// `working` and `input_required`, or `None` if it names neither.
    pub fn unfinished_only(&self) -> Option<TaskQuery> {
        self.narrowed(false)
    }

    /// This query with its statuses narrowed to those whose
    /// `is_terminal()` is `terminal`.
    fn narrowed(&self, terminal: bool) -> Option<TaskQuery> {
        let all = [
            TaskStatus::Working,
            TaskStatus::InputRequired,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ];
        let asked = if self.statuses.is_empty() {
            &all[..]
        } else {
            &self.statuses[..]
        };
        let statuses: Vec<TaskStatus> = asked
            .iter()
            .copied()
            .filter(|s| s.is_terminal() == terminal)
            .collect();
        (!statuses.is_empty()).then(|| TaskQuery {
            statuses,
            ..self.clone()
        })
    }
}

/// A task that waits: for a worker (queued) or for its client's answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaitingTask {
    /// The task id.
    pub id: String,
    /// Since when it waits (Unix milliseconds).
    pub since_ms: i64,
}

/// Task counts and the fleet at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TaskStats {
    /// When the figures were read (Unix milliseconds).
    pub at_ms: i64,
    /// Live tasks by status (wire names); expired ones not counted.
    pub by_status: BTreeMap<String, u64>,
    /// How many `working` tasks wait for a worker (queued execution).
    pub queued: u64,
    /// The one queued longest.
    pub oldest_queued: Option<WaitingTask>,
    /// The `input_required` task waiting longest for its client.
    pub oldest_input_required: Option<WaitingTask>,
    /// The [`LONGEST_WAITING`] `input_required` tasks waiting longest,
    /// longest first (ties by id); the first is `oldest_input_required`.
    pub longest_input_required: Vec<WaitingTask>,
    /// `working` tasks under a live lease, by lease holder (the replica or
    /// worker running each).
    pub running_by_holder: BTreeMap<String, u64>,
}

impl TaskStats {
    /// How many live tasks are in `status`.
    pub fn count(&self, status: TaskStatus) -> u64 {
        self.by_status.get(status.as_str()).copied().unwrap_or(0)
    }

    /// How long `task` (one of the oldest waiting) had waited when the
    /// figures were read.
    pub fn waited(&self, task: &WaitingTask) -> Duration {
        let ms = self.at_ms.saturating_sub(task.since_ms).max(0);
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    /// Stats taken at `now_ms` from every live task, one at a time: what a
    /// store without indexes for them computes.
    pub fn tally<'a>(records: impl IntoIterator<Item = &'a TaskRecord>, now_ms: i64) -> Self {
        let mut stats = TaskStats {
            at_ms: now_ms,
            ..TaskStats::default()
        };
        for r in records {
            if r.is_expired(now_ms) {
                continue;
            }
            stats.saw(r, now_ms);
        }
        stats
    }

    /// Count one live task in `status` that holds no lease and waits for
    /// no input (a finished one).
    pub(crate) fn count_status(&mut self, status: TaskStatus) {
        *self
            .by_status
            .entry(status.as_str().to_owned())
            .or_default() += 1;
    }

    /// One live `input_required` task, waiting since `since_ms`.
    pub(crate) fn waiting(&mut self, id: &str, since_ms: i64) {
        older(&mut self.oldest_input_required, id, since_ms);
        keep_longest(&mut self.longest_input_required, id, since_ms);
    }

    /// One queued task, queued since `since_ms`: the oldest kept.
    pub(crate) fn queued_since(&mut self, id: &str, since_ms: i64) {
        older(&mut self.oldest_queued, id, since_ms);
    }

    /// Count one live task.
    pub(crate) fn saw(&mut self, r: &TaskRecord, now_ms: i64) {
        self.count_status(r.status);
        match (r.status, &r.lease) {
            (TaskStatus::Working, Some(lease)) if lease.is_queued() => {
                self.queued += 1;
                self.queued_since(&r.id, queued_since_ms(lease.until_ms));
            }
            (TaskStatus::Working, Some(lease)) if lease.until_ms >= now_ms => {
                *self
                    .running_by_holder
                    .entry(lease.holder.clone())
                    .or_default() += 1;
            }
            (TaskStatus::InputRequired, _) => self.waiting(&r.id, r.updated_at_ms),
            _ => {}
        }
    }
}

/// When a queued task was queued, of its lease end: the lease ended one
/// millisecond before.
pub(crate) fn queued_since_ms(lease_until_ms: i64) -> i64 {
    lease_until_ms.saturating_add(1)
}

/// Keep in `longest` (sorted, longest first) the [`LONGEST_WAITING`] that
/// wait longest (the smaller id on a tie).
fn keep_longest(longest: &mut Vec<WaitingTask>, id: &str, since_ms: i64) {
    // A walk read in several calls may read a task twice.
    if longest.iter().any(|w| w.id == id) {
        return;
    }
    let at = longest.partition_point(|w| (w.since_ms, w.id.as_str()) < (since_ms, id));
    if at < LONGEST_WAITING {
        longest.insert(
            at,
            WaitingTask {
                id: id.to_owned(),
                since_ms,
            },
        );
        longest.truncate(LONGEST_WAITING);
    }
}

/// Keep in `slot` whichever waits longer (the smaller id on a tie).
fn older(slot: &mut Option<WaitingTask>, id: &str, since_ms: i64) {
    let replace = slot
        .as_ref()
        .is_none_or(|w| (since_ms, id) < (w.since_ms, w.id.as_str()));
    if replace {
        *slot = Some(WaitingTask {
            id: id.to_owned(),
            since_ms,
        });
    }
}

/// What a store offers an operator: every task, whoever's it is, newest
/// first, paged by keyset ([`TaskCursor`]), so that tasks created or
/// changed meanwhile never move a task from one page to another. Used
/// through an [`Operator`](crate::Operator).
///
/// A store shared between processes answers for all of them. Records come
/// back as stored: a record sealed at rest keeps its sealed fields (and no
/// arguments or result in clear) unless the store is a `SealedStore` with
/// the keys.
pub trait OperatorStore: Send + Sync {
    /// At most `query.page_size()` live tasks matching `query`, newest
    /// first (by `(created_at_ms, id)`), strictly after its cursor. A store
    /// must not scan every task for a page: it reads an index of what the
    /// query names, or walks one by creation time reading at most
    /// [`WALK_BUDGET`](super::WALK_BUDGET) records, and then says where it
    /// stopped ([`Found::walked_to`]).
    fn find<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Found>>;

    /// Counts by status, the queue and the running tasks at `now_ms`.
    fn stats(&self, now_ms: i64) -> BoxFuture<'_, Result<TaskStats>>;

    /// Delete at most `query.page_size()` tasks matching `query` that are
    /// terminal (`completed`, `failed`, `cancelled`; never a task that may
    /// still change); how many it deleted, and where its walk stopped if
    /// it stopped at [`WALK_BUDGET`](super::WALK_BUDGET). The caller
    /// repeats it (after [`Purged::walked_to`] when set) until fewer come
    /// back from a walk that did not stop.
    fn purge<'a>(&'a self, query: &'a TaskQuery, now_ms: i64) -> BoxFuture<'a, Result<Purged>>;

    /// How many tasks ended in each span of `query`, by how they ended;
    /// optional ([`Error::Unsupported`](super::Error::Unsupported) by
    /// default). A store answers from an index of ended tasks by the time
    /// they ended, at a cost that grows with the tasks that ended in the
    /// spans, not with the store (the memory store reads every task).
    fn ended(&self, query: EndedQuery) -> BoxFuture<'_, Result<EndedCounts>> {
        let _ = query;
        Box::pin(std::future::ready(Err(super::Error::Unsupported(
            "counting ended tasks",
        ))))
    }

    /// The store underneath, whose records are as stored, when this store
    /// changes records on their way in and out (`SealedStore` seals and
    /// opens them, and makes one it cannot open read as `failed`); `None`
    /// (the default) when records are stored as they are written. An
    /// operator's cancel reads and writes there: a cancelled task keeps
    /// none of its private fields, so a task whose sealed fields this
    /// process's keys cannot open is still cancelled, not reported as
    /// ended, and the fleet, whatever its keys, reads the cancel.
    fn as_stored(&self) -> Option<&dyn super::TaskStore> {
        None
    }

    /// Whether [`TaskQuery::search`] can match this store's tasks: `false`
    /// for a store that seals arguments at rest (`SealedStore`), whose
    /// searches find nothing.
    fn searches_arguments(&self) -> bool {
        true
    }
}
