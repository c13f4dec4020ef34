//! The handlers running in this process, for a drain to wait on: not every
//! task the registry tracks runs here (a task waited on here may run on
//! another replica).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// Task ids with a handler running here, and a wake-up when one stops.
#[derive(Debug, Default)]
pub(crate) struct RunningHandlers {
    /// Runs per task: a re-run may start before the run it replaces stops.
    ids: Mutex<HashMap<String, usize>>,
    stopped: Notify,
}

/// A handler's run, counted from before its runner is spawned (a drain
/// that starts meanwhile waits for it) until it is dropped.
pub(crate) struct Running {
    handlers: Arc<RunningHandlers>,
    id: String,
}

impl RunningHandlers {
    fn ids(&self) -> MutexGuard<'_, HashMap<String, usize>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count a run of task `id` until the guard is dropped.
    pub(crate) fn start(self: &Arc<Self>, id: &str) -> Running {
        *self.ids().entry(id.to_owned()).or_default() += 1;
        Running {
            handlers: Arc::clone(self),
            id: id.to_owned(),
        }
    }

    /// The tasks with a handler running here now.
    pub(crate) fn tasks(&self) -> Vec<String> {
        self.ids().keys().cloned().collect()
    }

    /// Completes when a run stops after this call; enable it before
    /// reading [`tasks`](Self::tasks) so that no stop falls in between.
    pub(crate) fn stopped(&self) -> Notified<'_> {
        self.stopped.notified()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut ids = self.handlers.ids();
        if let Some(n) = ids.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                ids.remove(&self.id);
            }
        }
        drop(ids);
        self.handlers.stopped.notify_waiters();
    }
}
