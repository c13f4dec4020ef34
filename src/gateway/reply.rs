//! The gateway's own answers, shaped for the era the client speaks:
//! `initialize` (2025-11-25) and `server/discover` (2026-07-28) from what
//! the upstream said of itself, the upstream's tools, and `resultType` on
//! every 2026-07-28 result.

use serde_json::{json, Value};

use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest};
use crate::protocol::{META_PROTOCOL_VERSION, PROTOCOL_2025_11_25, PROTOCOL_2026_07_28};
use crate::upstream::link::ResultText;
use crate::upstream::session::{ServerInfo, UPSTREAM_VERSIONS};

/// The versions the gateway serves its clients.
const SERVED: [&str; 2] = [PROTOCOL_2026_07_28, PROTOCOL_2025_11_25];

/// `-32022` for a 2026-07-28-style request in a version the gateway does
/// not serve (the layer checks tool calls and task methods itself).
pub(crate) fn check_version(req: &JsonRpcRequest) -> Result<(), JsonRpcError> {
    let requested = match req.protocol_version() {
        Some(v) if SERVED.contains(&v) => return Ok(()),
        Some(v) => v.to_owned(),
        // No version that is a string: one of another type is refused too.
        // Params whose text has neither the key's last word nor an escape
        // (a key written with escapes has a `\`) hold no such key: the
        // common 2025-era request builds no tree for this.
        None if req
            .params
            .as_ref()
            .and_then(|p| p.text())
            .is_some_and(|t| !t.contains("protocolVersion") && !t.contains('\\')) =>
        {
            return Ok(())
        }
        None => match req.meta().and_then(|m| m.get(META_PROTOCOL_VERSION)) {
            Some(other) => other.to_string(),
            None => return Ok(()),
        },
    };
    Err(JsonRpcError::new(
        code::UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
    )
    .with_data(json!({ "supported": SERVED, "requested": requested })))
}

/// The upstream's capabilities as the gateway offers them: what it serves
/// (tools, resources, prompts, completions, logging), without its own task
/// support (the layer adds the gateway's).
fn capabilities(info: &ServerInfo) -> Value {
    let mut caps = info.capabilities.clone();
    if let Some(c) = caps.as_object_mut() {
        c.remove("tasks");
        c.remove("experimental");
    } else {
        caps = json!({});
    }
    caps.as_object_mut()
        .map(|c| c.entry("tools").or_insert_with(|| json!({})));
    caps
}

/// `initialize` of a 2025-era client: the version it asked for when the
/// gateway speaks it, else the newest.
pub(crate) fn initialize(req: &JsonRpcRequest, info: &ServerInfo) -> Value {
    let asked = req
        .params_object()
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str)
        .filter(|v| UPSTREAM_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_2025_11_25);
    let mut result = json!({
        "protocolVersion": asked,
        "capabilities": capabilities(info),
        "serverInfo": info.server_info,
    });
    if let Some(instructions) = &info.instructions {
        result["instructions"] = instructions.clone();
    }
    result
}

/// `server/discover` of a 2026-07-28 client.
pub(crate) fn discover(info: &ServerInfo) -> Value {
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": SERVED,
        "capabilities": capabilities(info),
        // The upstream may change what it offers at any time: a client
        // keeps this answer for no one else and re-reads it at will.
        "cacheScope": "private",
        "ttlMs": 0,
        "_meta": { "io.modelcontextprotocol/serverInfo": info.server_info }
    });
    if let Some(instructions) = &info.instructions {
        result["instructions"] = instructions.clone();
    }
    result
}

/// `tools/list`: the upstream's tools (the layer adds each one's
/// `execution.taskSupport` for 2025-era clients).
pub(crate) fn tools(tools: &[Value]) -> Value {
    json!({ "tools": tools })
}

/// A result as the client's era has it: 2026-07-28 results say
/// `resultType` (`complete` unless it is already there).
pub(crate) fn shaped(mut result: Value, modern: bool) -> Value {
    if modern {
        if let Some(r) = result.as_object_mut() {
            r.entry("resultType").or_insert_with(|| json!("complete"));
        }
    }
    result
}

/// [`shaped`] for a result kept as text: `resultType` is written in front
/// of the object's members when the client speaks 2026-07-28 and the text
/// holds no `resultType` anywhere; otherwise (a member of that name
/// somewhere, or not an object) the value, to be shaped as a `Value`.
pub(crate) fn shaped_raw(raw: ResultText, modern: bool) -> Result<ResultText, Value> {
    let text = raw.get();
    if !modern {
        return Ok(raw);
    }
    let body = text.trim_start();
    if body.starts_with('{') && !text.contains("\"resultType\"") {
        let rest = body[1..].trim_start();
        let spliced = if rest.starts_with('}') {
            "{\"resultType\":\"complete\"}".to_owned()
        } else {
            format!("{{\"resultType\":\"complete\",{rest}")
        };
        // A member put first into an object that was valid: valid.
        return Ok(ResultText::trusted(spliced));
    }
    Err(serde_json::from_str(text).unwrap_or(Value::Null))
}

/// A fresh key for a parked call: 128 random bits, so that a client cannot
/// guess another's (and parked calls are bound to their owner besides).
pub(crate) fn state_key() -> Result<String, JsonRpcError> {
    crate::runtime::ids::new_task_id()
        .map(|id| format!("mcp-tasks-gateway:{id}"))
        .map_err(|_| JsonRpcError::internal("the OS random source failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> ResultText {
        ResultText::trusted(text.to_owned())
    }

    #[test]
    fn a_kept_result_gains_result_type_for_2026_clients_only() {
        let r = |t: &str, m| shaped_raw(raw(t), m).map(|r| r.get().to_owned());
        assert_eq!(
            r(r#"{"content":[]}"#, false),
            Ok(r#"{"content":[]}"#.to_owned())
        );
        assert_eq!(
            r(r#" { "content":[]}"#, true),
            Ok(r#"{"resultType":"complete","content":[]}"#.to_owned())
        );
        assert_eq!(r("{}", true), Ok(r#"{"resultType":"complete"}"#.to_owned()));
        // A member of that name anywhere: shaped as a value, which keeps
        // the upstream's own.
        let v = shaped_raw(raw(r#"{"resultType":"x"}"#), true).unwrap_err();
        assert_eq!(shaped(v, true), json!({ "resultType": "x" }));
        assert!(shaped_raw(raw("[1]"), true).is_err());
    }

    #[test]
    fn a_version_that_is_no_string_is_refused_however_its_key_is_written() {
        let req = |params: &str| {
            JsonRpcRequest::from_slice(
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{params}}}"#)
                    .as_bytes(),
            )
            .unwrap()
        };
        let code = |params: &str| check_version(&req(params)).map_err(|e| e.code);
        assert_eq!(code(r#"{"_meta":{"progressToken":1}}"#), Ok(()));
        assert_eq!(code(r#"{"x":"a\\"}"#), Ok(()));
        let refused = Err(code::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(
            code(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}"#),
            refused
        );
        assert_eq!(
            code(r#"{"_meta":{"io.modelcontextprotocol\/protocol\u0056ersion":5}}"#),
            refused
        );
        assert_eq!(
            code(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}"#),
            refused
        );
    }
}
