//! Decoding the common request without a `Value` of the whole message:
//! [`JsonRpcRequest::decode_plain`].

use std::fmt;

use bytes::Bytes;
use http::Extensions;
use serde::{Deserialize, Deserializer};

use super::facts::{read_facts, ReadFacts};
use super::scan::scan;
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
        match scan(bytes) {
            Some(scanned) => Some(JsonRpcRequest {
                id: scanned.id,
                method: scanned.method.to_owned(),
                params: scanned
                    .params
                    .map(|(facts, text)| Params::from_message(bytes, facts, Some(text))),
                extensions: Extensions::new(),
            }),
            None => Self::decode_serde(bytes),
        }
    }

    /// [`decode_plain`](Self::decode_plain) through serde, for what the
    /// hand-written [`scan`] leaves.
    fn decode_serde(bytes: &Bytes) -> Option<Self> {
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
            params: plain
                .params
                .map(|facts| Params::from_message(bytes, facts, None)),
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

    /// What the hand-written scan reads of `bytes`, if it reads them, is
    /// what serde's pass reads: the same request, facts and params text.
    fn the_scan_agrees_with_serde(bytes: &Bytes) {
        let text = String::from_utf8_lossy(bytes);
        let Some(scanned) = scan(bytes) else {
            return;
        };
        let fast = JsonRpcRequest::decode_plain(bytes).unwrap();
        let serde = JsonRpcRequest::decode_serde(bytes);
        let serde = serde.unwrap_or_else(|| panic!("serde refuses what the scan read: {text}"));
        assert!(same(&fast, &serde), "{text}");
        assert_eq!(scanned.method, serde.method, "{text}");
        let texts = |r: &JsonRpcRequest| r.params.as_ref().map(|p| p.text().map(str::to_owned));
        assert_eq!(texts(&fast), texts(&serde), "{text}");
    }

    /// The scan reads the common shapes, and leaves to serde what it is
    /// not sure of; whatever it reads, serde reads the same.
    #[test]
    fn the_scan_reads_the_common_requests_and_agrees_with_serde() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;
        let read: &[String] = &[
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"abc",{meta}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{{"name":"greet","arguments":{{"name":"a\nb\u00e9","n":[1,-2,0.5,-0.25,true,false,null,{{}},[]]}},{meta}}}}}"#),
            format!(" \t\r\n{{ \"params\" : {{ {meta} , \"task\" : {{ \"ttl\" : 1 }} }} , \"method\" : \"m\" , \"jsonrpc\" : \"2.0\" }} \n"),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
            r#"{"jsonrpc":"2.0","id":-17,"method":"m","params":{"taskId":7,"name":{},"uri":[],"task":"t"}}"#.into(),
            r#"{"jsonrpc":"2.0","id":0,"method":"m","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/protocolVersion":"v"},"_meta":{"io.modelcontextprotocol/protocolVersion":"w"}}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}},"extensions":{"io.modelcontextprotocol/tasks":1}}}}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v"},"_meta":7}}"#.into(),
            r#"{"jsonrpc":"2.0","id":999999999999999999,"method":"m","params":{"a":"\u00e9\ud7ff\ue000"}}"#.into(),
            // Keys next to the ones compared whole: a prefix, a longer one.
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersio":"v","io.modelcontextprotocol/protocolVersionX":"w","io.modelcontextprotocol/clientCapabilities":{"extension":{"io.modelcontextprotocol/tasks":{}},"extensions":{"io.modelcontextprotocol/task":{},"io.modelcontextprotocol/tasks2":{}}}}}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"":"v","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":7}}}}}"#.into(),
            // The `_meta`s read by one comparison, with members after them
            // and a repeated `_meta` after a canonical one.
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{}}}"#.into(),
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"m","params":{{{meta},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":4,"method":"m","params":{{"_meta":{{}},{meta}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":5,"method":"m","params":{{ {meta} }}}}"#),
            // The compact order read without looking up member names, and
            // its near misses, which the member-by-member scan reads.
            r#"{"jsonrpc":"2.0","id":6,"method":"m"}"#.into(),
            r#"{"jsonrpc":"2.0","id":-7,"method":"m","params":{}}"#.into(),
            r#"{"jsonrpc":"2.0","id":"s","method":"m","params":{}}"#.into(),
            r#"{"jsonrpc":"2.0","id":8,"method":"m","params":{} }"#.into(),
            r#"{"jsonrpc":"2.0","id":11,"params":{},"method":"m"}"#.into(),
            // The compact `tasks/*` params read whole, and their near
            // misses: another `_meta`, a member after it, another order.
            format!(r#"{{"jsonrpc":"2.0","id":12,"method":"tasks/get","params":{{"taskId":"t-1",{meta}}}}}"#),
            r#"{"jsonrpc":"2.0","id":13,"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#.into(),
            r#"{"jsonrpc":"2.0","id":14,"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}"#.into(),
            format!(r#"{{"jsonrpc":"2.0","id":15,"method":"tasks/get","params":{{"taskId":"t",{meta},"taskId":"u"}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":16,"method":"tasks/get","params":{{"taskId":"t",{meta},"_meta":{{}}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":17,"method":"tasks/get","params":{{{meta},"taskId":"t"}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":18,"method":"tasks/get","params":{{"taskId":7,{meta}}}}}"#),
            r#"{"jsonrpc":"2.0","id":19,"method":"tasks/get","params":{"taskId":"t","_meta":{}}}"#.into(),
            r#"{"jsonrpc":"2.0","id":20,"method":"tasks/get","params":{"taskId":"t"}}"#.into(),
        ];
        for text in read {
            let bytes = Bytes::copy_from_slice(text.as_bytes());
            assert!(scan(&bytes).is_some(), "{text}");
            the_scan_agrees_with_serde(&bytes);
        }
        // Left to serde, which reads or refuses them.
        let left: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"t\u0061sks/get"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"taskId":"a\n"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a\u0062":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\ud83d\ude00"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1e2}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1234567890123456789}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":01}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1.}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":tru}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\x"}}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\t\"}}",
            r#"{"jsonrpc":"2.0","id":1,"method":"m","id":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m""#,
            r#"{"jsonrpc":"2.0","method":"m","params":"#,
            // A known key written with an escape is left to serde.
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"v"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"m","params":{},"id":10}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m",}"#,
            // A canonical `_meta` whose object does not end where it seems to.
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}x}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t\n","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        ];
        for text in left {
            assert!(scan(text.as_bytes()).is_none(), "{text}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"a":{}{}}}}}"#,
            "[".repeat(40),
            "]".repeat(40)
        );
        assert!(scan(deep.as_bytes()).is_none());
        assert!(JsonRpcRequest::decode_plain(&Bytes::from(deep)).is_some());
        // No cut of a request reads as one.
        let whole = read[1].as_bytes();
        for end in 0..whole.len() {
            assert!(scan(&whole[..end]).is_none());
        }
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
            let bytes = Bytes::copy_from_slice(text.as_bytes());
            let decoded = JsonRpcRequest::decode_plain(&bytes);
            assert_eq!(decoded.is_some(), plain, "{text}");
            the_scan_agrees_with_serde(&bytes);
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
