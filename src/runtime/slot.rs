//! [`Slot`]: how a worker's run tells the worker that its handler is done
//! before the run ends, so the slot serves the next run while the answer
//! is written (issue 33).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A worker slot held by one run. The run frees it when its handler gave
/// an answer that ends its turn here (a result, an error or a round of
/// input requests: not `requestState` alone, which may call the handler
/// again); the worker then counts the run as writing, not running, until
/// it ends.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    freed: Arc<AtomicBool>,
    worker: Arc<Notify>,
}

impl Slot {
    /// A slot of the worker woken through `worker`.
    pub(crate) fn new(worker: &Arc<Notify>) -> Self {
        Slot {
            freed: Arc::new(AtomicBool::new(false)),
            worker: Arc::clone(worker),
        }
    }

    /// Free the slot (once; later calls do nothing) and wake the worker.
    pub(crate) fn free(&self) {
        if !self.freed.swap(true, Ordering::AcqRel) {
            // A permit is kept if the worker is not waiting.
            self.worker.notify_one();
        }
    }

    /// Whether the run freed it.
    pub(crate) fn is_free(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}
