//! Decoding the common request without a `Value` of the whole message:
//! [`JsonRpcRequest::decode_plain`].

use std::fmt;

use bytes::Bytes;
use http::Extensions;
use serde::{Deserialize, Deserializer};

use super::facts::{read_facts, ReadFacts};
use super::{JsonRpcRequest, Params, RequestId};

impl JsonRpcRequest {
    /// The common case of [`from_slice`](Self::from_slice) without the
    /// detour through a `Value` of the whole message: exactly `jsonrpc`
    /// (`"2.0"`), `method`, and optionally an `id` (string or integer) and
    /// an object `params`, each once. Anything else (other members, a
    /// `null` id, a `jsonrpc` with escapes, bytes that are not JSON, ...)
    /// is `None`, and the caller decodes through a `Value`, which gives the
    /// precise error or the same request: the answer on the wire does not
    /// depend on which path read the message.
    pub(crate) fn decode_plain(bytes: &Bytes) -> Option<Self> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Plain<'a> {
            #[serde(borrow)]
            jsonrpc: &'a str,
            method: String,
            #[serde(default, deserialize_with = "strict_id")]
            id: Option<RequestId>,
            #[serde(default, borrow, deserialize_with = "read_facts")]
            params: Option<ReadFacts<'a>>,
        }
        let plain: Plain<'_> = serde_json::from_slice(bytes).ok()?;
        if plain.jsonrpc != "2.0" {
            return None;
        }
        Some(JsonRpcRequest {
            id: plain.id,
            method: plain.method,
            params: plain.params.map(|facts| Params::from_message(bytes, facts)),
            extensions: Extensions::new(),
        })
    }
}

/// An `id` that [`JsonRpcRequest::from_value`] accepts: a string or an
/// integer that fits `i64` (`null`, fractions and the rest are errors).
fn strict_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<RequestId>, D::Error> {
    struct Id;
    impl serde::de::Visitor<'_> for Id {
        type Value = RequestId;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or an integer")
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<RequestId, E> {
            Ok(RequestId::Number(n))
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<RequestId, E> {
            i64::try_from(n)
                .map(RequestId::Number)
                .map_err(|_| E::custom("id out of range"))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RequestId, E> {
            Ok(RequestId::String(s.to_owned()))
        }
        fn visit_string<E: serde::de::Error>(self, s: String) -> Result<RequestId, E> {
            Ok(RequestId::String(s))
        }
    }
    deserializer.deserialize_any(Id).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::JsonRpcError;
    use serde_json::Value;

    /// What the `Value` path makes of `bytes`: the request, or the error.
    fn through_value(bytes: &[u8]) -> Result<JsonRpcRequest, JsonRpcError> {
        let value: Value = serde_json::from_slice(bytes).map_err(JsonRpcError::parse_error)?;
        JsonRpcRequest::from_value(value)
    }

    /// The same request, and the same facts the layer routes on, whether
    /// they are read from the message (`a`) or from a `Value` (`b`).
    fn same(a: &JsonRpcRequest, b: &JsonRpcRequest) -> bool {
        a.id == b.id
            && a.method == b.method
            && a.params == b.params
            && a.era_facts() == b.era_facts()
            && ["taskId", "name", "uri", "cursor"]
                .iter()
                .all(|key| a.str_param(key) == b.str_param(key))
            && a.params.as_ref().map(|p| p.is_object_param("task"))
                == b.params.as_ref().map(|p| p.is_object_param("task"))
    }

    /// The plain decoding reads exactly what the `Value` path reads, and
    /// leaves everything else to it: the wire never shows which one ran.
    #[test]
    fn plain_decoding_agrees_with_the_value_path() {
        let cases: &[(&str, bool)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a"}}"#,
                true,
            ),
            (r#"{"method":"m","jsonrpc":"2.0","id":"x"}"#, true),
            (r#"{"jsonrpc":"2.0","method":"notifications/x"}"#, true),
            (
                r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"m"}"#,
                true,
            ),
            (
                r#" {"jsonrpc":"2.0","id":"\u0041","method":"\n","params":{}} "#,
                true,
            ),
            // What the layer routes on, read in the decoding pass: escapes,
            // repeated members (the last counts), other types.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a\u00e9\n","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","taskId":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":[]}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null,"task":[],"uri":{"a":"b"},"_meta":{"io.modelcontextprotocol/protocolVersion":7,"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":true}}}}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{},"io.modelcontextprotocol/tasks":1}}}}}"#,
                true,
            ),
            // Left to the `Value` path, which decides: inside params, what
            // a `Value` refuses (a lone surrogate, a number out of range).
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\ud800"}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1e400]}}"#,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#, false),
            (r#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#, false),
            (r#"{"jsonrpc":"2.0","id":1e2,"method":"m"}"#, false),
            (
                r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#, false),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","extra":[[[[1]]]]}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}"#,
                false,
            ),
            (r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#, false),
            (r#"{"jsonrpc":"2\u002e0","id":1,"method":"m"}"#, false),
            (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, false),
            (r#"{"jsonrpc":"2.0","id":1}"#, false),
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, false),
            (r#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#, false),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#, false),
            ("", false),
            ("\u{0}", false),
        ];
        for &(text, plain) in cases {
            let decoded = JsonRpcRequest::decode_plain(&Bytes::copy_from_slice(text.as_bytes()));
            assert_eq!(decoded.is_some(), plain, "{text}");
            let via_value = through_value(text.as_bytes());
            if let Some(request) = &decoded {
                assert!(same(request, via_value.as_ref().unwrap()), "{text}");
            }
            let public = JsonRpcRequest::from_slice(text.as_bytes());
            match (&public, &via_value) {
                (Ok(a), Ok(b)) => assert!(same(a, b), "{text}"),
                (Err(a), Err(b)) => assert_eq!(a, b, "{text}"),
                _ => panic!("from_slice and the Value path disagree on {text}"),
            }
        }
        // Deeper than serde_json's recursion limit inside params: an error
        // either way, with the same message.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(JsonRpcRequest::decode_plain(&Bytes::copy_from_slice(deep.as_bytes())).is_none());
        assert_eq!(
            JsonRpcRequest::from_slice(deep.as_bytes()).unwrap_err(),
            through_value(deep.as_bytes()).unwrap_err()
        );
    }
}
