//! The MCP handshake with the upstream, as a client: `initialize` in the
//! newest version both sides speak, `notifications/initialized`, and the
//! upstream's tools; a connection whose handshake is given up is closed.

use std::sync::Arc;

use serde_json::{json, Value};

use super::link::Link;
use crate::jsonrpc::JsonRpcError;

/// The versions the gateway speaks to an upstream, newest first: the
/// `initialize` handshake of the 2025 SDKs (none of them answers the
/// stateless 2026-07-28 wire with mid-call requests).
pub(crate) const UPSTREAM_VERSIONS: [&str; 4] =
    ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Pages of `tools/list` read before giving up on an upstream that keeps
/// handing out cursors.
const MAX_TOOL_PAGES: usize = 100;

/// What the upstream said of itself in `initialize`.
#[derive(Clone, Debug)]
pub(crate) struct ServerInfo {
    /// The version the upstream chose.
    pub(crate) protocol_version: String,
    /// Its capabilities (`tools`, `resources`, `prompts`, ...).
    pub(crate) capabilities: Value,
    /// Its `serverInfo` (name, version).
    pub(crate) server_info: Value,
    /// Its `instructions`, if any.
    pub(crate) instructions: Option<Value>,
}

/// `initialize` and `notifications/initialized` on a new link.
pub(crate) async fn initialize(link: &Link) -> Result<ServerInfo, String> {
    let params = json!({
        "protocolVersion": UPSTREAM_VERSIONS[0],
        // What the gateway can forward to its clients: their answers come
        // back as the task's input (`tasks/update`) or on the client's
        // own stream.
        "capabilities": {
            "elicitation": {},
            "sampling": {},
            "roots": { "listChanged": false }
        },
        "clientInfo": { "name": "mcp-tasks-gateway", "version": env!("CARGO_PKG_VERSION") }
    });
    let result = link.request("initialize", params).await.map_err(|e| {
        format!(
            "the upstream refused initialize: {} ({})",
            e.message, e.code
        )
    })?;
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !UPSTREAM_VERSIONS.contains(&version.as_str()) {
        return Err(format!(
            "the upstream answered initialize with protocol version {version:?}; the gateway speaks {}",
            UPSTREAM_VERSIONS.join(", ")
        ));
    }
    link.notify("notifications/initialized", json!({}));
    Ok(ServerInfo {
        protocol_version: version,
        capabilities: result
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        server_info: result
            .get("serverInfo")
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: result.get("instructions").cloned(),
    })
}

/// Every tool the upstream lists, all pages, each without an `execution`
/// member: the gateway runs the tasks, so the upstream's own task support
/// is not what its clients get.
pub(crate) async fn list_tools(link: &Link) -> Result<Vec<Value>, JsonRpcError> {
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let mut page = link.request("tools/list", params).await?;
        if let Some(Value::Array(list)) = page.get_mut("tools").map(Value::take) {
            for mut tool in list {
                if let Some(t) = tool.as_object_mut() {
                    t.remove("execution");
                    tools.push(tool);
                }
            }
        }
        match page.get("nextCursor") {
            Some(c) if !c.is_null() => cursor = Some(c.clone()),
            _ => return Ok(tools),
        }
    }
    Err(JsonRpcError::internal(format!(
        "the upstream's tools/list went on past {MAX_TOOL_PAGES} pages"
    )))
}

/// A connection whose handshake is under way, closed if the handshake is
/// given up.
pub(super) struct Opening(pub(super) Option<Arc<Link>>);

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(link) = self.0.take() {
            link.close("the gateway stopped before the upstream's handshake ended".to_owned());
        }
    }
}
