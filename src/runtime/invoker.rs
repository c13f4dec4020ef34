//! A type-erased clone of the inner service, for re-running orphaned tasks.

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, PoisonError};

use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse};

/// The inner service's error, type-erased for the orphan recovery runner.
#[derive(Debug)]
pub(crate) struct InnerFailed;

pub(crate) type Invoker =
    tower::util::BoxCloneService<JsonRpcRequest, JsonRpcResponse, InnerFailed>;

/// A type-erased clone of the inner service, kept for re-running orphaned
/// tasks ([`Recovery::Rerun`](crate::Recovery::Rerun)).
#[derive(Default)]
pub(crate) struct RerunInvoker {
    pub(super) slot: Mutex<Option<Invoker>>,
    pub(super) set: AtomicBool,
}

impl RerunInvoker {
    pub(super) fn get(&self) -> Option<Invoker> {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
