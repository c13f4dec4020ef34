//! The server under attack, and the five tasks of alice's it must keep.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcp_task_layer::{McpEndpoint, TaskEvent, TaskLayer};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tower::ServiceBuilder;

use crate::client::{accept_name, legacy, modern, rpc};
use crate::common;
use crate::common::wire::bearer;
use crate::ALICE;

// ----- the server -----

pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) seen: Arc<common::Seen>,
    events: broadcast::Receiver<TaskEvent>,
}

/// The server most cases run against: its endpoint answers `tasks/get`
/// itself (`with_direct_tasks_get`, as the example server does), so that
/// every hostile `tasks/get` goes that way; [`start_with`]'s goes through
/// the service.
pub(crate) async fn start() -> Server {
    serve(common::layer(), true).await
}

/// [`start`] with a layer of the test's own, its `tasks/get` through the
/// service.
pub(crate) async fn start_with(layer: TaskLayer) -> Server {
    serve(layer, false).await
}

async fn serve(layer: TaskLayer, direct: bool) -> Server {
    let seen = Arc::new(common::Seen::default());
    let events = layer.subscribe();
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(common::server(Arc::clone(&seen)));
    let mut endpoint = McpEndpoint::new(service).with_identity(bearer);
    if direct {
        endpoint = endpoint.with_direct_tasks_get();
    }
    let app = endpoint.into_router("/mcp");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Server { addr, seen, events }
}

// ----- the tasks -----

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum T {
    /// `ask`, waiting for `name`.
    Ask,
    /// `hang`, working.
    Hang,
    /// `ask`, answered and completed.
    Done,
    /// `ask`, cancelled while it waited for input.
    Cancelled,
    /// A 2025-11-25 `hang` task, working.
    Legacy,
}

pub(crate) const ALL: [T; 5] = [T::Ask, T::Hang, T::Done, T::Cancelled, T::Legacy];
pub(crate) const MODERN: [T; 4] = [T::Ask, T::Hang, T::Done, T::Cancelled];

pub(crate) struct World {
    pub(crate) server: Server,
    pub(crate) ids: BTreeMap<T, String>,
    next: i64,
}

impl World {
    pub(crate) fn id(&self, t: T) -> &str {
        &self.ids[&t]
    }

    pub(crate) fn next_id(&mut self) -> i64 {
        self.next += 1;
        self.next
    }

    /// `tasks/get` of a task as alice, in its own era.
    async fn get(&mut self, t: T) -> Value {
        let id = self.next_id();
        let task = self.id(t).to_owned();
        let body = if t == T::Legacy {
            legacy(id, "tasks/get", json!({ "taskId": task }))
        } else {
            modern(id, "tasks/get", json!({ "taskId": task }))
        };
        let v = rpc(self.server.addr, &body, Some(ALICE)).await;
        assert!(v.get("error").is_none(), "{v}");
        v["result"].clone()
    }

    /// Wait, on the layer's events and never on wall time, until a task
    /// has `status`.
    pub(crate) async fn wait_for(&mut self, t: T, status: &str) -> Value {
        for _ in 0..1_000 {
            let body = self.get(t).await;
            if body["status"] == status {
                return body;
            }
            match tokio::time::timeout(Duration::from_secs(30), self.server.events.recv()).await {
                Ok(Ok(_) | Err(broadcast::error::RecvError::Lagged(_))) => {}
                other => panic!("{t:?} never reached {status}: {other:?}, last {body}"),
            }
        }
        panic!("{t:?} never reached {status}");
    }

    pub(crate) async fn snapshot(&mut self) -> BTreeMap<T, Value> {
        let mut out = BTreeMap::new();
        for t in ALL {
            out.insert(t, self.get(t).await);
        }
        out
    }
}

pub(crate) async fn setup() -> World {
    let server = start().await;
    let addr = server.addr;
    let mut w = World {
        server,
        ids: BTreeMap::new(),
        next: 0,
    };
    let mut start_task = |tool: &'static str| {
        let id = w.next_id();
        async move {
            // `ask` works 50 ms before it asks, so it asks inside a task.
            let args = json!({ "delay_ms": 50 });
            let body = modern(id, "tools/call", json!({ "name": tool, "arguments": args }));
            let v = rpc(addr, &body, Some(ALICE)).await;
            assert_eq!(v["result"]["resultType"], "task", "{v}");
            v["result"]["taskId"].as_str().unwrap().to_owned()
        }
    };
    let ask = start_task("ask").await;
    let hang = start_task("hang").await;
    let done = start_task("ask").await;
    let cancelled = start_task("ask").await;
    w.ids.insert(T::Ask, ask);
    w.ids.insert(T::Hang, hang);
    w.ids.insert(T::Done, done);
    w.ids.insert(T::Cancelled, cancelled);

    let id = w.next_id();
    let body = legacy(id, "tools/call", json!({ "name": "hang", "task": {} }));
    let v = rpc(addr, &body, Some(ALICE)).await;
    w.ids.insert(
        T::Legacy,
        v["result"]["task"]["taskId"].as_str().unwrap().to_owned(),
    );

    for t in [T::Ask, T::Done, T::Cancelled] {
        w.wait_for(t, "input_required").await;
    }
    let id = w.next_id();
    let done = w.id(T::Done).to_owned();
    let body = modern(
        id,
        "tasks/update",
        json!({ "taskId": done, "inputResponses": { "name": accept_name("Ada") } }),
    );
    assert_eq!(
        rpc(addr, &body, Some(ALICE)).await["result"],
        json!({ "resultType": "complete" })
    );
    let id = w.next_id();
    let cancelled = w.id(T::Cancelled).to_owned();
    let body = modern(id, "tasks/cancel", json!({ "taskId": cancelled }));
    rpc(addr, &body, Some(ALICE)).await;
    w.wait_for(T::Done, "completed").await;
    w.wait_for(T::Cancelled, "cancelled").await;
    assert_eq!(w.get(T::Hang).await["status"], "working");
    assert_eq!(w.get(T::Legacy).await["status"], "working");
    w
}
