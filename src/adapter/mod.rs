//! Adapters that turn servers written with other MCP frameworks into the
//! inner `Service<JsonRpcRequest>` of a [`TaskLayer`](crate::TaskLayer).

#[cfg(feature = "rmcp")]
pub(crate) mod rmcp;
