//! The owner model over real HTTP (issue "Close the holes", defect 1):
//! callers without an identity share one owner, so `tasks/list` is neither
//! served nor advertised to them; a listing and its cursors hold only the
//! caller's own 2025-11-25 tasks; and a layer that requires an identity
//! makes no task for an anonymous caller. Each test failed on the code
//! before its fix.

use std::net::SocketAddr;

use serde_json::{json, Value};

use crate::client::{legacy, modern, post, routing};
use crate::common;
use crate::world::{start, start_with};
use crate::{ALICE, BOB};

/// POST `body` as `caller`: the HTTP status and the JSON-RPC reply.
async fn call(addr: SocketAddr, body: &Value, caller: Option<&str>) -> (u16, Value) {
    let reply = post(addr, routing(body, caller), body.to_string()).await;
    let json = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    (reply.status.as_u16(), json)
}

/// A 2025-11-25 `hang` task of `caller`'s: its id and `createdAt`.
async fn legacy_task(addr: SocketAddr, id: i64, caller: Option<&str>) -> (String, String) {
    let body = legacy(id, "tools/call", json!({ "name": "hang", "task": {} }));
    let (status, reply) = call(addr, &body, caller).await;
    assert_eq!(status, 200, "{reply}");
    let task = &reply["result"]["task"];
    let id = task["taskId"].as_str().unwrap_or_else(|| panic!("{reply}"));
    (
        id.to_owned(),
        task["createdAt"].as_str().unwrap().to_owned(),
    )
}

/// Every page of `caller`'s 2025-11-25 listing, following `nextCursor`:
/// the ids of each page and each cursor given.
async fn pages(addr: SocketAddr, caller: &str, first_id: i64) -> (Vec<Vec<String>>, Vec<String>) {
    let (mut pages, mut cursors) = (Vec::new(), Vec::new());
    for n in 0..20 {
        let params = match cursors.last() {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let body = legacy(first_id + n, "tasks/list", params);
        let (status, reply) = call(addr, &body, Some(caller)).await;
        assert_eq!(status, 200, "{reply}");
        let ids = reply["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{reply}"))
            .iter()
            .map(|t| t["taskId"].as_str().unwrap().to_owned())
            .collect();
        pages.push(ids);
        match reply["result"]["nextCursor"].as_str() {
            Some(c) => cursors.push(c.to_owned()),
            None => return (pages, cursors),
        }
    }
    panic!("the listing never ended: {pages:?}");
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// R52, R77: callers without an identity all share one owner, so a listing
/// would show each of them the others' tasks. `tasks/list` is not offered
/// to them: `-32601` (HTTP 200, a 2025-11-25 request), with or without a
/// cursor. An identified caller still lists hers, and only hers. Before the
/// fix the second anonymous caller was shown the first one's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_an_identity_cannot_list_tasks() {
    let server = start().await;
    let addr = server.addr;
    let (theirs, _) = legacy_task(addr, 1, None).await;
    let (mine, _) = legacy_task(addr, 2, Some(ALICE)).await;
    for (id, params) in [(3, json!({})), (4, json!({ "cursor": hex("1:x") }))] {
        let (status, reply) = call(addr, &legacy(id, "tasks/list", params), None).await;
        assert_eq!(status, 200, "{reply}");
        assert!(reply.get("result").is_none(), "listed to nobody: {reply}");
        assert_eq!(reply["error"]["code"], -32601, "{reply}");
        assert_eq!(reply["error"]["message"], "Method not found: tasks/list");
        assert_eq!(reply["id"], id);
    }
    let (pages, _) = pages(addr, ALICE, 5).await;
    assert_eq!(pages, [vec![mine]], "alice lists hers, not {theirs}");
}

/// R59, R77: the 2025-11-25 `initialize` result advertises `tasks.list`
/// only when the request has an identity; the rest of `capabilities.tasks`
/// either way. Before the fix `list` was advertised to everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_tasks_list_only_with_an_identity() {
    let server = start().await;
    let init = |id: i64| {
        legacy(
            id,
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "t", "version": "1" }
            }),
        )
    };
    let (status, anonymous) = call(server.addr, &init(1), None).await;
    assert_eq!(status, 200, "{anonymous}");
    assert_eq!(
        anonymous["result"]["capabilities"]["tasks"],
        json!({ "cancel": {}, "requests": { "tools": { "call": {} } } }),
        "no tasks.list without an identity"
    );
    let (status, identified) = call(server.addr, &init(2), Some(ALICE)).await;
    assert_eq!(status, 200, "{identified}");
    assert_eq!(
        identified["result"]["capabilities"]["tasks"],
        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
    );
}

/// R52, R73, R74, Q9: with one task a page, alice's listing shows each of
/// her 2025-11-25 tasks once, every page full, and no cursor names her
/// newer 2026-07-28 task or bob's; bob given alice's cursor sees only his.
/// Before the fix the first page was empty and its cursor was made of the
/// 2026-07-28 task (the store listed both eras and the layer dropped one
/// after paging).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_name_only_the_callers_own_tasks_of_her_era() {
    let server = start_with(common::layer().with_list_page_size(1)).await;
    let addr = server.addr;
    let (old, _) = legacy_task(addr, 1, Some(ALICE)).await;
    let (newer, at) = legacy_task(addr, 2, Some(ALICE)).await;
    // A 2026-07-28 task of hers created after both (in a later
    // millisecond, so it sorts first), then one of bob's.
    let mut modern_task = None;
    for id in 3..1_000 {
        let body = modern(id, "tools/call", json!({ "name": "hang", "arguments": {} }));
        let (_, reply) = call(addr, &body, Some(ALICE)).await;
        let task = &reply["result"];
        assert_eq!(task["resultType"], "task", "{reply}");
        if task["createdAt"].as_str().unwrap() > at.as_str() {
            modern_task = Some(task["taskId"].as_str().unwrap().to_owned());
            break;
        }
    }
    let modern_task = modern_task.expect("a task in a later millisecond");
    let (bobs, _) = legacy_task(addr, 1_001, Some(BOB)).await;

    let (listed, cursors) = pages(addr, ALICE, 1_002).await;
    assert_eq!(listed, [vec![newer.clone()], vec![old.clone()]]);
    for cursor in &cursors {
        for foreign in [&modern_task, &bobs] {
            assert!(
                !cursor.contains(foreign.as_str()) && !cursor.contains(&hex(foreign)),
                "cursor {cursor} names {foreign}"
            );
        }
    }
    let body = legacy(2_000, "tasks/list", json!({ "cursor": cursors[0] }));
    let (status, reply) = call(addr, &body, Some(BOB)).await;
    assert_eq!(status, 200, "{reply}");
    let tasks = reply["result"]["tasks"].as_array().unwrap();
    assert!(
        tasks.iter().all(|t| t["taskId"] == json!(bobs)),
        "alice's cursor shows bob only his own: {reply}"
    );
}

/// `with_identity_required(true)`: a `tools/call` that would make a task
/// gets `-32600` from an anonymous caller, in both eras, before its handler
/// runs, over HTTP as 401 with a `WWW-Authenticate: Bearer` challenge (issue
/// 28: it was HTTP 200); a call that makes no task, and an identified
/// caller's task, pass as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_required_layer_makes_no_task_for_an_anonymous_caller() {
    let server = start_with(common::layer().with_identity_required(true)).await;
    let addr = server.addr;
    let refusals = [
        modern(1, "tools/call", json!({ "name": "hang", "arguments": {} })),
        legacy(2, "tools/call", json!({ "name": "hang", "task": {} })),
        modern(3, "tools/call", json!({ "name": "slow", "arguments": {} })),
    ];
    for body in &refusals {
        let http = post(addr, routing(body, None), body.to_string()).await;
        assert_eq!(http.status, 401, "{body}: {http:?}");
        assert_eq!(
            http.headers["www-authenticate"], r#"Bearer realm="mcp""#,
            "{http:?}"
        );
        let reply: Value = serde_json::from_slice(&http.body).unwrap();
        assert_eq!(reply["id"], body["id"]);
        assert_eq!(reply["error"]["code"], -32600, "{body}: {reply}");
        assert_eq!(
            reply["error"]["message"],
            "Invalid request: a task needs an identified caller"
        );
    }
    assert_eq!(server.seen.calls("hang"), 0, "no handler ran");
    assert_eq!(server.seen.calls("slow"), 0, "no handler ran");
    let echo = modern(
        4,
        "tools/call",
        json!({ "name": "echo", "arguments": { "text": "hi" } }),
    );
    let (status, reply) = call(addr, &echo, None).await;
    assert_eq!(status, 200);
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    let (_, reply) = call(addr, &refusals[0], Some(ALICE)).await;
    assert_eq!(reply["result"]["resultType"], "task", "{reply}");
}
