//! [`Engine`]: the state one layer's services share.

use std::sync::{Arc, OnceLock, Weak};

use tokio::sync::broadcast;
use tower_service::Service;

use crate::clock::Clock;
use crate::config::{default_owner, Config};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::store::{self, Era, TaskRecord, TaskStore};

use super::errors::store_failure;
use super::hub::{EventHub, TaskEvent};
use super::ids;
use super::invoker::RerunInvoker;
use super::registry::{Registry, Reservation};
use super::running::RunningHandlers;

/// What the layer needs of the inner service to run tasks with it.
pub(crate) trait InnerService:
    Service<
        JsonRpcRequest,
        Response = JsonRpcResponse,
        Future: Send + 'static,
        Error: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> InnerService for S
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
}

/// The state one layer's services share: the store, the configuration, the
/// tasks this replica runs, the event channels and the background work.
pub(crate) struct Engine {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) cfg: Config,
    clock: Clock,
    pub(super) registry: Arc<Registry>,
    /// The handlers running in this process.
    pub(super) running: Arc<RunningHandlers>,
    pub(super) hub: EventHub,
    /// Set once the reaper (and change feed) run.
    pub(super) background: OnceLock<()>,
    /// This process's replica id, the holder name in leases.
    pub(super) replica: String,
    pub(super) invoker: RerunInvoker,
    /// The engine itself, for the task handles it gives handlers (which
    /// must not keep it alive).
    pub(super) me: Weak<Engine>,
}

impl Engine {
    /// An engine over `store`, sending task events on `events`.
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        cfg: Config,
        events: broadcast::Sender<TaskEvent>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Engine {
            store,
            cfg,
            clock: Clock::new(),
            registry: Arc::default(),
            running: Arc::default(),
            hub: EventHub::new(events),
            background: OnceLock::new(),
            replica: ids::new_task_id()
                .unwrap_or_else(|_| format!("replica-{}", std::process::id())),
            invoker: RerunInvoker::default(),
            me: Weak::clone(me),
        })
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub(crate) fn owner_of(&self, req: &JsonRpcRequest) -> Option<String> {
        match &self.cfg.owner {
            Some(extract) => extract(req),
            None => default_owner(req),
        }
    }

    /// One of `owner`'s slots of unfinished tasks in this process
    /// ([`Limits::max_tasks_per_owner`](crate::Limits)), or the `-32602`
    /// error if all are taken.
    pub(crate) fn reserve_slot(&self, owner: Option<&str>) -> Result<Reservation, JsonRpcError> {
        self.registry
            .reserve(owner, self.cfg.limits.max_tasks_per_owner)
    }

    /// Re-read `owner`'s tasks this replica tracks and forget those that
    /// ended or are gone (another replica may have finished, cancelled or
    /// reaped them unseen), then try for a slot again.
    pub(crate) async fn reserve_slot_after_recount(
        &self,
        owner: Option<&str>,
    ) -> Result<Reservation, JsonRpcError> {
        for id in self.registry.owned_by(owner) {
            // A read error keeps the entry: better refused than overshot.
            let _ = self.lookup_raw(&id).await;
        }
        self.reserve_slot(owner)
    }

    /// The channel task events go out on.
    pub(crate) fn events(&self) -> &broadcast::Sender<TaskEvent> {
        &self.hub.events
    }

    /// Look a task up for a caller: absent, expired, of another owner or of
    /// another era all read as `None`.
    pub(super) async fn lookup(
        &self,
        id: &str,
        owner: Option<&str>,
        era: Era,
    ) -> Result<Option<Arc<TaskRecord>>, JsonRpcError> {
        visible(self.lookup_raw(id).await, owner, era)
    }

    /// Read a task whoever's it is; a task found ended or gone is
    /// forgotten here.
    async fn lookup_raw(&self, id: &str) -> store::Result<Option<Arc<TaskRecord>>> {
        let found = store::opened_found(self.store.get(id, self.now_ms()).await);
        self.saw(id, &found);
        found
    }

    /// What a read found, for this replica's registry: an ended or gone
    /// task is not this replica's to count or run any more.
    pub(super) fn saw(&self, id: &str, found: &store::Result<Option<Arc<TaskRecord>>>) {
        match found {
            Ok(None) => self.forget_ended(id, None),
            Ok(Some(r)) if r.status.is_terminal() => self.forget_ended(id, Some(&r.view())),
            _ => {}
        }
    }
}

/// Whether a caller of `owner` speaking `era` may see `record` (R51: a task
/// of another owner or era is indistinguishable from an unknown one).
pub(super) fn may_see(record: &TaskRecord, owner: Option<&str>, era: Era) -> bool {
    record.owner.as_deref() == owner && record.era == era
}

/// What a read found, as a caller may see it: absent, expired, of another
/// owner or of another era all read as `None`.
pub(super) fn visible(
    found: store::Result<Option<Arc<TaskRecord>>>,
    owner: Option<&str>,
    era: Era,
) -> Result<Option<Arc<TaskRecord>>, JsonRpcError> {
    match found {
        Ok(Some(r)) if may_see(&r, owner, era) => Ok(Some(r)),
        Ok(_) => Ok(None),
        Err(e) => Err(store_failure(&e)),
    }
}
