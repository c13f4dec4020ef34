//! The client's requests the gateway may be told to cancel: a synchronous
//! `tools/call` or a forwarded request in flight, by its owner and request
//! id. `notifications/cancelled` from the client trips its token, and the
//! upstream call is cancelled in turn. Each entry is forgotten when its
//! request ends.
//!
//! Over HTTP nothing but the owner ties a cancel to the request it names,
//! and two clients of one owner (or two anonymous clients) may have
//! requests with the same id in flight at once: a cancel that could name
//! either trips neither, and each request's end forgets only its own
//! entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::hashing::Chosen;
use crate::jsonrpc::RequestId;

type Key = (Option<String>, RequestId);

/// The requests of one key in flight: almost always one.
type Entries = Vec<(u64, CancellationToken)>;

/// The requests in flight that a client may cancel.
#[derive(Default)]
pub(crate) struct Cancels {
    map: Mutex<HashMap<Key, Entries, Chosen>>,
    next: AtomicU64,
}

/// One request watched for its cancellation, until dropped.
pub(crate) struct Watched {
    cancels: Arc<Cancels>,
    key: Key,
    serial: u64,
    /// Tripped by the client's `notifications/cancelled`.
    pub(crate) token: CancellationToken,
}

impl Cancels {
    /// Watch request `id` of `owner`.
    pub(crate) fn watch(self: &Arc<Self>, owner: Option<String>, id: RequestId) -> Watched {
        let token = CancellationToken::new();
        let key = (owner, id);
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .entry(key.clone())
            .or_default()
            .push((serial, token.clone()));
        Watched {
            cancels: Arc::clone(self),
            key,
            serial,
            token,
        }
    }

    /// `owner` cancelled its request `id`. A request of another caller, or
    /// one not in flight, is left alone; so are two or more of `owner`'s
    /// with that id, since the cancel cannot say which.
    pub(crate) fn cancel(&self, owner: Option<String>, id: RequestId) {
        match self.lock().get(&(owner, id)).map(Vec::as_slice) {
            Some([(_, token)]) => token.cancel(),
            Some([]) | None => {}
            Some(many) => tracing::debug!(
                requests = many.len(),
                "a cancel of a request id that more than one request of its owner has; none cancelled"
            ),
        }
    }

    /// Requests watched now.
    pub(crate) fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entries, Chosen>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let mut map = self.cancels.lock();
        if let Some(entries) = map.get_mut(&self.key) {
            entries.retain(|(serial, _)| *serial != self.serial);
            if entries.is_empty() {
                map.remove(&self.key);
            }
        }
    }
}
