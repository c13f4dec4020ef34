//! Which protocol era a request speaks, and the rules that differ by era:
//! which `tasks/*` methods exist, when a `tools/call` becomes a task, which
//! capability a request must declare.
//!
//! A request whose `_meta` names `io.modelcontextprotocol/protocolVersion`
//! follows the 2026-07-28 tasks extension; any other follows 2025-11-25
//! (docs/requirements.md §1).

use serde_json::json;

use crate::config::TaskPolicy;
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest};
use crate::protocol::TASKS_EXTENSION;
use crate::store::Era;

/// The era and capabilities of one request, read from its own `_meta`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestEra {
    pub(crate) modern: bool,
    pub(crate) tasks_declared: bool,
}

/// Whether `version` is one of the `supported` 2026-07-28-style versions.
pub(crate) fn serves(supported: &[String], version: &str) -> bool {
    supported.iter().any(|s| s == version)
}

impl RequestEra {
    pub(crate) fn of(req: &JsonRpcRequest) -> Self {
        Self::read(req).0
    }

    /// The era of a request the layer serves itself: a 2026-07-28-style
    /// request must name a version the layer supports, else `-32022`
    /// before anything else is looked at (docs/requirements.md, errors).
    pub(crate) fn admitted(
        req: &JsonRpcRequest,
        supported: &[String],
    ) -> Result<Self, JsonRpcError> {
        let (era, version) = Self::read(req);
        match version {
            Some(v) if !serves(supported, v) => {
                Err(JsonRpcError::unsupported_protocol_version(v, supported))
            }
            _ => Ok(era),
        }
    }

    /// A `tasks/*` request's era: [`admitted`](Self::admitted), then
    /// [`admit_tasks_method`](Self::admit_tasks_method).
    pub(crate) fn admit_tasks(
        req: &JsonRpcRequest,
        supported: &[String],
    ) -> Result<Era, JsonRpcError> {
        Self::admitted(req, supported).and_then(|era| era.admit_tasks_method(&req.method))
    }

    fn read(req: &JsonRpcRequest) -> (Self, Option<&str>) {
        let (version, tasks_declared) = req.era_facts();
        let modern = version.is_some();
        let era = RequestEra {
            modern,
            tasks_declared,
        };
        (era, version)
    }

    /// The era a task made by this request is stored under.
    pub(crate) fn store_era(self) -> Era {
        if self.modern {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// Whether a `tasks/*` request may be served in this era, and under
    /// which era its task is looked up.
    pub(crate) fn admit_tasks_method(self, method: &str) -> Result<Era, JsonRpcError> {
        if self.modern {
            match method {
                // Removed in 2026-07-28 (R10, R11).
                "tasks/result" | "tasks/list" => Err(JsonRpcError::method_not_found(method)),
                _ if !self.tasks_declared => Err(missing_tasks_capability()),
                _ => Ok(Era::Modern),
            }
        } else if method == "tasks/update" {
            // `tasks/update` does not exist in 2025-11-25 (R76).
            Err(JsonRpcError::method_not_found(method))
        } else {
            Ok(Era::Legacy)
        }
    }

    /// Whether a `tools/call` of `tool` under `policy` becomes a task, or
    /// the error that refuses it.
    pub(crate) fn wants_task(
        self,
        req: &JsonRpcRequest,
        tool: &str,
        policy: TaskPolicy,
    ) -> Result<bool, JsonRpcError> {
        if self.modern {
            return match (policy, self.tasks_declared) {
                (TaskPolicy::Sync, _) | (TaskPolicy::Auto { .. }, false) => Ok(false),
                (TaskPolicy::Task, false) => Err(missing_tasks_capability()),
                (_, true) => Ok(true),
            };
        }
        // 2025-11-25: the client asks for a task with `params.task`; the
        // policy is the tool's `execution.taskSupport`.
        let requested = req
            .params
            .as_ref()
            .is_some_and(|p| p.is_object_param("task"));
        let refusal = match (policy, requested) {
            (TaskPolicy::Sync, true) => "does not support task-augmented calls",
            (TaskPolicy::Task, false) => "must be called as a task",
            (_, requested) => return Ok(requested),
        };
        let e = JsonRpcError::method_not_found("tools/call");
        let message = format!("Tool {tool:?} {refusal}");
        Err(JsonRpcError { message, ..e })
    }
}

/// A 2026-07-28 `subscriptions/listen` that asks for task notifications;
/// other subscriptions are the inner server's.
pub(crate) fn wants_task_notifications(req: &JsonRpcRequest) -> bool {
    RequestEra::of(req).modern
        && req
            .params_object()
            .and_then(|p| p.get("notifications"))
            .is_some_and(|n| n.get("taskIds").is_some())
}

/// `-32021` for a 2026-07-28 request that did not declare the tasks
/// extension.
pub(crate) fn missing_tasks_capability() -> JsonRpcError {
    JsonRpcError::missing_capability(json!({ "extensions": { TASKS_EXTENSION: {} } }))
}
