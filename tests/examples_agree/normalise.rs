//! What may differ between two runs without being behaviour (see the list
//! in `main.rs`), replaced by placeholders.

use std::collections::BTreeMap;
use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::Transcript;

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The transcript's steps, normalised.
pub(crate) fn transcript(t: Transcript) -> Vec<(String, Value)> {
    let mut tasks = HashMap::new();
    t.steps
        .into_iter()
        .map(|(step, mut message)| {
            if message.get("method").is_some() && message.get("id").is_some() {
                message["id"] = json!("<server request id>");
            } else if message.get("id").is_some() {
                // Matched to its request by the driver already.
                message["id"] = json!("<id>");
            }
            if let Some(result) = message.get_mut("result") {
                who(result);
                if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
                    tools.iter_mut().for_each(schema);
                    tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
                }
            }
            walk(&mut message, &mut tasks, &step);
            (step, message)
        })
        .collect()
}

/// The server's name and instructions.
fn who(result: &mut Value) {
    if let Some(info) = result.get_mut("serverInfo") {
        info["name"] = json!("<server name>");
    }
    if let Some(info) = result.pointer_mut(&format!("/_meta/{}", SERVER_INFO.replace('/', "~1"))) {
        info["name"] = json!("<server name>");
    }
    if let Some(instructions) = result.get_mut("instructions") {
        *instructions = json!("<instructions>");
    }
}

/// A tool's `inputSchema` as `{property: JSON type}`.
fn schema(tool: &mut Value) {
    let Some(properties) = tool
        .pointer("/inputSchema/properties")
        .and_then(Value::as_object)
    else {
        return;
    };
    let kinds: BTreeMap<&String, Value> = properties
        .iter()
        .map(|(name, p)| {
            let kind = match &p["type"] {
                // `["string", "null"]`: an optional member.
                Value::Array(kinds) => kinds.iter().find(|k| *k != "null").cloned(),
                kind => Some(kind.clone()),
            };
            (name, kind.unwrap_or(Value::Null))
        })
        .collect();
    tool["inputSchema"] = json!({ "properties": kinds });
}

/// Task ids and times, anywhere in `value`.
fn walk(value: &mut Value, tasks: &mut HashMap<String, usize>, step: &str) {
    match value {
        Value::Object(map) => {
            times(map, step);
            for (key, member) in map.iter_mut() {
                match (key.as_str(), &*member) {
                    ("taskId", Value::String(id)) => {
                        let n = tasks.len() + 1;
                        let n = *tasks.entry(id.clone()).or_insert(n);
                        *member = json!(format!("task-{n}"));
                    }
                    _ => walk(member, tasks, step),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, tasks, step)),
        _ => {}
    }
}

fn times(map: &mut Map<String, Value>, step: &str) {
    let created = map.get("createdAt").and_then(Value::as_str);
    let updated = map.get("lastUpdatedAt").and_then(Value::as_str);
    if let (Some(created), Some(updated)) = (created, updated) {
        // RFC 3339 in UTC with the same precision compares as text.
        assert!(
            created.len() != updated.len() || created <= updated,
            "{step}: lastUpdatedAt {updated} before createdAt {created}"
        );
    }
    for key in ["createdAt", "lastUpdatedAt"] {
        if let Some(time) = map.get_mut(key) {
            assert!(time.is_string(), "{step}: {key} is not a string: {time}");
            *time = json!("<time>");
        }
    }
}
