//! Randomness from the kernel, and the words made of it: fresh nonces for shell text and ids,
//! and hex digits.

use std::io::Read;

/// Random bytes from the kernel.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

/// A fresh random word for shell text, `{prefix}` then 32 hex digits: no output can contain
/// it by chance, and nothing outside this daemon can know it.
pub fn nonce(prefix: &str) -> std::io::Result<String> {
    let bytes: [u8; 16] = random_bytes()?;
    Ok(format!("{prefix}{}", hex(&bytes)))
}

pub fn hex(bytes: &[u8]) -> String {
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
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert!(nonce("_p_").unwrap().starts_with("_p_"));
        assert_eq!(nonce("").unwrap().len(), 32);
    }
}
