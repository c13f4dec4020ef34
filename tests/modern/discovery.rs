//! R1–R17: discovery, creating a task, reading it, and the capability
//! checks around both.

use super::*;

#[tokio::test(start_paused = true)]
async fn r01_r09_discover_advertises_the_extension_and_not_legacy_tasks() {
    let c = Client::new(layer());
    let r = c.send26("server/discover", json!({}), false).await;
    let caps = &ok(&r)["capabilities"];
    assert_eq!(
        caps["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "R1"
    );
    assert!(
        caps.get("tasks").is_none(),
        "R9: no legacy capabilities.tasks"
    );
    assert_eq!(
        caps["tools"],
        json!({}),
        "the inner server's capabilities stay"
    );
}

#[tokio::test(start_paused = true)]
async fn r02_r07_no_task_without_the_capability_even_with_a_legacy_task_param() {
    let c = Client::new(layer());
    // Earlier requests that declared the capability change nothing (R2).
    c.start("slow", json!({"ms": 5000})).await;
    let r = c
        .send26(
            "tools/call",
            json!({"name": "slow", "arguments": {"ms": 5000}, "task": {"ttl": 60000}}),
            false,
        )
        .await;
    let body = ok(&r);
    assert_eq!(body["resultType"], "complete", "R2/R7: runs synchronously");
    assert!(body.get("taskId").is_none());
    assert_eq!(body["content"][0]["text"], "slept 5000");
}

#[tokio::test(start_paused = true)]
async fn r03_task_only_tool_without_capability_is_32021_with_required_capabilities() {
    let c = Client::new(layer());
    let r = c
        .send26(
            "tools/call",
            json!({"name": "hang", "arguments": {}}),
            false,
        )
        .await;
    let e = err(&r);
    assert_eq!(e.code, -32021);
    assert_eq!(
        e.data.as_ref().unwrap()["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    assert_eq!(c.seen.calls("hang"), 0, "the handler never ran");
}

#[tokio::test(start_paused = true)]
async fn r04_r28_create_task_result_is_flat_and_working() {
    let c = Client::new(layer());
    let r = c.call("hang", json!({})).await;
    let body = ok(&r);
    assert_eq!(body["resultType"], "task");
    assert_eq!(body["status"], "working", "R28");
    assert!(body["taskId"].is_string());
    for f in ["createdAt", "lastUpdatedAt"] {
        let t = body[f].as_str().unwrap();
        assert!(
            t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
            "{f} RFC 3339: {t}"
        );
    }
    assert_eq!(body["ttlMs"], json!(3_600_000));
    assert_eq!(body["pollIntervalMs"], json!(1000));
    for f in TASK_FIELDS_FORBIDDEN_ON_CREATE {
        assert!(body.get(f).is_none(), "{f} must not be on CreateTaskResult");
    }
}

#[tokio::test(start_paused = true)]
async fn r05_r14_only_create_task_result_carries_result_type_task() {
    let mut c = Client::new(layer());
    let id = c.start("ask", json!({})).await;
    let got = c.wait_for(&id, TaskStatus::InputRequired).await;
    assert_eq!(got["resultType"], "complete", "R14");
    let upd = c.update(&id, json!({"name": accept("name", "Ada")})).await;
    assert_eq!(ok(&upd)["resultType"], "complete");
    let done = c.wait_for(&id, TaskStatus::Completed).await;
    assert_eq!(done["resultType"], "complete");
    assert_eq!(ok(&c.cancel(&id).await)["resultType"], "complete");
    let sync = c.call("echo", json!({"text": "x"})).await;
    assert_eq!(
        ok(&sync)["resultType"],
        "complete",
        "R5: plain results stay complete"
    );
}

#[tokio::test(start_paused = true)]
async fn r06_get_right_after_create_succeeds() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    assert_eq!(c.get_ok(&id).await["status"], "working");
}

#[tokio::test(start_paused = true)]
async fn r08_legacy_tasks_capability_alone_counts_as_non_declaring() {
    let c = Client::new(layer());
    let mut m = meta(false);
    m["io.modelcontextprotocol/clientCapabilities"]["tasks"] =
        json!({"requests": {"tools": {"call": {}}}});
    let r = c
        .send(
            "tools/call",
            json!({"name": "hang", "arguments": {}, "_meta": m.clone()}),
        )
        .await;
    assert_eq!(err(&r).code, -32021, "R8 → R3");
    let r = c
        .send("tasks/get", json!({"taskId": "x", "_meta": m}))
        .await;
    assert_eq!(err(&r).code, -32021, "R8 → R16");
}

#[tokio::test(start_paused = true)]
async fn r10_r11_tasks_result_and_list_are_method_not_found() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    let r = c.send26("tasks/result", json!({"taskId": id}), true).await;
    assert_eq!(err(&r).code, -32601, "R10");
    let r = c.send26("tasks/list", json!({}), true).await;
    assert_eq!(err(&r).code, -32601, "R11");
}

#[tokio::test(start_paused = true)]
async fn r12_other_methods_pass_through_untouched() {
    let c = Client::new(layer().with_default_policy(TaskPolicy::Task));
    let r = c.send26("ping", json!({}), true).await;
    assert_eq!(ok(&r), &json!({"resultType": "complete"}));
    let r = c.send26("prompts/get", json!({"name": "p"}), true).await;
    assert_eq!(err(&r).code, -32601, "the inner server's own answer");
}

#[tokio::test(start_paused = true)]
async fn r13_r53_ids_are_unique_random_128_bit() {
    let c = Client::new(layer().with_default_ttl(Some(Duration::from_secs(60))));
    let mut ids = HashSet::new();
    for _ in 0..10_000 {
        let id = c.start("tool_error", json!({})).await;
        assert_eq!(id.len(), 32, "R53: 128 bits as hex");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(ids.insert(id), "R13: unique");
    }
    // Not sequential: no two ids share a 64-bit prefix.
    let prefixes: HashSet<_> = ids.iter().map(|i| i[..16].to_owned()).collect();
    assert_eq!(prefixes.len(), ids.len());
}

#[tokio::test(start_paused = true)]
async fn r15_r31_r42_unknown_task_is_32602_everywhere() {
    let c = Client::new(layer());
    for r in [
        c.get("nope").await,
        c.update("nope", json!({"a": accept("v", "x")})).await,
        c.cancel("nope").await,
    ] {
        assert_eq!(err(&r).code, -32602);
        assert_eq!(err(&r).message, "Failed to retrieve task: Task not found");
    }
}

#[tokio::test(start_paused = true)]
async fn r16_r32_r43_tasks_methods_without_capability_are_32021() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let r = c
            .send26(method, json!({"taskId": id, "inputResponses": {}}), false)
            .await;
        let e = err(&r);
        assert_eq!(e.code, -32021, "{method}");
        assert_eq!(
            e.data.as_ref().unwrap()["requiredCapabilities"]["extensions"]
                ["io.modelcontextprotocol/tasks"],
            json!({})
        );
    }
    assert_eq!(
        c.get_ok(&id).await["status"],
        "working",
        "a refused cancel changes nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn r17_working_task_has_no_payload() {
    let c = Client::new(layer());
    let id = c.start("hang", json!({})).await;
    let body = c.get_ok(&id).await;
    assert_eq!(body["status"], "working");
    for f in ["result", "error", "inputRequests"] {
        assert!(body.get(f).is_none(), "R17: {f}");
    }
}
