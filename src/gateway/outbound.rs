//! The request the upstream gets for a client's: the client's params as
//! they arrived, member by member (no tree of the arguments is built, and
//! their text is sent as the client wrote it), with `_meta` rewritten: the
//! 2026-07-28 keys and the client's `progressToken` out, the gateway's
//! token in. A tool call also drops the MRTR members (`requestState`,
//! `inputResponses`): the gateway answers those itself.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::events::TOKEN_PREFIX;
use crate::json::{write_json, write_json_str};
use crate::jsonrpc::{scan_members, JsonRpcError, JsonRpcRequest};
use crate::protocol::META_CLIENT_CAPABILITIES;

/// The members of a params object, their values as text (serde's read:
/// repeated keys, the last one counts).
#[derive(Deserialize)]
struct Members<'a>(#[serde(borrow)] BTreeMap<Cow<'a, str>, &'a RawValue>);

/// The members of the object `text`, read by hand (keys without escapes,
/// none repeated), or `None`: then serde reads them, as [`Members`].
fn plain_members(text: &str) -> Option<Vec<(Cow<'_, str>, &str)>> {
    let mut members: Vec<(Cow<'_, str>, &str)> = Vec::with_capacity(4);
    let mut repeated = false;
    scan_members(text, |key, value| {
        repeated |= members.iter().any(|(k, _)| k == key);
        members.push((Cow::Borrowed(key), value));
    })?;
    (!repeated).then_some(members)
}

/// What the client's `_meta` said that the gateway keeps for itself.
#[derive(Debug, Default)]
pub(crate) struct ClientMeta {
    /// The client's own `progressToken`.
    pub(crate) token: Option<Value>,
    /// The 2026-07-28 client's declared capabilities.
    pub(crate) caps: Option<Value>,
}

/// A client's params, ready to be sent upstream under any id.
#[derive(Debug)]
pub(crate) struct Outbound {
    /// `"key":value,` for each member kept, as the client wrote them.
    body: String,
    /// What is kept of the client's `_meta`.
    meta: Map<String, Value>,
    /// The client's `requestState`, when it sent one as a string.
    pub(crate) request_state: Option<String>,
}

impl Outbound {
    /// Of `req`'s params; `mrtr`: the MRTR members (`requestState`,
    /// `inputResponses`) are the gateway's, taken out (a tool call, or a
    /// 2026-07-28 client's forwarded request), not the upstream's.
    pub(crate) fn of(req: &JsonRpcRequest, mrtr: bool) -> Result<(Self, ClientMeta), JsonRpcError> {
        let owned;
        let text = match &req.params {
            None => "{}",
            Some(p) => match p.text() {
                Some(text) => text,
                None => {
                    owned = p.as_value().to_string();
                    &owned
                }
            },
        };
        let members = match plain_members(text) {
            Some(members) => members,
            None => {
                let Members(members) = serde_json::from_str(text).map_err(|e| {
                    JsonRpcError::invalid_params(format!("params must be an object: {e}"))
                })?;
                members.into_iter().map(|(k, v)| (k, v.get())).collect()
            }
        };
        let mut body = String::with_capacity(text.len() + 16);
        let mut meta = Map::new();
        let mut request_state = None;
        for (key, value) in members {
            match &*key {
                "_meta" => {
                    if let Ok(Value::Object(m)) = serde_json::from_str(value) {
                        meta = m;
                    }
                    continue;
                }
                "requestState" if mrtr => {
                    request_state = serde_json::from_str::<String>(value).ok();
                    continue;
                }
                "inputResponses" if mrtr => continue,
                _ => {}
            }
            write_json_str(&mut body, &key);
            body.push(':');
            body.push_str(value);
            body.push(',');
        }
        let caps = meta.get(META_CLIENT_CAPABILITIES).cloned();
        meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        let token = meta.remove("progressToken");
        Ok((
            Outbound {
                body,
                meta,
                request_state,
            },
            ClientMeta { token, caps },
        ))
    }

    /// The JSON-RPC request `id` for `method` with these params, the
    /// gateway's `progressToken` for `id` in its `_meta` when `progress`
    /// (the call's progress has somewhere to go): written into one buffer
    /// sized ahead.
    pub(crate) fn message(&self, id: u64, method: &str, progress: bool) -> String {
        let mut ids = itoa::Buffer::new();
        let id = ids.format(id);
        let mut out = String::with_capacity(self.body.len() + method.len() + 2 * id.len() + 96);
        out.push_str(r#"{"jsonrpc":"2.0","id":"#);
        out.push_str(id);
        out.push_str(r#","method":"#);
        write_json_str(&mut out, method);
        out.push_str(r#","params":{"#);
        if !progress && self.meta.is_empty() {
            // No `_meta` at all: the members without the last comma.
            out.push_str(self.body.strip_suffix(',').unwrap_or(&self.body));
            out.push_str("}}");
            return out;
        }
        out.push_str(&self.body);
        out.push_str(r#""_meta":"#);
        if progress && self.meta.is_empty() {
            // The common case: the token alone (made of digits, nothing
            // to escape).
            out.push_str(r#"{"progressToken":""#);
            out.push_str(TOKEN_PREFIX);
            out.push_str(id);
            out.push_str(r#""}"#);
        } else {
            let mut meta = self.meta.clone();
            if progress {
                meta.insert(
                    "progressToken".into(),
                    Value::String(format!("{TOKEN_PREFIX}{id}")),
                );
            }
            write_json(&mut out, &Value::Object(meta));
        }
        out.push_str("}}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(params: Value, tool_call: bool) -> (Outbound, ClientMeta) {
        let req = JsonRpcRequest::new(1, "tools/call", params);
        Outbound::of(&req, tool_call).unwrap()
    }

    #[test]
    fn the_upstream_gets_the_clients_params_with_the_gateways_token() {
        let (out, client) = of(
            json!({
                "name": "echo",
                "arguments": { "text": "hi \"there\"", "n": [1, 2] },
                "requestState": "s1",
                "inputResponses": {},
                "_meta": {
                    "progressToken": 7,
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
                    "trace": "t"
                }
            }),
            true,
        );
        assert_eq!(client.token, Some(json!(7)));
        assert_eq!(client.caps, Some(json!({ "elicitation": {} })));
        assert_eq!(out.request_state.as_deref(), Some("s1"));
        let sent: Value = serde_json::from_str(&out.message(42, "tools/call", true)).unwrap();
        assert_eq!(
            sent,
            json!({
                "jsonrpc": "2.0", "id": 42, "method": "tools/call",
                "params": {
                    "name": "echo",
                    "arguments": { "text": "hi \"there\"", "n": [1, 2] },
                    "_meta": { "trace": "t", "progressToken": "mcp-tasks-42" }
                }
            })
        );
        // A key with an escape or a repeated one: serde reads the params
        // (the last of a repeated member counts), and the same message goes.
        let (out, _) = of(json!({}), true);
        assert_eq!(out.body, "");
        let req = JsonRpcRequest::from_slice(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"a","x":1,"x":2}}"#,
        )
        .unwrap();
        let (out, _) = Outbound::of(&req, true).unwrap();
        let sent: Value = serde_json::from_str(&out.message(3, "tools/call", true)).unwrap();
        assert_eq!(
            sent["params"],
            json!({ "name": "a", "x": 2, "_meta": { "progressToken": "mcp-tasks-3" } })
        );
        // A call whose progress has nowhere to go asks for none: the
        // client's `_meta` keys only, or no `_meta` at all.
        let (out, _) = of(
            json!({ "name": "echo", "_meta": { "progressToken": 1 } }),
            true,
        );
        let sent: Value = serde_json::from_str(&out.message(4, "tools/call", false)).unwrap();
        assert_eq!(sent["params"], json!({ "name": "echo" }));
        let (out, _) = of(json!({ "name": "echo", "_meta": { "trace": "t" } }), true);
        let sent: Value = serde_json::from_str(&out.message(4, "tools/call", false)).unwrap();
        assert_eq!(
            sent["params"],
            json!({ "name": "echo", "_meta": { "trace": "t" } })
        );
        let (out, _) = of(json!({}), true);
        let sent: Value = serde_json::from_str(&out.message(4, "ping", false)).unwrap();
        assert_eq!(sent["params"], json!({}));
        // Forwarded requests keep every member but `_meta`'s own.
        let (out, _) = of(json!({ "requestState": "s1", "_meta": 3 }), false);
        let sent: Value = serde_json::from_str(&out.message(1, "prompts/get", true)).unwrap();
        assert_eq!(
            sent["params"],
            json!({ "requestState": "s1", "_meta": { "progressToken": "mcp-tasks-1" } })
        );
    }
}
