//! [`InputHandler`]: how a [`TaskClient`](super::TaskClient) answers the
//! server's input requests, in both eras.

use std::sync::Arc;

use serde_json::Value;

use crate::jsonrpc::JsonRpcError;
use crate::peer::ClientPeer;
use crate::protocol::InputRequest;
use crate::store::BoxFuture;

/// Answers the server's input requests (elicitation, sampling, roots):
/// given one request, the result object to send back (an `ElicitResult`,
/// a `CreateMessageResult`, a `ListRootsResult`), or an error.
pub trait InputHandler: Send + Sync + 'static {
    /// Answer one request.
    fn answer(&self, request: InputRequest) -> BoxFuture<'static, Result<Value, JsonRpcError>>;
}

impl<F, Fut> InputHandler for F
where
    F: Fn(InputRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, JsonRpcError>> + Send + 'static,
{
    fn answer(&self, request: InputRequest) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        Box::pin(self(request))
    }
}

/// The input handler as a [`ClientPeer`], for the 2025-11-25 `tasks/result`
/// stream.
pub(super) struct HandlerPeer(pub(super) Arc<dyn InputHandler>);

impl ClientPeer for HandlerPeer {
    fn request(
        &self,
        method: String,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, JsonRpcError>> {
        let params = match params {
            Value::Object(m) => Some(m),
            _ => None,
        };
        self.0.answer(InputRequest { method, params })
    }

    fn notify(&self, _method: String, _params: Value) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}
