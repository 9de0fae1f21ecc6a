//! Session ids and secret keys. A key is shown once, at connect; the daemon keeps only its
//! SHA-256 and compares in constant time.

use std::io::Read;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Random bytes from the kernel.
pub(crate) fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

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

/// A fresh random word for shell text, `{prefix}` then 32 hex digits: no output can contain
/// it by chance, and nothing outside this daemon can know it.
pub(crate) fn nonce(prefix: &str) -> std::io::Result<String> {
    let bytes: [u8; 16] = random_bytes()?;
    Ok(format!("{prefix}{}", hex(&bytes)))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)].into());
        out.push(DIGITS[usize::from(b & 0xf)].into());
    }
    out
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
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert!(nonce("_p_").unwrap().starts_with("_p_"));
        assert_eq!(nonce("").unwrap().len(), 32);
    }

    #[test]
    fn ids_are_short_and_distinct() {
        let a = new_session_id().unwrap();
        assert_eq!(a.len(), 11);
        assert_ne!(a, new_session_id().unwrap());
    }
}
