//! Both task eras through the pipes: 2026-07-28 tasks with pushes, and
//! 2025-11-25 tasks with an elicitation on a blocking `tasks/result`.

use super::*;

#[tokio::test]
async fn r41_r56_modern_tasks_create_ask_update_resume_cancel_with_pushes() {
    let mut s = Server::start(memory());
    let created = s
        .call26(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "notes.txt"}}),
        )
        .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();

    let listen = s.listen(&[&task]).await;
    let asked = s.until(&task, "input_required").await;
    assert_eq!(
        asked["inputRequests"]["confirm"]["params"]["message"],
        "Delete notes.txt?"
    );
    s.confirm(&task, &asked).await;
    // R56: the resume and the end are pushed, without resultType.
    let done = s.push(&task, "completed").await;
    assert!(done["params"].get("resultType").is_none(), "{done}");
    assert_eq!(
        s.response(listen).await["result"],
        json!({"resultType": "complete"}),
        "the listen answers once its task has ended"
    );
    let body = s.call26("tasks/get", json!({"taskId": task})).await;
    assert_eq!(body["status"], "completed");
    assert_eq!(body["result"]["content"][0]["text"], "Deleted notes.txt.");

    // Cancel (R41, R44): acknowledged, then pushed as cancelled.
    let slow = s
        .call26(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "c"}}),
        )
        .await;
    let slow = slow["taskId"].as_str().unwrap().to_owned();
    let listen = s.listen(&[&slow]).await;
    let ack = s.call26("tasks/cancel", json!({"taskId": slow})).await;
    assert_eq!(ack, json!({"resultType": "complete"}), "R41");
    s.push(&slow, "cancelled").await;
    s.response(listen).await;
    assert_eq!(
        s.call26("tasks/get", json!({"taskId": slow})).await["status"],
        "cancelled"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn r65_r66_r70_r75_legacy_tasks_with_an_elicitation_on_tasks_result() {
    let mut s = Server::start(memory());
    s.initialize().await;
    let created = s
        .call(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = created["task"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["task"]["status"], "working");

    // R65: a flat Task.
    let got = s.call("tasks/get", json!({"taskId": task})).await;
    assert_eq!(got["taskId"], task.as_str());
    assert!(
        got.get("task").is_none() && got.get("result").is_none(),
        "{got}"
    );

    // R75: the question comes on the pipes while tasks/result waits, and
    // the answer goes back on the same pipes.
    let waiting = s.request("tasks/result", json!({"taskId": task})).await;
    let ask = s
        .expect("elicitation/create", |m| {
            m["method"] == "elicitation/create"
        })
        .await;
    assert_eq!(
        ask["params"]["_meta"][RELATED]["taskId"],
        task.as_str(),
        "R75"
    );
    assert_eq!(ask["params"]["message"], "Delete a.txt?");
    let ask_id = ask["id"].as_str().expect("a string id").to_owned();
    assert!(ask_id.starts_with("srv-"), "{ask_id}");
    s.write(&json!({
        "jsonrpc": "2.0",
        "id": ask_id,
        "result": {"action": "accept", "content": {"confirm": true}}
    }))
    .await;
    let result = s.response(waiting).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "Deleted a.txt.",
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"][RELATED]["taskId"],
        task.as_str(),
        "R66"
    );

    // R52, R74: the stream's owner lists its task.
    let listed = s.call("tasks/list", json!({})).await;
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(ids.contains(&task.as_str()), "{listed}");

    // R70: cancel returns the cancelled Task, and it sticks.
    let slow = s
        .call(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 60}, "task": {}}),
        )
        .await;
    let slow = slow["task"]["taskId"].as_str().unwrap().to_owned();
    let cancelled = s.call("tasks/cancel", json!({"taskId": slow})).await;
    assert_eq!(cancelled["status"], "cancelled", "R70");
    assert_eq!(
        s.call("tasks/get", json!({"taskId": slow})).await["status"],
        "cancelled"
    );
    s.close_and_wait(Duration::from_secs(10)).await;
}
