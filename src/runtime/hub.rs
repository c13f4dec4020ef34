//! The channels task changes fan out on: the public event channel,
//! subscription snapshots and the store's change feed.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::{broadcast, Notify};

use super::watchers::TaskWatchers;
use crate::protocol::TaskStatus;
use crate::store::{TaskChange, TaskRecord};

/// A task's status changed. Sent on
/// [`TaskLayer::subscribe`](crate::TaskLayer::subscribe) after every
/// successful write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskEvent {
    /// The task.
    pub task_id: String,
    /// Its status after the write.
    pub status: TaskStatus,
    /// The record version written.
    pub version: u64,
}

/// The channels task changes fan out on.
pub(crate) struct EventHub {
    pub(crate) events: broadcast::Sender<TaskEvent>,
    /// Every written record, for `subscriptions/listen` streams; only fed
    /// while one is open.
    pub(crate) snapshots: broadcast::Sender<Arc<TaskRecord>>,
    /// Changes the store reported (other replicas' writes included), for
    /// subscriptions and blocked `tasks/result` calls; only fed while one
    /// listens.
    pub(crate) changes: broadcast::Sender<TaskChange>,
    /// Waiters on one task each.
    pub(crate) watchers: Arc<TaskWatchers>,
    /// Whether the store reports changes ([`TaskStore::changes`](crate::TaskStore::changes)).
    pub(crate) has_feed: AtomicBool,
    /// Idle workers of this process wait here for a queued run.
    pub(crate) queue: Notify,
}

impl EventHub {
    pub(crate) fn new(events: broadcast::Sender<TaskEvent>) -> Self {
        EventHub {
            events,
            snapshots: broadcast::channel(1024).0,
            changes: broadcast::channel(1024).0,
            watchers: Arc::default(),
            has_feed: AtomicBool::new(false),
            queue: Notify::new(),
        }
    }
}
