//! Decoding the common request without a `Value` of the whole message:
//! [`JsonRpcRequest::decode_plain`].

use std::fmt;

use http::Extensions;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::{JsonRpcRequest, RequestId};

impl JsonRpcRequest {
    /// The common case of [`from_slice`](Self::from_slice) without the
    /// detour through a `Value` of the whole message: exactly `jsonrpc`
    /// (`"2.0"`), `method`, and optionally an `id` (string or integer) and
    /// an object `params`, each once. Anything else (other members, a
    /// `null` id, a `jsonrpc` with escapes, bytes that are not JSON, ...)
    /// is `None`, and the caller decodes through a `Value`, which gives the
    /// precise error or the same request: the answer on the wire does not
    /// depend on which path read the message.
    pub(crate) fn decode_plain(bytes: &[u8]) -> Option<Self> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Plain<'a> {
            #[serde(borrow)]
            jsonrpc: &'a str,
            method: String,
            #[serde(default, deserialize_with = "strict_id")]
            id: Option<RequestId>,
            #[serde(default, deserialize_with = "object_params")]
            params: Option<Value>,
        }
        let plain: Plain<'_> = serde_json::from_slice(bytes).ok()?;
        (plain.jsonrpc == "2.0").then(|| JsonRpcRequest {
            id: plain.id,
            method: plain.method,
            params: plain.params,
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

/// `params` that [`JsonRpcRequest::from_value`] accepts: an object (a
/// `null` is an error, not an absent `params`).
fn object_params<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    match Value::deserialize(deserializer)? {
        params @ Value::Object(_) => Ok(Some(params)),
        _ => Err(D::Error::custom("\"params\" must be an object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::JsonRpcError;

    /// What the `Value` path makes of `bytes`: the request, or the error.
    fn through_value(bytes: &[u8]) -> Result<JsonRpcRequest, JsonRpcError> {
        let value: Value = serde_json::from_slice(bytes).map_err(JsonRpcError::parse_error)?;
        JsonRpcRequest::from_value(value)
    }

    fn same(a: &JsonRpcRequest, b: &JsonRpcRequest) -> bool {
        a.id == b.id && a.method == b.method && a.params == b.params
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
            // Left to the `Value` path, which decides.
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
            let decoded = JsonRpcRequest::decode_plain(text.as_bytes());
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
        assert!(JsonRpcRequest::decode_plain(deep.as_bytes()).is_none());
        assert_eq!(
            JsonRpcRequest::from_slice(deep.as_bytes()).unwrap_err(),
            through_value(deep.as_bytes()).unwrap_err()
        );
    }
}
