//! Lowercase hex, for task ids, server request ids and list cursors.

/// Append `bytes` as lowercase hex digits.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

/// Each byte's value as a hex digit, or 0xff.
const NIBBLES: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// The bytes of an even-length hex text, or `None` if it is not one.
/// (A table rather than `u8::from_str_radix` per pair: sealed task fields
/// are hex, opened on every read, and that took most of the read's time.)
pub(crate) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 2);
    let mut bad = 0;
    for pair in text.as_bytes().chunks_exact(2) {
        let (hi, lo) = (NIBBLES[usize::from(pair[0])], NIBBLES[usize::from(pair[1])]);
        bad |= hi | lo;
        out.push((hi << 4) | (lo & 0xf));
    }
    (bad & 0xf0 == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut text = String::new();
        push_hex(&mut text, &bytes);
        assert_eq!(text.len(), 512);
        assert!(text
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(decode_hex(&text), Some(bytes));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex("+f"), None, "no sign");
        assert_eq!(decode_hex("AbCd"), Some(vec![0xab, 0xcd]));
    }
}
