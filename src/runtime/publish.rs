//! Publishing a written change: the task's span, the event channels,
//! 2025-11-25 status notifications, and changes other replicas made.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::Duration;

use tokio::sync::broadcast;
use tracing::{info, Span};

use super::engine::Engine;
use super::hub::TaskEvent;
use super::registry::LocalTask;
use super::wire;
use crate::peer::Peer;
use crate::protocol::TaskStatus;
use crate::store::{Era, TaskChange, TaskRecord, TaskView};

impl Engine {
    /// Announce a written status: log it in the task's span, send it on the
    /// event channel, and (2025-11-25) notify the creating client if its
    /// transport left a way back.
    pub(crate) fn publish(&self, prev: TaskStatus, record: &TaskRecord, local: Option<&LocalTask>) {
        crate::metrics::transition(prev, record.status);
        self.registry.set_status(&record.id, record.status);
        let span = local.map_or_else(Span::none, |l| l.span.clone());
        info!(parent: &span, status = %record.status, version = record.version, "task status");
        if record.era == Era::Legacy {
            if let Some(peer) = local.and_then(|l| l.peer.clone()) {
                tell(&peer, &record.view());
            }
        }
        self.announce(record);
    }

    /// Forget a task a read found ended (`found`) or gone (`None`), and
    /// stop its handler here if one still runs. Whoever removes the entry
    /// tells the task's 2025-11-25 creator of its end, once: a run on
    /// another process whose terminal change the feed has not brought yet
    /// (a caller read it first) is told of here, or never would be.
    pub(super) fn forget_ended(&self, id: &str, found: Option<&TaskView<'_>>) {
        let Some(local) = self.registry.forget_ended(id) else {
            return;
        };
        let Some(view) = found.filter(|v| v.status.is_terminal()) else {
            return;
        };
        if local.era != Era::Legacy || local.status == view.status {
            return;
        }
        if let Some(peer) = local.peer {
            tell(&peer, view);
        }
    }

    /// Send a written record to event and subscription listeners.
    pub(crate) fn announce(&self, record: &TaskRecord) {
        self.hub.listeners.record(record);
        self.hub.watchers.wake(&record.id, record.version);
        let _ = self.hub.events.send(TaskEvent {
            task_id: record.id.clone(),
            status: record.status,
            version: record.version,
        });
    }

    /// A change the store reported, maybe written by another replica: a
    /// cancel stops this process's handler of the task now (the heartbeat
    /// would, a period later); subscribers and waiters re-read.
    pub(super) fn on_change(&self, change: TaskChange) {
        if let TaskChange::Updated { id, status, .. } = &change {
            if *status == TaskStatus::Cancelled {
                self.registry.cancel_remotely_cancelled(id);
            }
            if status.is_terminal() {
                // Ended here or elsewhere: nothing of it runs or counts
                // here any more (its creator was told by `relay_status`,
                // or by whoever forgot it first).
                self.registry.forget_ended(id);
            }
        }
        match &change {
            TaskChange::Updated {
                id,
                version,
                status,
            } => {
                self.hub.watchers.wake(id, *version);
                self.hub.listeners.changed(id, *version);
                // Queued, resumed or handed back, maybe.
                if *status == TaskStatus::Working {
                    self.wake_workers();
                }
            }
            TaskChange::Missed => {
                self.hub.watchers.wake_all();
                self.hub.listeners.missed();
                self.wake_workers();
            }
        }
    }

    /// After a gap in the change feed (its subscription was made or made
    /// again, or this process fell behind it), re-read the tasks whose
    /// handlers may run here: a cancel announced in the gap stops them now
    /// instead of at the next heartbeat. The feed starts with the first
    /// request, so a cancel written elsewhere right after a task started
    /// here could be published before this process subscribed.
    pub(super) async fn recheck_after_missed(&self) {
        for id in self.registry.working() {
            match self.store.get(&id, self.now_ms()).await {
                Ok(Some(record)) if record.status == TaskStatus::Cancelled => {
                    self.registry.cancel_remotely_cancelled(&id);
                    self.forget_ended(&id, Some(&record.view()));
                }
                Ok(Some(record)) if record.status.is_terminal() => {
                    self.forget_ended(&id, Some(&record.view()));
                }
                // Working or waiting: unchanged for its handler. Gone:
                // expired, which the reaper sweeps. A failed read: the
                // heartbeat reads it again.
                _ => {}
            }
        }
    }

    /// A 2025-11-25 task created here whose status another process wrote
    /// (a worker ran it): its creator hears of it as of a run here. `None`
    /// for every other change. The read and the notification are in the
    /// order of the feed, so that the last status is the last one sent;
    /// only a client that stops reading holds up the feed, and only while
    /// the notification is queued for it (bounded, see the peer).
    fn relay_status(&self, change: &TaskChange) -> Option<impl Future<Output = ()> + '_> {
        let TaskChange::Updated { id, status, .. } = change else {
            return None;
        };
        let peer = self.registry.creator_to_tell(id, *status)?;
        let id = id.clone();
        Some(async move { self.tell_as_read(&id, &peer).await })
    }

    /// After a gap in the change feed, in its order: the 2025-11-25
    /// creators of the tasks tracked here hear of a status written in the
    /// gap. Another process's worker may have moved a task on (to
    /// `input_required`, say) before this process subscribed, and no
    /// change of it may follow until its creator answers.
    async fn relay_after_missed(&self) {
        for (id, peer) in self.registry.with_creators() {
            self.tell_as_read(&id, &peer).await;
        }
    }

    /// Read task `id` and tell `peer`, its creator, of its status if this
    /// replica last saw another.
    async fn tell_as_read(&self, id: &str, peer: &Peer) {
        let found = crate::store::opened_found(self.store.get(id, self.now_ms()).await);
        let Ok(Some(record)) = found else { return };
        // In one step with the registry: a read that forgets the task
        // meanwhile tells its creator instead, never both.
        if !self.registry.advance_status(id, record.status) {
            return;
        }
        tell(peer, &record.view());
    }

    /// How often a subscription re-reads its tasks when the store reports
    /// no changes (another process may write them): the lease heartbeat's
    /// period.
    pub(crate) fn resync_period(&self) -> Option<Duration> {
        (!self.hub.has_feed.load(Ordering::Acquire)).then(|| self.cfg.heartbeat_period())
    }
}

/// Tell a 2025-11-25 client the status of its task: queued at once while
/// the client reads, sent in the background once it lags, so that the
/// caller (the change feed's loop among them) goes on.
fn tell(peer: &Peer, task: &TaskView<'_>) {
    let params = wire::legacy::task_value_of(task);
    tokio::spawn(peer.notify("notifications/tasks/status".into(), params));
}

/// Hand the store's change feed to the engine while it lives.
pub(crate) async fn change_loop(weak: Weak<Engine>, mut feed: broadcast::Receiver<TaskChange>) {
    loop {
        let change = match feed.recv().await {
            Ok(change) => change,
            Err(broadcast::error::RecvError::Lagged(_)) => TaskChange::Missed,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(engine) = weak.upgrade() else { return };
        if let Some(relay) = engine.relay_status(&change) {
            relay.await;
        }
        let missed = change == TaskChange::Missed;
        if missed {
            engine.relay_after_missed().await;
        }
        engine.on_change(change);
        if missed {
            // Reads of the store, off the feed's loop.
            tokio::spawn(async move { engine.recheck_after_missed().await });
        }
    }
}
