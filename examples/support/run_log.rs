//! `--run-log PATH`: a line per handler run (`TOOL TASK_ID UNIX_MS`) and
//! per handler stopped by its cancellation (`cancelled TASK_ID UNIX_MS`),
//! appended to a file, so that tests can count runs across the processes
//! of a worker fleet, and time the stops.

use std::fs::File;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, TaskHandle, TaskId};
use tower::Service;

/// The inner MCP server, its `tools/call` runs logged.
#[derive(Clone, Debug)]
pub(crate) struct RunLog<S> {
    inner: S,
    file: Arc<Mutex<File>>,
}

impl<S> RunLog<S> {
    /// Append to the file at `path` (made if missing).
    pub(crate) fn open(inner: S, path: &str) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(RunLog {
            inner,
            file: Arc::new(Mutex::new(file)),
        })
    }
}

fn write(file: &Mutex<File>, what: &str, task: &str) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    if let Ok(mut file) = file.lock() {
        let _ = writeln!(file, "{what} {task} {ms}");
    }
}

/// The task a run is of: the layer's `TaskId` (resumes, worker runs) or the
/// handle's id once bound; `-` for a first inline run, whose task is not
/// written yet.
fn task_of(req: &JsonRpcRequest) -> String {
    match req.extensions.get::<TaskId>() {
        Some(id) => id.0.clone(),
        None => req
            .extensions
            .get::<TaskHandle>()
            .and_then(TaskHandle::id)
            .unwrap_or("-")
            .to_owned(),
    }
}

impl<S> Service<JsonRpcRequest> for RunLog<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse>,
    S::Future: Send + 'static,
{
    type Response = JsonRpcResponse;
    type Error = S::Error;
    type Future = mcp_task_layer::store::BoxFuture<'static, Result<JsonRpcResponse, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: JsonRpcRequest) -> Self::Future {
        let tool = (req.method == "tools/call")
            .then(|| {
                req.params_object()?
                    .get("name")?
                    .as_str()
                    .map(str::to_owned)
            })
            .flatten();
        let task = task_of(&req);
        if let Some(tool) = &tool {
            write(&self.file, tool, &task);
        }
        let fut = self.inner.call(req);
        let file = Arc::clone(&self.file);
        Box::pin(async move {
            let out = fut.await;
            let cancelled = out.as_ref().is_ok_and(|resp| {
                resp.error_value()
                    .is_some_and(|e| e.message.ends_with(": cancelled"))
            });
            if tool.is_some() && cancelled {
                write(&file, "cancelled", &task);
            }
            out
        })
    }
}
