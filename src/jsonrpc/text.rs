//! The wire form of a response ([`JsonRpcResponse::to_vec`]), and a text
//! result written in place inside it ([`JsonRpcResponse::framed_text`]).

use super::{JsonRpcResponse, Payload, RequestId, TextResult};
use crate::json::{write_i64, write_json, write_json_str};

/// What comes before a response's id on the wire.
const BEFORE_ID: &str = "{\"jsonrpc\":\"2.0\",\"id\":";
/// What comes between the id and a result.
const BEFORE_RESULT: &str = ",\"result\":";

/// How many bytes `id` takes on the wire (a string's, when it needs no
/// escaping).
fn id_len(id: Option<&RequestId>) -> usize {
    match id {
        None => 4,
        Some(RequestId::Number(n)) => {
            n.unsigned_abs()
                .checked_ilog10()
                .map_or(1, |d| d as usize + 1)
                + usize::from(*n < 0)
        }
        Some(RequestId::String(s)) => s.len() + 2,
    }
}

/// `{"jsonrpc":"2.0","id":…` into `out`.
fn write_head(out: &mut String, id: Option<&RequestId>) {
    out.push_str(BEFORE_ID);
    match id {
        None => out.push_str("null"),
        Some(RequestId::Number(n)) => write_i64(out, *n),
        Some(RequestId::String(s)) => write_json_str(out, s),
    }
}

impl JsonRpcResponse {
    /// A success whose result this crate's own writer (valid JSON) appends
    /// by `write` to the string it is given, written in place inside the
    /// response's wire form: [`into_vec`](Self::into_vec) hands that
    /// buffer out as it is, without copying the result. `capacity` is
    /// about how long the result is.
    pub(crate) fn framed_text(
        id: Option<RequestId>,
        capacity: usize,
        write: impl FnOnce(&mut String),
    ) -> Self {
        let mut buf = String::with_capacity(
            BEFORE_ID.len() + id_len(id.as_ref()) + BEFORE_RESULT.len() + capacity + 1,
        );
        write_head(&mut buf, id.as_ref());
        buf.push_str(BEFORE_RESULT);
        let start = buf.len();
        write(&mut buf);
        let at = start..buf.len();
        buf.push('}');
        let text = TextResult {
            buf,
            at,
            framed: Some(id.clone()),
        };
        JsonRpcResponse {
            id,
            payload: Payload::Text(text, Default::default()),
            refusal: None,
        }
    }

    /// The wire form: `{"jsonrpc":"2.0","id":…,"result":…}` (or `"error"`),
    /// compact, a text result copied as it is.
    pub fn to_vec(&self) -> Vec<u8> {
        if let Some(wire) = self.framed() {
            return wire.as_bytes().to_vec();
        }
        // A text result: exactly the length of the answer (common ids), so
        // that the buffer becomes the HTTP body without another allocation.
        let mut out = String::with_capacity(match &self.payload {
            Payload::Text(json, _) => {
                r#"{"jsonrpc":"2.0","id":,"result":}"#.len()
                    + id_len(self.id.as_ref())
                    + json.get().len()
            }
            _ => 128,
        });
        write_head(&mut out, self.id.as_ref());
        match &self.payload {
            Payload::Value(v) => {
                out.push_str(BEFORE_RESULT);
                write_json(&mut out, v);
            }
            Payload::Text(json, _) => {
                out.push_str(BEFORE_RESULT);
                out.push_str(json.get());
            }
            Payload::Error(e) => {
                out.push_str(",\"error\":");
                // A struct of strings, numbers and a `Value`: cannot fail.
                let error = serde_json::to_string(e).unwrap_or_else(|_| "null".into());
                out.push_str(&error);
            }
        }
        out.push('}');
        out.into_bytes()
    }

    /// [`to_vec`](Self::to_vec), by value: a response written in place
    /// ([`framed_text`](Self::framed_text)) whose id has not changed since
    /// is its buffer, not copied (its capacity may exceed its length).
    #[cfg(feature = "axum")]
    pub(crate) fn into_vec(self) -> Vec<u8> {
        if self.framed().is_none() {
            return self.to_vec();
        }
        match self.payload {
            Payload::Text(text, _) => text.buf.into_bytes(),
            _ => Vec::new(),
        }
    }

    /// The whole wire form, if it is written already for this id.
    fn framed(&self) -> Option<&str> {
        match &self.payload {
            Payload::Text(text, _) if text.framed.as_ref() == Some(&self.id) => Some(&text.buf),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A response written in place reads and writes as one built from its
    /// text; once its id changes, it is written again.
    #[test]
    fn framed_text_is_the_same_response() {
        for id in [
            None,
            Some(RequestId::Number(0)),
            Some(RequestId::Number(-17)),
            Some(RequestId::from("a\"b")),
        ] {
            let framed =
                JsonRpcResponse::framed_text(id.clone(), 4, |out| out.push_str(r#"{"a":[1]}"#));
            let plain = JsonRpcResponse::trusted_text(id.clone(), r#"{"a":[1]}"#.into());
            assert_eq!(framed, plain);
            assert_eq!(framed.result_text(), Some(r#"{"a":[1]}"#));
            assert_eq!(framed.result_value(), Some(&json!({"a": [1]})));
            assert_eq!(framed.to_vec(), plain.to_vec());
            #[cfg(feature = "axum")]
            assert_eq!(framed.clone().into_vec(), plain.to_vec());
            assert_eq!(
                serde_json::to_string(&framed).unwrap(),
                serde_json::to_string(&plain).unwrap()
            );
            let mut moved = framed.clone();
            moved.id = Some(RequestId::Number(42));
            let expected = br#"{"jsonrpc":"2.0","id":42,"result":{"a":[1]}}"#.to_vec();
            assert_eq!(moved.to_vec(), expected);
            #[cfg(feature = "axum")]
            assert_eq!(moved.clone().into_vec(), expected);
            assert_eq!(framed.into_payload(), Ok(json!({"a": [1]})));
        }
    }
}
