//! The rmcp [`Peer`] a handler gets in its `RequestContext`.
//!
//! rmcp reads two things from it: the protocol version of the session (its
//! peer info), which decides whether an MRTR `InputRequiredResult` may be
//! returned and whether the handler may send requests to the client; and
//! the channel to the client. rmcp makes a `Peer` only while it serves a
//! transport, so the adapter serves one per purpose:
//!
//! - a closed transport, once per protocol version: the loop ends at once,
//!   and a request through such a peer fails with rmcp's "transport
//!   closed" (a call with no way to the client, a task's run);
//! - one transport per call, only when the transport in front of the layer
//!   gave the call a [`Peer`](crate::Peer) (SSE, stdio): what the handler
//!   sends goes to the client through it, and the client's answers come
//!   back to the handler.

use std::borrow::Cow;
use std::future::Future;
use std::io;

use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientResult, Implementation,
    InitializeRequestParams, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::{serve_directly, RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::mpsc;

use super::convert::error_data;

/// What the handler's peer claims the client negotiated.
fn peer_info(version: ProtocolVersion) -> InitializeRequestParams {
    InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
        .with_protocol_version(version)
}

/// The do-nothing server of the loops below: their transports never deliver
/// a client request, so it is never called.
#[derive(Clone, Copy, Debug, Default)]
struct Relay;

impl ServerHandler for Relay {}

/// A peer that reaches no client, for a session of `version`.
pub(super) fn closed(version: ProtocolVersion) -> Peer<RoleServer> {
    // Dropping the RunningService stops its loop (which has already ended:
    // the transport yields nothing); the peer stays, closed.
    let running: RunningService<RoleServer, Relay> =
        serve_directly(Relay, Closed, Some(peer_info(version)));
    running.peer().clone()
}

/// A transport with nothing to read: rmcp's loop ends as it starts.
struct Closed;

impl Transport<RoleServer> for Closed {
    type Error = io::Error;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("mcp-task-layer (no client)")
    }

    fn send(
        &mut self,
        _item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        std::future::ready(Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "this call has no way to the client",
        )))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        std::future::ready(None)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), io::Error>> + Send {
        std::future::ready(Ok(()))
    }
}

/// A peer whose messages reach the client through `client` while the
/// returned service runs; drop the service when the call ends.
pub(super) fn forwarding(
    version: ProtocolVersion,
    client: crate::Peer,
) -> RunningService<RoleServer, impl ServerHandler> {
    let (answers, inbox) = mpsc::unbounded_channel();
    serve_directly(
        Relay,
        Forward {
            client,
            answers,
            inbox,
        },
        Some(peer_info(version)),
    )
}

/// The transport of [`forwarding`]: requests and notifications the handler
/// sends go to the client's [`Peer`](crate::Peer); the client's answers
/// come back through `inbox`.
struct Forward {
    client: crate::Peer,
    answers: mpsc::UnboundedSender<RxJsonRpcMessage<RoleServer>>,
    inbox: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleServer>>,
}

/// A message's `method` and `params`, as rmcp serializes it.
fn method_and_params(message: &impl serde::Serialize) -> Option<(String, Value)> {
    let Ok(Value::Object(mut fields)) = serde_json::to_value(message) else {
        return None;
    };
    let Some(Value::String(method)) = fields.remove("method") else {
        return None;
    };
    let params = fields
        .remove("params")
        .unwrap_or_else(|| Value::Object(Default::default()));
    Some((method, params))
}

impl Transport<RoleServer> for Forward {
    type Error = io::Error;

    fn name() -> Cow<'static, str> {
        Cow::Borrowed("mcp-task-layer (client peer)")
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let client = self.client.clone();
        let answers = self.answers.clone();
        async move {
            match item {
                ServerJsonRpcMessage::Request(request) => {
                    let id = request.id;
                    let answer = match method_and_params(&request.request) {
                        None => Err(rmcp::ErrorData::internal_error(
                            "the request could not be serialized",
                            None,
                        )),
                        Some((method, params)) => match client.request(method, params).await {
                            Ok(result) => {
                                serde_json::from_value::<ClientResult>(result).map_err(|_| {
                                    rmcp::ErrorData::internal_error(
                                        "the client's answer is not a valid result",
                                        None,
                                    )
                                })
                            }
                            Err(e) => Err(error_data(e)),
                        },
                    };
                    let message = match answer {
                        Ok(result) => ClientJsonRpcMessage::response(result, id),
                        Err(error) => ClientJsonRpcMessage::error(error, Some(id)),
                    };
                    // The loop has ended when nobody reads: nothing to do.
                    let _ = answers.send(message);
                }
                ServerJsonRpcMessage::Notification(notification) => {
                    if let Some((method, params)) = method_and_params(&notification.notification) {
                        client.notify(method, params).await;
                    }
                }
                // Answers to client requests: this transport delivers none.
                ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_) => {}
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        // Never `None` while `self.answers` lives: the loop runs until the
        // call ends and drops its RunningService.
        self.inbox.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), io::Error>> + Send {
        std::future::ready(Ok(()))
    }
}
