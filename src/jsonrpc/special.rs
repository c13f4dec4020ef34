//! The end of a JSON string's plain run, found eight bytes at a time: the
//! inner loop of the hand-read request (`scan.rs`).

/// Where the first byte at or after `from` that ends a string's plain run
/// is: a quote, a backslash or a control character (eight bytes at a
/// time, as memchr does).
pub(super) fn special_at(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` below `n` (exact for the lowest
    // such byte, which is the one taken).
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let rest = bytes.get(from..)?;
    let mut words = rest.chunks_exact(8);
    let mut at = from;
    for word in &mut words {
        // `chunks_exact(8)` yields eight bytes: never the fallback.
        let x = u64::from_le_bytes(<[u8; 8]>::try_from(word).unwrap_or([b'"'; 8]));
        let hits = below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1)
            | below(x, 0x20);
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let i = words
        .remainder()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(at + i)
}

#[cfg(test)]
mod tests {
    use super::special_at;

    /// Eight bytes at a time finds what a byte-by-byte look finds.
    #[test]
    fn special_at_agrees_with_a_byte_by_byte_look() {
        let alphabet: &[u8] = b"a\"\\\x00\x1f \x7f\x80\xa2\xdc\xff!#[]";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..40 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        // Mostly plain bytes, sometimes a special one.
                        if seed % 5 == 0 {
                            alphabet[(seed / 5 % alphabet.len() as u64) as usize]
                        } else {
                            b'a' + (seed % 26) as u8
                        }
                    })
                    .collect();
                for from in 0..=len {
                    let naive = (from..len)
                        .find(|&i| bytes[i] == b'"' || bytes[i] == b'\\' || bytes[i] < 0x20);
                    assert_eq!(special_at(&bytes, from), naive, "{bytes:?} from {from}");
                }
            }
        }
    }
}
