//! The layer against tower-test mocks: what reaches the inner service, and
//! what never does.

mod common;

use std::time::Duration;

use common::meta;
use mcp_task_layer::{
    CancellationToken, JsonRpcRequest, JsonRpcResponse, TaskId, TaskLayer, TaskPolicy,
    TaskResumeContext,
};
use serde_json::{json, Value};
use tokio_test::{assert_pending, assert_ready_ok};
use tower::ServiceExt;
use tower_test::mock;

fn layer() -> TaskLayer {
    TaskLayer::default()
        .with_tool_policy("job", TaskPolicy::Task)
        .with_tool_policy(
            "maybe",
            TaskPolicy::Auto {
                within: Duration::from_millis(50),
            },
        )
}

fn req(id: i64, method: &str, mut params: Value, tasks: bool) -> JsonRpcRequest {
    params["_meta"] = meta(tasks);
    JsonRpcRequest::new(id, method, params)
}

fn text(id: Option<mcp_task_layer::RequestId>, s: &str) -> JsonRpcResponse {
    JsonRpcResponse::result(
        id,
        json!({"resultType": "complete", "content": [{"type": "text", "text": s}]}),
    )
}

/// Run `request` through a fresh clone of the service on its own task.
fn spawn_call(
    svc: &mock::Spawn<mcp_task_layer::TaskService<mock::Mock<JsonRpcRequest, JsonRpcResponse>>>,
    request: JsonRpcRequest,
) -> tokio::task::JoinHandle<JsonRpcResponse> {
    let svc = svc.get_ref().clone();
    tokio::spawn(async move { svc.oneshot(request).await.expect("mock service error") })
}

#[tokio::test(start_paused = true)]
async fn passthrough_reaches_the_inner_service_untouched() {
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer());
    assert_ready_ok!(svc.poll_ready());
    let mut request = req(7, "resources/read", json!({"uri": "file:///x"}), true);
    request.extensions.insert(42u32);
    let fut = svc.call(request);
    let (got, send) = handle
        .next_request()
        .await
        .expect("the request reaches the inner service");
    assert_eq!(got.method, "resources/read");
    assert_eq!(got.id, Some(7.into()));
    assert_eq!(got.params.as_ref().unwrap()["uri"], "file:///x");
    assert_eq!(
        got.extensions.get::<u32>(),
        Some(&42),
        "extensions travel through"
    );
    send.send_response(text(got.id.clone(), "contents"));
    let resp = fut.await.unwrap();
    assert_eq!(
        resp,
        text(Some(7.into()), "contents"),
        "the response comes back unchanged"
    );
}

#[tokio::test(start_paused = true)]
async fn tasks_methods_never_reach_the_inner_service() {
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer());
    for (i, method) in [
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "tasks/result",
        "tasks/list",
    ]
    .into_iter()
    .enumerate()
    {
        for tasks in [true, false] {
            assert_ready_ok!(svc.poll_ready());
            let resp = svc
                .call(req(
                    i as i64,
                    method,
                    json!({"taskId": "t", "inputResponses": {}}),
                    tasks,
                ))
                .await
                .unwrap();
            assert!(
                resp.error_value().is_some(),
                "{method}: answered by the layer"
            );
            assert_pending!(handle.poll_request());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn backpressure_and_errors_of_the_inner_service_propagate() {
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer());
    handle.allow(0);
    assert_pending!(svc.poll_ready());
    handle.allow(1);
    assert_ready_ok!(svc.poll_ready());
    let fut = svc.call(req(1, "ping", json!({}), true));
    let (_, send) = handle.next_request().await.unwrap();
    send.send_error("inner failure");
    let e = fut.await.expect_err("the inner error is the service error");
    assert_eq!(e.to_string(), "inner failure");
}

#[tokio::test(start_paused = true)]
async fn sync_tool_calls_pass_through_and_task_calls_get_a_token() {
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer());
    assert_ready_ok!(svc.poll_ready());
    let fut = svc.call(req(
        1,
        "tools/call",
        json!({"name": "plain", "arguments": {}}),
        true,
    ));
    let (got, send) = handle.next_request().await.unwrap();
    assert!(
        got.extensions.get::<CancellationToken>().is_none(),
        "sync calls are untouched"
    );
    send.send_response(text(got.id.clone(), "ok"));
    assert_eq!(
        fut.await.unwrap().result_value().unwrap()["resultType"],
        "complete"
    );

    let call = spawn_call(
        &svc,
        req(
            2,
            "tools/call",
            json!({"name": "job", "arguments": {"n": 1}}),
            true,
        ),
    );
    let (got, send) = handle.next_request().await.unwrap();
    assert!(
        got.extensions.get::<CancellationToken>().is_some(),
        "a task's handler gets its token"
    );
    let created = call.await.unwrap();
    let body = created.result_value().unwrap();
    assert_eq!(
        body["resultType"], "task",
        "the task exists while the handler still runs"
    );
    let task_id = body["taskId"].as_str().unwrap().to_owned();
    send.send_response(text(got.id.clone(), "finished"));

    let get = req(3, "tasks/get", json!({"taskId": task_id}), true);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let resp = spawn_call(&svc, get.clone()).await.unwrap();
        let body = resp.result_value().unwrap().clone();
        if body["status"] == "completed" {
            assert_eq!(body["result"]["content"][0]["text"], "finished");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_pending!(handle.poll_request());
}

#[tokio::test(start_paused = true)]
async fn resume_reaches_the_inner_service_once_with_its_context() {
    let (svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer());
    let call = spawn_call(
        &svc,
        req(
            1,
            "tools/call",
            json!({"name": "job", "arguments": {"n": 1}}),
            true,
        ),
    );
    let (first, send) = handle.next_request().await.unwrap();
    let task_id = call.await.unwrap().result_value().unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    send.send_response(JsonRpcResponse::result(
        first.id.clone(),
        json!({"resultType": "input_required",
               "inputRequests": {"ok": {"method": "elicitation/create", "params": {"mode": "form", "message": "Go?", "requestedSchema": {"type": "object", "properties": {}}}}},
               "requestState": "opaque"}),
    ));
    // Wait for input_required.
    let get = req(2, "tasks/get", json!({"taskId": task_id}), true);
    loop {
        let body = spawn_call(&svc, get.clone())
            .await
            .unwrap()
            .result_value()
            .unwrap()
            .clone();
        if body["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Eight racing answers: exactly one resume reaches the inner service.
    let updates: Vec<_> = (0..8)
        .map(|i| {
            spawn_call(
                &svc,
                req(10 + i, "tasks/update", json!({"taskId": task_id, "inputResponses": {"ok": {"action": "accept", "content": {}}}}), true),
            )
        })
        .collect();
    for u in updates {
        assert_eq!(
            u.await.unwrap().result_value().unwrap(),
            &json!({"resultType": "complete"})
        );
    }
    let (resumed, send) = handle.next_request().await.unwrap();
    assert_eq!(resumed.method, "tools/call");
    let p = resumed.params.as_ref().unwrap();
    assert_eq!(p["name"], "job");
    assert_eq!(p["arguments"], json!({"n": 1}));
    assert_eq!(p["requestState"], "opaque");
    assert_eq!(p["inputResponses"]["ok"]["action"], "accept");
    assert_ne!(resumed.id, first.id, "a fresh inner request id");
    let ctx = resumed
        .extensions
        .get::<TaskResumeContext>()
        .expect("resume context");
    assert_eq!(ctx.tool_name, "job");
    assert!(resumed.extensions.get::<CancellationToken>().is_some());
    assert_eq!(resumed.extensions.get::<TaskId>().unwrap().0, task_id);
    send.send_response(text(resumed.id.clone(), "done"));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_pending!(handle.poll_request());
}

/// A `subscribe()` receiver taken early in the builder chain hears the
/// tasks of the layer the chain ends with: every `with_*` keeps the event
/// channel. (Before the fix each `with_*` made a new channel, and this
/// receiver saw `Closed` and no event.)
#[tokio::test(start_paused = true)]
async fn a_receiver_taken_before_later_settings_still_hears_tasks() {
    let early = TaskLayer::default();
    let mut events = early.subscribe();
    let layer = early
        .with_poll_interval(Duration::from_millis(250))
        .with_tool_policy("job", TaskPolicy::Task);
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer);
    assert_ready_ok!(svc.poll_ready());
    let call = spawn_call(&svc, req(1, "tools/call", json!({"name": "job"}), true));
    let (_, _send) = handle.next_request().await.expect("the handler runs");
    let created = call.await.expect("the call answers");
    let task_id = created.result_value().expect("a result")["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let event = events
        .try_recv()
        .expect("the early receiver hears the task");
    assert_eq!(event.task_id, task_id);
    assert_eq!(event.status, mcp_task_layer::TaskStatus::Working);
}

/// A `tools/call` sent as a notification (no id) of a `Task` tool goes to
/// the inner service as it is: its answer could reach nobody, so a task of
/// it could never be addressed. (Before the fix a task was made.)
#[tokio::test(start_paused = true)]
async fn a_tool_call_notification_makes_no_task() {
    let layer = layer();
    let mut events = layer.subscribe();
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer);
    assert_ready_ok!(svc.poll_ready());
    let mut params = json!({"name": "job", "arguments": {}});
    params["_meta"] = meta(true);
    let fut = svc.call(JsonRpcRequest::notification("tools/call", Some(params)));
    let (got, send) = handle.next_request().await.expect("passed through");
    assert_eq!(got.id, None);
    assert!(
        got.extensions.get::<CancellationToken>().is_none(),
        "not run as a task"
    );
    send.send_response(text(None, "done"));
    fut.await.unwrap();
    assert!(events.try_recv().is_err(), "no task event");
}

/// Two calls of one owner, both still in their `Auto` window: with one
/// slot per owner the second is refused at once, because the first holds
/// the slot from its check on. (Before the fix both passed the check and
/// both became tasks: the bound was overshot.)
#[tokio::test(start_paused = true)]
async fn concurrent_calls_cannot_overshoot_the_per_owner_bound() {
    let layer = layer().with_limits(mcp_task_layer::Limits {
        max_tasks_per_owner: 1,
        ..mcp_task_layer::Limits::default()
    });
    let (mut svc, mut handle) = mock::spawn_layer::<JsonRpcRequest, JsonRpcResponse, _>(layer);
    assert_ready_ok!(svc.poll_ready());
    let first = spawn_call(&svc, req(1, "tools/call", json!({"name": "maybe"}), true));
    let (_, _first_send) = handle.next_request().await.expect("the first runs");
    assert_ready_ok!(svc.poll_ready());
    let second = svc
        .call(req(2, "tools/call", json!({"name": "maybe"}), true))
        .await
        .unwrap();
    let e = second.error_value().expect("the second is refused");
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("at most 1 are allowed"), "{e}");
    assert_pending!(handle.poll_request());
    // The first becomes a task when its window ends.
    let created = first.await.unwrap();
    assert_eq!(created.result_value().unwrap()["resultType"], "task");
}
