//! The client's requests the gateway may be told to cancel: a synchronous
//! `tools/call` or a forwarded request in flight, by its owner and request
//! id. `notifications/cancelled` from the client trips its token, and the
//! upstream call is cancelled in turn. Each entry is forgotten when its
//! request ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::hashing::Chosen;
use crate::jsonrpc::RequestId;

type Key = (Option<String>, RequestId);

/// The requests in flight that a client may cancel.
#[derive(Default)]
pub(crate) struct Cancels {
    map: Mutex<HashMap<Key, CancellationToken, Chosen>>,
}

/// One request watched for its cancellation, until dropped.
pub(crate) struct Watched {
    cancels: Arc<Cancels>,
    key: Key,
    /// Tripped by the client's `notifications/cancelled`.
    pub(crate) token: CancellationToken,
}

impl Cancels {
    /// Watch request `id` of `owner`.
    pub(crate) fn watch(self: &Arc<Self>, owner: Option<String>, id: RequestId) -> Watched {
        let token = CancellationToken::new();
        let key = (owner, id);
        self.lock().insert(key.clone(), token.clone());
        Watched {
            cancels: Arc::clone(self),
            key,
            token,
        }
    }

    /// `owner` cancelled its request `id` (a request of another caller, or
    /// one not in flight, is left alone).
    pub(crate) fn cancel(&self, owner: Option<String>, id: RequestId) {
        if let Some(token) = self.lock().get(&(owner, id)) {
            token.cancel();
        }
    }

    /// Requests watched now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, CancellationToken, Chosen>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.cancels.lock().remove(&self.key);
    }
}
