//! The 2025-11-25 wire form of a task: the flat `Task`.

use serde_json::Value;

use crate::protocol::Task;
use crate::store::{TaskRecord, TaskView};

/// The 2025-11-25 view of a record.
pub(crate) fn task(r: &TaskRecord) -> Task {
    task_of(&r.view())
}

/// [`task`] of a view.
pub(crate) fn task_of(r: &TaskView<'_>) -> Task {
    let m = super::metadata_of(r);
    Task {
        task_id: m.task_id,
        status: r.status,
        status_message: m.status_message,
        created_at: m.created_at,
        last_updated_at: m.last_updated_at,
        ttl: m.ttl_ms,
        poll_interval: m.poll_interval_ms,
    }
}

/// [`task`] as a JSON value.
pub(crate) fn task_value(r: &TaskRecord) -> Value {
    task_value_of(&r.view())
}

/// [`task_of`] as a JSON value.
pub(crate) fn task_value_of(r: &TaskView<'_>) -> Value {
    serde_json::to_value(task_of(r)).unwrap_or_default()
}
