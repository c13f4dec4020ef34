//! A gateway in process: `Proxy` over an upstream the test launches, under
//! a `TaskLayer` on a `MemoryStore`, called as a tower service.
#![allow(unreachable_pub, dead_code)]

use std::convert::Infallible;
use std::path::PathBuf;
use std::time::Duration;

use mcp_task_layer::gateway::{Proxy, ProxyConfig, UpstreamTarget};
use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, MemoryStore, TaskOwner, TaskPolicy};
use serde_json::{json, Value};
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt};

use crate::common;

/// The Python upstream (tests/gateway/upstream.py) as a command, writing
/// its events to `events`, or `None` when `MCP_TASKS_PYTHON` is not set
/// outside CI.
pub fn python(events: &std::path::Path) -> Option<UpstreamTarget> {
    let python = common::server_url(
        "MCP_TASKS_PYTHON",
        "Python with the mcp package",
        ".ci/python.sh: ensure_python_mcp",
    )?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gateway/upstream.py");
    Some(command(&format!(
        "env UPSTREAM_EVENTS={} {python} {script}",
        events.display()
    )))
}

/// server-everything over stdio, or `None` when `MCP_TASKS_EVERYTHING` is
/// not set outside CI.
pub fn everything() -> Option<UpstreamTarget> {
    let line = common::server_url(
        "MCP_TASKS_EVERYTHING",
        "@modelcontextprotocol/server-everything",
        ".ci/python.sh: ensure_everything",
    )?;
    Some(command(&line))
}

fn command(line: &str) -> UpstreamTarget {
    let mut words = line.split_whitespace().map(str::to_owned);
    let program = words.next().expect("a command");
    UpstreamTarget::Command {
        program,
        args: words.collect(),
    }
}

/// A gateway and the service in front of it.
pub struct Gateway {
    pub proxy: Proxy,
    svc: BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>,
    owner: Option<String>,
    next: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl Gateway {
    pub async fn start(target: UpstreamTarget, policies: &[(&str, TaskPolicy)]) -> Self {
        let mut cfg = ProxyConfig::default().with_connect_wait(Duration::from_secs(30));
        for (tool, policy) in policies {
            cfg = cfg.with_tool_policy(*tool, *policy);
        }
        Self::with_config(target, cfg).await
    }

    pub async fn with_config(target: UpstreamTarget, cfg: ProxyConfig) -> Self {
        let proxy = Proxy::start(target, cfg);
        let layer = proxy
            .task_layer(MemoryStore::new())
            .with_poll_interval(Duration::from_millis(100));
        let svc =
            BoxCloneSyncService::new(ServiceBuilder::new().layer(layer).service(proxy.clone()));
        // Bounded: at most 60 connect waits.
        let mut ready = proxy.ready().await;
        for _ in 0..60 {
            if ready.is_ok() {
                break;
            }
            ready = proxy.ready().await;
        }
        ready.expect("the upstream starts");
        Gateway {
            proxy,
            svc,
            owner: Some("alice".to_owned()),
            next: Default::default(),
        }
    }

    /// The gateway's service (the layer over the proxy), for a transport.
    pub fn service(&self) -> BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible> {
        self.svc.clone()
    }

    /// The same gateway as another caller.
    pub fn as_owner(&self, owner: &str) -> Self {
        Gateway {
            proxy: self.proxy.clone(),
            svc: self.svc.clone(),
            owner: Some(owner.to_owned()),
            next: self.next.clone(),
        }
    }

    pub async fn send(&self, method: &str, params: Value) -> JsonRpcResponse {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.send_with_id(id, method, params).await
    }

    /// A request carrying `peer`, the client's way back (as a transport
    /// puts it in the extensions).
    pub async fn send_with_peer(
        &self,
        method: &str,
        params: Value,
        peer: mcp_task_layer::Peer,
    ) -> JsonRpcResponse {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut req = JsonRpcRequest::new(id, method, params);
        req.extensions.insert(peer);
        if let Some(owner) = &self.owner {
            req.extensions.insert(TaskOwner::new(owner.clone()));
        }
        self.svc.clone().oneshot(req).await.unwrap()
    }

    /// A notification from this caller.
    pub async fn notify(&self, method: &str, params: Value) {
        let mut req = JsonRpcRequest::notification(method, Some(params));
        if let Some(owner) = &self.owner {
            req.extensions.insert(TaskOwner::new(owner.clone()));
        }
        let _ = self.svc.clone().oneshot(req).await;
    }

    pub async fn send_with_id(&self, id: i64, method: &str, params: Value) -> JsonRpcResponse {
        let mut req = JsonRpcRequest::new(id, method, params);
        if let Some(owner) = &self.owner {
            req.extensions.insert(TaskOwner::new(owner.clone()));
        }
        self.svc.clone().oneshot(req).await.unwrap()
    }

    /// A 2026-07-28 request, declaring the tasks extension or not.
    pub async fn send26(&self, method: &str, mut params: Value, tasks: bool) -> JsonRpcResponse {
        params["_meta"] = common::meta(tasks);
        self.send(method, params).await
    }

    pub async fn call(&self, tool: &str, args: Value) -> Value {
        let resp = self
            .send26(
                "tools/call",
                json!({ "name": tool, "arguments": args }),
                true,
            )
            .await;
        common::ok(&resp).clone()
    }

    pub async fn get(&self, task: &str) -> Value {
        let resp = self
            .send26("tasks/get", json!({ "taskId": task }), true)
            .await;
        common::ok(&resp).clone()
    }

    /// Poll `tasks/get` (at most 30 s) until `until` holds.
    pub async fn poll(&self, task: &str, what: &str, until: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..600 {
            let t = self.get(task).await;
            if until(&t) {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {task} never reached {what}: {}", self.get(task).await);
    }

    pub async fn status(&self, task: &str, status: &str) -> Value {
        self.poll(task, status, |t| t["status"] == status).await
    }
}

/// A fresh file for the upstream's events.
pub fn events_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events");
    (dir, path)
}

/// The upstream's event lines so far.
pub fn events(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Wait (at most 30 s) until the upstream wrote `line`.
pub async fn event(path: &std::path::Path, line: &str) {
    for _ in 0..600 {
        if events(path).iter().any(|l| l == line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upstream never wrote {line:?}: {:?}", events(path));
}

/// SIGKILL the upstream process `pid` (what the fixture's `pid` tool says).
pub fn kill(pid: &str) {
    let killed = std::process::Command::new("kill")
        .args(["-9", pid])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -9 {pid}");
}

/// The text of a tool result's first content item.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// The key of the first of `asked`'s `inputRequests` (a task's, or an
/// MRTR round's).
pub fn first_question(asked: &Value) -> String {
    asked["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next())
        .unwrap_or_else(|| panic!("no input request in {asked}"))
        .clone()
}
