//! The tasks this replica runs or waits on: their cancellation tokens and
//! tracing spans (kept across resumes), and how many each owner has.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;
use tracing::{info, Span};

use crate::jsonrpc::JsonRpcError;
use crate::peer::Peer;
use crate::protocol::TaskStatus;
use crate::store::TaskRecord;

/// What this process knows about a task beyond the store.
#[derive(Clone, Debug)]
pub(crate) struct LocalTask {
    pub(crate) token: CancellationToken,
    /// The task's span, the parent of everything logged about it.
    pub(crate) span: Span,
    /// Where to send 2025-11-25 status notifications, if the transport of
    /// the creating request offered a way back.
    pub(crate) peer: Option<Peer>,
    /// The last status this process wrote or saw (for the active gauge).
    pub(crate) status: TaskStatus,
    /// The task's owner (for the per-owner bound).
    pub(crate) owner: Option<String>,
}

impl LocalTask {
    /// A task first seen here as `record` (made before a restart, or on
    /// another replica): a fresh token and span.
    fn of(record: &TaskRecord) -> Self {
        LocalTask {
            token: CancellationToken::new(),
            span: task_span(&record.id, &record.tool_name),
            peer: None,
            status: record.status,
            owner: record.owner.clone(),
        }
    }
}

/// The span of one task, kept across its resumes.
pub(crate) fn task_span(id: &str, tool: &str) -> Span {
    tracing::info_span!("mcp_task", task_id = %id, tool = %tool)
}

/// The tasks of this replica, by id, and their count per owner.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    tasks: Mutex<HashMap<String, LocalTask>>,
    /// Unfinished tasks per owner among `tasks`.
    per_owner: Mutex<HashMap<Option<String>, usize>>,
}

impl Registry {
    fn tasks(&self) -> MutexGuard<'_, HashMap<String, LocalTask>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn per_owner(&self) -> MutexGuard<'_, HashMap<Option<String>, usize>> {
        self.per_owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Remember a task this process runs or waits on.
    pub(crate) fn track(&self, id: &str, local: LocalTask) {
        let owner = local.owner.clone();
        if self.tasks().insert(id.to_owned(), local).is_none() {
            *self.per_owner().entry(owner).or_default() += 1;
        }
    }

    /// The task's entry, made if this process has none yet.
    pub(crate) fn get_or_track(&self, record: &TaskRecord) -> LocalTask {
        if let Some(local) = self.get(&record.id) {
            return local;
        }
        let local = LocalTask::of(record);
        self.track(&record.id, local.clone());
        local
    }

    /// Forget a task (it ended, or is gone), returning what was known.
    pub(crate) fn forget(&self, id: &str) -> Option<LocalTask> {
        let local = self.tasks().remove(id)?;
        let mut owners = self.per_owner();
        if let Some(n) = owners.get_mut(&local.owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                owners.remove(&local.owner);
            }
        }
        Some(local)
    }

    pub(crate) fn get(&self, id: &str) -> Option<LocalTask> {
        self.tasks().get(id).cloned()
    }

    /// Note the status last written or seen for a task.
    pub(crate) fn set_status(&self, id: &str, status: TaskStatus) {
        if let Some(l) = self.tasks().get_mut(id) {
            l.status = status;
        }
    }

    /// Stop this process's handler of a task cancelled elsewhere.
    pub(crate) fn cancel_remotely_cancelled(&self, id: &str) {
        if let Some(local) = self.tasks().get(id) {
            if !local.token.is_cancelled() {
                info!(parent: &local.span, "cancelled on another replica");
                local.token.cancel();
            }
        }
    }

    /// The `-32602` error if `owner` already has `max` unfinished tasks in
    /// this process.
    pub(crate) fn at_capacity(&self, owner: Option<&str>, max: usize) -> Option<JsonRpcError> {
        let active = self
            .per_owner()
            .get(&owner.map(str::to_owned))
            .copied()
            .unwrap_or(0);
        (active >= max).then(|| {
            JsonRpcError::invalid_params(format!(
                "the caller already has {active} unfinished tasks; at most {max} are allowed"
            ))
        })
    }
}
