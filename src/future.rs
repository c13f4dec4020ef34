//! The response future of [`TaskService`](crate::TaskService).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use serde_json::Value;

use crate::advertise::{apply, Edit};
use crate::jsonrpc::JsonRpcResponse;
use crate::store::BoxFuture;

pin_project! {
    /// Response future of [`TaskService`](crate::TaskService): the inner
    /// service's own future, boxed, for requests the layer lets through, a
    /// boxed future for the requests it handles, or the answer itself.
    ///
    /// The inner future is boxed so that this one stays small: a server's
    /// future (the example server's: 720 bytes) inline made every request's
    /// future that large, `tasks/get`'s too, and it was copied whole several
    /// times a request (BENCHMARKS.md, issue 32's eighth pass).
    pub struct ResponseFuture<F, E> {
        #[pin]
        kind: Kind<F, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, E> {
        Passthrough { fut: Pin<Box<F>> },
        Capabilities { fut: Pin<Box<F>>, edit: Edit },
        Intercepted { fut: BoxFuture<'static, Result<JsonRpcResponse, E>> },
        Ready { resp: Option<JsonRpcResponse> },
    }
}

impl<F, E> ResponseFuture<F, E> {
    pub(crate) fn passthrough(fut: F) -> Self {
        ResponseFuture {
            kind: Kind::Passthrough { fut: Box::pin(fut) },
        }
    }

    pub(crate) fn capabilities(fut: F, edit: Edit) -> Self {
        ResponseFuture {
            kind: Kind::Capabilities {
                fut: Box::pin(fut),
                edit,
            },
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
            kind: Kind::Ready { resp: Some(resp) },
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
            KindProj::Passthrough { fut } => fut.as_mut().poll(cx),
            KindProj::Capabilities { fut, edit } => {
                let mut resp = ready!(fut.as_mut().poll(cx))?;
                if let Ok(Value::Object(result)) = resp.payload_mut() {
                    apply(edit, result);
                }
                Poll::Ready(Ok(resp))
            }
            KindProj::Intercepted { fut } => fut.as_mut().poll(cx),
            // Polled again after `Ready`: a contract breach by the caller.
            KindProj::Ready { resp } => match resp.take() {
                Some(resp) => Poll::Ready(Ok(resp)),
                None => Poll::Pending,
            },
        }
    }
}
