//! The clients: each task of the workload driven over HTTP through the
//! front (created, read, answered, cancelled), every request and answer
//! recorded with its times. A request that fails (the front down, a
//! timeout) is recorded as such and tried again; it acks nothing.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_task_layer::client::HttpTransport;
use mcp_task_layer::JsonRpcRequest;
use serde_json::{json, Map, Value};
use tower::ServiceExt;

/// What a task of the workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `slow_compute` for 0.2 to 1 s.
    Quick,
    /// `slow_compute` for 3 to 8 s: outlives leases, so faults hit it.
    Long,
    /// `confirm_delete`: one question, answered.
    Ask,
    /// `multi_input`: two questions at once, answered together.
    Multi,
    /// `slow_compute` for 60 s, cancelled after a moment.
    Cancel,
}

/// One request and its answer.
#[derive(Clone, Debug)]
pub(crate) struct Op {
    pub(crate) task: usize,
    pub(crate) method: &'static str,
    pub(crate) start: Instant,
    pub(crate) end: Instant,
    /// The result, or why there is none (`rpc CODE: MESSAGE` for an
    /// error answer, `transport: ...` for no answer).
    pub(crate) answer: Result<Value, String>,
}

/// A task of the workload.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) kind: Kind,
    /// Seconds of `slow_compute`; for `Cancel`, ms before the cancel.
    pub(crate) amount: f64,
    pub(crate) label: String,
}

impl Plan {
    pub(crate) fn call(&self) -> Value {
        match self.kind {
            Kind::Quick | Kind::Long => {
                json!({"name": "slow_compute", "arguments": {"seconds": self.amount, "label": self.label}})
            }
            Kind::Cancel => {
                json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": self.label}})
            }
            Kind::Ask => json!({"name": "confirm_delete", "arguments": {"filename": self.label}}),
            Kind::Multi => json!({"name": "multi_input", "arguments": {}}),
        }
    }

    /// The result text a completed task of this plan must have.
    pub(crate) fn expected(&self) -> String {
        match self.kind {
            Kind::Quick | Kind::Long => format!("computed {} in {}s", self.label, self.amount),
            Kind::Cancel => format!("computed {} in 60s", self.label),
            Kind::Ask => format!("Deleted {}.", self.label),
            Kind::Multi => format!("Thanks, {}; proceed: true.", self.label),
        }
    }

    fn answer(&self, key: &str, asked: &Value) -> Value {
        let property = asked["params"]["requestedSchema"]["properties"]
            .as_object()
            .and_then(|p| p.keys().next().cloned())
            .unwrap_or_else(|| key.to_owned());
        let value = if property == "name" {
            json!(self.label)
        } else {
            json!(true)
        };
        json!({"action": "accept", "content": {property: value}})
    }
}

pub(crate) type History = Arc<Mutex<Vec<Op>>>;

/// The clients' connection pool to the front, shared (a connection per
/// request would leave tens of thousands of sockets in `TIME_WAIT`).
#[derive(Clone)]
pub(crate) struct Client {
    http: HttpTransport,
    next: Arc<AtomicI64>,
    history: History,
}

impl Client {
    pub(crate) fn new(url: String, history: History) -> Client {
        let http = HttpTransport::new(&url)
            .and_then(|h| h.with_bearer("alice"))
            .expect("client");
        Client {
            http,
            next: Arc::default(),
            history,
        }
    }

    /// One request, recorded.
    pub(crate) async fn send(
        &self,
        task: usize,
        method: &'static str,
        mut params: Value,
    ) -> Result<Value, String> {
        params["_meta"] = crate::common::meta(true);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let http = self.http.clone();
        let req = JsonRpcRequest::new(id, method, params);
        let answer = match tokio::time::timeout(Duration::from_secs(15), http.oneshot(req)).await {
            Err(_) => Err("transport: timed out".to_owned()),
            Ok(Err(e)) => Err(format!("transport: {e}")),
            Ok(Ok(resp)) => resp
                .into_payload()
                .map_err(|e| format!("rpc {}: {}", e.code, e.message)),
        };
        let op = Op {
            task,
            method,
            start,
            end: Instant::now(),
            answer: answer.clone(),
        };
        self.history.lock().unwrap().push(op);
        answer
    }
}

fn terminal(status: &Value) -> bool {
    matches!(status.as_str(), Some("completed" | "failed" | "cancelled"))
}

/// Drive task `n` of plan `plan` until it ends or `deadline` passes.
pub(crate) async fn drive(client: Client, n: usize, plan: Plan, deadline: Instant) {
    // Create: a call that gets no answer acks nothing; try again.
    let id = loop {
        if Instant::now() > deadline {
            return;
        }
        match client.send(n, "tools/call", plan.call()).await {
            Ok(r) if r["resultType"] == "task" => break r["taskId"].as_str().unwrap().to_owned(),
            // Answered at once (an `Auto` call a worker finished in time).
            Ok(_) => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let created = Instant::now();
    let mut cancelled = false;
    let mut reads_after_end = 0;
    while Instant::now() < deadline && reads_after_end < 3 {
        if plan.kind == Kind::Cancel
            && !cancelled
            && created.elapsed() > Duration::from_millis(plan.amount as u64)
        {
            cancelled = client
                .send(n, "tasks/cancel", json!({"taskId": id}))
                .await
                .is_ok();
        }
        if let Ok(task) = client.send(n, "tasks/get", json!({"taskId": id})).await {
            if terminal(&task["status"]) {
                reads_after_end += 1;
            } else if task["status"] == "input_required" {
                let asked = task["inputRequests"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                let answers: Map<String, Value> = asked
                    .iter()
                    .map(|(k, q)| (k.clone(), plan.answer(k, q)))
                    .collect();
                let params = json!({"taskId": id, "inputResponses": answers});
                let _ = client.send(n, "tasks/update", params).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}
