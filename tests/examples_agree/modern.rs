//! The 2026-07-28 script: every request carries its `_meta`.

use serde_json::{json, Value};

use crate::driver::Server;
use crate::Transcript;

const TERMINAL: &[&str] = &["completed", "failed", "cancelled"];

/// `_meta` of a 2026-07-28 request; with `tasks`, it declares the tasks
/// extension.
fn meta_with(tasks: bool) -> Value {
    let mut capabilities = json!({ "elicitation": { "form": {} } });
    if tasks {
        capabilities["extensions"] = json!({ "io.modelcontextprotocol/tasks": {} });
    }
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "examples-agree", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

fn with_meta(mut params: Value, meta: &Value) -> Value {
    params["_meta"] = meta.clone();
    params
}

/// The task id of a creating response.
fn task_id(created: &Value) -> String {
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

pub(crate) async fn script(s: &mut Server) -> Transcript {
    let mut t = Transcript::default();
    let meta = meta_with(true);
    let bare = meta_with(false);
    let call = |name: &str, arguments: Value| {
        with_meta(json!({ "name": name, "arguments": arguments }), &meta)
    };

    t.add(
        "server/discover",
        s.call("server/discover", with_meta(json!({}), &meta)).await,
    );
    t.add(
        "tools/list",
        s.call("tools/list", with_meta(json!({}), &meta)).await,
    );

    // Sync answers.
    t.add(
        "greet",
        s.call("tools/call", call("greet", json!({"name": "Ada"})))
            .await,
    );
    t.add(
        "greet without name",
        s.call("tools/call", call("greet", json!({}))).await,
    );
    t.add(
        "greet without the extension (R2)",
        s.call(
            "tools/call",
            with_meta(json!({"name": "greet", "arguments": {"name": "Bo"}}), &bare),
        )
        .await,
    );
    t.add(
        "slow_compute answered in its window",
        s.call(
            "tools/call",
            call("slow_compute", json!({"seconds": 0, "label": "quick"})),
        )
        .await,
    );

    // slow_compute as a task, cancelled (R41, R44).
    let created = s
        .call(
            "tools/call",
            call("slow_compute", json!({"seconds": 60, "label": "long"})),
        )
        .await;
    let task = task_id(&created);
    t.add("slow_compute created", created);
    t.add(
        "slow_compute working",
        s.poll(&task, &meta, &["working"]).await,
    );
    let params = with_meta(json!({ "taskId": task }), &meta);
    t.add("tasks/cancel", s.call("tasks/cancel", params.clone()).await);
    t.add(
        "slow_compute cancelled",
        s.poll(&task, &meta, TERMINAL).await,
    );
    t.add(
        "tasks/cancel again (R45)",
        s.call("tasks/cancel", params).await,
    );

    // A tool error completes (R22); a JSON-RPC error fails (R23).
    for tool in ["failing_job", "protocol_error_job"] {
        let created = s.call("tools/call", call(tool, json!({}))).await;
        let task = task_id(&created);
        t.add(&format!("{tool} created"), created);
        t.add(
            &format!("{tool} ended"),
            s.poll(&task, &meta, TERMINAL).await,
        );
    }

    // confirm_delete: one question, answered with tasks/update.
    let created = s
        .call(
            "tools/call",
            call("confirm_delete", json!({"filename": "notes.txt"})),
        )
        .await;
    let task = task_id(&created);
    t.add("confirm_delete created", created);
    let asked = s.poll(&task, &meta, &["input_required"]).await;
    let key = only_key(&asked);
    t.add("confirm_delete asks", asked);
    let answer = json!({ key: {"action": "accept", "content": {"confirm": true}} });
    t.add(
        "confirm_delete tasks/update",
        s.call(
            "tasks/update",
            with_meta(json!({"taskId": task, "inputResponses": answer}), &meta),
        )
        .await,
    );
    t.add("confirm_delete ended", s.poll(&task, &meta, TERMINAL).await);

    // multi_input: two questions, answered one key at a time (R34, R36).
    let created = s.call("tools/call", call("multi_input", json!({}))).await;
    let task = task_id(&created);
    t.add("multi_input created", created);
    let asked = s.poll(&task, &meta, &["input_required"]).await;
    let keys = keys(&asked);
    t.add("multi_input asks", asked);
    for key in keys {
        let property = if key.contains("name") {
            "name"
        } else {
            "confirm"
        };
        let value = if property == "name" {
            json!("Ada")
        } else {
            json!(true)
        };
        let answer = json!({ &key: {"action": "accept", "content": { property: value }} });
        t.add(
            &format!("multi_input answers {property}"),
            s.call(
                "tasks/update",
                with_meta(json!({"taskId": task, "inputResponses": answer}), &meta),
            )
            .await,
        );
        let statuses = ["input_required", "completed", "failed", "cancelled"];
        let now = s.poll(&task, &meta, &statuses).await;
        t.add(&format!("multi_input after {property}"), now);
    }

    // test_tool_with_task: a plain MRTR round, then a task.
    let asked = s
        .call("tools/call", call("test_tool_with_task", json!({})))
        .await;
    t.add("test_tool_with_task MRTR round", asked);
    let retry = with_meta(
        json!({
            "name": "test_tool_with_task",
            "arguments": {},
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
        }),
        &meta,
    );
    let created = s.call("tools/call", retry).await;
    let task = task_id(&created);
    t.add("test_tool_with_task created", created);
    t.add(
        "test_tool_with_task ended",
        s.poll(&task, &meta, TERMINAL).await,
    );

    // progress_job: its first step comes with the creating answer.
    let created = s
        .call("tools/call", call("progress_job", json!({"steps": 3})))
        .await;
    let task = task_id(&created);
    t.add("progress_job created", created);
    t.add("progress_job ended", s.poll(&task, &meta, TERMINAL).await);

    errors(s, &mut t, &meta, &bare, &task).await;
    t
}

/// The errors of the acceptance cases; `done` is a finished task.
async fn errors(s: &mut Server, t: &mut Transcript, meta: &Value, bare: &Value, done: &str) {
    let unknown = json!({"taskId": "no-such-task"});
    for method in ["tasks/get", "tasks/cancel"] {
        t.add(
            &format!("{method} unknown (R15, R42)"),
            s.call(method, with_meta(unknown.clone(), meta)).await,
        );
    }
    let update = json!({"taskId": "no-such-task", "inputResponses": {}});
    t.add(
        "tasks/update unknown (R31)",
        s.call("tasks/update", with_meta(update, meta)).await,
    );
    t.add(
        "tasks/update without inputResponses (R38)",
        s.call("tasks/update", with_meta(json!({"taskId": done}), meta))
            .await,
    );
    let known = json!({"taskId": done});
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let mut params = known.clone();
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        t.add(
            &format!("{method} without the extension (R16, R32, R43)"),
            s.call(method, with_meta(params, bare)).await,
        );
    }
    t.add(
        "task-only tool without the extension (R3)",
        s.call(
            "tools/call",
            with_meta(json!({"name": "failing_job", "arguments": {}}), bare),
        )
        .await,
    );
    for method in ["tasks/result", "tasks/list"] {
        t.add(
            &format!("{method} (R10, R11)"),
            s.call(method, with_meta(known.clone(), meta)).await,
        );
    }
    t.add(
        "unknown tool",
        s.call(
            "tools/call",
            with_meta(json!({"name": "no_such_tool", "arguments": {}}), meta),
        )
        .await,
    );
    t.add(
        "tools/call without a name",
        s.call("tools/call", with_meta(json!({"arguments": {}}), meta))
            .await,
    );
    t.add(
        "tools/call with a name that is not a string",
        s.call("tools/call", with_meta(json!({"name": 7}), meta))
            .await,
    );
    t.add(
        "greet with a name that is not a string",
        s.call(
            "tools/call",
            with_meta(json!({"name": "greet", "arguments": {"name": 7}}), meta),
        )
        .await,
    );
    t.add(
        "unknown method",
        s.call("no/such/method", with_meta(json!({}), meta)).await,
    );
    let mut old = meta.clone();
    old["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    t.add(
        "unsupported version",
        s.call("tools/list", with_meta(json!({}), &old)).await,
    );
}

/// The keys of an `input_required` task's `inputRequests`, sorted.
fn keys(asked: &Value) -> Vec<String> {
    let mut keys: Vec<String> = asked["result"]["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("no inputRequests: {asked}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

fn only_key(asked: &Value) -> String {
    let keys = keys(asked);
    assert_eq!(keys.len(), 1, "one question: {asked}");
    keys[0].clone()
}
