//! `key_codec`: the tuple-key encoding of the Deno KV layer.
//!
//! - Raw: `Key::decode(data)` never panics, and whatever it accepts encodes back to exactly
//!   `data` (the decoder accepts only canonical encodings, so every key has one encoding).
//! - Structured: two keys built from the input (every part kind, bigints of every length
//!   class, any f64 bit pattern, shared prefixes) encode (unless a bigint is over 255
//!   bytes), decode back to themselves, and compare exactly as their encodings compare;
//!   equal keys hash equally.

use crate::util::hex;
use arbitrary::{Arbitrary, Unstructured};
use stampkv::{Key, KeyError, KeyPart, KvBigInt};
use std::hash::{DefaultHasher, Hash, Hasher};

/// One part, as the input describes it.
#[derive(Arbitrary, Debug)]
enum PartSpec {
    Bytes(Vec<u8>),
    /// Bytes with many zeros (the escaped byte).
    Zeros {
        len: u8,
        mask: u8,
    },
    String(String),
    SmallString(u8),
    BigInt {
        negative: bool,
        magnitude: Vec<u8>,
    },
    /// A bigint of `len` magnitude bytes (up to 300: beyond 255 is refused).
    LongBigInt {
        negative: bool,
        len: u16,
        fill: u8,
    },
    Int(i64),
    Number(f64),
    Bool(bool),
}

impl PartSpec {
    fn build(self) -> KeyPart {
        match self {
            PartSpec::Bytes(b) => KeyPart::Bytes(b),
            PartSpec::Zeros { len, mask } => {
                KeyPart::Bytes((0..len % 8).map(|i| if mask >> i & 1 == 1 { 0 } else { 0xFF }).collect())
            }
            PartSpec::String(s) => KeyPart::String(s),
            PartSpec::SmallString(n) => {
                KeyPart::String(["", "a", "ab", "b", "\0", "a\0", "é"][n as usize % 7].into())
            }
            PartSpec::BigInt { negative, magnitude } => {
                KeyPart::BigInt(KvBigInt::from_sign_magnitude(negative, &magnitude))
            }
            PartSpec::LongBigInt { negative, len, fill } => {
                let len = usize::from(len % 301);
                let magnitude: Vec<u8> =
                    (0..len).map(|i| fill.wrapping_add(i as u8).max(u8::from(i == 0))).collect();
                KeyPart::BigInt(KvBigInt::from_sign_magnitude(negative, &magnitude))
            }
            PartSpec::Int(n) => KeyPart::BigInt(KvBigInt::from(n)),
            PartSpec::Number(x) => KeyPart::Number(x),
            PartSpec::Bool(b) => KeyPart::Bool(b),
        }
    }
}

/// Two keys; the second may share a prefix of the first's parts.
#[derive(Arbitrary, Debug)]
struct KeysSpec {
    first: Vec<PartSpec>,
    shared: u8,
    second: Vec<PartSpec>,
}

fn hash_of(key: &Key) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// Runs the `key_codec` target on one input.
pub fn key_codec(data: &[u8]) {
    raw(data);
    if let Ok(spec) = KeysSpec::arbitrary(&mut Unstructured::new(data)) {
        structured(spec);
    }
}

fn raw(data: &[u8]) {
    let Ok(key) = Key::decode(data) else { return };
    let encoded = key.encode().unwrap_or_else(|e| panic!("decoded key {key:?} does not encode: {e}"));
    assert_eq!(
        encoded,
        data,
        "decode accepted a non-canonical encoding: {} decodes to {key:?}, which encodes to {}",
        hex(data),
        hex(&encoded)
    );
}

fn structured(spec: KeysSpec) {
    let first: Vec<KeyPart> = spec.first.into_iter().take(8).map(PartSpec::build).collect();
    let shared = usize::from(spec.shared).min(first.len());
    let mut second: Vec<KeyPart> = first[..shared].to_vec();
    second.extend(spec.second.into_iter().take(8).map(PartSpec::build));
    let (k1, k2) = (Key(first), Key(second));
    let (Some(e1), Some(e2)) = (round_trip(&k1), round_trip(&k2)) else { return };
    let (by_key, by_bytes) = (k1.cmp(&k2), e1.cmp(&e2));
    assert_eq!(
        by_key,
        by_bytes,
        "key order differs from encoding order: {k1:?} vs {k2:?}; encodings {} vs {}",
        hex(&e1),
        hex(&e2)
    );
    assert_eq!(k1 == k2, e1 == e2, "key equality differs from encoding equality: {k1:?} vs {k2:?}");
    if k1 == k2 {
        assert_eq!(hash_of(&k1), hash_of(&k2), "equal keys hash differently: {k1:?} vs {k2:?}");
    }
    // Part by part, too (the order of single parts is what the key order is made of).
    for (p1, p2) in k1.0.iter().zip(&k2.0) {
        let (a, b) = (Key(vec![p1.clone()]), Key(vec![p2.clone()]));
        let (ea, eb) = (a.encode().unwrap_or_default(), b.encode().unwrap_or_default());
        if !ea.is_empty() && !eb.is_empty() {
            assert_eq!(p1.cmp(p2), ea.cmp(&eb), "part order differs from encoding order: {p1:?} vs {p2:?}");
        }
    }
}

/// Encodes and decodes a key; `None` when encoding is refused for its documented reason.
fn round_trip(key: &Key) -> Option<Vec<u8>> {
    let encoded = match key.encode() {
        Ok(encoded) => encoded,
        Err(KeyError::BigIntTooLarge) => {
            let too_large =
                key.0.iter().any(|p| matches!(p, KeyPart::BigInt(n) if n.magnitude_be().len() > 255));
            assert!(too_large, "BigIntTooLarge for {key:?}, whose bigints all fit in 255 bytes");
            return None;
        }
        Err(e) => panic!("{key:?} does not encode: {e}"),
    };
    let decoded = Key::decode(&encoded)
        .unwrap_or_else(|e| panic!("the encoding {} of {key:?} does not decode: {e}", hex(&encoded)));
    assert_eq!(&decoded, key, "decode(encode(k)) != k for encoding {}", hex(&encoded));
    assert_eq!(decoded.0.len(), key.0.len(), "part count changed for {key:?}");
    for (a, b) in decoded.0.iter().zip(&key.0) {
        if let (KeyPart::Number(x), KeyPart::Number(y)) = (a, b) {
            // -0 stays -0; every NaN becomes the one canonical NaN.
            let same = (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
            assert!(same, "number part {y:?} came back as {x:?}");
        }
    }
    assert_eq!(decoded.encode().ok().as_ref(), Some(&encoded), "re-encoding {key:?} changed the bytes");
    Some(encoded)
}
