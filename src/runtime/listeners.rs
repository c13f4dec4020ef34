//! The open `subscriptions/listen` streams, by the task they watch: a write
//! reaches the streams that watch its task and no other, so that its cost
//! grows with that task's subscribers, not with every open stream. An entry
//! is forgotten when its stream stops watching the task (it ended, or is
//! gone) or the stream ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, watch};

use crate::store::TaskRecord;

/// How many pushes wait for one stream before it is told it lagged (and
/// re-reads its tasks from the store).
const INBOX: usize = 64;

/// What a stream hears.
#[derive(Debug)]
pub(crate) enum Pushed {
    /// A record of a watched task, as written in this process.
    Record(Arc<TaskRecord>),
    /// The store reported a write of a watched task (maybe another
    /// replica's) at this version.
    Changed(String, u64),
    /// Writes may have been missed (this stream's inbox was full, or the
    /// change feed lagged or reconnected): re-read every watched task.
    Missed,
}

/// One stream's way in.
#[derive(Debug, Clone)]
struct Inbox {
    stream: u64,
    tx: mpsc::Sender<Pushed>,
    lagged: Arc<AtomicBool>,
}

impl Inbox {
    fn push(&self, pushed: Pushed) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(pushed) {
            // The stream has pushes waiting, so it wakes and sees the flag.
            self.lagged.store(true, Ordering::Release);
        }
    }
}

/// Every open stream, by watched task.
#[derive(Debug)]
pub(crate) struct TaskListeners {
    /// How many tasks have a watching stream: a write with none costs one
    /// load.
    watched: AtomicUsize,
    next_stream: AtomicU64,
    by_task: Mutex<HashMap<String, Vec<Inbox>>>,
    /// Bumped when every stream must re-read (the change feed lagged).
    missed: watch::Sender<u64>,
}

impl Default for TaskListeners {
    fn default() -> Self {
        TaskListeners {
            watched: AtomicUsize::new(0),
            next_stream: AtomicU64::new(0),
            by_task: Mutex::default(),
            missed: watch::channel(0).0,
        }
    }
}

impl TaskListeners {
    fn by_task(&self) -> MutexGuard<'_, HashMap<String, Vec<Inbox>>> {
        self.by_task.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new stream, watching nothing yet.
    pub(crate) fn open(self: &Arc<Self>) -> Listener {
        let (tx, rx) = mpsc::channel(INBOX);
        Listener {
            listeners: Arc::clone(self),
            inbox: Inbox {
                stream: self.next_stream.fetch_add(1, Ordering::Relaxed),
                tx,
                lagged: Arc::default(),
            },
            rx,
            missed: self.missed.subscribe(),
            tasks: Vec::new(),
        }
    }

    /// A record written in this process: to the streams watching its task.
    pub(crate) fn record(&self, record: &TaskRecord) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        let by_task = self.by_task();
        let Some(inboxes) = by_task.get(&record.id) else {
            return;
        };
        let shared = Arc::new(record.clone());
        for inbox in inboxes {
            inbox.push(Pushed::Record(Arc::clone(&shared)));
        }
    }

    /// A write the store reported: to the streams watching its task.
    pub(crate) fn changed(&self, id: &str, version: u64) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(inboxes) = self.by_task().get(id) {
            for inbox in inboxes {
                inbox.push(Pushed::Changed(id.to_owned(), version));
            }
        }
    }

    /// Writes may have been missed: every stream re-reads its tasks.
    pub(crate) fn missed(&self) {
        self.missed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// How many tasks have a watching stream (tests).
    #[cfg(test)]
    fn tasks_watched(&self) -> usize {
        self.by_task().len()
    }
}

/// One stream's watches; every one of them is forgotten when it drops.
#[derive(Debug)]
pub(crate) struct Listener {
    listeners: Arc<TaskListeners>,
    inbox: Inbox,
    rx: mpsc::Receiver<Pushed>,
    missed: watch::Receiver<u64>,
    /// The tasks this stream watches (few: at most a subscription's ids).
    tasks: Vec<String>,
}

impl Listener {
    /// Hear of task `id`'s writes from now on.
    pub(crate) fn watch(&mut self, id: &str) {
        if self.tasks.iter().any(|t| t == id) {
            return;
        }
        let mut by_task = self.listeners.by_task();
        let inboxes = by_task.entry(id.to_owned()).or_insert_with(|| {
            self.listeners.watched.fetch_add(1, Ordering::AcqRel);
            Vec::new()
        });
        inboxes.push(self.inbox.clone());
        self.tasks.push(id.to_owned());
    }

    /// Hear no more of task `id`.
    pub(crate) fn unwatch(&mut self, id: &str) {
        let Some(at) = self.tasks.iter().position(|t| t == id) else {
            return;
        };
        self.tasks.swap_remove(at);
        let mut by_task = self.listeners.by_task();
        self.listeners.forget(&mut by_task, id, self.inbox.stream);
    }

    /// The next thing heard. Never ends: the stream holds a sender of its
    /// own inbox, and the hub outlives it.
    pub(crate) async fn recv(&mut self) -> Pushed {
        if self.inbox.lagged.swap(false, Ordering::AcqRel) {
            return Pushed::Missed;
        }
        tokio::select! {
            pushed = self.rx.recv() => pushed.unwrap_or(Pushed::Missed),
            changed = self.missed.changed() => match changed {
                Ok(()) => Pushed::Missed,
                Err(_) => std::future::pending().await,
            },
        }
    }
}

impl TaskListeners {
    fn forget(&self, by_task: &mut HashMap<String, Vec<Inbox>>, id: &str, stream: u64) {
        let Some(inboxes) = by_task.get_mut(id) else {
            return;
        };
        inboxes.retain(|inbox| inbox.stream != stream);
        if inboxes.is_empty() {
            by_task.remove(id);
            self.watched.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let mut by_task = self.listeners.by_task();
        for id in &self.tasks {
            self.listeners.forget(&mut by_task, id, self.inbox.stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Era;

    fn record(id: &str, version: u64) -> TaskRecord {
        let mut r = TaskRecord::new(id, Era::Modern, "tool", serde_json::Value::Null, 0, None);
        r.version = version;
        r
    }

    #[tokio::test]
    async fn a_write_reaches_the_watchers_of_its_task_only() {
        let hub = Arc::new(TaskListeners::default());
        let mut a = hub.open();
        let mut b = hub.open();
        a.watch("t1");
        b.watch("t2");
        hub.record(&record("t1", 2));
        match a.recv().await {
            Pushed::Record(r) => assert_eq!((r.id.as_str(), r.version), ("t1", 2)),
            other => panic!("{other:?}"),
        }
        assert!(b.rx.try_recv().is_err(), "t2's watcher heard nothing");
        assert_eq!(hub.tasks_watched(), 2);
        a.unwatch("t1");
        assert_eq!(hub.tasks_watched(), 1);
        drop(b);
        assert_eq!(hub.tasks_watched(), 0, "every entry forgotten");
    }

    #[tokio::test]
    async fn a_full_inbox_and_a_missed_feed_make_the_stream_reread() {
        let hub = Arc::new(TaskListeners::default());
        let mut a = hub.open();
        a.watch("t1");
        for v in 0..=INBOX as u64 {
            hub.record(&record("t1", v));
        }
        assert!(matches!(a.recv().await, Pushed::Missed));
        hub.missed();
        // What was queued comes first, the feed's miss after it.
        let mut missed = false;
        for _ in 0..=INBOX {
            if let Pushed::Missed = a.recv().await {
                missed = true;
                break;
            }
        }
        assert!(missed);
    }
}
