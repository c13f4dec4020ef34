//! The protocol's names that the message layer routes on: `_meta` keys,
//! the tasks extension and the two version strings. They live below both
//! `jsonrpc/` (which reads them while decoding) and `protocol.rs` (which
//! publishes them), so that neither imports the other in a circle.

/// Name of the 2026-07-28 tasks extension.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// `_meta` key of the per-request protocol version (2026-07-28).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the per-request client capabilities (2026-07-28).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key that ties a message to a task (2025-11-25).
pub const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The 2026-07-28 protocol version string.
pub const PROTOCOL_2026_07_28: &str = "2026-07-28";
/// The 2025-11-25 protocol version string.
pub const PROTOCOL_2025_11_25: &str = "2025-11-25";
