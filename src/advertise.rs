//! What the layer adds to results it lets through: the tasks capability in
//! `initialize` and `server/discover`, each tool's `taskSupport` in a
//! 2025-11-25 `tools/list`.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{TaskPolicy, ToolPolicies};
use crate::protocol::TASKS_EXTENSION;

/// How a passed-through result is amended.
#[derive(Clone)]
pub(crate) enum Edit {
    /// `server/discover`: advertise the 2026-07-28 extension.
    Discover,
    /// 2025-11-25 `initialize`: advertise `capabilities.tasks`, with
    /// `tasks.list` only if `list` (the caller has an identity).
    Initialize { list: bool },
    /// 2025-11-25 `tools/list`: each tool's `execution.taskSupport`.
    ToolsList(Arc<ToolPolicies>),
}

fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object just above"),
    }
}

pub(crate) fn apply(edit: &Edit, result: &mut Map<String, Value>) {
    match edit {
        Edit::Initialize { list } => {
            let caps = object(result, "capabilities");
            let mut tasks =
                serde_json::json!({ "cancel": {}, "requests": { "tools": { "call": {} } } });
            if *list {
                tasks["list"] = Value::Object(Map::new());
            }
            caps.insert("tasks".into(), tasks);
        }
        Edit::ToolsList(policies) => {
            if let Some(Value::Array(tools)) = result.get_mut("tools") {
                for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
                    let support = match policies.of(name) {
                        TaskPolicy::Sync => "forbidden",
                        TaskPolicy::Auto { .. } => "optional",
                        TaskPolicy::Task => "required",
                    };
                    object(tool, "execution").insert("taskSupport".into(), support.into());
                }
            }
        }
        Edit::Discover => {
            let caps = object(result, "capabilities");
            // A 2026-07-28 server must not advertise the legacy capability (R9).
            caps.remove("tasks");
            object(caps, "extensions").insert(TASKS_EXTENSION.into(), Value::Object(Map::new()));
        }
    }
}
