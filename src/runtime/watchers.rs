//! Waiters on one task each (a blocked 2025-11-25 `tasks/result`): a write
//! wakes the waiters of its own task only, not every waiter of the layer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// Per task, the version last written, for whoever waits on it.
#[derive(Debug, Default)]
pub(crate) struct TaskWatchers {
    /// How many watches are open: a write with none costs one load.
    open: AtomicUsize,
    by_task: Mutex<HashMap<String, watch::Sender<u64>>>,
}

/// One waiter's watch of one task; closed when dropped.
#[derive(Debug)]
pub(crate) struct TaskWatch {
    watchers: Arc<TaskWatchers>,
    id: String,
    changed: watch::Receiver<u64>,
}

impl TaskWatchers {
    fn by_task(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        self.by_task.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watch task `id` from now on: every write of it after this call
    /// wakes the watch.
    pub(crate) fn watch(self: &Arc<Self>, id: &str) -> TaskWatch {
        let changed = self
            .by_task()
            .entry(id.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        self.open.fetch_add(1, Ordering::AcqRel);
        TaskWatch {
            watchers: Arc::clone(self),
            id: id.to_owned(),
            changed,
        }
    }

    /// Task `id` was written at `version`.
    pub(crate) fn wake(&self, id: &str, version: u64) {
        if self.open.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(tx) = self.by_task().get(id) {
            tx.send_replace(version);
        }
    }

    /// Writes may have been missed (the change feed lagged or reconnected):
    /// every waiter reads again.
    pub(crate) fn wake_all(&self) {
        if self.open.load(Ordering::Acquire) == 0 {
            return;
        }
        for tx in self.by_task().values() {
            tx.send_modify(|_| {});
        }
    }
}

impl TaskWatch {
    /// Until the task is written again (at once if it was since the last
    /// call, or since the watch began).
    pub(crate) async fn changed(&mut self) {
        // The sender lives as long as any watch of the task.
        let _ = self.changed.changed().await;
    }
}

impl Drop for TaskWatch {
    fn drop(&mut self) {
        self.watchers.open.fetch_sub(1, Ordering::AcqRel);
        let mut by_task = self.watchers.by_task();
        // This watch's receiver is still alive here: the last one counts 1.
        if by_task
            .get(&self.id)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            by_task.remove(&self.id);
        }
    }
}
