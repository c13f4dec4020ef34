//! Malformed params: task ids, `inputResponses`, 2025-11-25
//! `tasks/list` cursors.

use serde_json::{json, Value};

use super::{error, Cases, Ctx, Want};
use crate::client::{accept_name, legacy, modern};
use crate::world::T;
use crate::{ALICE, BOB, UNKNOWN};

/// Bad task ids: -32602; strings that name no task of the caller get
/// exactly the "not found" body.
pub(super) fn bad_task_ids(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ask = k.ask.clone();
    let hang = k.hang.clone();
    let wrong_types: Vec<(&str, Value)> = vec![
        ("missing", Value::Null),
        ("null", json!(null)),
        ("a number", json!(1)),
        ("a float", json!(1.5)),
        ("true", json!(true)),
        ("an array", json!([ask.clone()])),
        ("an object", json!({ "taskId": ask.clone() })),
        ("a huge number", json!(u64::MAX)),
    ];
    let wrong_strings: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("a space", " ".into()),
        ("upper case", ask.to_uppercase()),
        ("with a trailing space", format!("{ask} ")),
        ("with a leading space", format!(" {ask}")),
        ("one digit short", ask[..31].to_owned()),
        ("one digit long", format!("{ask}0")),
        ("with a NUL", format!("{ask}\u{0}")),
        ("with unicode", format!("{ask}é")),
        ("a path", format!("../{ask}")),
        ("a wildcard", "*".into()),
        ("SQL", "' OR '1'='1".into()),
        ("4 KiB", "a".repeat(4096)),
        (
            "another owner's prefix",
            format!("{}{}", &ask[..16], &hang[16..]),
        ),
        ("unknown", UNKNOWN.into()),
    ];
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = |task: Option<Value>| {
            let mut p = json!({ "inputResponses": { "name": accept_name("Mallory") } });
            if method != "tasks/update" {
                p = json!({});
            }
            if let Some(task) = task {
                p["taskId"] = task;
            }
            p
        };
        for (what, v) in &wrong_types {
            let id = n();
            let task = (*what != "missing").then(|| v.clone());
            c.json(
                format!("{method}: taskId {what}"),
                &modern(id, method, params(task)),
                Some(ALICE),
                error(200, -32602, json!(id)),
            );
        }
        for (what, s) in &wrong_strings {
            let id = n();
            c.json(
                format!("{method}: taskId {what}"),
                &modern(id, method, params(Some(json!(s)))),
                Some(ALICE),
                Want::NotFound(json!(id)),
            );
        }
    }
}

/// Malformed inputResponses: -32602, whatever the task.
pub(super) fn bad_input_responses(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let ids = k.ids;
    let deep100 = k.deep100.clone();
    let mut deep33 = json!("x");
    for _ in 0..33 {
        deep33 = json!({ "d": deep33 });
    }
    let many: serde_json::Map<String, Value> = (0..65)
        .map(|i| {
            (
                if i == 0 {
                    "name".to_owned()
                } else {
                    format!("k{i}")
                },
                accept_name("x"),
            )
        })
        .collect();
    let bad_answers: Vec<(&str, Option<Value>)> = vec![
        ("missing", None),
        ("null", Some(Value::Null)),
        ("an array", Some(json!([accept_name("Mallory")]))),
        ("a string", Some(json!("Mallory"))),
        ("a number", Some(json!(1))),
        ("true", Some(json!(true))),
        (
            "an answer that is a string",
            Some(json!({ "name": "Mallory" })),
        ),
        ("an answer that is a number", Some(json!({ "name": 7 }))),
        ("an answer that is null", Some(json!({ "name": null }))),
        (
            "an answer that is an array",
            Some(json!({ "name": [accept_name("Mallory")] })),
        ),
        (
            "a valid answer beside a string",
            Some(json!({ "name": accept_name("Mallory"), "x": "y" })),
        ),
        (
            "a valid answer beside null",
            Some(json!({ "name": accept_name("Mallory"), "x": null })),
        ),
        (
            "a valid answer beside an array",
            Some(json!({ "x": [], "name": accept_name("Mallory") })),
        ),
        ("65 answers", Some(Value::Object(many))),
        (
            "an answer over 1 MiB",
            Some(json!({ "name": accept_name(&"m".repeat(1 << 20)) })),
        ),
        (
            "answers over 1 MiB together",
            Some(
                json!({ "name": accept_name(&"m".repeat(600_000)), "zz": accept_name(&"m".repeat(600_000)) }),
            ),
        ),
        ("an answer 34 deep", Some(json!({ "name": deep33 }))),
        (
            "an unknown key 101 deep",
            Some(json!({ "name": accept_name("Mallory"), "zz": { "deep": deep100 } })),
        ),
    ];
    for t in [T::Ask, T::Hang, T::Done] {
        let task = ids[&t].clone();
        for (what, answers) in &bad_answers {
            let id = n();
            let mut params = json!({ "taskId": task });
            if let Some(a) = answers {
                params["inputResponses"] = a.clone();
            }
            c.json(
                format!("tasks/update of {t:?}: inputResponses {what}"),
                &modern(id, "tasks/update", params),
                Some(ALICE),
                error(200, -32602, json!(id)),
            );
        }
    }
}

/// 2025-11-25 tasks/list with bad cursors: -32602.
pub(super) fn bad_cursors(c: &mut Cases, k: &Ctx<'_>, n: &mut impl FnMut() -> i64) {
    let legacy_task = k.legacy_task.clone();
    let hex = |s: &[u8]| s.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let cursors: Vec<(&str, Value)> = vec![
        ("not hex", json!("zz")),
        ("odd length", json!("abc")),
        ("no colon", json!(hex(b"nocolon"))),
        (
            "a non-number time",
            json!(hex(format!("x:{legacy_task}").as_bytes())),
        ),
        (
            "a time out of range",
            json!(hex(b"99999999999999999999999:abc")),
        ),
        ("not UTF-8", json!(hex(b"\xff\xfe:1"))),
        ("over 512 characters", json!("30".repeat(300))),
        ("unicode", json!("éé")),
        ("a sign", json!("+1")),
        ("a number", json!(12)),
        ("true", json!(true)),
        ("an array", json!(["00"])),
        ("an object", json!({ "after": legacy_task })),
    ];
    for (who, caller) in [("alice", Some(ALICE)), ("bob", Some(BOB))] {
        for (what, cursor) in &cursors {
            let id = n();
            c.json(
                format!("2025-11-25 tasks/list by {who} with a cursor {what}"),
                &legacy(id, "tasks/list", json!({ "cursor": cursor })),
                caller,
                error(200, -32602, json!(id)),
            );
        }
    }
}
