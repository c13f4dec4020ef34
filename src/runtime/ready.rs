//! [`Ready`]: claims a worker holds for its next free slots, so that a slot
//! that frees starts its next run at once instead of after a claim round
//! (issue 33).
//!
//! A held claim is registered as running here from the moment it is held,
//! so a cancel (or any end) announced meanwhile reaches it: it is dropped
//! unrun when its turn comes. A claim held longer than a heartbeat period
//! (a third of the lease) is put back in the queue: its lease is not
//! renewed until its run starts, and a run that starts then still renews
//! it in time. Whatever is held when the worker stops, or when its loop is
//! dropped, is put back in the queue unrun, as a round's claims are
//! ([`Won`]).

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::time::Instant;

use super::drain::HandedBack;
use super::engine::Engine;
use super::registry::LocalTask;
use super::won::Won;
use crate::store::TaskRecord;

/// Claims held for the worker's next free slots, oldest first.
pub(super) struct Ready {
    engine: Arc<Engine>,
    held: VecDeque<Held>,
}

/// One claim held.
struct Held {
    record: Arc<TaskRecord>,
    local: LocalTask,
    since: Instant,
}

impl Ready {
    pub(super) fn new(engine: &Arc<Engine>) -> Self {
        Ready {
            engine: Arc::clone(engine),
            held: VecDeque::new(),
        }
    }

    /// How many claims are held.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// Hold what a round won, each registered as running here.
    pub(super) fn hold(&mut self, won: Won) {
        let since = Instant::now();
        for record in won.take() {
            let local = self.engine.registry.rerun(&record);
            self.held.push_back(Held {
                record,
                local,
                since,
            });
        }
    }

    /// The next claim to run, and its entry here. A claim whose task was
    /// cancelled or ended while it was held is forgotten instead: no
    /// handler runs for it.
    pub(super) fn next(&mut self) -> Option<(Arc<TaskRecord>, LocalTask)> {
        while let Some(held) = self.held.pop_front() {
            if held.local.token.is_cancelled() {
                self.engine
                    .registry
                    .forget_run(&held.record.id, &held.local);
                continue;
            }
            return Some((held.record, held.local));
        }
        None
    }

    /// Ready when the oldest claim held has been held a heartbeat period;
    /// pending while none is held.
    pub(super) async fn stale(&self) {
        match self.held.front() {
            Some(oldest) => {
                tokio::time::sleep_until(oldest.since + self.engine.cfg.heartbeat_period()).await;
            }
            None => std::future::pending().await,
        }
    }

    /// Put back in the queue (in the background) every claim held for a
    /// heartbeat period or longer.
    pub(super) fn drop_stale(&mut self) {
        let period = self.engine.cfg.heartbeat_period();
        let stale = self
            .held
            .iter()
            .take_while(|held| held.since.elapsed() >= period)
            .count();
        self.requeue(stale);
    }

    /// Put every claim held back in the queue now: how each went.
    pub(super) async fn give_back(&mut self) -> Vec<HandedBack> {
        let records = self.forget(self.held.len());
        Won::new(&self.engine, records).give_back().await
    }

    /// Put the first `n` claims held back in the queue, by a task of its
    /// own (where a runtime is left: `Won`'s drop).
    fn requeue(&mut self, n: usize) {
        let records = self.forget(n);
        drop(Won::new(&self.engine, records));
    }

    /// Forget the first `n` claims held here; their records.
    fn forget(&mut self, n: usize) -> Vec<Arc<TaskRecord>> {
        self.held
            .drain(..n)
            .map(|held| {
                self.engine
                    .registry
                    .forget_run(&held.record.id, &held.local);
                held.record
            })
            .collect()
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        self.requeue(self.held.len());
    }
}
