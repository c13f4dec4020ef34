//! A `tasks/get` in the compact shapes the SDKs write ([`PlainGet`]),
//! recognised on its bytes and answered by the layer
//! without decoding it into a request: what
//! [`McpEndpoint::with_direct_tasks_get`](super::McpEndpoint::with_direct_tasks_get)
//! does first. Anything else (another shape, member order, spacing or
//! escape; headers that are not exactly the body's) goes the general way,
//! which answers this shape exactly as this does.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{Extensions, StatusCode};

use super::headers::exactly;
use super::response::outcome_response;
use super::seen::SeenHeaders;
use crate::jsonrpc::{JsonRpcResponse, RequestId};
use crate::runtime::handlers::PlainAnswer;
use crate::runtime::Engine;

const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
/// After the id, up to the opening quote of the task id.
const METHOD: &[u8] = br#","method":"tasks/get","params":{"taskId":""#;
/// From the task id's closing quote, a 2025-11-25 request's end.
const LEGACY_END: &[u8] = br#""}}"#;
/// From the task id's closing quote, up to the protocol version's opening one.
const META: &[u8] = br#"","_meta":{"io.modelcontextprotocol/protocolVersion":""#;
/// From the version's closing quote: the tasks extension declared, the end.
const MODERN_END: &[u8] = br#"","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#;
/// The TypeScript SDK's order (the method first, the id last), up to the
/// opening quote of the task id.
const METHOD_FIRST: &[u8] = br#"{"method":"tasks/get","params":{"taskId":""#;
/// From the task id's closing quote, in that order, up to the id.
const ID_LAST: &[u8] = br#""},"jsonrpc":"2.0","id":"#;

/// A `tasks/get` body of exactly this shape, with no space anywhere:
/// `{"jsonrpc":"2.0","id":ID,"method":"tasks/get","params":{"taskId":"T"}}`
/// (2025-11-25, as the Python SDK writes it; the TypeScript SDK writes
/// `{"method":"tasks/get","params":{"taskId":"T"},"jsonrpc":"2.0","id":ID}`,
/// read too), or with `,"_meta":{"io.modelcontextprotocol/protocolVersion":"V",
/// "io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
/// after `"T"` (2026-07-28, the tasks extension declared). ID is an
/// integer of at most 18 digits (not `-0`) or a plain string; T and V are
/// plain strings: visible ASCII but `"` and `\`, no space.
#[derive(Debug, PartialEq)]
pub(super) struct PlainGet<'b> {
    pub(super) id: RequestId,
    pub(super) task_id: &'b str,
    /// The 2026-07-28 protocol version, `None` in 2025-11-25.
    pub(super) version: Option<&'b str>,
}

impl<'b> PlainGet<'b> {
    pub(super) fn read(body: &'b [u8]) -> Option<Self> {
        let Some(rest) = body.strip_prefix(HEAD) else {
            return Self::read_method_first(body);
        };
        let (id, rest) = read_id(rest)?;
        let (task_id, rest) = plain(rest.strip_prefix(METHOD)?)?;
        if rest == LEGACY_END {
            return Some(PlainGet {
                id,
                task_id,
                version: None,
            });
        }
        let (version, rest) = plain(rest.strip_prefix(META)?)?;
        (rest == MODERN_END).then_some(PlainGet {
            id,
            task_id,
            version: Some(version),
        })
    }

    /// The TypeScript SDK's order: code of its own, off the way of the
    /// other shapes.
    #[inline(never)]
    fn read_method_first(body: &'b [u8]) -> Option<Self> {
        let (task_id, rest) = plain(body.strip_prefix(METHOD_FIRST)?)?;
        let (id, rest) = read_id(rest.strip_prefix(ID_LAST)?)?;
        (rest == b"}").then_some(PlainGet {
            id,
            task_id,
            version: None,
        })
    }

    /// Whether the 2026-07-28 headers are, each once, exactly the body's
    /// (so that [`check_headers`](super::headers::check_headers) passes;
    /// any other case goes its way). A task id in the `=?…?=` form of an
    /// encoded header is left to it too.
    fn headers_agree(&self, headers: &SeenHeaders<'_>) -> bool {
        let Some(version) = self.version else {
            // 2025-11-25 requests are not checked.
            return true;
        };
        exactly(headers.protocol_version, version)
            && exactly(headers.mcp_method, "tasks/get")
            && exactly(headers.mcp_name, self.task_id)
            && !self.task_id.starts_with("=?")
    }
}

/// A plain string's text, up to its closing quote, and the rest from that
/// quote on.
fn plain(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let len = plain_len(bytes)?;
    let (text, rest) = bytes.split_at(len);
    if rest.first() != Some(&b'"') {
        return None;
    }
    Some((std::str::from_utf8(text).ok()?, rest))
}

/// Whether `b` may be in a plain string: visible ASCII but `"` and `\`.
fn is_plain(b: u8) -> bool {
    (b'!'..=b'~').contains(&b) && b != b'"' && b != b'\\'
}

/// The length of the plain bytes `bytes` begins with, if a byte that is
/// not follows them. Eight bytes at a time: a task id is read on every
/// poll, and read one byte at a time, its 32 bytes and the version's 10
/// cost ~350 instructions more a request (issue 32, BENCHMARKS.md's
/// fourteenth pass).
fn plain_len(bytes: &[u8]) -> Option<usize> {
    use crate::words::{below, equal, from_del};
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let Ok(word) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let x = u64::from_le_bytes(word);
        let odd = below(x, b'!') | from_del(x) | equal(x, b'"') | equal(x, b'\\');
        if odd != 0 {
            // The lowest bit set is the first such byte (little-endian).
            return Some(at + (odd.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = words.remainder();
    tail.iter().position(|&b| !is_plain(b)).map(|len| at + len)
}

/// The id, and the rest after it.
fn read_id(bytes: &[u8]) -> Option<(RequestId, &[u8])> {
    if let Some(rest) = bytes.strip_prefix(b"\"") {
        let (text, rest) = plain(rest)?;
        return Some((RequestId::String(text.to_owned()), rest.get(1..)?));
    }
    let (negative, digits) = match bytes.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, bytes),
    };
    let len = digits.iter().position(|b| !b.is_ascii_digit())?;
    let (number, rest) = digits.split_at(len);
    match number {
        [b'0'] if !negative => {}
        [b'1'..=b'9', ..] if len <= 18 => {}
        _ => return None,
    }
    let n = number
        .iter()
        .fold(0i64, |n, &b| n * 10 + i64::from(b - b'0'));
    Some((RequestId::Number(if negative { -n } else { n }), rest))
}

/// What the endpoint does with a body after [`answer_plain_get`].
pub(super) enum Plain {
    /// Answer this: what the service's way answers, status included.
    Answered(StatusCode, JsonRpcResponse),
    /// A `tasks/get` whose store must be waited for: the service's way.
    Service,
    /// Decode the body and go on as for any other.
    Decode,
}

/// The answer to a [`PlainGet`] body whose headers agree with it, if the
/// layer gives it without waiting (see `Engine::tasks_get_plain`).
pub(super) fn answer_plain_get(
    engine: &Arc<Engine>,
    headers: &SeenHeaders<'_>,
    body: &[u8],
    identity: &Extensions,
) -> Plain {
    let Some(get) = PlainGet::read(body) else {
        return Plain::Decode;
    };
    if !get.headers_agree(headers) {
        return Plain::Decode;
    }
    match engine.tasks_get_plain(&get.id, get.task_id, get.version, identity) {
        PlainAnswer::Answer(response) => {
            let modern = get.version.is_some();
            let (status, response) =
                outcome_response(get.id, Ok::<_, Infallible>(response), modern);
            Plain::Answered(status, response)
        }
        PlainAnswer::Service => Plain::Service,
        PlainAnswer::Decode => Plain::Decode,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::jsonrpc::{JsonRpcRequest, StrParam};

    const MODERN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"ab12","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#;
    const LEGACY: &str =
        r#"{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"taskId":"ab12"}}"#;
    /// As the TypeScript SDK (1.32) writes it.
    const METHOD_FIRST_BODY: &str =
        r#"{"method":"tasks/get","params":{"taskId":"ab12"},"jsonrpc":"2.0","id":3}"#;

    /// What the general way reads of `body`, as a `PlainGet` would say it,
    /// if it reads a `tasks/get` with the tasks extension declared.
    fn decoded(body: &[u8]) -> Option<(RequestId, String, Option<String>)> {
        let request =
            JsonRpcRequest::decode_plain(&Bytes::copy_from_slice(body)).or_else(|| {
                let value: serde_json::Value = serde_json::from_slice(body).ok()?;
                JsonRpcRequest::from_value(value).ok()
            })?;
        let (version, declared) = request.era_facts();
        if request.method != "tasks/get" || (version.is_some() && !declared) {
            return None;
        }
        let StrParam::Str(task_id) = request.str_param("taskId") else {
            return None;
        };
        Some((
            request.id.clone()?,
            task_id.to_owned(),
            version.map(str::to_owned),
        ))
    }

    fn agrees(body: &[u8]) {
        if let Some(get) = PlainGet::read(body) {
            let text = String::from_utf8_lossy(body);
            let general = decoded(body).unwrap_or_else(|| panic!("not a tasks/get: {text}"));
            let plain = (
                get.id,
                get.task_id.to_owned(),
                get.version.map(str::to_owned),
            );
            assert_eq!(plain, general, "{text}");
        }
    }

    #[test]
    fn the_shapes_clients_send_are_read() {
        assert_eq!(
            PlainGet::read(MODERN.as_bytes()),
            Some(PlainGet {
                id: RequestId::Number(1),
                task_id: "ab12",
                version: Some("2026-07-28")
            })
        );
        assert_eq!(
            PlainGet::read(LEGACY.as_bytes()),
            Some(PlainGet {
                id: RequestId::from("x"),
                task_id: "ab12",
                version: None
            })
        );
        assert_eq!(
            PlainGet::read(METHOD_FIRST_BODY.as_bytes()),
            Some(PlainGet {
                id: RequestId::Number(3),
                task_id: "ab12",
                version: None
            })
        );
        for other in [
            METHOD_FIRST_BODY.replace(":3}", ":3} "),
            METHOD_FIRST_BODY.replace(":3}", ":3,\"x\":1}"),
            METHOD_FIRST_BODY.replace(":3}", ":3.0}"),
            METHOD_FIRST_BODY.replace("\"2.0\"", "\"1.0\""),
        ] {
            assert_eq!(PlainGet::read(other.as_bytes()), None, "{other}");
        }
        for id in ["0", "-7", "123456789012345678", r#""a-b""#] {
            let body = MODERN.replace(r#""id":1"#, &format!(r#""id":{id}"#));
            assert!(PlainGet::read(body.as_bytes()).is_some(), "{body}");
            agrees(body.as_bytes());
        }
        for id in [
            "-0",
            "01",
            "1.5",
            "1e3",
            "1234567890123456789",
            "null",
            r#""a b""#,
            r#""a\"b""#,
            r#""é""#,
        ] {
            let body = MODERN.replace(r#""id":1"#, &format!(r#""id":{id}"#));
            assert_eq!(PlainGet::read(body.as_bytes()), None, "{body}");
        }
        for other in [
            MODERN.replace("ab12", "a b"),
            MODERN.replace("ab12", r"a\u0062"),
            MODERN.replace(":{}}}}}}", ":{}}}}}} "),
            MODERN.replace("tasks\":{}", "tasks\":1"),
            MODERN.replace(r#""id":1,"#, ""),
            LEGACY.replace("}}", "},\"x\":1}"),
            LEGACY.replace("tasks/get", "tasks/cancel"),
        ] {
            assert_eq!(PlainGet::read(other.as_bytes()), None, "{other}");
        }
    }

    /// Eight bytes at a time, the scan stops where one byte at a time
    /// would: at every position of every kind of byte, and with the
    /// bytes above a stop (where a borrow or carry could set a flag) of
    /// every kind too.
    #[test]
    fn plain_len_stops_where_a_byte_by_byte_scan_does() {
        let by_byte = |bytes: &[u8]| bytes.iter().position(|&b| !is_plain(b));
        for len in 0..20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    for after in [0u8, b'!', b'"', b'\\', 0x7f, 0xff, b'a'] {
                        let mut bytes = vec![b'a'; len];
                        bytes[at] = b;
                        if at + 1 < len {
                            bytes[at + 1] = after;
                        }
                        assert_eq!(plain_len(&bytes), by_byte(&bytes), "{bytes:?}");
                    }
                }
            }
        }
    }

    /// Whatever is read is what the general way reads: every byte of both
    /// shapes replaced by others, or dropped.
    #[test]
    fn what_is_read_is_what_the_general_way_reads() {
        let replacements = [
            b'"', b'\\', b' ', b'0', b'9', b'-', b'a', b'{', b'}', b',', b':', 0x7f, 0xc3,
        ];
        for body in [MODERN, LEGACY, METHOD_FIRST_BODY] {
            let body = body.as_bytes();
            agrees(body);
            for at in 0..body.len() {
                for &b in &replacements {
                    let mut changed = body.to_vec();
                    changed[at] = b;
                    agrees(&changed);
                }
                let mut dropped = body.to_vec();
                dropped.remove(at);
                agrees(&dropped);
            }
        }
    }
}
