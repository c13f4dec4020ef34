//! What each era and the tasks extension allow: `tasks/*` without the
//! extension, methods of the other era, tool calls refused before any
//! handler runs.

use serde_json::{json, Value};

use super::{error, Cases, Ctx};
use crate::client::{accept_name, legacy, meta, modern};
use crate::{ALICE, CAPS, PV, TASKS};

/// tasks/* without the tasks extension: -32021, HTTP 400.
pub(super) fn without_the_extension(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let caps_variants: Vec<(&str, Value)> = vec![
        ("no clientCapabilities", json!({ PV: "2026-07-28" })),
        (
            "empty clientCapabilities",
            json!({ PV: "2026-07-28", CAPS: {} }),
        ),
        (
            "clientCapabilities null",
            json!({ PV: "2026-07-28", CAPS: null }),
        ),
        (
            "clientCapabilities a string",
            json!({ PV: "2026-07-28", CAPS: "tasks" }),
        ),
        (
            "extensions null",
            json!({ PV: "2026-07-28", CAPS: { "extensions": null } }),
        ),
        (
            "extensions an array",
            json!({ PV: "2026-07-28", CAPS: { "extensions": [TASKS] } }),
        ),
        (
            "the extension true",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: true } } }),
        ),
        (
            "the extension a string",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: "yes" } } }),
        ),
        (
            "the extension null",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: null } } }),
        ),
        (
            "the extension an array",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { TASKS: [] } } }),
        ),
        (
            "a misspelt extension",
            json!({ PV: "2026-07-28", CAPS: { "extensions": { "io.modelcontextprotocol/task": {} } } }),
        ),
        (
            "the extension outside clientCapabilities",
            json!({ PV: "2026-07-28", "extensions": { TASKS: {} } }),
        ),
        (
            "legacy capabilities.tasks",
            json!({ PV: "2026-07-28", CAPS: { "tasks": {} } }),
        ),
    ];
    for (what, m) in &caps_variants {
        for (method, params) in [
            ("tasks/get", json!({ "taskId": ask })),
            (
                "tasks/update",
                json!({ "taskId": ask, "inputResponses": { "name": accept_name("Mallory") } }),
            ),
            ("tasks/cancel", json!({ "taskId": hang })),
        ] {
            let id = n();
            let mut body = modern(id, method, params);
            body["params"]["_meta"] = m.clone();
            c.json(
                format!("{method} with {what}"),
                &body,
                Some(ALICE),
                error(400, -32021, json!(id)),
            );
        }
    }
    for tool in ["hang", "ask", "nope"] {
        let id = n();
        let mut body = modern(id, "tools/call", json!({ "name": tool, "arguments": {} }));
        body["params"]["_meta"] = meta(false);
        c.json(
            format!("{tool} as a task without the extension"),
            &body,
            Some(ALICE),
            error(400, -32021, json!(id)),
        );
    }
}

/// Methods the 2026-07-28 layer does not have: -32601, HTTP 404.
pub(super) fn methods_of_the_other_era(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let legacy_task = k.legacy_task.clone();
    for (method, params) in [
        ("tasks/result", json!({ "taskId": ask })),
        ("tasks/list", json!({})),
        ("tasks/list", json!({ "cursor": "00" })),
        ("tasks/Get", json!({ "taskId": ask })),
        ("TASKS/GET", json!({ "taskId": ask })),
        ("tasks/delete", json!({ "taskId": ask })),
        ("tasks/", json!({ "taskId": ask })),
        ("tasks/update/", json!({ "taskId": ask })),
    ] {
        let id = n();
        c.json(
            format!("modern {method:?}"),
            &modern(id, method, params.clone()),
            Some(ALICE),
            error(404, -32601, json!(id)),
        );
        let id = n();
        let mut body = modern(id, method, params);
        body["params"]["_meta"] = meta(false);
        c.json(
            format!("modern {method:?} without the extension"),
            &body,
            Some(ALICE),
            error(404, -32601, json!(id)),
        );
    }
    let id = n();
    c.json(
        "2025-11-25 tasks/update",
        &legacy(
            id,
            "tasks/update",
            json!({ "taskId": legacy_task, "inputResponses": {} }),
        ),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    let id = n();
    c.json(
        "2025-11-25 tasks/update of a modern task",
        &legacy(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": { "name": accept_name("Mallory") } }),
        ),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
}

/// Tool calls the layer refuses before any handler runs.
pub(super) fn refused_tool_calls(c: &mut Cases, n: &mut impl FnMut() -> i64) {
    let id = n();
    c.json(
        "2025-11-25 hang without params.task",
        &legacy(id, "tools/call", json!({ "name": "hang" })),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    let id = n();
    c.json(
        "2025-11-25 hang with params.task a string",
        &legacy(id, "tools/call", json!({ "name": "hang", "task": "yes" })),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    let id = n();
    c.json(
        "2025-11-25 echo as a task",
        &legacy(id, "tools/call", json!({ "name": "echo", "task": {} })),
        Some(ALICE),
        error(200, -32601, json!(id)),
    );
    for (what, args) in [
        (
            "arguments over 1 MiB",
            json!({ "blob": "b".repeat(1 << 20) }),
        ),
        (
            "a string argument over 1 MiB",
            json!("s".repeat((1 << 20) + 1)),
        ),
    ] {
        let id = n();
        c.json(
            format!("hang with {what}"),
            &modern(
                id,
                "tools/call",
                json!({ "name": "hang", "arguments": args }),
            ),
            Some(ALICE),
            error(200, -32602, json!(id)),
        );
    }
    let id = n();
    let mut body = modern(id, "tools/call", json!({ "name": "hang", "arguments": {} }));
    body["params"]["_meta"]["pad"] = json!("p".repeat(1 << 20));
    c.json(
        "hang with a _meta over 1 MiB",
        &body,
        Some(ALICE),
        error(200, -32602, json!(id)),
    );
}
