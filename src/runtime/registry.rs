//! The tasks this replica runs or waits on: their cancellation tokens and
//! tracing spans (kept across resumes), and how many each owner has.
//!
//! An entry is forgotten on every terminal path this replica sees: its own
//! terminal writes, another replica's seen through the change feed, the
//! heartbeat or a runner's write losing to it, a read that finds the task
//! ended or gone, and expiry (swept by the reaper whoever deleted it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
    /// When the task expires (Unix ms), so that it is forgotten then
    /// whichever replica reaps it.
    pub(crate) expires_at_ms: Option<i64>,
    /// Which entry this is: a run forgets only its own entry, never the
    /// one a re-run of the same task made after it.
    generation: u64,
}

impl LocalTask {
    /// The entry of a task first written here: `token` is the one its
    /// handler was given.
    pub(crate) fn new(record: &TaskRecord, token: CancellationToken, peer: Option<Peer>) -> Self {
        LocalTask {
            token,
            span: task_span(&record.id, &record.tool_name),
            peer,
            status: record.status,
            owner: record.owner.clone(),
            expires_at_ms: record.expires_at_ms(),
            generation: 0,
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
    /// Unfinished tasks per owner among `tasks`, plus reserved slots.
    per_owner: Mutex<HashMap<Option<String>, usize>>,
    generations: AtomicU64,
}

/// A slot of an owner's unfinished-task bound, held while a call may still
/// become a task; given back when dropped unless a task took it.
#[derive(Debug)]
pub(crate) struct Reservation {
    registry: Arc<Registry>,
    owner: Option<String>,
    held: bool,
}

impl Reservation {
    /// The task the slot was held for was written: it is tracked now.
    pub(crate) fn commit(mut self, id: &str, mut local: LocalTask) {
        self.held = false;
        local.generation = self.registry.next_generation();
        self.registry.tasks().insert(id.to_owned(), local);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held {
            self.registry.release(&self.owner);
        }
    }
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

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn release(&self, owner: &Option<String>) {
        let mut owners = self.per_owner();
        if let Some(n) = owners.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                owners.remove(owner);
            }
        }
    }

    /// Hold one of `owner`'s `max` slots, or the `-32602` error if all are
    /// taken. Checked and counted at once, so concurrent calls cannot
    /// overshoot the bound.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        owner: Option<&str>,
        max: usize,
    ) -> Result<Reservation, JsonRpcError> {
        let owner = owner.map(str::to_owned);
        {
            let mut owners = self.per_owner();
            let active = owners.entry(owner.clone()).or_default();
            if *active >= max {
                let active = *active;
                if active == 0 {
                    owners.remove(&owner);
                }
                return Err(JsonRpcError::invalid_params(format!(
                    "the caller already has {active} unfinished tasks; at most {max} are allowed"
                )));
            }
            *active += 1;
        }
        Ok(Reservation {
            registry: Arc::clone(self),
            owner,
            held: true,
        })
    }

    /// The task's entry, made (with a fresh token) if this process has none
    /// yet: the task was made before a restart, or on another replica.
    pub(crate) fn get_or_track(&self, record: &TaskRecord) -> LocalTask {
        if let Some(local) = self.get(&record.id) {
            return local;
        }
        let mut local = LocalTask::new(record, CancellationToken::new(), None);
        local.generation = self.next_generation();
        let mut tasks = self.tasks();
        if let Some(raced) = tasks.get(&record.id) {
            return raced.clone();
        }
        tasks.insert(record.id.clone(), local.clone());
        drop(tasks);
        *self.per_owner().entry(local.owner.clone()).or_default() += 1;
        local
    }

    /// A new entry for a task run again from the top: a token of its own
    /// (the old run's token stops only the old run), the same span.
    pub(crate) fn rerun(&self, record: &TaskRecord) -> LocalTask {
        let mut local = LocalTask::new(record, CancellationToken::new(), None);
        local.generation = self.next_generation();
        let mut tasks = self.tasks();
        let fresh = match tasks.get(&record.id) {
            Some(old) => {
                local.span = old.span.clone();
                false
            }
            None => true,
        };
        tasks.insert(record.id.clone(), local.clone());
        drop(tasks);
        if fresh {
            *self.per_owner().entry(local.owner.clone()).or_default() += 1;
        }
        local
    }

    /// Forget a task (it ended, or is gone), returning what was known.
    pub(crate) fn forget(&self, id: &str) -> Option<LocalTask> {
        let local = self.tasks().remove(id)?;
        self.release(&local.owner);
        Some(local)
    }

    /// Forget the entry `local` of a run, unless a newer run replaced it.
    pub(crate) fn forget_run(&self, id: &str, local: &LocalTask) {
        let mut tasks = self.tasks();
        if tasks
            .get(id)
            .is_some_and(|l| l.generation == local.generation)
        {
            if let Some(gone) = tasks.remove(id) {
                drop(tasks);
                self.release(&gone.owner);
            }
        }
    }

    /// Forget a task found ended or gone, and stop its handler here if one
    /// still runs.
    pub(crate) fn forget_ended(&self, id: &str) {
        if let Some(local) = self.forget(id) {
            local.token.cancel();
        }
    }

    /// Forget every task whose TTL has run out by `now_ms`, whichever
    /// replica reaps it.
    pub(crate) fn forget_expired(&self, now_ms: i64) -> Vec<LocalTask> {
        let expired: Vec<LocalTask> = {
            let mut tasks = self.tasks();
            let ids: Vec<String> = tasks
                .iter()
                .filter(|(_, l)| l.expires_at_ms.is_some_and(|at| at <= now_ms))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| tasks.remove(id)).collect()
        };
        for local in &expired {
            self.release(&local.owner);
        }
        expired
    }

    /// The ids of `owner`'s tasks this replica tracks.
    pub(crate) fn owned_by(&self, owner: Option<&str>) -> Vec<String> {
        self.tasks()
            .iter()
            .filter(|(_, l)| l.owner.as_deref() == owner)
            .map(|(id, _)| id.clone())
            .collect()
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
}
