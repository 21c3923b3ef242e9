//! Standard base64 with `=` padding (RFC 4648 §4), for binary data in dumps.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The 6-bit value of a symbol of the alphabet.
fn symbol_value(c: u8) -> Option<u32> {
    let value = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(value))
}

/// Appends the padded encoding of `bytes` to `out`.
pub fn encode_into(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                // `& 63` keeps the index inside the 64-symbol alphabet.
                out.push(ALPHABET.get((n >> (18 - 6 * i)) as usize & 63).copied().unwrap_or(b'='));
            } else {
                out.push(b'=');
            }
        }
    }
}

/// The padded encoding of `bytes`.
#[cfg(test)]
pub fn encode(bytes: &[u8]) -> String {
    let mut out = Vec::new();
    encode_into(&mut out, bytes);
    // Only ASCII symbols were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Decodes canonical padded input (length a multiple of 4, padding only at the end, no
/// bits set in the padding); `None` otherwise.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let groups = bytes.len() / 4;
    let mut out = Vec::with_capacity(groups * 3);
    for (index, chunk) in bytes.chunks(4).enumerate() {
        let padding = chunk.iter().rev().take_while(|c| **c == b'=').count();
        if padding > 2 || (padding > 0 && index + 1 != groups) {
            return None;
        }
        let mut n = 0u32;
        for &c in chunk.get(..4 - padding)? {
            n = (n << 6) | symbol_value(c)?;
        }
        n <<= 6 * padding;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - padding;
        if decoded.get(keep..)?.iter().any(|b| *b != 0) {
            return None;
        }
        out.extend_from_slice(decoded.get(..keep)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_4648_vectors_round_trip_and_malformed_input_is_refused() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).as_deref(), Some(plain.as_bytes()));
        }
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)), Some(all));
        assert_eq!(encode(&[0xfb, 0xff]), "+/8=");
        for bad in ["Zg=", "Zg", "Z===", "Zh==", "Zm9=Zm9v", "Zm9v!A==", "-_8="] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
