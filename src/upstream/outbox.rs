//! What a link sends the upstream, in order, and what may be dropped.
//!
//! The queue to the connection's writer is bounded. A request waits for
//! room (its caller waits for its answer anyway). An answer to the
//! upstream's own request, or a `notifications/cancelled`, must arrive (the
//! upstream waits for it, or would run on for nobody), yet is sent from
//! code that cannot wait (a drop, the reader of the upstream's messages):
//! when the queue is full it waits in an overflow, in order, that one task
//! moves to the queue as room comes, until the connection ends. Such
//! messages are bounded by the upstream's requests and the gateway's calls
//! in flight. A hint (a roots change, which carries no data) is dropped
//! when the queue is full.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_util::sync::CancellationToken;

/// The sending side of a link.
pub(super) struct Outbox {
    tx: mpsc::Sender<Vec<u8>>,
    overflow: Arc<Mutex<Overflow>>,
}

#[derive(Default)]
struct Overflow {
    queue: VecDeque<Vec<u8>>,
    /// A task moves the overflow to the queue.
    draining: bool,
}

impl Outbox {
    /// Messages go to `tx`.
    pub(super) fn new(tx: mpsc::Sender<Vec<u8>>) -> Self {
        Outbox {
            tx,
            overflow: Arc::default(),
        }
    }

    /// Send once there is room; `false` if the connection's writer is gone.
    pub(super) async fn send(&self, message: Vec<u8>) -> bool {
        self.tx.send(message).await.is_ok()
    }

    /// Send now, or drop the message if the queue is full.
    pub(super) fn hint(&self, message: Vec<u8>) {
        let _ = self.tx.try_send(message);
    }

    /// Send without waiting, and never drop the message while the
    /// connection lives (`closed` fires when it ends): after the messages
    /// of this kind sent before it.
    pub(super) fn must(&self, message: Vec<u8>, closed: &CancellationToken) {
        let mut overflow = self.overflow.lock().unwrap_or_else(PoisonError::into_inner);
        let message = if overflow.queue.is_empty() {
            match self.tx.try_send(message) {
                Ok(()) | Err(TrySendError::Closed(_)) => return,
                Err(TrySendError::Full(message)) => message,
            }
        } else {
            message
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no runtime to send an upstream message later: dropped");
            return;
        };
        overflow.queue.push_back(message);
        if !overflow.draining {
            overflow.draining = true;
            let (tx, queue, closed) = (self.tx.clone(), Arc::clone(&self.overflow), closed.clone());
            runtime.spawn(drain(tx, queue, closed));
        }
    }
}

/// Move the overflow to the queue as room comes: a slot first, then the
/// oldest message, so that nothing sent meanwhile goes ahead of it.
async fn drain(
    tx: mpsc::Sender<Vec<u8>>,
    overflow: Arc<Mutex<Overflow>>,
    closed: CancellationToken,
) {
    loop {
        let permit = tokio::select! {
            permit = tx.reserve() => permit.ok(),
            () = closed.cancelled() => None,
        };
        let mut o = overflow.lock().unwrap_or_else(PoisonError::into_inner);
        match (permit, o.queue.pop_front()) {
            (Some(permit), Some(message)) => permit.send(message),
            (Some(_), None) => {
                o.draining = false;
                return;
            }
            (None, _) => {
                // The connection is over: nothing can be sent on it.
                o.queue.clear();
                o.draining = false;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the writer's queue full, answers and cancels wait and arrive in
    /// order once the writer reads on; a hint is dropped. Before, every
    /// one of them was dropped: an answer to the upstream's question lost,
    /// its call waiting upstream for ever.
    #[tokio::test]
    async fn with_the_queue_full_what_must_arrive_waits_in_order_and_hints_are_dropped() {
        let (tx, mut rx) = mpsc::channel(1);
        let out = Outbox::new(tx);
        let closed = CancellationToken::new();
        out.hint(b"first".to_vec());
        out.must(b"answer".to_vec(), &closed);
        out.hint(b"hint".to_vec());
        out.must(b"cancel".to_vec(), &closed);
        let mut got = Vec::new();
        // The writer reads on; what waits arrives without a wait of its
        // own (bounded: a lost message fails here, not by a hang).
        for _ in 0..3 {
            match tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv()).await {
                Ok(Some(m)) => got.push(String::from_utf8(m).unwrap()),
                _ => break,
            }
        }
        assert_eq!(got, ["first", "answer", "cancel"]);
        out.must(b"later".to_vec(), &closed);
        assert_eq!(rx.recv().await.unwrap(), b"later");
        assert!(rx.try_recv().is_err(), "the hint sent while full is gone");
    }

    /// A connection that ends lets go of what still waits.
    #[tokio::test]
    async fn an_ended_connection_drops_what_waits() {
        let (tx, rx) = mpsc::channel(1);
        let out = Outbox::new(tx);
        let closed = CancellationToken::new();
        out.hint(b"first".to_vec());
        out.must(b"answer".to_vec(), &closed);
        closed.cancel();
        // The drainer stops; nothing is left queued.
        for _ in 0..100 {
            if !out.overflow.lock().unwrap().draining {
                break;
            }
            tokio::task::yield_now().await;
        }
        let o = out.overflow.lock().unwrap();
        assert!(!o.draining && o.queue.is_empty());
        drop(rx);
    }
}
