//! Requests that are served and change nothing: stale, replayed and
//! unknown keys; huge strings, unknown keys and deep nesting where they
//! are allowed.

use serde_json::{json, Value};

use super::{answer, Cases, Ctx, Want};
use crate::client::{accept_name, legacy, modern};
use crate::world::T;
use crate::{ALICE, BOB, UNKNOWN};

/// Stale, replayed and unknown keys: acked, nothing changes.
pub(super) fn stale_and_replayed_keys(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ids = k.ids;
    let ask = k.ask.clone();
    let stale_keys = [
        "name.2",
        "Name",
        "name ",
        " name",
        "",
        "nam",
        "name\u{0}",
        "inputRequests",
        "__proto__",
    ];
    for key in stale_keys {
        let id = n();
        let body = modern(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": { key: accept_name("Mallory") } }),
        );
        c.json(
            format!("tasks/update of Ask with key {key:?}"),
            &body,
            Some(ALICE),
            Want::Ack(json!(id)),
        );
    }
    let id = n();
    c.json(
        "tasks/update of Ask with no answers",
        &modern(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": {} }),
        ),
        Some(ALICE),
        Want::Ack(json!(id)),
    );
    let unknown64: serde_json::Map<String, Value> =
        (0..64).map(|i| (format!("k{i}"), json!({}))).collect();
    let id = n();
    c.json(
        "tasks/update of Ask with 64 unknown keys",
        &modern(
            id,
            "tasks/update",
            json!({ "taskId": ask, "inputResponses": unknown64 }),
        ),
        Some(ALICE),
        Want::Ack(json!(id)),
    );
    for t in [T::Hang, T::Done, T::Cancelled] {
        let task = ids[&t].clone();
        for _ in 0..2 {
            let id = n();
            c.json(
                format!("a replayed answer to {t:?}"),
                &answer(id, &task),
                Some(ALICE),
                Want::Ack(json!(id)),
            );
        }
    }
    for t in [T::Done, T::Cancelled] {
        let task = ids[&t].clone();
        let id = n();
        c.json(
            format!("tasks/cancel of terminal {t:?}"),
            &modern(id, "tasks/cancel", json!({ "taskId": task })),
            Some(ALICE),
            Want::Ack(json!(id)),
        );
    }
}

/// Huge strings, unknown keys and deep nesting where they are
/// allowed: the request is served as if they were not there.
pub(super) fn harmless_extras(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let legacy_task = k.legacy_task.clone();
    let deep100 = k.deep100.clone();
    let id = n();
    let mut body = modern(
        id,
        "tasks/get",
        json!({ "taskId": ask, "junk": "j".repeat(3 << 20) }),
    );
    body["junk2"] = json!({ "more": [1, 2, 3] });
    c.json(
        "tasks/get of Ask with a 3 MiB unknown key",
        &body,
        Some(ALICE),
        Want::Same(T::Ask, json!(id)),
    );
    let id = n();
    let body = modern(
        id,
        "tasks/get",
        json!({ "taskId": UNKNOWN, "junk": "j".repeat(3 << 20) }),
    );
    c.json(
        "tasks/get of an unknown task with a 3 MiB unknown key",
        &body,
        Some(ALICE),
        Want::NotFound(json!(id)),
    );
    let big_id = "i".repeat(1 << 20);
    c.json("a 1 MiB string id", &json!({ "jsonrpc": "2.0", "id": big_id, "method": "tasks/get", "params": { "taskId": UNKNOWN } }), Some(ALICE), Want::NotFound(json!(big_id)));
    let id = n();
    let mut body = modern(id, "tasks/get", json!({ "taskId": hang, "deep": deep100 }));
    body["params"]["_meta"]["x-unknown"] = json!({ "a": [1, { "b": null }] });
    c.json(
        "tasks/get of Hang with deep unknown keys",
        &body,
        Some(ALICE),
        Want::Same(T::Hang, json!(id)),
    );
    let id = n();
    let body = modern(
        id,
        "tasks/cancel",
        json!({ "taskId": hang, "force": true, "reason": "r".repeat(100_000) }),
    );
    c.json(
        "bob cancels Hang with force: true",
        &body,
        Some(BOB),
        Want::NotFound(json!(id)),
    );
    let id = n();
    let body = legacy(
        id,
        "tasks/get",
        json!({ "taskId": legacy_task, "junk": [null, {}, []] }),
    );
    c.json(
        "2025-11-25 tasks/get with unknown keys",
        &body,
        Some(ALICE),
        Want::Same(T::Legacy, json!(id)),
    );
}
