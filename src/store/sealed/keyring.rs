//! [`SealKeyRing`]: the keys a [`SealedStore`](super::SealedStore) seals
//! with (the newest) and opens with (any of them), by key id.

use std::fmt;
use std::path::Path;

use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use zeroize::Zeroizing;

use crate::hex::decode_hex;

/// Bytes in a key: XChaCha20-Poly1305 keys are 256 bits.
pub const SEAL_KEY_BYTES: usize = 32;

/// The longest key id accepted.
const MAX_KEY_ID_LEN: usize = 64;

/// The sealing keys, oldest first: new writes are sealed with the newest
/// (the last), and a record sealed with any key of the ring opens.
///
/// Rotating: append a new key (a new last line in the key file) and
/// restart; records are sealed with it from their next write on, and the
/// old key keeps opening the rest. Drop an old key only once no record
/// sealed with it is left (every task of that time has expired).
///
/// Key bytes are wiped from memory when the ring is dropped, and never
/// shown: `Debug` prints the key ids alone.
///
/// ```
/// use mcp_task_layer::store::SealKeyRing;
///
/// let ring = SealKeyRing::parse(
///     "# oldest first\n\
///      2026-01:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n\
///      2026-06:202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f\n",
/// )?;
/// assert_eq!(ring.newest_id(), "2026-06");
/// assert!(!format!("{ring:?}").contains("0001"));
/// # Ok::<(), mcp_task_layer::store::SealKeyError>(())
/// ```
pub struct SealKeyRing {
    /// Never empty.
    keys: Vec<SealKey>,
}

struct SealKey {
    id: String,
    /// The cipher keeps its own copy of the key and wipes it when dropped.
    cipher: XChaCha20Poly1305,
}

/// Why a key ring could not be made. Says which line, never what was on it.
#[derive(Debug)]
#[non_exhaustive]
pub enum SealKeyError {
    /// The key file or variable could not be read.
    Read(String),
    /// No key at all.
    Empty,
    /// A line is not `KEY_ID:HEX` with an id of letters, digits and dashes
    /// (at most 64) and 64 hex digits.
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Two keys have the same id.
    DuplicateId(String),
}

impl fmt::Display for SealKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealKeyError::Read(e) => write!(f, "cannot read the sealing keys: {e}"),
            SealKeyError::Empty => f.write_str("no sealing key given"),
            SealKeyError::Malformed { line, why } => {
                write!(
                    f,
                    "sealing key line {line}: {why} (expected KEY_ID:64 hex digits)"
                )
            }
            SealKeyError::DuplicateId(id) => write!(f, "two sealing keys have the id {id:?}"),
        }
    }
}

impl std::error::Error for SealKeyError {}

impl fmt::Debug for SealKeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealKeyRing")
            .field("ids", &self.keys.iter().map(|k| &k.id).collect::<Vec<_>>())
            .finish()
    }
}

impl SealKeyRing {
    /// A ring of one key.
    pub fn single(id: &str, key: [u8; SEAL_KEY_BYTES]) -> Result<Self, SealKeyError> {
        let key = Zeroizing::new(key);
        check_id(id).map_err(|why| SealKeyError::Malformed { line: 1, why })?;
        Ok(SealKeyRing {
            keys: vec![SealKey::new(id, &key)],
        })
    }

    /// The same ring with `key` added as the newest.
    pub fn with_key(mut self, id: &str, key: [u8; SEAL_KEY_BYTES]) -> Result<Self, SealKeyError> {
        let key = Zeroizing::new(key);
        check_id(id).map_err(|why| SealKeyError::Malformed {
            line: self.keys.len() + 1,
            why,
        })?;
        if self.get(id).is_some() {
            return Err(SealKeyError::DuplicateId(id.to_owned()));
        }
        self.keys.push(SealKey::new(id, &key));
        Ok(self)
    }

    /// A ring from lines `KEY_ID:HEX`, oldest first, the last the newest.
    /// Blank lines and lines starting with `#` are skipped; spaces around a
    /// line are ignored.
    pub fn parse(text: &str) -> Result<Self, SealKeyError> {
        let mut keys: Vec<SealKey> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why| SealKeyError::Malformed { line: n + 1, why };
            let (id, hex) = line.split_once(':').ok_or(bad("no colon"))?;
            check_id(id).map_err(bad)?;
            if hex.len() != 2 * SEAL_KEY_BYTES {
                return Err(bad("the key is not 64 hex digits"));
            }
            let bytes = Zeroizing::new(decode_hex(hex).ok_or(bad("the key is not hex"))?);
            let mut key = Zeroizing::new([0u8; SEAL_KEY_BYTES]);
            key.copy_from_slice(&bytes);
            if keys.iter().any(|k| k.id == id) {
                return Err(SealKeyError::DuplicateId(id.to_owned()));
            }
            keys.push(SealKey::new(id, &key));
        }
        if keys.is_empty() {
            return Err(SealKeyError::Empty);
        }
        Ok(SealKeyRing { keys })
    }

    /// [`parse`](Self::parse) the file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, SealKeyError> {
        let text = Zeroizing::new(
            std::fs::read_to_string(path.as_ref())
                .map_err(|e| SealKeyError::Read(format!("{}: {e}", path.as_ref().display())))?,
        );
        Self::parse(&text)
    }

    /// [`parse`](Self::parse) the environment variable `name` (lines
    /// separated by newlines or by `;`).
    pub fn from_env(name: &str) -> Result<Self, SealKeyError> {
        let text = Zeroizing::new(
            std::env::var(name).map_err(|e| SealKeyError::Read(format!("{name}: {e}")))?,
        );
        let lines = Zeroizing::new(text.replace(';', "\n"));
        Self::parse(&lines)
    }

    /// The id of the key new writes are sealed with.
    pub fn newest_id(&self) -> &str {
        self.newest().0
    }

    /// Every key id, oldest first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    pub(super) fn newest(&self) -> (&str, &XChaCha20Poly1305) {
        let key = self.keys.last().unwrap_or_else(|| unreachable!());
        (&key.id, &key.cipher)
    }

    /// The cipher of key `id`.
    pub(super) fn get(&self, id: &str) -> Option<&XChaCha20Poly1305> {
        self.keys.iter().find(|k| k.id == id).map(|k| &k.cipher)
    }
}

impl SealKey {
    fn new(id: &str, key: &[u8; SEAL_KEY_BYTES]) -> Self {
        SealKey {
            id: id.to_owned(),
            cipher: XChaCha20Poly1305::new(key.into()),
        }
    }
}

/// An id of letters, digits and dashes: it is written in every sealed
/// field, before a colon.
fn check_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > MAX_KEY_ID_LEN {
        return Err("the key id must have 1 to 64 characters");
    }
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err("the key id must be letters, digits and dashes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn lines_parse_oldest_first_and_errors_name_the_line_not_the_key() {
        let ring = SealKeyRing::parse(&format!("\n# c\n a:{K} \nb-2:{K}\n")).unwrap();
        assert_eq!(ring.ids().collect::<Vec<_>>(), ["a", "b-2"]);
        assert_eq!(ring.newest_id(), "b-2");
        for (text, line) in [
            (format!("a:{K}\nb{K}"), 2),
            (format!("a b:{K}"), 1),
            (format!("a:{}", &K[1..]), 1),
            (format!("a:{}zz", &K[2..]), 1),
            (format!(":{K}"), 1),
        ] {
            match SealKeyRing::parse(&text) {
                Err(e @ SealKeyError::Malformed { line: l, .. }) => {
                    assert_eq!(l, line, "{text}");
                    assert!(!e.to_string().contains(&K[4..20]), "{e}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            SealKeyRing::parse(&format!("a:{K}\na:{K}")),
            Err(SealKeyError::DuplicateId(_))
        ));
        assert!(matches!(
            SealKeyRing::parse("# none\n"),
            Err(SealKeyError::Empty)
        ));
    }

    #[test]
    fn debug_shows_ids_only() {
        let ring = SealKeyRing::single("k1", [7; 32]).unwrap();
        let shown = format!("{ring:?}");
        assert!(shown.contains("k1") && !shown.contains('7'), "{shown}");
    }
}
