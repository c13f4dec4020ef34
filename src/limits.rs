//! Bounds on what clients and handlers can make the layer store.

use serde_json::{Map, Value};

use crate::json::{depth, json_size};
use crate::jsonrpc::JsonRpcError;

/// Bounds on client input and stored data. Every violation is a precise
/// `-32602` (client input) or a `failed` task with `-32603` (a handler's
/// oversized result), never a panic and never a partial write.
///
/// ```
/// use mcp_task_layer::{Limits, MemoryStore, TaskLayer};
///
/// let limits = Limits { max_input_responses: 8, ..Limits::default() };
/// let layer = TaskLayer::new(MemoryStore::new()).with_limits(limits);
/// # let _ = layer;
/// ```
///
/// Build it with struct update syntax from [`Limits::default`]; new bounds
/// will only ever be added with a default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most answers in one `tasks/update` (default 64).
    pub max_input_responses: usize,
    /// Largest `inputResponses` object, serialized, in bytes (default 1 MiB).
    pub max_input_responses_bytes: usize,
    /// Deepest nesting of any answer (default 32).
    pub max_input_depth: usize,
    /// Largest `arguments` (plus `_meta`) stored with a task, serialized, in
    /// bytes (default 1 MiB).
    pub max_arguments_bytes: usize,
    /// Largest result or error a handler may store in a task, serialized, in
    /// bytes (default 8 MiB); a larger one fails the task.
    pub max_result_bytes: usize,
    /// Most answers accumulated over a task's whole life (default 256).
    pub max_accumulated_responses: usize,
    /// Most unfinished tasks (`working` or `input_required`) one owner may
    /// have at once in this process (default 10 000); a `tools/call` that
    /// would make one more gets `-32602` and its handler never runs.
    pub max_tasks_per_owner: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_input_responses: 64,
            max_input_responses_bytes: 1 << 20,
            max_input_depth: 32,
            max_arguments_bytes: 1 << 20,
            max_result_bytes: 8 << 20,
            max_accumulated_responses: 256,
            max_tasks_per_owner: 10_000,
        }
    }
}

impl Limits {
    /// Check a `tasks/update`'s `inputResponses`.
    pub(crate) fn check_answers(&self, answers: &Map<String, Value>) -> Result<(), JsonRpcError> {
        if answers.len() > self.max_input_responses {
            return Err(JsonRpcError::invalid_params(format!(
                "\"inputResponses\" has {} answers; at most {} are accepted",
                answers.len(),
                self.max_input_responses
            )));
        }
        let mut total = 0;
        for (key, answer) in answers {
            if !answer.is_object() {
                return Err(JsonRpcError::invalid_params(format!(
                    "the answer under \"{key}\" must be an object"
                )));
            }
            if depth(answer) > self.max_input_depth {
                return Err(JsonRpcError::invalid_params(format!(
                    "the answer under \"{key}\" nests deeper than {} levels",
                    self.max_input_depth
                )));
            }
            total += key.len() + json_size(answer);
            if total > self.max_input_responses_bytes {
                return Err(JsonRpcError::invalid_params(format!(
                    "\"inputResponses\" is larger than {} bytes",
                    self.max_input_responses_bytes
                )));
            }
        }
        Ok(())
    }

    /// Check what a new task would store of its request: `size` is its
    /// `arguments` plus `_meta`, serialized.
    pub(crate) fn check_arguments(&self, size: usize) -> Result<(), JsonRpcError> {
        if size > self.max_arguments_bytes {
            return Err(JsonRpcError::invalid_params(format!(
                "the call's arguments are larger than {} bytes and cannot be stored with a task",
                self.max_arguments_bytes
            )));
        }
        Ok(())
    }
}
