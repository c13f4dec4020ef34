//! The tasks this replica runs or waits on: their cancellation tokens and
//! tracing spans (kept across resumes), and how many each owner has.
//!
//! An entry is forgotten on every terminal path this replica sees: its own
//! terminal writes, another replica's seen through the change feed, the
//! heartbeat or a runner's write losing to it, a read that finds the task
//! ended or gone, and expiry (swept by the reaper whoever deleted it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;
use tracing::{info, Span};

use crate::jsonrpc::JsonRpcError;
use crate::peer::Peer;
use crate::protocol::TaskStatus;
use crate::store::{Era, TaskRecord};

/// What this process knows about a task beyond the store.
#[derive(Clone, Debug)]
pub(crate) struct LocalTask {
    pub(crate) token: CancellationToken,
    /// The task's span, the parent of everything logged about it.
    pub(crate) span: Span,
    /// Where to send 2025-11-25 status notifications, if the transport of
    /// the creating request offered a way back.
    pub(crate) peer: Option<Peer>,
    /// The last status this process wrote or saw (for the active gauge,
    /// and status notifications of runs elsewhere).
    pub(crate) status: TaskStatus,
    /// The protocol era the task was created in.
    pub(crate) era: Era,
    /// The task's owner (for the per-owner bound).
    pub(crate) owner: Option<String>,
    /// When the task expires (Unix ms), so that it is forgotten then
    /// whichever replica reaps it.
    pub(crate) expires_at_ms: Option<i64>,
    /// Which entry this is: a run forgets only its own entry, never the
    /// one a re-run of the same task made after it.
    generation: u64,
    /// The owner's count this entry is in, given back when it is forgotten.
    slot: Option<OwnerCount>,
}

/// How many unfinished tasks (and held slots) one owner has here.
type OwnerCount = Arc<AtomicUsize>;

impl LocalTask {
    /// The entry of a task first written here: `token` is the one its
    /// handler was given.
    pub(crate) fn new(record: &TaskRecord, token: CancellationToken, peer: Option<Peer>) -> Self {
        LocalTask {
            token,
            span: task_span(&record.id, &record.tool_name),
            peer,
            status: record.status,
            era: record.era,
            owner: record.owner.clone(),
            expires_at_ms: record.expires_at_ms(),
            generation: 0,
            slot: None,
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
    /// Unfinished tasks per owner among `tasks`, plus reserved slots. A
    /// count at zero stays until the reaper's sweep: giving a slot back is
    /// one atomic decrement, no lookup.
    per_owner: Mutex<HashMap<Option<String>, OwnerCount>>,
    /// How many entries `tasks` has: a read that finds a task ended looks
    /// it up only when there is anything to find.
    len: AtomicUsize,
    generations: AtomicU64,
}

/// A slot of an owner's unfinished-task bound, held while a call may still
/// become a task; given back when dropped unless a task took it.
#[derive(Debug)]
pub(crate) struct Reservation {
    registry: Arc<Registry>,
    /// `None` once a task took the slot.
    count: Option<OwnerCount>,
}

impl Reservation {
    /// The task the slot was held for was written: it is tracked now.
    pub(crate) fn commit(&mut self, id: &str, mut local: LocalTask) {
        local.generation = self.registry.next_generation();
        local.slot = self.count.take();
        self.registry.insert(id, local);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(count) = self.count.take() {
            count.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Registry {
    fn tasks(&self) -> MutexGuard<'_, HashMap<String, LocalTask>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn per_owner(&self) -> MutexGuard<'_, HashMap<Option<String>, OwnerCount>> {
        self.per_owner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn next_generation(&self) -> u64 {
        self.generations.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The count of `owner`, made if it has none.
    fn count_of(&self, owner: Option<&str>) -> OwnerCount {
        Arc::clone(
            self.per_owner()
                .entry(owner.map(str::to_owned))
                .or_default(),
        )
    }

    fn insert(&self, id: &str, local: LocalTask) -> Option<LocalTask> {
        let old = self.tasks().insert(id.to_owned(), local);
        match &old {
            Some(old) => release(old),
            None => {
                self.len.fetch_add(1, Ordering::AcqRel);
            }
        }
        old
    }

    /// Hold one of `owner`'s `max` slots, or the `-32602` error if all are
    /// taken. Checked and counted at once, so concurrent calls cannot
    /// overshoot the bound.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        owner: Option<&str>,
        max: usize,
    ) -> Result<Reservation, JsonRpcError> {
        let count = self.count_of(owner);
        let mut active = count.load(Ordering::Acquire);
        loop {
            if active >= max {
                return Err(JsonRpcError::invalid_params(format!(
                    "the caller already has {active} unfinished tasks; at most {max} are allowed"
                )));
            }
            match count.compare_exchange_weak(
                active,
                active + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => active = now,
            }
        }
        Ok(Reservation {
            registry: Arc::clone(self),
            count: Some(count),
        })
    }

    /// The task's entry, made (with a fresh token) if this process has none
    /// yet: the task was made before a restart, or on another replica.
    pub(crate) fn get_or_track(&self, record: &TaskRecord) -> LocalTask {
        if let Some(local) = self.get(&record.id) {
            return local;
        }
        let local = self.counted(record);
        let mut tasks = self.tasks();
        if let Some(raced) = tasks.get(&record.id) {
            let raced = raced.clone();
            drop(tasks);
            release(&local);
            return raced;
        }
        tasks.insert(record.id.clone(), local.clone());
        self.len.fetch_add(1, Ordering::AcqRel);
        local
    }

    /// A new entry for `record`, counted in its owner's count.
    fn counted(&self, record: &TaskRecord) -> LocalTask {
        let mut local = LocalTask::new(record, CancellationToken::new(), None);
        local.generation = self.next_generation();
        let count = self.count_of(record.owner.as_deref());
        count.fetch_add(1, Ordering::AcqRel);
        local.slot = Some(count);
        local
    }

    /// A new entry for a task run again from the top: a token of its own
    /// (the old run's token stops only the old run), the same span, and
    /// status notifications still to the task's creator.
    pub(crate) fn rerun(&self, record: &TaskRecord) -> LocalTask {
        let mut local = self.counted(record);
        if let Some(old) = self.tasks().get(&record.id) {
            local.span = old.span.clone();
            local.peer.clone_from(&old.peer);
        }
        self.insert(&record.id, local.clone());
        local
    }

    /// Forget a task (it ended, or is gone), returning what was known.
    pub(crate) fn forget(&self, id: &str) -> Option<LocalTask> {
        let local = self.tasks().remove(id)?;
        self.len.fetch_sub(1, Ordering::AcqRel);
        release(&local);
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
                self.len.fetch_sub(1, Ordering::AcqRel);
                release(&gone);
            }
        }
    }

    /// Forget a task found ended or gone, and stop its handler here if one
    /// still runs; what was known comes back to the one caller that
    /// removed it.
    pub(crate) fn forget_ended(&self, id: &str) -> Option<LocalTask> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let local = self.forget(id)?;
        local.token.cancel();
        Some(local)
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
        self.len.fetch_sub(expired.len(), Ordering::AcqRel);
        for local in &expired {
            release(local);
        }
        // Owners with nothing here any more (and no slot held): dropped.
        self.per_owner()
            .retain(|_, count| count.load(Ordering::Acquire) > 0 || Arc::strong_count(count) > 1);
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

    /// The ids of the tasks this replica last saw `working` whose token
    /// is not cancelled: the handlers that may run here.
    pub(crate) fn working(&self) -> Vec<String> {
        if self.len.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.tasks()
            .iter()
            .filter(|(_, l)| l.status == TaskStatus::Working && !l.token.is_cancelled())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The 2025-11-25 tasks tracked here with a way back to their
    /// creator: each id with that way.
    pub(crate) fn with_creators(&self) -> Vec<(String, Peer)> {
        if self.len.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        self.tasks()
            .iter()
            .filter(|(_, l)| l.era == Era::Legacy)
            .filter_map(|(id, l)| Some((id.clone(), l.peer.clone()?)))
            .collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<LocalTask> {
        self.tasks().get(id).cloned()
    }

    /// The way back to the 2025-11-25 creator of task `id`, if this
    /// replica tracks it with one and last saw it in a status other than
    /// `status`. Looked up on every change the store reports: no copy of
    /// the entry.
    pub(crate) fn creator_to_tell(&self, id: &str, status: TaskStatus) -> Option<Peer> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let tasks = self.tasks();
        let local = tasks.get(id)?;
        if local.era != Era::Legacy || local.status == status {
            return None;
        }
        local.peer.clone()
    }

    /// Note `status` as seen for task `id` if this replica tracks it and
    /// last saw another status: whether it did, in one step, so that
    /// of two callers noting the same status one learns it is new.
    pub(crate) fn advance_status(&self, id: &str, status: TaskStatus) -> bool {
        match self.tasks().get_mut(id) {
            Some(l) if l.status != status => {
                l.status = status;
                true
            }
            _ => false,
        }
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

/// Give back the owner's slot an entry held.
fn release(local: &LocalTask) {
    if let Some(count) = &local.slot {
        count.fetch_sub(1, Ordering::AcqRel);
    }
}
