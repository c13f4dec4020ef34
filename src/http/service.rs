//! The endpoint as a plain tower service of HTTP requests, without a
//! router: what [`McpEndpoint::into_service`](super::McpEndpoint::into_service)
//! returns and what [`into_router`](super::McpEndpoint::into_router) routes
//! its path to.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::ALLOW;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::BoxError;
use tower_service::Service;

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
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if self
            .path
            .as_deref()
            .is_some_and(|path| request.uri().path() != path)
        {
            return Box::pin(std::future::ready(Ok(empty(StatusCode::NOT_FOUND))));
        }
        if request.method() != Method::POST {
            let mut response = empty(StatusCode::METHOD_NOT_ALLOWED);
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return Box::pin(std::future::ready(Ok(response)));
        }
        let state = Arc::clone(&self.state);
        Box::pin(handle(state, request))
    }
}

fn empty(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}
