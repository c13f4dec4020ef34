//! The public model types: wire shapes, the poll decision, the poll interval,
//! and the store conformance suite on the memory store.

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_task_layer::client::{resolve_poll_interval, DEFAULT_POLL_INTERVAL, MIN_POLL_INTERVAL};
use mcp_task_layer::store::{conformance, MemoryStore};
use mcp_task_layer::{
    DetailedTask, InputRequest, JsonRpcError, JsonRpcRequest, Task, TaskMetadata, TaskPollDecision,
    TaskStatus,
};
use serde_json::{json, Map, Value};

const ALL: [TaskStatus; 5] = [
    TaskStatus::Working,
    TaskStatus::InputRequired,
    TaskStatus::Completed,
    TaskStatus::Failed,
    TaskStatus::Cancelled,
];

fn meta() -> TaskMetadata {
    TaskMetadata::new(
        "t1",
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:00:01.000Z",
        Some(60_000),
    )
    .with_poll_interval_ms(Some(500))
}

#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run(|| async { MemoryStore::new() }).await;
}

#[test]
fn poll_decision_covers_every_status() {
    for status in ALL {
        for hint in [None, Some(0), Some(250), Some(u64::MAX)] {
            let expected = match status {
                TaskStatus::Working => TaskPollDecision::InProgress { poll_hint: hint },
                TaskStatus::InputRequired => TaskPollDecision::InputRequired,
                terminal => {
                    assert!(terminal.is_terminal());
                    TaskPollDecision::Terminal { status: terminal }
                }
            };
            assert_eq!(status.poll_decision(hint), expected, "{status} {hint:?}");
            let legacy: Task = serde_json::from_value(json!({
                "taskId": "t", "status": status, "createdAt": "x", "lastUpdatedAt": "y",
                "ttl": null, "pollInterval": hint
            }))
            .unwrap();
            assert_eq!(legacy.poll_decision(), expected, "Task::poll_decision");
        }
    }
}

#[test]
fn detailed_task_poll_decision_passes_the_hint_verbatim() {
    assert_eq!(
        DetailedTask::working(meta()).poll_decision(),
        TaskPollDecision::InProgress {
            poll_hint: Some(500)
        }
    );
    let m = TaskMetadata::new("t", "a", "b", None);
    assert_eq!(
        DetailedTask::working(m).poll_decision(),
        TaskPollDecision::InProgress { poll_hint: None }
    );
    assert_eq!(
        DetailedTask::cancelled(meta()).poll_decision(),
        TaskPollDecision::Terminal {
            status: TaskStatus::Cancelled
        }
    );
    assert_eq!(
        DetailedTask::input_required(meta(), BTreeMap::new()).poll_decision(),
        TaskPollDecision::InputRequired
    );
}

#[test]
fn resolve_poll_interval_every_combination() {
    let floor = Duration::from_millis(100);
    let default = Duration::from_millis(1000);
    let overrides = [
        None,
        Some(Duration::ZERO),
        Some(Duration::from_millis(50)),
        Some(Duration::from_millis(3000)),
    ];
    let hints = [None, Some(0u64), Some(50), Some(100), Some(2000)];
    for o in overrides {
        for h in hints {
            let got = resolve_poll_interval(o, h, default, floor);
            let chosen = o.or(h.map(Duration::from_millis)).unwrap_or(default);
            assert_eq!(got, chosen.max(floor), "override {o:?} hint {h:?}");
            assert!(got >= floor, "never below the floor");
            if let Some(o) = o {
                assert_eq!(got, o.max(floor), "the override wins over any hint");
            }
        }
    }
    // A default below the floor is raised too.
    assert_eq!(
        resolve_poll_interval(None, None, Duration::ZERO, floor),
        floor
    );
    assert_eq!(
        resolve_poll_interval(None, None, DEFAULT_POLL_INTERVAL, MIN_POLL_INTERVAL),
        DEFAULT_POLL_INTERVAL
    );
}

#[test]
fn detailed_task_serializes_to_the_2026_wire_shape_and_back() {
    let mut result = Map::new();
    result.insert("content".into(), json!([{"type": "text", "text": "hi"}]));
    result.insert("isError".into(), json!(false));
    let mut reqs = BTreeMap::new();
    reqs.insert(
        "name".to_owned(),
        InputRequest::new(
            "elicitation/create",
            json!({"message": "?"}).as_object().unwrap().clone(),
        ),
    );
    let cases = [
        (DetailedTask::working(meta()), json!({})),
        (
            DetailedTask::input_required(meta(), reqs),
            json!({"inputRequests": {"name": {"method": "elicitation/create", "params": {"message": "?"}}}}),
        ),
        (
            DetailedTask::completed(meta(), result),
            json!({"result": {"content": [{"type": "text", "text": "hi"}], "isError": false}}),
        ),
        (
            DetailedTask::failed(meta(), JsonRpcError::new(-32603, "boom")),
            json!({"error": {"code": -32603, "message": "boom"}}),
        ),
        (DetailedTask::cancelled(meta()), json!({})),
    ];
    for (task, extra) in cases {
        let v = serde_json::to_value(&task).unwrap();
        let mut expected = json!({
            "taskId": "t1", "status": task.status().as_str(),
            "createdAt": "2026-01-01T00:00:00.000Z", "lastUpdatedAt": "2026-01-01T00:00:01.000Z",
            "ttlMs": 60000, "pollIntervalMs": 500
        });
        expected
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        assert_eq!(v, expected, "{:?}", task.status());
        let back: DetailedTask = serde_json::from_value(v).unwrap();
        assert_eq!(back, task);
        assert_eq!(back.task_id(), "t1");
        assert_eq!(
            back.result().is_some(),
            task.status() == TaskStatus::Completed
        );
        assert_eq!(back.error().is_some(), task.status() == TaskStatus::Failed);
        assert_eq!(
            back.input_requests().is_some(),
            task.status() == TaskStatus::InputRequired
        );
    }
    // A tasks/get body (with resultType) reads as a DetailedTask too.
    let body = json!({"resultType": "complete", "taskId": "t", "status": "working",
                      "createdAt": "a", "lastUpdatedAt": "b", "ttlMs": null});
    let t: DetailedTask = serde_json::from_value(body).unwrap();
    assert_eq!(t.metadata().ttl_ms, None);
    // A completed task without its result is rejected.
    let bad = json!({"taskId": "t", "status": "completed", "createdAt": "a", "lastUpdatedAt": "b", "ttlMs": 1});
    assert!(serde_json::from_value::<DetailedTask>(bad).is_err());
}

#[test]
fn request_decoding_gives_the_exact_jsonrpc_error() {
    let cases: [(&[u8], i64); 9] = [
        (b"{", -32700),
        (b"\xff\xfe", -32700),
        (b"[]", -32600),
        (b"42", -32600),
        (br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":1}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#, -32600),
        (br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#, -32600),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#,
            -32600,
        ),
    ];
    for (bytes, code) in cases {
        let e = JsonRpcRequest::from_slice(bytes).expect_err("must be rejected");
        assert_eq!(e.code, code, "{}", String::from_utf8_lossy(bytes));
    }
    let ok =
        JsonRpcRequest::from_slice(br#"{"jsonrpc":"2.0","id":"a","method":"m","params":{"k":1}}"#)
            .unwrap();
    assert_eq!(ok.id, Some("a".into()));
    assert_eq!(
        ok.params.as_ref().map(mcp_task_layer::Params::as_value),
        Some(&json!({"k": 1}))
    );
    let note =
        JsonRpcRequest::from_slice(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#).unwrap();
    assert!(note.id.is_none());
    assert_eq!(
        serde_json::to_value(&ok).unwrap(),
        json!({"jsonrpc":"2.0","id":"a","method":"m","params":{"k":1}})
    );
    let _: Value = serde_json::to_value(mcp_task_layer::JsonRpcResponse::error(
        None,
        JsonRpcError::parse_error("x"),
    ))
    .unwrap();
}

#[test]
fn a_text_result_reads_writes_and_compares_like_its_value() {
    use mcp_task_layer::{JsonRpcResponse, JsonText, RequestId};
    use serde_json::value::RawValue;

    let value = json!({"content": [{"type": "text", "text": "é \"q\" \u{1}"}], "n": 1.5});
    let text = serde_json::to_string(&value).unwrap();
    let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
    let by_value = JsonRpcResponse::result(Some(RequestId::from("a")), value.clone());
    let by_text = JsonRpcResponse::raw_result(Some(RequestId::from("a")), raw(&text));

    assert_eq!(by_text.result_text(), Some(text.as_str()));
    assert_eq!(by_value.result_text(), None);
    assert_eq!(by_text.result_value(), Some(&value));
    assert!(!by_text.is_error());
    assert_eq!(by_text, by_value);
    // The wire form copies the text as it is, and equals serde's.
    assert_eq!(by_text.to_vec(), serde_json::to_vec(&by_value).unwrap());
    assert_eq!(by_text.to_vec(), by_value.to_vec());
    assert_eq!(serde_json::to_vec(&by_text).unwrap(), by_value.to_vec());
    let back: JsonRpcResponse = serde_json::from_slice(&by_text.to_vec()).unwrap();
    assert_eq!(back, by_value);
    assert_eq!(by_text.clone().into_payload(), Ok(value.clone()));

    // Changing it in place turns it into a value.
    let mut edited = by_text.clone();
    edited.payload_mut().unwrap()["n"] = json!(2);
    assert_eq!(edited.result_text(), None);
    assert_eq!(edited.result_value().unwrap()["n"], 2);
    assert_ne!(edited, by_text);

    // Line breaks between tokens go (one SSE `data:` line per message);
    // those escaped inside strings stay.
    let pretty = serde_json::to_string_pretty(&json!({"a": "x\ny", "b": [1, 2]})).unwrap();
    let compacted = JsonRpcResponse::raw_result(None, raw(&pretty));
    assert_eq!(compacted.result_text(), Some(r#"{"a":"x\ny","b":[1,2]}"#));
    assert!(!compacted.to_vec().contains(&b'\n'));
    assert_eq!(
        std::str::from_utf8(&compacted.to_vec()).unwrap(),
        r#"{"jsonrpc":"2.0","id":null,"result":{"a":"x\ny","b":[1,2]}}"#
    );

    // Errors and numeric ids.
    let error = JsonRpcResponse::error(Some(RequestId::from(7)), JsonRpcError::internal("x"));
    assert_eq!(error.to_vec(), serde_json::to_vec(&error).unwrap());
    assert!(error.is_error() && error.result_value().is_none());
    assert_ne!(error, by_value);

    // JsonText: shared text, equal by text or by value, serde as the JSON.
    let a = JsonText::from_value(&value);
    assert_eq!(a.get(), text);
    assert_eq!(a.to_value(), value);
    let spaced: JsonText = serde_json::from_str(
        r#"{ "n" : 1.5 , "content" : [{"type":"text","text":"é \"q\" \u0001"}] }"#,
    )
    .unwrap();
    assert_eq!(spaced, a);
    assert_ne!(JsonText::from_value(&json!({"n": 2})), a);
    assert_eq!(serde_json::to_string(&a).unwrap(), text);
    assert_eq!(
        serde_json::to_string(&json!({"outcome": a.to_value()})).unwrap(),
        format!(r#"{{"outcome":{text}}}"#)
    );
}
