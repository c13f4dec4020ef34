//! The clients: one task at a time, script after script, each waiting on
//! the layer's events.

use super::*;

pub(crate) type Svc = BoxCloneSyncService<JsonRpcRequest, JsonRpcResponse, Infallible>;

/// Wakes the clients waiting for a task when the layer announces a change.
#[derive(Default)]
pub(crate) struct Waiters(Mutex<HashMap<String, Arc<Notify>>>);

impl Waiters {
    pub(crate) fn register(&self, task: &str) -> Arc<Notify> {
        let n = Arc::new(Notify::new());
        self.0
            .lock()
            .unwrap()
            .insert(task.to_owned(), Arc::clone(&n));
        n
    }
    pub(crate) fn forget(&self, task: &str) {
        self.0.lock().unwrap().remove(task);
    }
    pub(crate) fn wake(&self, task: &str) {
        if let Some(n) = self.0.lock().unwrap().get(task) {
            n.notify_one();
        }
    }
}

#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) rounds: AtomicUsize,
    pub(crate) cancel_input: AtomicUsize,
    pub(crate) cancel_working: AtomicUsize,
    pub(crate) cancel_race: AtomicUsize,
    pub(crate) work: AtomicUsize,
    pub(crate) fail: AtomicUsize,

    pub(crate) requests: AtomicU64,
    pub(crate) updates: AtomicU64,
    pub(crate) wrong: AtomicUsize,
    /// The longest script, start to checked end.
    pub(crate) slowest_ms: AtomicU64,
}

pub(crate) struct Client {
    pub(crate) svc: Svc,
    pub(crate) handlers: Arc<Handlers>,
    pub(crate) gate: u64,
    pub(crate) owner: String,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) next: u64,
}

impl Client {
    pub(crate) async fn send(&mut self, method: &str, mut params: Value) -> JsonRpcResponse {
        self.next += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": {}, "extensions": { TASKS: {} } },
        });
        let mut req = JsonRpcRequest::new(i64::try_from(self.next).unwrap_or(0), method, params);
        req.extensions.insert(TaskOwner::new(self.owner.clone()));
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        self.svc
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| match e {})
    }

    pub(crate) async fn get(&mut self, task: &str) -> Result<Value, String> {
        match self
            .send("tasks/get", json!({ "taskId": task }))
            .await
            .into_payload()
        {
            Ok(v) => Ok(v),
            Err(e) => Err(format!("tasks/get: {e}")),
        }
    }

    /// Wait until the task leaves `working`: woken by layer events, with a
    /// `tasks/get` at least every 500 ms.
    pub(crate) async fn settle(&mut self, task: &str, wake: &Notify) -> Result<Value, String> {
        let started = Instant::now();
        loop {
            let body = self.get(task).await?;
            if body["status"] != "working" {
                return Ok(body);
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err(format!("still working after 120 s: {body}"));
            }
            let _ = tokio::time::timeout(Duration::from_millis(500), wake.notified()).await;
        }
    }

    /// Call a tool that must become a task; its id. An `ask` handler waits
    /// at its gate until the client has the id.
    pub(crate) async fn start(&mut self, tool: &str, mut args: Value) -> Result<String, String> {
        self.gate += 1;
        let gate = self.gate;
        if tool == "ask" {
            args["gate"] = json!(gate);
        }
        let resp = self
            .send("tools/call", json!({ "name": tool, "arguments": args }))
            .await;
        if tool == "ask" {
            self.handlers.gates.open(gate);
        }
        let v = resp
            .into_payload()
            .map_err(|e| format!("tools/call {tool}: {e}"))?;
        match (v["resultType"].as_str(), v["taskId"].as_str()) {
            (Some("task"), Some(id)) => Ok(id.to_owned()),
            _ => Err(format!("tools/call {tool} did not make a task: {v}")),
        }
    }

    pub(crate) async fn cancel(&mut self, task: &str) -> Result<(), String> {
        let resp = self.send("tasks/cancel", json!({ "taskId": task })).await;
        match resp.into_payload() {
            Ok(v) if v == json!({ "resultType": "complete" }) => Ok(()),
            other => Err(format!("tasks/cancel: {other:?}")),
        }
    }

    /// One script, checked and timed; `Err` says what went wrong.
    pub(crate) async fn round(&mut self, script: u64, rng: &mut u64) -> Result<(), String> {
        const NAMES: [&str; 5] = [
            "rounds",
            "cancel_input",
            "cancel_working",
            "cancel_race",
            "work",
        ];
        let started = Instant::now();
        let outcome = self.script(script, rng).await;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.stats.slowest_ms.fetch_max(ms, Ordering::Relaxed);
        outcome.map_err(|e| format!("{} after {ms} ms: {e}", NAMES[(script % 5) as usize]))
    }

    pub(crate) async fn script(&mut self, script: u64, rng: &mut u64) -> Result<(), String> {
        let mut roll = |n: u64| {
            // xorshift: cheap and deterministic per client.
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            *rng % n
        };
        let work_ms = 20 + roll(30);
        match script % 5 {
            0 => {
                let rounds = 1 + roll(3);
                let args = json!({ "rounds": rounds, "ms": work_ms });
                let task = self.start("ask", args).await?;
                let wake = self.waiters.register(&task);
                let mut answered = 0;
                let outcome = loop {
                    let body = match self.settle(&task, &wake).await {
                        Ok(body) => body,
                        Err(e) => break Err(e),
                    };
                    match body["status"].as_str() {
                        Some("input_required") => {
                            let keys: Vec<String> = body["inputRequests"]
                                .as_object()
                                .map(|m| m.keys().cloned().collect())
                                .unwrap_or_default();
                            let [key] = keys.as_slice() else {
                                break Err(format!("expected one input request: {body}"));
                            };
                            answered += 1;
                            let answers = json!({ key.clone(): { "action": "accept", "content": { "v": format!("a{answered}") } } });
                            self.stats.updates.fetch_add(1, Ordering::Relaxed);
                            let r = self
                                .send(
                                    "tasks/update",
                                    json!({ "taskId": task, "inputResponses": answers }),
                                )
                                .await;
                            if r.result_value() != Some(&json!({ "resultType": "complete" })) {
                                break Err(format!("tasks/update: {r:?}"));
                            }
                        }
                        Some("completed") => {
                            let expected = format!("rounds={rounds} last=a{rounds}");
                            break if body["result"]["content"][0]["text"] == expected.as_str()
                                && answered == rounds
                            {
                                self.stats.rounds.fetch_add(1, Ordering::Relaxed);
                                Ok(())
                            } else {
                                Err(format!("expected {expected} after {rounds} answers ({answered}): {body}"))
                            };
                        }
                        _ => break Err(format!("rounds: unexpected {body}")),
                    }
                };
                self.waiters.forget(&task);
                outcome
            }
            1 => {
                let task = self
                    .start("ask", json!({ "rounds": 1, "ms": work_ms }))
                    .await?;
                let wake = self.waiters.register(&task);
                let body = self.settle(&task, &wake).await;
                self.waiters.forget(&task);
                let body = body?;
                if body["status"] != "input_required" {
                    return Err(format!("cancel_input: not waiting for input: {body}"));
                }
                self.cancel(&task).await?;
                self.expect_cancelled(&task).await?;
                self.stats.cancel_input.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            2 => {
                let task = self.start("hang", json!({})).await?;
                tokio::time::sleep(Duration::from_millis(roll(50))).await;
                self.cancel(&task).await?;
                self.expect_cancelled(&task).await?;
                self.stats.cancel_working.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            3 => {
                // The handler is let go as the task is made, and answers
                // after 0-2 ms: the cancel races it.
                let task = self
                    .start("ask", json!({ "rounds": 1, "ms": roll(3) }))
                    .await?;
                self.cancel(&task).await?;
                self.expect_cancelled(&task).await?;
                self.stats.cancel_race.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            _ => {
                let fail = roll(4) == 0;
                let tool = if fail { "fail" } else { "work" };
                let task = self.start(tool, json!({ "ms": work_ms })).await?;
                let wake = self.waiters.register(&task);
                let body = self.settle(&task, &wake).await;
                self.waiters.forget(&task);
                let body = body?;
                let ok = if fail {
                    body["status"] == "failed" && body["error"]["code"] == -32050
                } else {
                    body["status"] == "completed"
                        && body["result"]["content"][0]["text"]
                            == format!("worked {work_ms}").as_str()
                };
                if !ok {
                    return Err(format!("{tool}: unexpected {body}"));
                }
                let counter = if fail {
                    &self.stats.fail
                } else {
                    &self.stats.work
                };
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// `cancelled` right after the cancel's ack, and still `cancelled` a
    /// little later (the handler's late answer must not overwrite it).
    pub(crate) async fn expect_cancelled(&mut self, task: &str) -> Result<(), String> {
        for pause in [0, 60] {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let body = self.get(task).await?;
            if body["status"] != "cancelled" {
                return Err(format!("not cancelled: {body}"));
            }
        }
        Ok(())
    }
}
