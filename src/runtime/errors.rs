//! The errors the engine answers with in more than one place.

use tracing::warn;

use crate::jsonrpc::{code, JsonRpcError};
use crate::store;

/// The one answer for unknown, expired and foreign task ids, so that a
/// task's existence never leaks (R51).
pub(crate) fn task_not_found() -> JsonRpcError {
    JsonRpcError::new(
        code::INVALID_PARAMS,
        "Failed to retrieve task: Task not found",
    )
}

/// The store failed: logged here, answered without its details.
pub(crate) fn store_failure(e: &store::Error) -> JsonRpcError {
    warn!(error = %e, "task store failure");
    JsonRpcError::internal("the task store is unavailable")
}

/// Every compare-and-set retry lost to another writer.
pub(crate) fn changing_too_fast() -> JsonRpcError {
    JsonRpcError::internal("the task is changing too fast; try again")
}
