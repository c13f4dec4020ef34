//! The request headers the endpoint reads, found in one pass over the
//! header map ([`SeenHeaders`]) instead of a hashed look-up for each.

use axum::http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, ORIGIN};
use axum::http::{HeaderMap, HeaderValue};

use super::sse::lists_event_stream;

/// Whether `bytes` are what `HeaderValue::to_str` accepts (visible ASCII,
/// 32 to 126, and tabs), eight bytes at a time: a word without a byte
/// below 32 or above 126 needs no look at its bytes.
pub(super) fn readable(bytes: &[u8]) -> bool {
    use crate::words::{below, from_del};
    let byte_ok = |b: &u8| (32..127).contains(b) || *b == b'\t';
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let Ok(word8) = <[u8; 8]>::try_from(word) else {
            return false;
        };
        let x = u64::from_le_bytes(word8);
        // The high bit of some byte is set when one is below 32, or above
        // 126 (no false alarm when there is none; tabs are looked at).
        let odd = below(x, 32) | from_del(x);
        if odd != 0 && !word.iter().all(byte_ok) {
            return false;
        }
    }
    words.remainder().iter().all(byte_ok)
}

/// How often a header the endpoint reads once came.
#[derive(Clone, Copy, Debug)]
pub(super) enum One<'h> {
    Absent,
    Once(&'h HeaderValue),
    Repeated,
}

impl<'h> One<'h> {
    fn add(&mut self, value: &'h HeaderValue) {
        *self = match self {
            One::Absent => One::Once(value),
            One::Once(_) | One::Repeated => One::Repeated,
        };
    }
}

/// What the endpoint reads of a request's headers: `Origin` and
/// `Content-Type` ([`admit`](super::guard::admit)), the first
/// `Content-Length` (the body limit), whether an `Accept` lists
/// `text/event-stream`, and the 2026-07-28 headers
/// ([`check_headers`](super::headers::check_headers)). Each check reads
/// these exactly as it read the map: a repeated header is `Repeated`.
#[derive(Debug)]
pub(super) struct SeenHeaders<'h> {
    pub(super) origin: One<'h>,
    pub(super) content_type: One<'h>,
    pub(super) content_length: Option<&'h HeaderValue>,
    pub(super) accepts_event_stream: bool,
    pub(super) protocol_version: One<'h>,
    pub(super) mcp_method: One<'h>,
    pub(super) mcp_name: One<'h>,
}

impl<'h> SeenHeaders<'h> {
    /// One pass over every value of `headers`.
    pub(super) fn read(headers: &'h HeaderMap) -> Self {
        let mut seen = SeenHeaders {
            origin: One::Absent,
            content_type: One::Absent,
            content_length: None,
            accepts_event_stream: false,
            protocol_version: One::Absent,
            mcp_method: One::Absent,
            mcp_name: One::Absent,
        };
        for (name, value) in headers {
            // A standard name is compared as the constant it is (no string
            // comparison); the 2026-07-28 names are not standard ones, and
            // header names are stored lower-case.
            if name == CONTENT_TYPE {
                seen.content_type.add(value);
            } else if name == ACCEPT {
                seen.accepts_event_stream |= lists_event_stream(value.as_bytes());
            } else if name == CONTENT_LENGTH {
                seen.content_length.get_or_insert(value);
            } else if name == ORIGIN {
                seen.origin.add(value);
            } else {
                match name.as_str() {
                    "mcp-protocol-version" => seen.protocol_version.add(value),
                    "mcp-method" => seen.mcp_method.add(value),
                    "mcp-name" => seen.mcp_name.add(value),
                    _ => {}
                }
            }
        }
        seen
    }

    /// The declared body length, if it is a number: what
    /// `to_str()`, `trim()` and `parse::<u64>()` read, on the bytes.
    pub(super) fn declared_length(&self) -> Option<u64> {
        let value = self.content_length?.as_bytes();
        // The common value: up to 19 digits, nothing else.
        if (1..20).contains(&value.len()) && value.iter().all(u8::is_ascii_digit) {
            return Some(value.iter().fold(0, |n, &b| n * 10 + u64::from(b - b'0')));
        }
        // `to_str` refuses anything but visible ASCII and tabs.
        if !value.iter().all(|&b| b == b'\t' || (32..127).contains(&b)) {
            return None;
        }
        // `parse::<u64>` takes one leading `+`, then digits only.
        let digits = value.trim_ascii();
        let digits = digits.strip_prefix(b"+").unwrap_or(digits);
        if digits.is_empty() {
            return None;
        }
        digits.iter().try_fold(0u64, |n, &b| {
            if !b.is_ascii_digit() {
                return None;
            }
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `readable` is `HeaderValue::to_str`'s test, on every byte in every
    /// place of a word and in the tail.
    #[test]
    fn readable_agrees_with_to_str() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..40 {
            for _ in 0..300 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        if seed % 7 == 0 {
                            (seed >> 8) as u8
                        } else {
                            b'a' + (seed % 26) as u8
                        }
                    })
                    .collect();
                let Ok(value) = HeaderValue::from_bytes(&bytes) else {
                    continue;
                };
                assert_eq!(readable(&bytes), value.to_str().is_ok(), "{bytes:?}");
            }
        }
        for b in 0..=255u8 {
            for at in 0..12 {
                let mut bytes = vec![b'x'; 12];
                bytes[at] = b;
                let by_str = std::str::from_utf8(&bytes)
                    .is_ok_and(|s| s.bytes().all(|c| c == b'\t' || (32..127).contains(&c)));
                assert_eq!(readable(&bytes), by_str, "{b} at {at}");
            }
        }
    }

    /// What one pass reads is what a look-up of each header gives.
    #[test]
    fn one_pass_reads_what_the_lookups_read() {
        let mut headers = HeaderMap::new();
        headers.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.append(ACCEPT, HeaderValue::from_static("application/json"));
        headers.append(ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.append(CONTENT_LENGTH, HeaderValue::from_static(" 12 "));
        headers.append(CONTENT_LENGTH, HeaderValue::from_static("13"));
        headers.append("mcp-method", HeaderValue::from_static("tasks/get"));
        headers.append("Mcp-Name", HeaderValue::from_static("a"));
        headers.append("mcp-name", HeaderValue::from_static("b"));
        let seen = SeenHeaders::read(&headers);
        assert!(matches!(seen.origin, One::Absent));
        assert!(matches!(seen.content_type, One::Once(v) if v == "application/json"));
        assert!(seen.accepts_event_stream);
        assert_eq!(seen.declared_length(), Some(12));
        for value in [
            "0",
            "+7",
            " 42\t",
            "++1",
            "-1",
            "",
            " ",
            "+",
            "1 2",
            "0x10",
            "１",
            "18446744073709551615",
            "18446744073709551616",
            "007",
        ] {
            let mut map = HeaderMap::new();
            map.insert(CONTENT_LENGTH, HeaderValue::from_str(value).unwrap());
            let by_str = value.trim().parse::<u64>().ok();
            assert_eq!(
                SeenHeaders::read(&map).declared_length(),
                by_str,
                "{value:?}"
            );
        }
        let mut map = HeaderMap::new();
        map.insert(CONTENT_LENGTH, HeaderValue::from_bytes(b"1\xb2").unwrap());
        assert_eq!(SeenHeaders::read(&map).declared_length(), None);
        assert!(matches!(seen.protocol_version, One::Absent));
        assert!(matches!(seen.mcp_method, One::Once(v) if v == "tasks/get"));
        assert!(matches!(seen.mcp_name, One::Repeated));
        headers.insert(ORIGIN, HeaderValue::from_static("http://localhost"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let seen = SeenHeaders::read(&headers);
        assert!(matches!(seen.origin, One::Once(_)));
        assert!(!seen.accepts_event_stream);
    }
}
