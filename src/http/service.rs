//! The endpoint as a plain tower service of HTTP requests, without a
//! router: what [`McpEndpoint::into_service`](super::McpEndpoint::into_service)
//! returns and what [`into_router`](super::McpEndpoint::into_router) routes
//! its path to.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::extract::Request;
use axum::http::header::ALLOW;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::BoxError;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::answer::{Answer, Response};
use super::handle::{handle, EndpointState};
use crate::jsonrpc::{JsonRpcRequest, JsonRpcResponse};
use crate::store::BoxFuture;

/// A [`McpEndpoint`](super::McpEndpoint) as a
/// `tower::Service<http::Request<axum::body::Body>>`, made by
/// [`McpEndpoint::into_service`](super::McpEndpoint::into_service).
///
/// It answers `POST` to its path as the endpoint does, any other method
/// there with HTTP 405 (`Allow: POST`), and any other path with HTTP 404,
/// without a router in between. Serve it with
/// [`serve`](crate::serve)`(listener, service)` (with deadlines for slow
/// clients), or `axum::serve(listener, axum::ServiceExt::into_make_service(service))`,
/// or through hyper directly.
#[must_use]
pub struct McpService<S> {
    state: Arc<EndpointState<S>>,
    /// `None` when a router chose the path already.
    path: Option<Arc<str>>,
}

impl<S> McpService<S> {
    pub(super) fn new(state: EndpointState<S>, path: Option<&str>) -> Self {
        McpService {
            state: Arc::new(state),
            path: path.map(Arc::from),
        }
    }
}

impl<S> Clone for McpService<S> {
    fn clone(&self) -> Self {
        McpService {
            state: Arc::clone(&self.state),
            path: self.path.clone(),
        }
    }
}

impl<S> fmt::Debug for McpService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpService")
            .field("service", &std::any::type_name::<S>())
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<S> Service<Request> for McpService<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<axum::response::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (parts, body) = request.into_parts();
        if let Some(refused) = self.refusal(&parts) {
            let refused = refused.response().map(Answer::into_body);
            return Box::pin(std::future::ready(Ok(refused)));
        }
        let handled = handle(Arc::clone(&self.state), parts, body);
        Box::pin(async move {
            let Ok(response) = handled.await;
            Ok(response.map(Answer::into_body))
        })
    }
}

impl<S> McpService<S>
where
    S: Service<JsonRpcRequest, Response = JsonRpcResponse> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
    /// One request as hyper hands it over, its body read as it is (not
    /// boxed into axum's `Body`), without `oneshot`: what
    /// [`McpEndpoint::serve`](super::McpEndpoint::serve)'s connections
    /// call. It answers exactly as [`Service::call`] does. The request's
    /// future is boxed: held inline by hyper's dispatcher, its ~1 KB were
    /// copied five times a request, which costs more than one allocation
    /// from the allocator's per-thread cache.
    pub(super) fn serve_hyper(
        &self,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> Served<impl Future<Output = Result<Response, Infallible>> + Send> {
        let (parts, body) = request.into_parts();
        match self.refusal(&parts) {
            Some(refusal) => Served::Refused { refusal },
            None => Served::Handled {
                future: Box::pin(handle(Arc::clone(&self.state), parts, body)),
            },
        }
    }
}

/// Why a request is refused before the endpoint reads it.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// Another path: 404.
    NotFound,
    /// Another method than `POST`: 405.
    NotAllowed,
}

impl Refusal {
    fn response(self) -> Response {
        match self {
            Refusal::NotFound => empty(StatusCode::NOT_FOUND),
            Refusal::NotAllowed => {
                let mut response = empty(StatusCode::METHOD_NOT_ALLOWED);
                response
                    .headers_mut()
                    .insert(ALLOW, HeaderValue::from_static("POST"));
                response
            }
        }
    }
}

impl<S> McpService<S> {
    /// Whether a request is for another path (404) or with another method
    /// than `POST` (405).
    fn refusal(&self, parts: &Parts) -> Option<Refusal> {
        if self
            .path
            .as_deref()
            .is_some_and(|path| parts.uri.path() != path)
        {
            return Some(Refusal::NotFound);
        }
        if parts.method != Method::POST {
            return Some(Refusal::NotAllowed);
        }
        None
    }
}

pin_project! {
    /// The future of [`McpService::serve_hyper`]: a request refused by its
    /// path or method (its answer made when polled: the future stays small,
    /// and hyper moves it several times a request), or handled.
    #[project = ServedProj]
    pub(super) enum Served<F> {
        Refused { refusal: Refusal },
        Handled { #[pin] future: F },
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Served<F> {
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        match self.project() {
            ServedProj::Refused { refusal } => Poll::Ready(refusal.response()),
            ServedProj::Handled { future } => match ready!(future.poll(cx)) {
                Ok(response) => Poll::Ready(response),
                Err(never) => match never {},
            },
        }
    }
}

fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Answer::Whole(None));
    *response.status_mut() = status;
    response
}
