//! The 2026-07-28 headers a request must carry, checked against its body.

use std::borrow::Cow;

use super::seen::{readable, One, SeenHeaders};
use crate::jsonrpc::{code, JsonRpcError, JsonRpcRequest};
use crate::names::{PROTOCOL_2025_11_25, PROTOCOL_2026_07_28};

/// The body value `Mcp-Name` must mirror, for the methods that have one
/// (its UTF-8 bytes: it is compared, not read).
fn routed_name(request: &JsonRpcRequest) -> Option<&[u8]> {
    let key = match request.method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    request.params.as_ref()?.str_param_bytes(key)
}

fn mismatch(detail: &str) -> JsonRpcError {
    JsonRpcError::new(code::HEADER_MISMATCH, format!("Header mismatch: {detail}"))
}

/// The one value of a header, trimmed, if it is readable (what
/// `HeaderValue::to_str` accepts): its bytes, compared with the body's.
fn single_header<'h>(header: One<'h>, display: &str) -> Result<&'h [u8], JsonRpcError> {
    match header {
        // Visible ASCII and tabs only: trimming ASCII whitespace is
        // `str::trim` here, without its Unicode tables.
        One::Once(value) if readable(value.as_bytes()) => Ok(value.as_bytes().trim_ascii()),
        One::Once(_) => Err(mismatch(&format!(
            "the {display} header is not visible ASCII"
        ))),
        One::Repeated => Err(mismatch(&format!("the {display} header is repeated"))),
        One::Absent => Err(mismatch(&format!("the {display} header is missing"))),
    }
}

/// Whether `value` is one of the protocol versions and methods this
/// crate names: visible ASCII without surrounding whitespace, so that a
/// header whose one value is exactly these bytes passes
/// [`single_header`] and its comparison (see [`exactly`]).
fn clean(value: &str) -> bool {
    matches!(
        value,
        PROTOCOL_2026_07_28
            | PROTOCOL_2025_11_25
            | "tasks/get"
            | "tasks/update"
            | "tasks/cancel"
            | "tools/call"
            | "tools/list"
            | "prompts/get"
            | "resources/read"
            | "subscriptions/listen"
            | "server/discover"
    )
}

/// Whether `header` came once with exactly the bytes of `value`: for a
/// [`clean`] value, what [`single_header`] and the comparison after it
/// accept, without reading the header's bytes one by one first.
pub(super) fn exactly(header: One<'_>, value: &str) -> bool {
    matches!(header, One::Once(v) if v.as_bytes() == value.as_bytes())
}

/// Check the 2026-07-28 headers against the body.
pub(super) fn check_headers(
    headers: &SeenHeaders<'_>,
    request: &JsonRpcRequest,
) -> Result<(), JsonRpcError> {
    let Some(version) = request.protocol_version() else {
        return Ok(());
    };
    if !(clean(version) && exactly(headers.protocol_version, version))
        && single_header(headers.protocol_version, "MCP-Protocol-Version")? != version.as_bytes()
    {
        return Err(mismatch(
            "the MCP-Protocol-Version header differs from _meta's protocolVersion",
        ));
    }
    let method = request.method.as_str();
    if !(clean(method) && exactly(headers.mcp_method, method))
        && single_header(headers.mcp_method, "Mcp-Method")? != method.as_bytes()
    {
        return Err(mismatch("the Mcp-Method header differs from the method"));
    }
    if let Some(expected) = routed_name(request) {
        let raw = single_header(headers.mcp_name, "Mcp-Name")?;
        let name = decode_header_value(raw)
            .ok_or_else(|| mismatch("the Mcp-Name header has a malformed base64 value"))?;
        if name != expected {
            return Err(mismatch("the Mcp-Name header differs from the body"));
        }
    }
    Ok(())
}

/// A header value as sent: plain, or `=?base64?…?=` over UTF-8 bytes
/// (`None` if they are not UTF-8).
fn decode_header_value(raw: &[u8]) -> Option<Cow<'_, [u8]>> {
    match raw
        .strip_prefix(b"=?base64?")
        .and_then(|rest| rest.strip_suffix(b"?="))
    {
        Some(encoded) => {
            let bytes = decode_base64(encoded)?;
            std::str::from_utf8(&bytes).ok()?;
            Some(Cow::Owned(bytes))
        }
        None => Some(Cow::Borrowed(raw)),
    }
}

/// Standard-alphabet base64, padding optional.
fn decode_base64(encoded: &[u8]) -> Option<Vec<u8>> {
    let unpadded = encoded
        .strip_suffix(b"==")
        .or_else(|| encoded.strip_suffix(b"="))
        .unwrap_or(encoded);
    if unpadded.len() % 4 == 1 || (unpadded.len() != encoded.len() && encoded.len() % 4 != 0) {
        return None;
    }
    let mut out = Vec::with_capacity(unpadded.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in unpadded {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decoded value as text.
    fn decoded(raw: &str) -> Option<String> {
        decode_header_value(raw.as_bytes()).map(|b| String::from_utf8(b.into_owned()).unwrap())
    }

    /// The values `exactly` passes: each is what `single_header` gives of
    /// a header with exactly its bytes, so the short way agrees with it.
    #[test]
    fn clean_values_pass_single_header_unchanged() {
        let clean_ones = [
            PROTOCOL_2026_07_28,
            PROTOCOL_2025_11_25,
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "tools/call",
            "tools/list",
            "prompts/get",
            "resources/read",
            "subscriptions/listen",
            "server/discover",
        ];
        for value in clean_ones {
            assert!(clean(value), "{value}");
            let header = axum::http::HeaderValue::from_static(value);
            assert!(exactly(One::Once(&header), value));
            let single = single_header(One::Once(&header), "X").ok();
            assert_eq!(single, Some(value.as_bytes()), "{value}");
        }
        for other in [" tasks/get", "tasks/get\t", "2026-07-28 ", "Tasks/get", "x"] {
            assert!(!clean(other), "{other:?}");
        }
        let header = axum::http::HeaderValue::from_static("tasks/get");
        assert!(!exactly(One::Repeated, "tasks/get"));
        assert!(!exactly(One::Once(&header), "tasks/cancel"));
    }

    #[test]
    fn base64_header_values() {
        assert_eq!(
            decoded("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=").as_deref(),
            Some("=?base64?literal?=")
        );
        assert_eq!(decoded("=?base64?w6lsw6g=?=").as_deref(), Some("élè"));
        assert_eq!(decoded("=?base64?w6lsw6g?=").as_deref(), Some("élè"));
        assert_eq!(decoded("greet").as_deref(), Some("greet"));
        assert_eq!(decoded("=?base64?***?="), None);
        assert_eq!(decoded("=?base64?QQ=?="), None);
        assert_eq!(decoded("=?base64?Q?="), None);
        assert_eq!(decoded("=?base64?/w==?="), None, "not UTF-8");
        assert_eq!(decode_base64(b"").as_deref(), Some(&[][..]));
        assert_eq!(decode_base64(b"AAEC").as_deref(), Some(&[0u8, 1, 2][..]));
    }
}
