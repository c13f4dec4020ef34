//! The channels task changes fan out on: the public event channel, the
//! `subscriptions/listen` streams (by watched task) and the waiters on one
//! task.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::{broadcast, Notify};

use super::listeners::TaskListeners;
use super::watchers::TaskWatchers;
use crate::protocol::TaskStatus;

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
    /// The open `subscriptions/listen` streams, by the task they watch:
    /// written records and the store's changes reach the streams of their
    /// task only.
    pub(crate) listeners: Arc<TaskListeners>,
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
            listeners: Arc::default(),
            watchers: Arc::default(),
            has_feed: AtomicBool::new(false),
            queue: Notify::new(),
        }
    }
}
