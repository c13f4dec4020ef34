//! A `MemoryStore` with a change feed the test writes (nothing is sent on
//! it unless the test sends it), counting `runnable` reads (without
//! `claim_runnable`, a worker's claim round is one `runnable` read and a
//! compare-and-set per run it takes).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_task_layer::store::{BoxFuture, Result, TaskChange, TaskRecord, TaskStore};
use mcp_task_layer::MemoryStore;
use tokio::sync::broadcast;

/// The store; see the module.
#[derive(Debug)]
pub struct FedStore {
    inner: MemoryStore,
    feed: broadcast::Sender<TaskChange>,
    runnable_reads: Arc<AtomicUsize>,
    /// The `limit` of each `runnable` read, in order.
    limits: Arc<Mutex<Vec<usize>>>,
    /// How long each `runnable` read takes (tokio time).
    read_delay: Duration,
}

impl FedStore {
    /// `inner` with a feed: the store, the feed's sender and the count of
    /// `runnable` reads.
    pub fn new(inner: MemoryStore) -> (Self, broadcast::Sender<TaskChange>, Arc<AtomicUsize>) {
        let feed = broadcast::channel(16).0;
        let runnable_reads = Arc::new(AtomicUsize::new(0));
        let store = FedStore {
            inner,
            feed: feed.clone(),
            runnable_reads: Arc::clone(&runnable_reads),
            limits: Arc::default(),
            read_delay: Duration::ZERO,
        };
        (store, feed, runnable_reads)
    }

    /// Each `runnable` read takes `delay` (of tokio time).
    pub fn with_read_delay(mut self, delay: Duration) -> Self {
        self.read_delay = delay;
        self
    }

    /// The `limit` of each `runnable` read so far, in order.
    pub fn limits(&self) -> Arc<Mutex<Vec<usize>>> {
        Arc::clone(&self.limits)
    }
}

impl TaskStore for FedStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        self.inner.create(record)
    }
    fn get<'a>(&'a self, id: &'a str, now: i64) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        self.inner.get(id, now)
    }
    fn replace(&self, record: TaskRecord, v: u64) -> BoxFuture<'_, Result<()>> {
        self.inner.replace(record, v)
    }
    fn delete_expired(&self, now: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        self.inner.delete_expired(now, limit)
    }
    fn runnable(&self, now: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        self.runnable_reads.fetch_add(1, Ordering::SeqCst);
        self.limits.lock().unwrap().push(limit);
        let delay = self.read_delay;
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            self.inner.runnable(now, limit).await
        })
    }
    fn changes(&self) -> Option<broadcast::Receiver<TaskChange>> {
        Some(self.feed.subscribe())
    }
}
