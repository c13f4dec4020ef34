//! `TaskClient` against this crate's own server stack, in both eras.

mod common;

use std::sync::Arc;
use std::time::Duration;

use mcp_task_layer::client::{ClientEra, ClientError, Started, TaskClient};
use mcp_task_layer::{InputRequest, JsonRpcError, JsonRpcRequest, JsonRpcResponse, TaskLayer};
use serde_json::{json, Value};
use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;

type Svc = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, std::convert::Infallible>;

fn stack(layer: TaskLayer) -> (Svc, Arc<common::Seen>) {
    let seen = Arc::new(common::Seen::default());
    let svc = BoxCloneSyncService::new(
        ServiceBuilder::new()
            .layer(layer)
            .service(common::server(Arc::clone(&seen))),
    );
    (svc, seen)
}

/// Answers every elicitation: `name` → "Ada", `v` → "x".
async fn answer(req: InputRequest) -> Result<Value, JsonRpcError> {
    match req.method.as_str() {
        "elicitation/create" => {
            let schema = &req.params.as_ref().unwrap()["requestedSchema"]["properties"];
            let field = schema.as_object().unwrap().keys().next().unwrap().clone();
            let value = if field == "name" { "Ada" } else { "x" };
            Ok(json!({"action": "accept", "content": {field: value}}))
        }
        "sampling/createMessage" => Ok(
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
        ),
        other => Err(JsonRpcError::method_not_found(other)),
    }
}

fn eras() -> [ClientEra; 2] {
    [ClientEra::Modern, ClientEra::Legacy]
}

fn text(result: &serde_json::Map<String, Value>) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

#[tokio::test(start_paused = true)]
async fn sync_results_come_back_directly() {
    let (svc, _) = stack(common::layer());
    let client = TaskClient::new(svc);
    let r = client
        .call_tool("echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "hi");
    let r = client.call_tool("slow", json!({"ms": 10})).await.unwrap();
    assert_eq!(text(&r), "slept 10", "Auto within budget: synchronous");
}

#[tokio::test(start_paused = true)]
async fn task_results_are_driven_to_the_end_in_both_eras() {
    for era in eras() {
        let (svc, _) = stack(common::layer());
        let client = TaskClient::new(svc).with_era(era);
        let started = client
            .start_tool("slow", json!({"ms": 3000}))
            .await
            .unwrap();
        let Started::Task {
            task_id,
            poll_interval_ms,
        } = started
        else {
            panic!("{era:?}: expected a task")
        };
        assert_eq!(poll_interval_ms, Some(1000));
        let r = client.wait(&task_id).await.unwrap();
        assert_eq!(text(&r), "slept 3000", "{era:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn input_round_trips_in_both_eras() {
    for era in eras() {
        let (svc, seen) = stack(common::layer());
        let client = TaskClient::new(svc)
            .with_era(era)
            .with_input_handler(answer);
        let r = client.call_tool("ask", json!({})).await.unwrap();
        assert_eq!(text(&r), "Hello, Ada!", "{era:?}");
        assert_eq!(seen.calls("ask"), 2, "{era:?}: one resume");
        let r = client.call_tool("ask2", json!({})).await.unwrap();
        assert_eq!(text(&r), "x+x", "{era:?}: two requests at once");
        let r = client.call_tool("reask", json!({})).await.unwrap();
        assert_eq!(text(&r), "last=x", "{era:?}: an inner key asked twice");
    }
}

#[tokio::test(start_paused = true)]
async fn mrtr_rounds_before_a_task_are_answered_and_retried() {
    let (svc, seen) = stack(common::layer());
    let client = TaskClient::new(svc).with_input_handler(answer);
    let r = client.call_tool("ask_now", json!({})).await.unwrap();
    assert_eq!(text(&r), "Hello, Ada!");
    assert_eq!(seen.calls("ask_now"), 2, "the retry carried the answer");
}

#[tokio::test(start_paused = true)]
async fn input_without_a_handler_is_an_error() {
    let (svc, _) = stack(common::layer());
    let client = TaskClient::new(svc);
    // Plain MRTR reaches the client, which cannot answer.
    match client.call_tool("ask_now", json!({})).await {
        Err(ClientError::NoInputHandler) => {}
        other => panic!("expected NoInputHandler, got {other:?}"),
    }
    // Without a handler the client declares no elicitation, so the server
    // fails a task that asks for it (R39).
    match client.call_tool("ask", json!({})).await {
        Err(ClientError::Failed(e)) => assert_eq!(e.code, -32021),
        other => panic!("expected Failed(-32021), got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn failures_are_errors_in_both_eras() {
    for era in eras() {
        let (svc, _) = stack(common::layer());
        let client = TaskClient::new(svc).with_era(era);
        match client.call_tool("boom", json!({})).await {
            Err(ClientError::Failed(e)) => assert_eq!(e.code, -32050, "{era:?}"),
            other => panic!("{era:?}: expected Failed, got {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_on_request_and_on_drop() {
    for era in eras() {
        let (svc, _) = stack(common::layer());
        let client = TaskClient::new(svc).with_era(era);
        let Started::Task { task_id, .. } = client.start_tool("hang", json!({})).await.unwrap()
        else {
            panic!()
        };
        let waiter = {
            let client = client.clone();
            let id = task_id.clone();
            tokio::spawn(async move { client.wait(&id).await })
        };
        client.cancel(&task_id).await.unwrap();
        match waiter.await.unwrap() {
            Err(ClientError::Cancelled) => {}
            other => panic!("{era:?}: expected Cancelled, got {other:?}"),
        }

        // Dropping a wait cancels the task.
        let Started::Task { task_id, .. } = client.start_tool("hang", json!({})).await.unwrap()
        else {
            panic!()
        };
        let waiting = client.wait(&task_id);
        let _ = tokio::time::timeout(Duration::from_secs(3), waiting).await;
        let (task, _) = {
            let mut last = None;
            for _ in 0..100 {
                let polled = client.poll(&task_id).await.unwrap();
                let done = polled.0.status() == mcp_task_layer::TaskStatus::Cancelled;
                last = Some(polled);
                if done {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            last.unwrap()
        };
        assert_eq!(
            task.status(),
            mcp_task_layer::TaskStatus::Cancelled,
            "{era:?}: cancelled on drop"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_client_resumes_a_stored_task_id() {
    let (svc, _) = stack(common::layer());
    let task_id = {
        let first = TaskClient::new(svc.clone()).with_input_handler(answer);
        match first.start_tool("ask", json!({})).await.unwrap() {
            Started::Task { task_id, .. } => task_id,
            other => panic!("expected a task, got {other:?}"),
        }
        // `first` is gone: the "restart".
    };
    let second = TaskClient::new(svc).with_input_handler(answer);
    let r = second.wait(&task_id).await.unwrap();
    assert_eq!(text(&r), "Hello, Ada!");
}

#[tokio::test(start_paused = true)]
async fn polling_follows_each_tasks_own_hint_and_the_override() {
    // The server suggests 1 s; a 3 s handler is polled ~3 times, not more.
    let (svc, _) = stack(common::layer().with_poll_interval(Duration::from_millis(1000)));
    let started = tokio::time::Instant::now();
    let client = TaskClient::new(svc.clone());
    let r = client.call_tool("slow", json!({"ms": 3000})).await.unwrap();
    assert_eq!(text(&r), "slept 3000");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_millis(4200),
        "{took:?}"
    );
    // A caller override wins: 100 ms polls end within 100 ms of the result.
    let started = tokio::time::Instant::now();
    let client = TaskClient::new(svc).with_poll_interval(Duration::from_millis(100));
    client.call_tool("slow", json!({"ms": 3000})).await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(3200), "{took:?}");
}

/// The same client over real HTTP: `HttpTransport` against `McpEndpoint`,
/// with input answered through `tasks/update` (2026-07-28) and on the SSE
/// stream of `tasks/result` (2025-11-25).
#[cfg(all(feature = "http-client", feature = "axum"))]
#[tokio::test]
async fn over_http_in_both_eras() {
    use mcp_task_layer::client::HttpTransport;
    use mcp_task_layer::McpEndpoint;

    let (svc, seen) = stack(common::layer());
    let app = McpEndpoint::new(svc).into_router("/mcp");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    for era in eras() {
        let transport = HttpTransport::new(&url).unwrap();
        let client = TaskClient::new(transport)
            .with_era(era)
            .with_input_handler(answer);
        let r = client.call_tool("ask2", json!({})).await.unwrap();
        assert_eq!(text(&r), "x+x", "{era:?}");
        let r = client
            .call_tool("echo", json!({"text": "sync"}))
            .await
            .unwrap();
        assert_eq!(text(&r), "sync");
        match client.call_tool("boom", json!({})).await {
            Err(ClientError::Failed(e)) => assert_eq!(e.code, -32050),
            other => panic!("{era:?}: {other:?}"),
        }
    }
    assert_eq!(seen.calls("ask2"), 4, "each era: one run and one resume");
}
