//! A store that misbehaves on demand, around a `MemoryStore`: writes that
//! fail (a store outage), writes that commit and then hold their answer
//! back (so a test can drop the caller's future right after a committed
//! write), and `orphans` (which `MemoryStore` does not offer), so that
//! lease recovery can be driven in one process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mcp_task_layer::store::{BoxFuture, Error, Result, TaskRecord};
use mcp_task_layer::{MemoryStore, TaskStatus, TaskStore};
use tokio::sync::{watch, Notify};

#[derive(Debug)]
pub struct FaultyStore {
    inner: MemoryStore,
    ids: Mutex<Vec<String>>,
    /// `replace` fails with a backend error while set.
    pub fail_replace: AtomicBool,
    /// While closed (`false`), a write commits, signals `written`, and then
    /// waits for the gate to open before it answers.
    gate: watch::Sender<bool>,
    pub written: Notify,
}

impl Default for FaultyStore {
    fn default() -> Self {
        FaultyStore {
            inner: MemoryStore::new(),
            ids: Mutex::default(),
            fail_replace: AtomicBool::new(false),
            gate: watch::channel(true).0,
            written: Notify::new(),
        }
    }
}

impl FaultyStore {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Hold every write's answer from now on, until [`open`](Self::open).
    pub fn close(&self) {
        self.gate.send_replace(false);
    }

    pub fn open(&self) {
        self.gate.send_replace(true);
    }

    /// The ids of every task created, in order.
    pub fn ids(&self) -> Vec<String> {
        self.ids.lock().unwrap().clone()
    }

    async fn after_write(&self) {
        if !*self.gate.borrow() {
            self.written.notify_one();
            let mut gate = self.gate.subscribe();
            let _ = gate.wait_for(|open| *open).await;
        }
    }
}

impl TaskStore for FaultyStore {
    fn create(&self, record: TaskRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let id = record.id.clone();
            self.inner.create(record).await?;
            self.ids.lock().unwrap().push(id);
            self.after_write().await;
            Ok(())
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Arc<TaskRecord>>>> {
        self.inner.get(id, now_ms)
    }

    fn replace(&self, record: TaskRecord, expected_version: u64) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if self.fail_replace.load(Ordering::SeqCst) {
                return Err(Error::Backend("the store is down (injected)".into()));
            }
            self.inner.replace(record, expected_version).await?;
            self.after_write().await;
            Ok(())
        })
    }

    fn delete_expired(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<String>>> {
        self.inner.delete_expired(now_ms, limit)
    }

    fn orphans(&self, now_ms: i64, limit: usize) -> BoxFuture<'_, Result<Vec<Arc<TaskRecord>>>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for id in self.ids() {
                if let Some(r) = self.inner.get(&id, now_ms).await? {
                    let lapsed = r.lease.as_ref().is_some_and(|l| l.until_ms < now_ms);
                    if r.status == TaskStatus::Working && lapsed && out.len() < limit {
                        out.push(r);
                    }
                }
            }
            Ok(out)
        })
    }
}
