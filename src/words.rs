//! Byte tests eight bytes at a time ("SWAR"): each takes eight bytes as a
//! little-endian `u64` and sets the high bit of each byte that passes.
//!
//! A borrow or a carry out of a byte that passes can set the bit of a
//! byte above it as well, never of one below: whether any bit is set is
//! exact, and so is the lowest one (the first byte that passes), not the
//! others.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes below `n` (`n <= 128`).
#[inline]
pub(crate) fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS
}

/// The bytes equal to `b`.
#[inline]
pub(crate) fn equal(x: u64, b: u8) -> u64 {
    below(x ^ (ONES * u64::from(b)), 1)
}

/// The bytes from DEL (127) up: not printable ASCII at the top.
// Only the HTTP edge's checks use it.
#[cfg_attr(not(feature = "axum"), allow(dead_code))]
#[inline]
pub(crate) fn from_del(x: u64) -> u64 {
    (x.wrapping_add(ONES) | x) & HIGHS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's name, the test, and what it flags one byte at a time.
    type Case = (&'static str, fn(u64) -> u64, fn(u8) -> bool);

    /// The first byte a test flags, as its lowest bit set gives it.
    fn first(flags: u64) -> Option<u32> {
        (flags != 0).then(|| flags.trailing_zeros() / 8)
    }

    /// Every byte value at every position of a word, each with every kind
    /// of byte after it (where a borrow or carry could set a flag): the
    /// first byte flagged is the first byte that passes, one at a time.
    #[test]
    fn the_first_byte_flagged_is_the_first_that_passes() {
        let tests: [Case; 5] = [
            ("below 0x20", |x| below(x, 0x20), |b| b < 0x20),
            ("below !", |x| below(x, b'!'), |b| b < b'!'),
            ("equal \"", |x| equal(x, b'"'), |b| b == b'"'),
            ("equal \\", |x| equal(x, b'\\'), |b| b == b'\\'),
            ("from DEL", from_del, |b| b >= 0x7f),
        ];
        for (name, flags, passes) in tests {
            for at in 0..8 {
                for b in 0..=255u8 {
                    for after in [
                        0u8, 0x1f, b' ', b'!', b'"', b'\\', b'a', 0x7e, 0x7f, 0x80, 0xff,
                    ] {
                        let mut word = [b'a'; 8];
                        word[at] = b;
                        if at < 7 {
                            word[at + 1] = after;
                        }
                        let by_byte = word.iter().position(|&b| passes(b)).map(|i| i as u32);
                        assert_eq!(
                            first(flags(u64::from_le_bytes(word))),
                            by_byte,
                            "{name}: {word:?}"
                        );
                    }
                }
            }
        }
    }
}
