//! The 2025-11-25 script: `initialize`, then `params.task`, `tasks/result`
//! and questions as `elicitation/create` requests on the pipes.

use serde_json::{json, Value};

use crate::driver::Server;
use crate::Transcript;

/// The task id of a creating response.
fn task_id(created: &Value) -> String {
    created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments, "task": { "ttl": 60000 } })
}

/// A `tasks/result` that asks `questions` questions on the way: each
/// `elicitation/create` is recorded (in the order of their messages) and
/// answered by `answer`, then the response is recorded.
async fn result_with_questions(
    s: &mut Server,
    t: &mut Transcript,
    step: &str,
    task: &str,
    questions: usize,
    answer: impl Fn(&Value) -> Value,
) {
    let waiting = s.request("tasks/result", json!({ "taskId": task })).await;
    // Answered as they come (the layer may wait for one answer before it
    // asks the next), recorded in the order of their messages.
    let mut asked = Vec::new();
    for _ in 0..questions {
        let ask = s.expect(|m| m["method"] == "elicitation/create").await;
        let reply = json!({"jsonrpc": "2.0", "id": ask["id"].clone(), "result": answer(&ask)});
        s.write(&reply).await;
        asked.push(ask);
    }
    asked.sort_by_key(|m| m["params"]["message"].to_string());
    for ask in asked {
        t.add(&format!("{step} asks"), ask);
    }
    t.add(&format!("{step} tasks/result"), s.response(waiting).await);
}

pub(crate) async fn script(s: &mut Server) -> Transcript {
    let mut t = Transcript::default();
    let init = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": { "elicitation": { "form": {} } },
        "clientInfo": { "name": "examples-agree", "version": "1" }
    });
    t.add("initialize", s.call("initialize", init).await);
    s.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    t.add("ping", s.call("ping", json!({})).await);
    t.add("tools/list", s.call("tools/list", json!({})).await);
    t.add(
        "greet",
        s.call(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "Ada"}}),
        )
        .await,
    );
    t.add(
        "greet with task (R61)",
        s.call("tools/call", call("greet", json!({"name": "Ada"})))
            .await,
    );
    t.add(
        "slow_compute without task",
        s.call(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0}}),
        )
        .await,
    );
    t.add(
        "failing_job without task (R62)",
        s.call(
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
        )
        .await,
    );

    // slow_compute as a task, cancelled (R70, R71).
    let created = s
        .call(
            "tools/call",
            call("slow_compute", json!({"seconds": 60, "label": "long"})),
        )
        .await;
    let task = task_id(&created);
    t.add("slow_compute created", created);
    let id = json!({ "taskId": task });
    t.add(
        "slow_compute tasks/get (R65)",
        s.call("tasks/get", id.clone()).await,
    );
    t.add(
        "tasks/cancel (R70)",
        s.call("tasks/cancel", id.clone()).await,
    );
    t.add(
        "slow_compute cancelled",
        s.call("tasks/get", id.clone()).await,
    );
    t.add("tasks/cancel again (R71)", s.call("tasks/cancel", id).await);

    // isError fails the task (R69); a JSON-RPC error is the result (R67).
    for tool in ["failing_job", "protocol_error_job"] {
        let created = s.call("tools/call", call(tool, json!({}))).await;
        let task = task_id(&created);
        t.add(&format!("{tool} created"), created);
        let id = json!({ "taskId": task });
        t.add(
            &format!("{tool} tasks/result"),
            s.call("tasks/result", id.clone()).await,
        );
        t.add(&format!("{tool} tasks/get"), s.call("tasks/get", id).await);
    }

    // Questions reach the client on the tasks/result call (R75, R66).
    let accept = |ask: &Value| {
        let schema = &ask["params"]["requestedSchema"]["properties"];
        let content = if schema.get("confirm").is_some() {
            json!({"confirm": true})
        } else {
            json!({"name": "Ada"})
        };
        json!({"action": "accept", "content": content})
    };
    let tools = [
        ("confirm_delete", json!({"filename": "a.txt"}), 1),
        ("multi_input", json!({}), 2),
        ("test_tool_with_task", json!({}), 1),
    ];
    for (tool, arguments, questions) in tools {
        let created = s.call("tools/call", call(tool, arguments)).await;
        let task = task_id(&created);
        t.add(&format!("{tool} created"), created);
        result_with_questions(s, &mut t, tool, &task, questions, accept).await;
        t.add(
            &format!("{tool} tasks/get"),
            s.call("tasks/get", json!({"taskId": task})).await,
        );
    }

    let created = s
        .call("tools/call", call("progress_job", json!({"steps": 3})))
        .await;
    let task = task_id(&created);
    t.add("progress_job created", created);
    let id = json!({ "taskId": task });
    t.add(
        "progress_job tasks/result",
        s.call("tasks/result", id.clone()).await,
    );
    t.add("progress_job tasks/get", s.call("tasks/get", id).await);

    t.add("tasks/list (R74)", s.call("tasks/list", json!({})).await);

    // Errors.
    let unknown = json!({"taskId": "no-such-task"});
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        t.add(
            &format!("{method} unknown (R72)"),
            s.call(method, unknown.clone()).await,
        );
    }
    t.add(
        "tasks/update (R76)",
        s.call(
            "tasks/update",
            json!({"taskId": "no-such-task", "inputResponses": {}}),
        )
        .await,
    );
    t.add(
        "tasks/list with a bad cursor (R73)",
        s.call("tasks/list", json!({"cursor": "not a cursor"}))
            .await,
    );
    t.add(
        "unknown tool",
        s.call(
            "tools/call",
            json!({"name": "no_such_tool", "arguments": {}}),
        )
        .await,
    );
    t.add(
        "tools/call without a name",
        s.call("tools/call", json!({"arguments": {}})).await,
    );
    t.add(
        "greet with a name that is not a string",
        s.call(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": 7}}),
        )
        .await,
    );
    t.add("unknown method", s.call("no/such/method", json!({})).await);
    t
}
