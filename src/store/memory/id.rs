//! [`Id`]: a short string kept inline, for task ids and index keys.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A short string kept inline: a task id (the layer's are 32 bytes), a tool
/// or owner name. Longer ones are allocated once and shared by every copy.
///
/// Reading one inline touches no other memory: with a million tasks, every
/// pointer a read follows is a likely cache miss, and a shard's map compares
/// the id it finds with the one asked for. Ids hash, compare and order by
/// their bytes (UTF-8 orders like the strings), so that none of this
/// re-validates the text; a lookup builds an `Id` of the id asked for (on
/// the stack, for ids up to 32 bytes).
#[derive(Clone)]
pub(super) enum Id {
    Inline(u8, [u8; INLINE]),
    Shared(Arc<str>),
}

const INLINE: usize = 32;

impl Id {
    pub(super) fn new(id: &str) -> Self {
        match u8::try_from(id.len()) {
            Ok(len) if id.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..id.len()].copy_from_slice(id.as_bytes());
                Id::Inline(len, bytes)
            }
            _ => Id::Shared(Arc::from(id)),
        }
    }

    /// A number from the id's first and last eight bytes (all of a shorter
    /// one), its length and `seed`, in one multiplication: which shard the
    /// id lives in. Equal ids spread alike.
    pub(super) fn spread(&self, seed: u64) -> usize {
        let bytes = self.bytes();
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            for (to, from) in w.iter_mut().zip(b) {
                *to = *from;
            }
            u64::from_le_bytes(w)
        };
        let (head, tail) = match (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
            (Some(head), Some(tail)) => (u64::from_le_bytes(*head), u64::from_le_bytes(*tail)),
            _ => (word(bytes), 0),
        };
        let x = (head ^ tail.rotate_left(29) ^ seed ^ bytes.len() as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (x >> 40) as usize
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Id::Inline(len, bytes) => &bytes[..usize::from(*len)],
            Id::Shared(s) => s.as_bytes(),
        }
    }

    pub(super) fn as_str(&self) -> &str {
        match self {
            // Copied from a `&str` whole: the prefix is always UTF-8.
            Id::Inline(..) => std::str::from_utf8(self.bytes()).unwrap_or(""),
            Id::Shared(s) => s,
        }
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Id {}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> Ordering {
        self.bytes().cmp(other.bytes())
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_like_their_strings() {
        let ids = [
            "",
            "a",
            "a\0",
            "a\0b",
            "ab",
            "abcdefghijklmnop",
            "abcdefghijklmnop\0",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "abcdefghijklmnoq",
            "0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef\0",
            "0123456789abcdef0123456789abcdefg",
            "0123456789abcdef0123456789abcdeg",
            "b",
            "é",
            "zz",
        ];
        for x in ids {
            for y in ids {
                assert_eq!(Id::new(x).cmp(&Id::new(y)), x.cmp(y), "{x:?} vs {y:?}");
                assert_eq!(Id::new(x) == Id::new(y), x == y);
                assert_eq!(Id::new(x).as_str(), x);
            }
        }
    }
}
