//! Session ids and secret keys. A key is shown once, at connect; the daemon keeps only its
//! SHA-256 and compares in constant time.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::random::{hex, random_bytes};

/// A public session id: short (it names the master's control socket) and unguessable enough
/// not to collide.
pub fn new_session_id() -> std::io::Result<String> {
    let bytes: [u8; 5] = random_bytes()?;
    Ok(format!("s{}", hex(&bytes)))
}

/// Whether `id` has the form [`new_session_id`] gives (it names a file in the masters
/// directory, so a record must not smuggle anything else in).
pub fn is_session_id(id: &str) -> bool {
    id.len() == 11
        && id.starts_with('s')
        && id[1..]
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A fresh secret key (256 bits, base64url) and the hash we keep of it.
pub fn new_session_key() -> std::io::Result<(String, KeyHash)> {
    let bytes: [u8; 32] = random_bytes()?;
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let hash = KeyHash::of(&key);
    Ok((key, hash))
}

/// The length of a session key: 32 bytes in base64url without padding.
const KEY_LEN: usize = 43;

/// The text put where a session key was.
pub const REDACTED: &str = "[session key]";

/// `text` with every session key whose hash is among `known` replaced by [`REDACTED`]. The
/// daemon keeps keys only as hashes, so each run of key characters is hashed at every offset
/// where a key fits (a summary is 200 bytes: a few hundred hashes at most).
pub fn redact<'a>(text: &'a str, known: &[KeyHash]) -> std::borrow::Cow<'a, str> {
    let bytes = text.as_bytes();
    let is_key_char = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let mut found: Vec<usize> = vec![];
    let mut at = 0;
    while at + KEY_LEN <= bytes.len() {
        if !bytes[at..at + KEY_LEN].iter().all(|&b| is_key_char(b)) {
            at += 1;
            continue;
        }
        let hash = KeyHash(Sha256::digest(&bytes[at..at + KEY_LEN]).into());
        if known.contains(&hash) {
            found.push(at);
            at += KEY_LEN;
        } else {
            at += 1;
        }
    }
    if found.is_empty() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for start in found {
        // Key characters are ASCII: both ends are character boundaries.
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = start + KEY_LEN;
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// The SHA-256 of a session key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyHash([u8; 32]);

impl KeyHash {
    pub fn of(key: &str) -> Self {
        Self(Sha256::digest(key.as_bytes()).into())
    }

    /// Compares `key` with this hash without an early exit, so timing tells nothing about
    /// how much of a guess was right.
    pub fn matches(&self, key: &str) -> bool {
        let other = Self::of(key);
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    pub fn to_hex(self) -> String {
        hex(&self.0)
    }

    /// A hash written by [`KeyHash::to_hex`]: exactly 64 lowercase hex digits.
    pub fn from_hex(text: &str) -> Option<Self> {
        let digits = text.as_bytes();
        if digits.len() != 64 {
            return None;
        }
        let value = |d: u8| match d {
            b'0'..=b'9' => Some(d - b'0'),
            b'a'..=b'f' => Some(d - b'a' + 10),
            _ => None,
        };
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            *byte = value(pair[0])? << 4 | value(pair[1])?;
        }
        Some(Self(bytes))
    }
}

// Even the hash stays out of debug output.
impl std::fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyHash(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_only_themselves() {
        let (key, hash) = new_session_key().unwrap();
        assert_eq!(key.len(), 43);
        assert!(hash.matches(&key));
        assert!(!hash.matches(&format!("{key}x")));
        assert!(!hash.matches(""));
        let (other, _) = new_session_key().unwrap();
        assert_ne!(key, other);
    }

    #[test]
    fn every_known_key_is_redacted_wherever_it_stands() {
        let (a, ha) = new_session_key().unwrap();
        let (b, hb) = new_session_key().unwrap();
        let (unknown, _) = new_session_key().unwrap();
        let text = format!("echo {a}; X={b}x é{a} {unknown}");
        assert_eq!(
            redact(&text, &[ha, hb]),
            format!("echo {REDACTED}; X={REDACTED}x é{REDACTED} {unknown}")
        );
        assert!(matches!(
            redact("no key here", &[ha]),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(redact(&a[..42], &[ha]), &a[..42]);
        assert_eq!(redact(&a, &[]), a);
    }

    #[test]
    fn a_hash_reads_back_from_its_hex_and_nothing_else_does() {
        let (key, hash) = new_session_key().unwrap();
        let back = KeyHash::from_hex(&hash.to_hex()).unwrap();
        assert!(back.matches(&key));
        assert!(KeyHash::from_hex(&hash.to_hex().to_uppercase()).is_none());
        assert!(KeyHash::from_hex(&hash.to_hex()[1..]).is_none());
        assert!(KeyHash::from_hex(&"g".repeat(64)).is_none());
    }

    #[test]
    fn only_generated_ids_look_like_ids() {
        assert!(is_session_id(&new_session_id().unwrap()));
        for bad in [
            "",
            "s012345678",
            "s0123456789a",
            "x0123456789",
            "s012345678/",
            "s../../etc",
        ] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }

    #[test]
    fn ids_are_short_and_distinct() {
        let a = new_session_id().unwrap();
        assert_eq!(a.len(), 11);
        assert_ne!(a, new_session_id().unwrap());
    }
}
