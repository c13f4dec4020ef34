//! Writes in batches: the creates and compare-and-sets that the callers of
//! one store make at the same time go to Redis as one `WRITE` script call
//! (issue 33).
//!
//! A queued task costs a create in front, and a claim and a result in a
//! worker, whose claims of one round and results of its concurrent runs
//! come together. One call for many writes saves the server a script call
//! and a round of socket reads and writes for each, and the client as
//! much. Each write in a batch is still its own create or compare-and-set,
//! applied in the order the callers made them, each caller hears its own
//! answer, and nothing waits for a batch to fill: writes that arrive while
//! one call is out go with the next, and a write alone goes alone.

use std::sync::Mutex;

use tokio::sync::oneshot;

use super::scripts::WRITE_ARGS;
use crate::store::{Error, Result};

/// The most writes one call carries.
const MAX_BATCH: usize = 64;

/// One write's `WRITE` arguments.
pub(super) type Args = [String; WRITE_ARGS];

/// One write, and where its answer goes.
pub(super) type Waiting = (Args, oneshot::Sender<Result<i64>>);

/// The writes waiting for the next call, and whether a call is out.
#[derive(Debug, Default)]
pub(super) struct Batches {
    queue: Mutex<(Vec<Waiting>, bool)>,
}

impl Batches {
    /// Queue a write; true if no call is out, and the caller must start
    /// the loop that sends them (`writes.rs`).
    pub(super) fn push(&self, write: Waiting) -> bool {
        let mut queue = self.lock();
        queue.0.push(write);
        !std::mem::replace(&mut queue.1, true)
    }

    /// The next batch, oldest first, at most [`MAX_BATCH`]; `None` once
    /// none waits, and the loop ends (the next write starts another).
    pub(super) fn next(&self) -> Option<Vec<Waiting>> {
        let mut queue = self.lock();
        if queue.0.is_empty() {
            queue.1 = false;
            return None;
        }
        let n = queue.0.len().min(MAX_BATCH);
        Some(queue.0.drain(..n).collect())
    }

    /// The loop ended without finishing: every write queued fails, and
    /// the next write starts another loop.
    pub(super) fn abandon(&self) {
        let waiting = {
            let mut queue = self.lock();
            queue.1 = false;
            std::mem::take(&mut queue.0)
        };
        for (_, answer) in waiting {
            let _ = answer.send(Err(Error::Backend(
                "the Redis write batches stopped: the runtime the store connected on has ended"
                    .into(),
            )));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<Waiting>, bool)> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}
