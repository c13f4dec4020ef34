//! Isolation: other owners, no owner and the other era get exactly
//! "not found", and their notifications change nothing.

use serde_json::json;

use super::{answer, Cases, Ctx, Want};
use crate::client::{accept_name, legacy, meta, modern};
use crate::world::MODERN;
use crate::{ALICE, BOB};

/// Other owners, no owner, the other era: exactly "not found".
pub(super) fn other_owners_and_eras(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ids = k.ids;
    let legacy_task = k.legacy_task.clone();
    let callers: [(&str, Option<&str>); 5] = [
        ("bob", Some(BOB)),
        ("nobody", None),
        ("an upper-case alice", Some("ALICE")),
        ("alice with a leading space", Some(" alice")),
        ("an empty bearer", Some("")),
    ];
    for t in MODERN {
        let task = ids[&t].clone();
        for (who, caller) in callers {
            for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
                let id = n();
                let mut params = json!({ "taskId": task });
                if method == "tasks/update" {
                    params["inputResponses"] = json!({ "name": accept_name("Mallory") });
                }
                c.json(
                    format!("{method} of {t:?} by {who}"),
                    &modern(id, method, params),
                    caller,
                    Want::NotFound(json!(id)),
                );
            }
        }
        for method in ["tasks/get", "tasks/cancel", "tasks/result"] {
            let id = n();
            c.json(
                format!("2025-11-25 {method} of modern {t:?}"),
                &legacy(id, method, json!({ "taskId": task })),
                Some(ALICE),
                Want::NotFound(json!(id)),
            );
        }
    }
    for (who, caller) in callers {
        for method in ["tasks/get", "tasks/cancel", "tasks/result"] {
            let id = n();
            c.json(
                format!("2025-11-25 {method} of the legacy task by {who}"),
                &legacy(id, method, json!({ "taskId": legacy_task })),
                caller,
                Want::NotFound(json!(id)),
            );
        }
    }
    for method in ["tasks/get", "tasks/cancel"] {
        let id = n();
        c.json(
            format!("modern {method} of the legacy task"),
            &modern(id, method, json!({ "taskId": legacy_task })),
            Some(ALICE),
            Want::NotFound(json!(id)),
        );
    }
    let id = n();
    c.json(
        "modern tasks/update of the legacy task",
        &answer(id, &legacy_task),
        Some(ALICE),
        Want::NotFound(json!(id)),
    );
}

/// Notifications that would change a task if they came from alice:
/// 202 and nothing else.
pub(super) fn notifications_from_others(c: &mut Cases, k: &Ctx<'_>) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let legacy_task = k.legacy_task.clone();
    for (what, mut body, caller) in [
        (
            "bob cancels Hang",
            modern(0, "tasks/cancel", json!({ "taskId": hang })),
            Some(BOB),
        ),
        ("bob answers Ask", answer(0, &ask), Some(BOB)),
        (
            "nobody cancels Hang",
            modern(0, "tasks/cancel", json!({ "taskId": hang })),
            None,
        ),
        (
            "bob cancels the legacy task",
            legacy(0, "tasks/cancel", json!({ "taskId": legacy_task })),
            Some(BOB),
        ),
        (
            "alice cancels Hang without the extension",
            {
                let mut b = modern(0, "tasks/cancel", json!({ "taskId": hang }));
                b["params"]["_meta"] = meta(false);
                b
            },
            Some(ALICE),
        ),
        (
            "alice answers Ask with a non-object answer",
            modern(
                0,
                "tasks/update",
                json!({ "taskId": ask, "inputResponses": { "name": accept_name("M"), "x": 1 } }),
            ),
            Some(ALICE),
        ),
    ] {
        body.as_object_mut().unwrap().remove("id");
        c.json(
            format!("notification: {what}"),
            &body,
            caller,
            Want::Accepted,
        );
    }
}
