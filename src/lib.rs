//! Durable, asynchronous MCP tasks for any JSON-RPC [`tower`] service.
//!
//! [`TaskLayer`] wraps the user's MCP server (a
//! `Service<JsonRpcRequest, Response = JsonRpcResponse>`). It handles
//! `tools/call` and the `tasks/*` methods of the 2026-07-28 tasks extension
//! (`io.modelcontextprotocol/tasks`), keeps task state in a pluggable
//! [`TaskStore`], and lets everything else through untouched.
//!
//! The inner server never has to know about tasks: it answers `tools/call`
//! with a result, a JSON-RPC error, or an MRTR `input_required` result. When
//! a task waits for input and the client answers with `tasks/update`, the
//! layer calls the handler again from the top with the original arguments
//! and every answer so far, plus a [`TaskResumeContext`] in the request
//! extensions.
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//! use mcp_task_layer::{JsonRpcRequest, JsonRpcResponse, MemoryStore, TaskLayer, TaskPolicy};
//! use serde_json::json;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = service_fn(|req: JsonRpcRequest| async move {
//!     // The user's MCP server: here every call answers at once.
//!     Ok::<_, std::convert::Infallible>(JsonRpcResponse::result(
//!         req.id,
//!         json!({"resultType": "complete", "content": [{"type": "text", "text": "done"}]}),
//!     ))
//! });
//! let svc = ServiceBuilder::new()
//!     .layer(
//!         TaskLayer::new(MemoryStore::new())
//!             .with_tool_policy("report", TaskPolicy::Auto { within: Duration::from_millis(100) }),
//!     )
//!     .service(server);
//!
//! let call = JsonRpcRequest::new(1, "tools/call", json!({
//!     "name": "report",
//!     "arguments": {},
//!     "_meta": {
//!         "io.modelcontextprotocol/protocolVersion": "2026-07-28",
//!         "io.modelcontextprotocol/clientCapabilities": {
//!             "extensions": {"io.modelcontextprotocol/tasks": {}}
//!         }
//!     }
//! }));
//! let resp = svc.oneshot(call).await.unwrap();
//! // It finished within its budget, so it came back synchronously.
//! assert_eq!(resp.result_value().unwrap()["resultType"], "complete");
//! # }
//! ```
//!
//! # Feature flags
//!
//! | feature | what it adds |
//! |---|---|
//! | `axum` | a Streamable HTTP endpoint for any `Service<JsonRpcRequest>` |
//!
//! # Requests the layer handles
//!
//! See the README for the full table of methods, eras and error codes.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod client;
mod context;
mod future;
#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
mod http;
pub mod jsonrpc;
mod layer;
mod limits;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod metrics;
pub mod peer;
pub mod protocol;
mod runtime;
mod service;
pub mod store;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use self::http::{McpEndpoint, DEFAULT_BODY_LIMIT};
pub use client::{resolve_poll_interval, TaskPollDecision};
pub use context::{TaskId, TaskOwner, TaskResumeContext};
pub use future::ResponseFuture;
pub use jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse, JsonText, RequestId};
pub use layer::{Recovery, TaskLayer, TaskPolicy};
pub use limits::Limits;
pub use peer::{ClientPeer, Peer};
pub use protocol::{
    DetailedTask, InputRequest, InputRequests, InputResponses, Task, TaskMetadata, TaskStatus,
};
pub use service::TaskService;
pub use store::{MemoryStore, TaskStore};
pub use tokio_util::sync::CancellationToken;

/// A task's status changed. Sent on [`TaskLayer::subscribe`] after every
/// successful write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskEvent {
    /// The task.
    pub task_id: String,
    /// Its status after the write.
    pub status: TaskStatus,
    /// The record version written.
    pub version: u64,
}
