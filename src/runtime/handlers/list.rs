//! `tasks/list` (2025-11-25): the caller's tasks, newest first, a page at a
//! time behind an opaque cursor; only for a caller with an identity.

use serde_json::{json, Value};

use super::{respond, Reply};
use crate::hex::{decode_hex, push_hex};
use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, JsonRpcResponse};
use crate::runtime::engine::Engine;
use crate::runtime::errors::store_failure;
use crate::runtime::wire;
use crate::store::{self, Era, ListQuery};

impl Engine {
    pub(crate) async fn tasks_list(&self, req: JsonRpcRequest) -> JsonRpcResponse {
        let answer = self.list(&req).await;
        respond(req.id, answer)
    }

    async fn list(&self, req: &JsonRpcRequest) -> Result<Reply, JsonRpcError> {
        // Callers without an identity all share the one ownerless key: a
        // listing would show each the others' tasks (R52). The method is
        // not offered to them (nor advertised in `initialize`), R77.
        let owner = self
            .owner_of(req)
            .ok_or_else(|| JsonRpcError::method_not_found("tasks/list"))?;
        let after = match req.params_object().and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(
                decode_cursor(c).ok_or_else(|| JsonRpcError::invalid_params("Invalid cursor"))?,
            ),
            Some(_) => return Err(JsonRpcError::invalid_params("\"cursor\" must be a string")),
        };
        let page = self.cfg.list_page_size.max(1);
        // Of this owner and era at the store: the cursor below is made of
        // the page's last record, so it can only ever name one of theirs.
        let records = self
            .store
            .list(ListQuery {
                after: after.as_ref().map(|(c, id)| (*c, id.as_str())),
                ..ListQuery::new(Some(&owner), Era::Legacy, page + 1, self.now_ms())
            })
            .await
            .map_err(|e| match e {
                store::Error::Unsupported(_) => JsonRpcError::method_not_found("tasks/list"),
                e => store_failure(&e),
            })?;
        let records: Vec<_> = records.into_iter().map(store::opened).collect();
        let more = records.len() > page;
        let shown = &records[..records.len().min(page)];
        let tasks: Vec<Value> = shown.iter().map(|r| wire::legacy::task_value(r)).collect();
        let mut out = json!({ "tasks": tasks });
        if more {
            if let Some(last) = shown.last() {
                out["nextCursor"] = Value::String(encode_cursor(last.created_at_ms, &last.id));
            }
        }
        Ok(Reply::Value(out))
    }
}

/// An opaque `tasks/list` cursor: the position `(createdAt, id)` of the last
/// task shown, hex-encoded. It only positions a listing; whose tasks are
/// listed always comes from the caller's identity, never from the cursor.
fn encode_cursor(created_ms: i64, id: &str) -> String {
    let raw = format!("{created_ms}:{id}");
    let mut out = String::with_capacity(raw.len() * 2);
    push_hex(&mut out, raw.as_bytes());
    out
}

fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    if cursor.len() > 512 {
        return None;
    }
    let raw = String::from_utf8(decode_hex(cursor)?).ok()?;
    let (created, id) = raw.split_once(':')?;
    Some((created.parse().ok()?, id.to_owned()))
}
