//! The crate's JSON writers and measures: compact JSON written straight into
//! a `String` (byte for byte what `serde_json` writes), sizes and depths
//! counted without building text, and [`JsonText`], JSON kept as text.

use serde_json::value::RawValue;
use serde_json::Value;

mod text;

pub use text::JsonText;

/// Serialized size of a value, counted without allocating the text.
pub(crate) fn json_size(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Append `value` as compact JSON: byte for byte what `serde_json::to_vec`
/// writes, without going through serde (and into a `String`, so nobody
/// checks the text for UTF-8 again).
pub(crate) fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // `Number`'s `Display` is its JSON text (itoa, or the shortest
        // round-trip form of a finite float).
        Value::Number(n) => {
            use std::fmt::Write as _;
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_json_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_str(out, key);
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal, escaped as serde_json does: `\"`, `\\`, the
/// short forms `\b \t \n \f \r`, and `\u00xx` for other control bytes.
pub(crate) fn write_json_str(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    if !needs_escaping(s.as_bytes()) {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut clean = 0;
    for (i, &byte) in s.as_bytes().iter().enumerate() {
        if byte >= 0x20 && byte != b'"' && byte != b'\\' {
            continue;
        }
        // `i` is at an ASCII byte, so a char boundary.
        out.push_str(s.get(clean..i).unwrap_or_default());
        clean = i + 1;
        let short = match byte {
            b'"' => '"',
            b'\\' => '\\',
            0x08 => 'b',
            0x09 => 't',
            0x0a => 'n',
            0x0c => 'f',
            0x0d => 'r',
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
                continue;
            }
        };
        out.push('\\');
        out.push(short);
    }
    out.push_str(s.get(clean..).unwrap_or_default());
    out.push('"');
}

fn needs_escaping(bytes: &[u8]) -> bool {
    use crate::words::{below, equal};
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        // `chunks_exact(8)` only yields 8-byte chunks.
        let x = u64::from_le_bytes(<[u8; 8]>::try_from(chunk).unwrap_or([b'"'; 8]));
        if below(x, 0x20) | equal(x, b'"') | equal(x, b'\\') != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Nesting depth of a value (a scalar is 0), without recursion.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// `n` in decimal (without `fmt`'s machinery, on every read; `itoa` hands
/// back its digits as text, not checked again as UTF-8).
pub(crate) fn write_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// `n` in decimal, as `write!(out, "{n}")` writes it.
pub(crate) fn write_i64(out: &mut String, n: i64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// `raw` without line breaks: text with any (whitespace between tokens,
/// since strings escape them) is written again, compact. A message on an
/// event stream must fit one `data:` line.
pub(crate) fn compact(raw: Box<RawValue>) -> Box<RawValue> {
    compacted(raw.get())
        .and_then(|text| RawValue::from_string(text).ok())
        .unwrap_or(raw)
}

/// [`compact`] for JSON text: `None` when `text` has no line break (it is
/// compact enough as it is), else `text` written again, compact (`None`
/// too if it does not parse).
pub(crate) fn compacted(text: &str) -> Option<String> {
    // No line break: compact enough as it is.
    memchr::memchr2(b'\n', b'\r', text.as_bytes())?;
    serde_json::from_str::<Value>(text)
        .ok()
        .map(|v| v.to_string())
}

/// Text that is valid JSON by construction; `null` if it were not.
pub(crate) fn parse_trusted(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_and_depths() {
        assert_eq!(json_size(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#.len());
        let mut all_bytes = String::new();
        for c in (0u8..=0x7f)
            .map(char::from)
            .chain(['\u{e9}', '\u{2028}', '\u{1f600}'])
        {
            all_bytes.push(c);
        }
        // Each byte alone and at every position of an 8-byte step.
        let mut singles = Vec::new();
        for c in (0u8..=0x7f).map(char::from) {
            for at in 0..9 {
                let mut s = "abcdefghijklmnop".to_owned();
                s.insert(at, c);
                singles.push(Value::String(s));
            }
        }
        for v in [
            Value::Array(singles),
            json!({"s": all_bytes, "n": [0, -1, u64::MAX, i64::MIN, 0.1, -2.5e-300, 1e300]}),
            json!([null, true, false, {}, [], "", {"": {"a": [[]]}}]),
            json!(-0.0),
        ] {
            let mut mine = String::new();
            write_json(&mut mine, &v);
            assert_eq!(mine, serde_json::to_string(&v).unwrap());
        }
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({"a": {"b": [1]}})), 3);
        let mut deep = json!(0);
        for _ in 0..10_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(depth(&deep), 10_000, "no recursion, no stack overflow");
        // Dropping a 10k-deep Value recurses inside serde_json; keep it.
        std::mem::forget(deep);
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 999, 1_000, u64::from(u32::MAX), u64::MAX] {
            let mut out = String::from("x");
            write_u64(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
        for n in [0, -1, 7, -10, 999, i64::MIN, i64::MAX] {
            let mut out = String::from("x");
            write_i64(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }
}
