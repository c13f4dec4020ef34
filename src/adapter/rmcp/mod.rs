//! [`RmcpService`]: an rmcp `ServerHandler` (the official Rust MCP SDK) as
//! the inner service of a [`TaskLayer`](crate::TaskLayer).
//!
//! - `convert`: `JsonRpcRequest` → rmcp's `ClientRequest`, and its answer back;
//! - `peer`: the rmcp `Peer` a handler sees, with the protocol version it
//!   must see and, when the transport gave one, a way to the client;
//! - `service`: the `tower::Service` that calls the handler.

mod convert;
mod peer;
mod service;

pub use service::RmcpService;
