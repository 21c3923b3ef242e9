//! URL-safe base64 with `=` padding (RFC 4648 §5), as Deno's list cursors use it.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Encodes with padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                // `& 63` keeps the index inside the 64-symbol alphabet.
                let symbol = ALPHABET.get((n >> (18 - 6 * i)) as usize & 63).copied().unwrap_or(b'=');
                out.push(symbol as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes canonical padded input: length a multiple of 4, padding only at the end, and
/// no bits set in the padding. `None` otherwise.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (index, chunk) in bytes.chunks(4).enumerate() {
        let last = index + 1 == bytes.len() / 4;
        let padding = chunk.iter().rev().take_while(|c| **c == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in chunk.get(..4 - padding)? {
            n = (n << 6) | ALPHABET.iter().position(|a| *a == c)? as u32;
        }
        n <<= 6 * padding as u32;
        let produced = 3 - padding;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Canonical: the bits under the padding are zero.
        let (kept, under_padding) = decoded.split_at_checked(produced)?;
        if under_padding.iter().any(|b| *b != 0) {
            return None;
        }
        out.extend_from_slice(kept);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rfc_4648_vectors_and_round_trips() {
        for (raw, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
        ] {
            assert_eq!(encode(raw.as_bytes()), encoded);
            assert_eq!(decode(encoded).as_deref(), Some(raw.as_bytes()));
        }
        assert_eq!(encode(&[0xfb, 0xff]), "-_8=");
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)), Some(all));
    }

    #[test]
    fn non_canonical_input_is_refused() {
        for bad in ["FQE", "FQE==", "Zg=a", "Zg==Zg==", "Zh==", "+/8=", "Z==="] {
            assert_eq!(decode(bad), None, "{bad}");
        }
        assert_eq!(decode("FQE="), Some(vec![0x15, 0x01]));
    }
}
