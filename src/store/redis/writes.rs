//! [`RedisStore`]'s writes: each goes with the next batch (`batch.rs`),
//! one `WRITE` script call (`scripts.rs`) for the writes waiting.

use std::sync::Arc;

use redis::Value;
use tokio::sync::oneshot;

use super::batch::Args;
use super::{backend, RedisStore};
use crate::store::{Error, Result};

impl RedisStore {
    /// Write `args` with the next batch and wait for its answer. The first
    /// writer while no call is out starts the loop that sends batches
    /// until none waits (a task of its own on the store's runtime, so that
    /// a caller that goes away strands no one, and a caller on another
    /// executor needs no tokio context).
    pub(super) async fn write_batched(&self, args: Args) -> Result<i64> {
        self.conn()?;
        let (tx, rx) = oneshot::channel();
        if self.inner.batches.push((args, tx)) {
            let sender = BatchLoop {
                store: self.clone(),
                finished: false,
            };
            self.inner.runtime.spawn(sender.run());
        }
        rx.await.unwrap_or_else(|_| {
            Err(Error::Backend(
                "the Redis write batch stopped before answering".into(),
            ))
        })
    }

    /// One `WRITE` call: an answer for each write. A call that failed as a
    /// whole (the connection) may have written: each caller hears the
    /// failure, as of a write of its own.
    async fn send(&self, writes: &[Args]) -> Vec<Result<i64>> {
        let k = &self.inner.keys;
        let mut invocation = self.inner.scripts.write.prepare_invoke();
        invocation
            .arg(&k.expiry)
            .arg(&k.leases)
            .arg(&k.ended)
            .arg(&k.channel)
            .arg(&k.status_head);
        for write in writes {
            for arg in write {
                invocation.arg(arg);
            }
        }
        let answers: std::result::Result<Vec<Value>, Error> = match self.conn() {
            Ok(mut conn) => invocation.invoke_async(&mut conn).await.map_err(backend),
            Err(e) => Err(e),
        };
        match answers {
            Ok(answers) if answers.len() == writes.len() => {
                answers.into_iter().map(answer).collect()
            }
            Ok(answers) => {
                let text = format!(
                    "the Redis WRITE script answered {} times for {} writes",
                    answers.len(),
                    writes.len()
                );
                writes
                    .iter()
                    .map(|_| Err(Error::Backend(text.clone().into())))
                    .collect()
            }
            Err(e) if writes.len() == 1 => vec![Err(e)],
            Err(e) => {
                let e = Arc::new(e);
                writes
                    .iter()
                    .map(|_| Err(Error::Backend(Box::new(SharedError(Arc::clone(&e))))))
                    .collect()
            }
        }
    }
}

/// The loop that sends the batches until none waits. Dropped before it
/// finished (its runtime shut down, so it never ran or stopped midway),
/// it fails the writes still queued and lets the next write start a loop
/// again: no writer waits for ever.
struct BatchLoop {
    store: RedisStore,
    finished: bool,
}

impl BatchLoop {
    async fn run(mut self) {
        while let Some(batch) = self.store.inner.batches.next() {
            let (writes, answers): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            let results = self.store.send(&writes).await;
            for (answer, result) in answers.into_iter().zip(results) {
                // A caller that went away needs no answer.
                let _ = answer.send(result);
            }
        }
        self.finished = true;
    }
}

impl Drop for BatchLoop {
    fn drop(&mut self) {
        if !self.finished {
            self.store.inner.batches.abandon();
        }
    }
}

/// One write's answer: its number, or its error's text.
fn answer(value: Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(n),
        Value::BulkString(text) => Err(Error::Backend(
            format!("a Redis write failed: {}", String::from_utf8_lossy(&text)).into(),
        )),
        other => Err(Error::Backend(
            format!("a Redis write answered {other:?}").into(),
        )),
    }
}

/// A failed call's error, told to each of its callers.
#[derive(Debug)]
struct SharedError(Arc<Error>);

impl std::fmt::Display for SharedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a batch of Redis writes failed: {}", self.0)
    }
}

impl std::error::Error for SharedError {}
