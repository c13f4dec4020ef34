//! The response future of [`TaskService`](crate::TaskService).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use serde_json::{Map, Value};

use crate::jsonrpc::JsonRpcResponse;
use crate::layer::TaskPolicy;
use crate::protocol::TASKS_EXTENSION;
use crate::runtime::Shared;
use crate::store::BoxFuture;
use std::sync::Arc;

pin_project! {
    /// Response future of [`TaskService`](crate::TaskService): the inner
    /// service's own future for requests the layer lets through (no
    /// allocation), or a boxed future for the requests it handles.
    pub struct ResponseFuture<F, E> {
        #[pin]
        kind: Kind<F, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, E> {
        Passthrough { #[pin] fut: F },
        Capabilities { #[pin] fut: F, edit: Edit },
        Intercepted { fut: BoxFuture<'static, Result<JsonRpcResponse, E>> },
        Ready { resp: Option<Box<JsonRpcResponse>> },
    }
}

/// How a passed-through result is amended.
#[derive(Clone)]
pub(crate) enum Edit {
    /// `server/discover`: advertise the 2026-07-28 extension.
    Discover,
    /// 2025-11-25 `initialize`: advertise `capabilities.tasks`.
    Initialize,
    /// 2025-11-25 `tools/list`: each tool's `execution.taskSupport`.
    ToolsList(Arc<Shared>),
}

impl<F, E> ResponseFuture<F, E> {
    pub(crate) fn passthrough(fut: F) -> Self {
        ResponseFuture {
            kind: Kind::Passthrough { fut },
        }
    }

    pub(crate) fn capabilities(fut: F, edit: Edit) -> Self {
        ResponseFuture {
            kind: Kind::Capabilities { fut, edit },
        }
    }

    pub(crate) fn intercepted(fut: BoxFuture<'static, Result<JsonRpcResponse, E>>) -> Self {
        ResponseFuture {
            kind: Kind::Intercepted { fut },
        }
    }

    /// An answer the layer gave in `call` itself.
    pub(crate) fn ready(resp: JsonRpcResponse) -> Self {
        ResponseFuture {
            kind: Kind::Ready {
                resp: Some(Box::new(resp)),
            },
        }
    }
}

impl<F, E> fmt::Debug for ResponseFuture<F, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Passthrough { .. } => "Passthrough",
            Kind::Capabilities { .. } => "Capabilities",
            Kind::Intercepted { .. } => "Intercepted",
            Kind::Ready { .. } => "Ready",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish()
    }
}

impl<F, E> Future for ResponseFuture<F, E>
where
    F: Future<Output = Result<JsonRpcResponse, E>>,
{
    type Output = Result<JsonRpcResponse, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Passthrough { fut } => fut.poll(cx),
            KindProj::Capabilities { fut, edit } => {
                let mut resp = ready!(fut.poll(cx))?;
                if let Ok(Value::Object(result)) = resp.payload_mut() {
                    apply(edit, result);
                }
                Poll::Ready(Ok(resp))
            }
            KindProj::Intercepted { fut } => fut.as_mut().poll(cx),
            // Polled again after `Ready`: a contract breach by the caller.
            KindProj::Ready { resp } => match resp.take() {
                Some(resp) => Poll::Ready(Ok(*resp)),
                None => Poll::Pending,
            },
        }
    }
}

fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object just above"),
    }
}

fn apply(edit: &Edit, result: &mut Map<String, Value>) {
    match edit {
        Edit::Initialize => {
            let caps = object(result, "capabilities");
            caps.insert(
                "tasks".into(),
                serde_json::json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
            );
        }
        Edit::ToolsList(shared) => {
            if let Some(Value::Array(tools)) = result.get_mut("tools") {
                for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
                    let support = match shared.cfg.policy(name) {
                        TaskPolicy::Sync => "forbidden",
                        TaskPolicy::Auto { .. } => "optional",
                        TaskPolicy::Task => "required",
                    };
                    object(tool, "execution").insert("taskSupport".into(), support.into());
                }
            }
        }
        Edit::Discover => {
            let caps = object(result, "capabilities");
            // A 2026-07-28 server must not advertise the legacy capability (R9).
            caps.remove("tasks");
            object(caps, "extensions").insert(TASKS_EXTENSION.into(), Value::Object(Map::new()));
        }
    }
}
