//! Standard base64 with `=` padding (RFC 4648 §4), for binary data in dumps: the `base64`
//! crate's standard engine, strict on decoding (canonical padding, no stray bits).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// Appends the padded encoding of `bytes` to `out`.
pub fn encode_into(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    if let Some(tail) = out.get_mut(start..) {
        // The slice is exactly the encoded length, so this cannot fail.
        let _ = STANDARD.encode_slice(bytes, tail);
    }
}

/// The padded encoding of `bytes`.
#[cfg(test)]
pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes canonical padded input (length a multiple of 4, padding only at the end, no
/// bits set in the padding); `None` otherwise.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
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
