//! Keys: tuples of parts, encoded exactly as Deno KV encodes them (a subset of the
//! FoundationDB tuple layer), so that the bytewise order of encodings is the key order.
//!
//! ```text
//! key    := part*                       (no separators, no length prefix)
//! part   := 0x01 escaped(bytes) 0x00    a byte array
//!         | 0x02 escaped(utf8)  0x00    a string
//!         | 0x0B (len ^ 0xFF) !mag      a bigint < 0 whose magnitude has 9..=255 bytes
//!         | 0x0C..=0x13 !mag            a bigint < 0 with 8..=1 magnitude bytes (0x14 - len)
//!         | 0x14                        the bigint 0
//!         | 0x15..=0x1C mag             a bigint > 0 with 1..=8 magnitude bytes (0x14 + len)
//!         | 0x1D len mag                a bigint > 0 whose magnitude has 9..=255 bytes
//!         | 0x21 f64'                   a number: 8 bytes big-endian, sign-flip transformed
//!         | 0x26 | 0x27                 false | true
//! escaped(s) = s with every 0x00 written as 0x00 0xFF
//! mag    = minimal big-endian magnitude; !mag = its ones' complement
//! f64'   = bits ^ 0x8000_0000_0000_0000 if the sign bit is clear, else bits ^ all ones;
//!          every NaN is first made the canonical 0x7FF8_0000_0000_0000 (as JavaScript does)
//! ```
//! Order across types: bytes < string < bigint < number < false < true.

use crate::KvBigInt;
use std::cmp::Ordering;
use std::fmt;

/// One part of a key.
#[derive(Clone)]
pub enum KeyPart {
    /// A byte array (`Uint8Array`).
    Bytes(Vec<u8>),
    /// A string.
    String(String),
    /// A `bigint` (magnitude up to 255 bytes).
    BigInt(KvBigInt),
    /// A number (a JavaScript number is always a double: `1` is `Number(1.0)`).
    Number(f64),
    /// A boolean.
    Bool(bool),
}

/// A key: a tuple of parts. Ordered and compared as its encoding.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(pub Vec<KeyPart>);

/// Why bytes are not a valid key, or a key cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// A tag byte that starts no known part.
    InvalidTag {
        /// Offset of the tag.
        offset: usize,
        /// The byte found.
        tag: u8,
    },
    /// A string part that is not valid UTF-8.
    InvalidUtf8 {
        /// Offset of the part.
        offset: usize,
    },
    /// The input ends inside a part.
    UnexpectedEof,
    /// A bigint written with leading zero bytes, or a badly escaped byte sequence.
    NonCanonical {
        /// Offset of the part.
        offset: usize,
    },
    /// A bigint whose magnitude needs more than 255 bytes.
    BigIntTooLarge,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::InvalidTag { offset, tag } => write!(f, "invalid tag 0x{tag:02x} at offset {offset}"),
            KeyError::InvalidUtf8 { offset } => {
                write!(f, "invalid utf8 in the string part at offset {offset}")
            }
            KeyError::UnexpectedEof => write!(f, "unexpected end of key"),
            KeyError::NonCanonical { offset } => write!(f, "non-canonical key part at offset {offset}"),
            KeyError::BigIntTooLarge => write!(f, "BigUint requires more than 255 bytes to be represented"),
        }
    }
}

impl std::error::Error for KeyError {}

const TAG_BYTES: u8 = 0x01;
const TAG_STRING: u8 = 0x02;
const TAG_NEG_BIG: u8 = 0x0B;
const TAG_ZERO: u8 = 0x14;
const TAG_POS_BIG: u8 = 0x1D;
const TAG_NUMBER: u8 = 0x21;
const TAG_FALSE: u8 = 0x26;
const TAG_TRUE: u8 = 0x27;

impl KeyPart {
    /// Appends this part's encoding.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), KeyError> {
        match self {
            KeyPart::Bytes(bytes) => encode_escaped(out, TAG_BYTES, bytes),
            KeyPart::String(text) => encode_escaped(out, TAG_STRING, text.as_bytes()),
            KeyPart::BigInt(value) => encode_bigint(out, value)?,
            KeyPart::Number(value) => {
                out.push(TAG_NUMBER);
                out.extend_from_slice(&encode_f64(*value).to_be_bytes());
            }
            KeyPart::Bool(false) => out.push(TAG_FALSE),
            KeyPart::Bool(true) => out.push(TAG_TRUE),
        }
        Ok(())
    }

    /// Rank of the part's type in the cross-type order.
    fn type_rank(&self) -> u8 {
        match self {
            KeyPart::Bytes(_) => 0,
            KeyPart::String(_) => 1,
            KeyPart::BigInt(_) => 2,
            KeyPart::Number(_) => 3,
            KeyPart::Bool(_) => 4,
        }
    }
}

fn encode_escaped(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    for &byte in bytes {
        out.push(byte);
        if byte == 0 {
            out.push(0xFF);
        }
    }
    out.push(0);
}

fn encode_bigint(out: &mut Vec<u8>, value: &KvBigInt) -> Result<(), KeyError> {
    let magnitude = value.magnitude_be();
    let len = magnitude.len();
    if len > 255 {
        return Err(KeyError::BigIntTooLarge);
    }
    if value.is_zero() {
        out.push(TAG_ZERO);
    } else if !value.is_negative() {
        if len <= 8 {
            out.push(TAG_ZERO + len as u8);
        } else {
            out.push(TAG_POS_BIG);
            out.push(len as u8);
        }
        out.extend_from_slice(magnitude);
    } else {
        if len <= 8 {
            out.push(TAG_ZERO - len as u8);
        } else {
            out.push(TAG_NEG_BIG);
            out.push(len as u8 ^ 0xFF);
        }
        out.extend(magnitude.iter().map(|b| !b));
    }
    Ok(())
}

/// The one NaN a key holds (what every NaN from JavaScript becomes).
const CANONICAL_NAN: u64 = 0x7FF8_0000_0000_0000;

/// The order-preserving transform of a double; every NaN becomes [`CANONICAL_NAN`].
fn encode_f64(value: f64) -> u64 {
    let bits = if value.is_nan() { CANONICAL_NAN } else { value.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    }
}

fn decode_f64(stored: u64) -> f64 {
    let bits = if stored >> 63 == 0 { !stored } else { stored ^ (1 << 63) };
    f64::from_bits(bits)
}

impl Key {
    /// The empty key (readable, never writable).
    pub fn new() -> Self {
        Key(Vec::new())
    }

    /// Appends a part.
    pub fn push(&mut self, part: impl Into<KeyPart>) -> &mut Self {
        self.0.push(part.into());
        self
    }

    /// The parts.
    pub fn parts(&self) -> &[KeyPart] {
        &self.0
    }

    /// Whether the key has no parts.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The key's encoding.
    pub fn encode(&self) -> Result<Vec<u8>, KeyError> {
        let mut out = Vec::with_capacity(16 * self.0.len());
        for part in &self.0 {
            part.encode_into(&mut out)?;
        }
        Ok(out)
    }

    /// Decodes a key; rejects malformed input.
    pub fn decode(bytes: &[u8]) -> Result<Key, KeyError> {
        let mut parts = Vec::new();
        decode_parts_into(bytes, 0, &mut parts)?;
        Ok(Key(parts))
    }
}

/// Decodes the parts of `bytes` from `offset` on, appending them to `parts`.
#[inline]
fn decode_parts_into(bytes: &[u8], mut offset: usize, parts: &mut Vec<KeyPart>) -> Result<(), KeyError> {
    while offset < bytes.len() {
        offset += decode_part_into(bytes, offset, parts)?;
    }
    Ok(())
}

/// The whole parts at the start of a byte prefix that many keys share (a listing's common
/// prefix), decoded once: [`DecodedPrefix::decode`] then copies them instead of decoding
/// them again for every key, which saves the escape scan and UTF-8 check of every shared
/// string part.
#[derive(Debug, Clone, Default)]
pub struct DecodedPrefix {
    /// The encoding of `parts`: the start of the prefix it was made from.
    bytes: Vec<u8>,
    parts: Vec<KeyPart>,
}

impl DecodedPrefix {
    /// Decodes the longest run of whole parts at the start of `prefix` (a part cut off by
    /// the prefix's end, or one that does not decode, ends the run).
    pub fn new(prefix: &[u8]) -> DecodedPrefix {
        let mut parts = Vec::new();
        let mut offset = 0;
        while let Ok(used) = decode_part_into(prefix, offset, &mut parts) {
            offset += used;
        }
        DecodedPrefix { bytes: prefix.get(..offset).unwrap_or_default().to_vec(), parts }
    }

    /// Decodes `key` as [`Key::decode`] does (same key, same errors); in tests, beside
    /// [`DecodedPrefix::decode_into`], which listings use. A key that starts
    /// with the prefix's whole parts reuses them, unless the byte after them is `FF`: then
    /// the last of them may have been an escaped zero in the key, not a terminator, and the
    /// key is decoded from its start.
    #[cfg(test)]
    pub(crate) fn decode(&self, key: &[u8]) -> Result<Key, KeyError> {
        let mut parts = self.parts_buffer();
        self.decode_into(key, &mut parts)?;
        Ok(Key(parts))
    }

    /// An empty vector with room for the parts of a key with two parts after the prefix's.
    #[inline]
    pub fn parts_buffer(&self) -> Vec<KeyPart> {
        Vec::with_capacity(self.parts.len() + 2)
    }

    /// [`DecodedPrefix::decode`] into `parts` (empty on entry): the caller builds the key
    /// around the vector, which spares a `Result<Key, _>` moved through the stack per key.
    #[inline]
    pub fn decode_into(&self, key: &[u8], parts: &mut Vec<KeyPart>) -> Result<(), KeyError> {
        let reusable = !self.parts.is_empty()
            && key.starts_with(&self.bytes)
            && key.get(self.bytes.len()) != Some(&0xFF);
        if !reusable {
            return decode_parts_into(key, 0, parts);
        }
        parts.extend_from_slice(&self.parts);
        decode_parts_into(key, self.bytes.len(), parts)
    }
}

/// Decodes the part starting at `offset` and appends it to `parts` (only when it decodes);
/// returns its encoded length. The part goes straight into the vector rather than through a
/// returned `(KeyPart, usize)`: a listing decodes a part per entry, and moving that tuple
/// through the stack cost more than decoding a number.
#[inline]
fn decode_part_into(bytes: &[u8], offset: usize, parts: &mut Vec<KeyPart>) -> Result<usize, KeyError> {
    let (&tag, rest) = bytes.get(offset..).and_then(<[u8]>::split_first).ok_or(KeyError::UnexpectedEof)?;
    match tag {
        TAG_NUMBER => {
            let raw: [u8; 8] =
                rest.get(..8).and_then(|r| r.try_into().ok()).ok_or(KeyError::UnexpectedEof)?;
            let value = decode_f64(u64::from_be_bytes(raw));
            if value.is_nan() && value.to_bits() != CANONICAL_NAN {
                return Err(KeyError::NonCanonical { offset });
            }
            push_number(parts, value);
            Ok(9)
        }
        TAG_STRING => {
            let (raw, used) = decode_escaped(rest)?;
            let text = String::from_utf8(raw).map_err(|_| KeyError::InvalidUtf8 { offset })?;
            parts.push(KeyPart::String(text));
            Ok(used + 1)
        }
        TAG_BYTES => {
            let (raw, used) = decode_escaped(rest)?;
            parts.push(KeyPart::Bytes(raw));
            Ok(used + 1)
        }
        TAG_NEG_BIG..=TAG_POS_BIG => {
            let (part, used) = decode_bigint(tag, rest, offset)?;
            parts.push(part);
            Ok(used)
        }
        TAG_FALSE => {
            parts.push(KeyPart::Bool(false));
            Ok(1)
        }
        TAG_TRUE => {
            parts.push(KeyPart::Bool(true));
            Ok(1)
        }
        _ => Err(KeyError::InvalidTag { offset, tag }),
    }
}

/// Appends a number part. `parts.push(KeyPart::Number(value))` builds the part on the
/// stack with two 8-byte stores and copies it into the vector with 16-byte loads, which the
/// processor cannot forward from those stores: it waits for them to retire, on every key of
/// a listing of numeric keys. `resize_with` makes room first and then constructs the part
/// in its slot, storing the tag and the number straight into the vector.
#[inline]
fn push_number(parts: &mut Vec<KeyPart>, value: f64) {
    parts.resize_with(parts.len() + 1, || KeyPart::Number(value));
}

/// Reads an escaped byte string up to its terminator; returns it and the bytes consumed.
fn decode_escaped(input: &[u8]) -> Result<(Vec<u8>, usize), KeyError> {
    // Most parts hold no zero byte: their bytes run up to the terminator and are copied
    // at once, into an allocation of the exact size.
    let first_zero = input.iter().position(|&b| b == 0).ok_or(KeyError::UnexpectedEof)?;
    if input.get(first_zero + 1) != Some(&0xFF) {
        let raw = input.get(..first_zero).unwrap_or_default();
        return Ok((raw.to_vec(), first_zero + 1));
    }
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        match input.get(i) {
            None => return Err(KeyError::UnexpectedEof),
            Some(0) if input.get(i + 1) == Some(&0xFF) => {
                out.push(0);
                i += 2;
            }
            Some(0) => return Ok((out, i + 1)),
            Some(&byte) => {
                out.push(byte);
                i += 1;
            }
        }
    }
}

fn decode_bigint(tag: u8, rest: &[u8], offset: usize) -> Result<(KeyPart, usize), KeyError> {
    let (negative, len, header) = match tag {
        TAG_ZERO => return Ok((KeyPart::BigInt(KvBigInt::default()), 1)),
        TAG_POS_BIG => (false, *rest.first().ok_or(KeyError::UnexpectedEof)? as usize, 1),
        TAG_NEG_BIG => (true, (*rest.first().ok_or(KeyError::UnexpectedEof)? ^ 0xFF) as usize, 1),
        t if t > TAG_ZERO => (false, (t - TAG_ZERO) as usize, 0),
        t => (true, (TAG_ZERO - t) as usize, 0),
    };
    let raw = rest.get(header..header + len).ok_or(KeyError::UnexpectedEof)?;
    let magnitude: Vec<u8> = if negative { raw.iter().map(|b| !b).collect() } else { raw.to_vec() };
    // Canonical: no leading zero byte, and the long forms only for more than 8 bytes.
    if magnitude.first() == Some(&0) || (header == 1 && len <= 8) {
        return Err(KeyError::NonCanonical { offset });
    }
    Ok((KeyPart::BigInt(KvBigInt::from_sign_magnitude(negative, &magnitude)), 1 + header + len))
}

impl Ord for KeyPart {
    /// The order of the parts' encodings.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (KeyPart::Bytes(a), KeyPart::Bytes(b)) => a.cmp(b),
            (KeyPart::String(a), KeyPart::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (KeyPart::BigInt(a), KeyPart::BigInt(b)) => a.cmp(b),
            (KeyPart::Number(a), KeyPart::Number(b)) => encode_f64(*a).cmp(&encode_f64(*b)),
            (KeyPart::Bool(a), KeyPart::Bool(b)) => a.cmp(b),
            _ => self.type_rank().cmp(&other.type_rank()),
        }
    }
}

impl PartialOrd for KeyPart {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for KeyPart {
    /// Equal when the encodings are equal (all NaNs are one key; `-0` and `0` differ).
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for KeyPart {}

impl std::hash::Hash for KeyPart {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            KeyPart::Bytes(b) => (0u8, b).hash(state),
            KeyPart::String(s) => (1u8, s).hash(state),
            KeyPart::BigInt(n) => (2u8, n).hash(state),
            KeyPart::Number(x) => (3u8, encode_f64(*x)).hash(state),
            KeyPart::Bool(b) => (4u8, b).hash(state),
        }
    }
}

impl fmt::Debug for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPart::Bytes(b) => write!(f, "Uint8Array{b:?}"),
            KeyPart::String(s) => write!(f, "{s:?}"),
            KeyPart::BigInt(n) => write!(f, "{n:?}"),
            KeyPart::Number(x) => write!(f, "{x:?}"),
            KeyPart::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.0).finish()
    }
}

macro_rules! from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for KeyPart {
            /// A number part (JavaScript numbers are doubles).
            fn from(value: $t) -> Self {
                KeyPart::Number(f64::from(value))
            }
        }
    )*};
}

from_number!(f64, f32, i32, u32, i16, u16, i8, u8);

macro_rules! from_bigint {
    ($($t:ty),*) => {$(
        impl From<$t> for KeyPart {
            /// A bigint part (use `as f64` for a number part).
            fn from(value: $t) -> Self {
                KeyPart::BigInt(KvBigInt::from(value))
            }
        }
    )*};
}

from_bigint!(i64, u64, i128);

impl From<KvBigInt> for KeyPart {
    fn from(value: KvBigInt) -> Self {
        KeyPart::BigInt(value)
    }
}

impl From<&str> for KeyPart {
    fn from(value: &str) -> Self {
        KeyPart::String(value.to_owned())
    }
}

impl From<String> for KeyPart {
    fn from(value: String) -> Self {
        KeyPart::String(value)
    }
}

impl From<&String> for KeyPart {
    fn from(value: &String) -> Self {
        KeyPart::String(value.clone())
    }
}

impl From<&[u8]> for KeyPart {
    fn from(value: &[u8]) -> Self {
        KeyPart::Bytes(value.to_vec())
    }
}

impl<const N: usize> From<&[u8; N]> for KeyPart {
    fn from(value: &[u8; N]) -> Self {
        KeyPart::Bytes(value.to_vec())
    }
}

impl From<Vec<u8>> for KeyPart {
    fn from(value: Vec<u8>) -> Self {
        KeyPart::Bytes(value)
    }
}

impl From<bool> for KeyPart {
    fn from(value: bool) -> Self {
        KeyPart::Bool(value)
    }
}

impl From<Vec<KeyPart>> for Key {
    fn from(parts: Vec<KeyPart>) -> Self {
        Key(parts)
    }
}

/// Builds a [`Key`]: `key!["users", 42]` is the key `["users", 42]` (42 is a number, as in
/// JavaScript); `key![]` is the empty key.
#[macro_export]
macro_rules! key {
    ($($part:expr),* $(,)?) => {
        $crate::Key(vec![$($crate::KeyPart::from($part)),*])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn escaping_and_decoding_of_bytes_parts() {
        let key = key![vec![0u8, 1, 0]];
        assert_eq!(hex(&key.encode().unwrap()), "01 00 ff 01 00 ff 00");
        assert_eq!(Key::decode(&key.encode().unwrap()).unwrap(), key);
    }

    /// A decoded prefix decodes every key, in it or not, well-formed or not, exactly as
    /// `Key::decode` does, whatever byte the prefix is cut at.
    #[test]
    fn decoding_with_a_prefix_matches_decoding_from_scratch() {
        let mut rng = stampkv_testkit::SplitMix64::new(23);
        let alphabet = [0u8, 1, 0xFF, b'a', 0xC3];
        let part = |rng: &mut stampkv_testkit::SplitMix64| -> KeyPart {
            let bytes: Vec<u8> = (0..rng.below(4)).map(|_| alphabet[rng.index(alphabet.len())]).collect();
            match rng.below(4) {
                0 => KeyPart::Bytes(bytes),
                1 => KeyPart::String(String::from_utf8_lossy(&bytes).into_owned()),
                2 => KeyPart::Number(rng.below(5) as f64 - 2.0),
                _ => KeyPart::BigInt(KvBigInt::from(rng.below(600) as i128 - 300)),
            }
        };
        for _ in 0..5_000 {
            let key = Key((0..1 + rng.below(4)).map(|_| part(&mut rng)).collect());
            let mut encoded = key.encode().unwrap();
            let cut = rng.index(encoded.len() + 1);
            let prefix = DecodedPrefix::new(&encoded[..cut]);
            assert_eq!(prefix.decode(&encoded), Ok(key.clone()), "cut at {cut}: {}", hex(&encoded));
            // Damaged keys fail the same way, prefix or not.
            if !encoded.is_empty() {
                let at = rng.index(encoded.len());
                encoded[at] = alphabet[rng.index(alphabet.len())];
                if rng.chance(30) {
                    encoded.truncate(at);
                }
                assert_eq!(prefix.decode(&encoded), Key::decode(&encoded), "{}", hex(&encoded));
            }
        }
        // Keys that continue a prefix's last string with an escaped zero.
        let prefix = DecodedPrefix::new(&key!["users"].encode().unwrap());
        let tricky = key!["users\0x"].encode().unwrap();
        assert_eq!(prefix.decode(&tricky), Ok(key!["users\0x"]));
        assert_eq!(prefix.decode(&key!["users", 7.0].encode().unwrap()), Ok(key!["users", 7.0]));
    }

    #[test]
    fn malformed_keys_are_rejected() {
        assert_eq!(Key::decode(&[0x05]), Err(KeyError::InvalidTag { offset: 0, tag: 0x05 }));
        assert_eq!(Key::decode(&[0x02, b'a']), Err(KeyError::UnexpectedEof));
        assert_eq!(Key::decode(&[0x02, 0xC3, 0x28, 0x00]), Err(KeyError::InvalidUtf8 { offset: 0 }));
        assert_eq!(Key::decode(&[0x21, 1, 2]), Err(KeyError::UnexpectedEof));
        assert_eq!(Key::decode(&[0x16, 0x00, 0x05]), Err(KeyError::NonCanonical { offset: 0 }));
        assert_eq!(Key::decode(&[0x1D, 0x02, 1, 2]), Err(KeyError::NonCanonical { offset: 0 }));
        assert_eq!(Key::decode(&[0x1D]), Err(KeyError::UnexpectedEof));
    }

    #[test]
    fn bigints_beyond_255_bytes_are_refused() {
        let huge = KvBigInt::from_sign_magnitude(false, &[1; 256]);
        assert_eq!(key![huge].encode(), Err(KeyError::BigIntTooLarge));
        assert_eq!(
            KeyError::BigIntTooLarge.to_string(),
            "BigUint requires more than 255 bytes to be represented"
        );
    }
}
