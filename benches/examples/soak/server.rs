//! The server under load: a task layer over handlers whose `ask`, `hang`,
//! `work` and `fail` tools the scripts call.

use super::*;

/// Gates that hold an `ask` handler's first invocation until its client
/// has the task id, so that the call becomes a task however late the
/// runtime polls it (a handler that answered within the task window would
/// be plain MRTR).
#[derive(Default)]
pub(crate) struct Gates(Mutex<HashMap<u64, Arc<Notify>>>);

impl Gates {
    pub(crate) fn gate(&self, id: u64) -> Arc<Notify> {
        Arc::clone(self.0.lock().unwrap().entry(id).or_default())
    }
    pub(crate) fn open(&self, id: u64) {
        self.gate(id).notify_one();
    }
    pub(crate) async fn pass(&self, id: u64) {
        self.gate(id).notified().await;
        self.0.lock().unwrap().remove(&id);
    }
}

#[derive(Default)]
pub(crate) struct Handlers {
    pub(crate) gates: Gates,
    /// `hang` handlers started.
    pub(crate) hang_started: AtomicUsize,
    /// `hang` handlers that saw their cancellation token and returned.
    pub(crate) hang_stopped: AtomicUsize,
    /// `hang` handlers the layer aborted (dropped) after the cancel grace,
    /// before they were polled again.
    pub(crate) hang_aborted: Arc<AtomicUsize>,
}

/// Counts a handler dropped before it finished.
pub(crate) struct Aborted(Option<Arc<AtomicUsize>>);

impl Drop for Aborted {
    fn drop(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) fn text(s: String) -> Value {
    json!({ "resultType": "complete", "content": [{ "type": "text", "text": s }] })
}

/// The MCP server behind the layer. `arguments.ms` is how long a call
/// works (tokio time) before it answers.
pub(crate) async fn server(
    h: Arc<Handlers>,
    req: JsonRpcRequest,
) -> Result<JsonRpcResponse, Infallible> {
    let id = req.id.clone();
    let params = req
        .params
        .clone()
        .map_or(Value::Null, mcp_task_layer::Params::into_value);
    let tool = params["name"].as_str().unwrap_or_default();
    let ms = params["arguments"]["ms"].as_u64().unwrap_or(1);
    let token = req
        .extensions
        .get::<CancellationToken>()
        .cloned()
        .unwrap_or_default();
    let result = match tool {
        // Asks `v` `rounds` times (a fresh task key each round), then
        // answers with the number of rounds and the last answer.
        "ask" => {
            if params["requestState"].is_null() {
                if let Some(gate) = params["arguments"]["gate"].as_u64() {
                    h.gates.pass(gate).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let rounds = params["arguments"]["rounds"].as_u64().unwrap_or(1);
            let asked: u64 = params["requestState"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if asked < rounds {
                json!({
                    "resultType": "input_required",
                    "inputRequests": { "v": { "method": "elicitation/create", "params": {
                        "mode": "form",
                        "message": format!("round {}", asked + 1),
                        "requestedSchema": { "type": "object", "properties": { "v": { "type": "string" } } }
                    } } },
                    "requestState": (asked + 1).to_string(),
                })
            } else {
                let last = params["inputResponses"]["v"]["content"]["v"]
                    .as_str()
                    .unwrap_or("?");
                text(format!("rounds={asked} last={last}"))
            }
        }
        "hang" => {
            h.hang_started.fetch_add(1, Ordering::Relaxed);
            let mut guard = Aborted(Some(Arc::clone(&h.hang_aborted)));
            token.cancelled().await;
            guard.0 = None;
            h.hang_stopped.fetch_add(1, Ordering::Relaxed);
            text("stopped".into())
        }
        "work" => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            text(format!("worked {ms}"))
        }
        "fail" => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(JsonRpcResponse::error(
                id,
                JsonRpcError::new(-32050, "the tool failed"),
            ));
        }
        other => {
            return Ok(JsonRpcResponse::error(
                id,
                JsonRpcError::invalid_params(format!("unknown tool {other}")),
            ))
        }
    };
    Ok(JsonRpcResponse::result(id, result))
}
