//! Values: the [`Value`] model, the stored form [`KvValue`], the V8 serialization format
//! ([`v8`]), sums on V8 numbers ([`sum_v8`]) and, with the `serde` feature, typed Rust
//! data (`to_value` / `from_value`, in the `serde` module).
//!
//! A stored value is one encoding byte followed by the data, exactly as Deno keeps a value
//! (the SQLite backend stores the same two things in the columns `v_encoding` and `v`):
//!
//! | byte | encoding | data | chosen for |
//! |---|---|---|---|
//! | `01` | V8 | V8 `ValueSerializer` bytes (`FF 0F` ... when written by stampkv) | everything else |
//! | `02` | LE64 | exactly 8 bytes, the `u64` little-endian | [`Value::U64`] (`Deno.KvU64`) |
//! | `03` | BYTES | the bytes, unchanged | a top-level [`Value::Bytes`] (a plain `Uint8Array`) |
//!
//! The byte-by-byte description of the stored form and of the V8 subset stampkv reads and
//! writes is in `FORMAT.md` next to this file, reproduced here:
//!
#![doc = include_str!("FORMAT.md")]

use crate::KvBigInt;
use std::fmt;

mod sum;
pub mod v8;

#[cfg(feature = "serde")]
pub mod serde;

pub use sum::{sum_v8, SumError};

#[cfg(feature = "serde")]
pub use self::serde::{from_value, to_value};

/// A structured value, as JavaScript's structured clone sees it.
///
/// Equality is structural (`derive(PartialEq)`), so a value containing `NaN` is not equal
/// to itself; [`Value::same_value`] compares with JavaScript's `Object.is` on numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `undefined`
    Undefined,
    /// `null`
    Null,
    /// A boolean.
    Bool(bool),
    /// A number (always a double in JavaScript).
    Number(f64),
    /// A `bigint`.
    BigInt(KvBigInt),
    /// A string.
    String(String),
    /// A `Uint8Array`.
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A plain object: its own enumerable properties, in order.
    Object(Vec<(String, Value)>),
    /// A `Map`, in insertion order.
    Map(Vec<(Value, Value)>),
    /// A `Set`, in insertion order.
    Set(Vec<Value>),
    /// A `Date`: milliseconds since the Unix epoch.
    Date(f64),
    /// A `RegExp`.
    RegExp {
        /// The pattern.
        source: String,
        /// The flags, e.g. `"gi"`.
        flags: String,
    },
    /// A `Deno.KvU64` (only as a whole stored value).
    U64(u64),
}

/// A stored value with its encoding, byte for byte as Deno stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvValue {
    /// V8 serialization bytes (encoding 1).
    V8(Vec<u8>),
    /// A `KvU64` (encoding 2, 8 bytes little-endian).
    U64(u64),
    /// A plain byte array (encoding 3).
    Bytes(Vec<u8>),
}

/// Why a value could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueError {
    /// The bytes are not valid.
    Malformed {
        /// Offset of the problem.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// Valid content that [`Value`] cannot represent (kept as raw bytes instead).
    Unrepresentable(String),
    /// A value that cannot be stored (e.g. a `KvU64` inside an array).
    NotAllowed(String),
    /// A stored value whose encoding byte is not 1, 2 or 3. Displays as Deno's message,
    /// `The value encoding {n} is unknown.`
    UnknownEncoding(u8),
    /// Converting between a Rust type and a [`Value`] with serde failed (`serde` feature).
    Serde(String),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Malformed { offset, reason } => {
                write!(f, "malformed value at byte {offset}: {reason}")
            }
            ValueError::Unrepresentable(what) => write!(f, "value cannot be represented: {what}"),
            ValueError::NotAllowed(what) => write!(f, "value not allowed: {what}"),
            ValueError::UnknownEncoding(n) => write!(f, "The value encoding {n} is unknown."),
            ValueError::Serde(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ValueError {}

/// Encoding byte of V8 serialized values.
pub const ENCODING_V8: u8 = 1;
/// Encoding byte of `KvU64` values (8 bytes little-endian).
pub const ENCODING_LE64: u8 = 2;
/// Encoding byte of plain byte arrays.
pub const ENCODING_BYTES: u8 = 3;

impl KvValue {
    /// The encoding number (1 V8, 2 LE64, 3 bytes).
    pub fn encoding(&self) -> u8 {
        match self {
            KvValue::V8(_) => ENCODING_V8,
            KvValue::U64(_) => ENCODING_LE64,
            KvValue::Bytes(_) => ENCODING_BYTES,
        }
    }

    /// Chooses the encoding Deno would use for `value` and encodes it.
    ///
    /// [`Value::U64`] becomes [`KvValue::U64`], a top-level [`Value::Bytes`] becomes
    /// [`KvValue::Bytes`] (Deno stores a plain `Uint8Array` that way), anything else is
    /// serialized with [`v8::serialize`]. Fails with [`ValueError::NotAllowed`] for a
    /// [`Value::U64`] nested inside another value, and for values V8 could not hold.
    pub fn from_value(value: &Value) -> Result<KvValue, ValueError> {
        match value {
            Value::U64(n) => Ok(KvValue::U64(*n)),
            Value::Bytes(bytes) => Ok(KvValue::Bytes(bytes.clone())),
            other => Ok(KvValue::V8(v8::serialize(other)?)),
        }
    }

    /// Decodes into a [`Value`]; `Unrepresentable` for V8 content it cannot hold.
    pub fn to_value(&self) -> Result<Value, ValueError> {
        match self {
            KvValue::V8(bytes) => v8::deserialize(bytes),
            KvValue::U64(n) => Ok(Value::U64(*n)),
            KvValue::Bytes(bytes) => Ok(Value::Bytes(bytes.clone())),
        }
    }

    /// The stored form (every store keeps values in it): the encoding byte followed by the data.
    pub fn encode_stored(&self) -> Vec<u8> {
        let data: &[u8] = match self {
            KvValue::V8(bytes) | KvValue::Bytes(bytes) => bytes,
            KvValue::U64(n) => return [&[ENCODING_LE64][..], &n.to_le_bytes()].concat(),
        };
        let mut out = Vec::with_capacity(1 + data.len());
        out.push(self.encoding());
        out.extend_from_slice(data);
        out
    }

    /// Parses the engine's stored form.
    ///
    /// V8 data is not inspected (it stays opaque, byte for byte); a LE64 value must be
    /// exactly 8 bytes ([`ValueError::Malformed`] otherwise); an unknown encoding byte gives
    /// [`ValueError::UnknownEncoding`].
    #[inline]
    pub fn decode_stored(stored: &[u8]) -> Result<KvValue, ValueError> {
        let Some((&encoding, data)) = stored.split_first() else {
            return Err(ValueError::Malformed { offset: 0, reason: "empty stored value".into() });
        };
        match encoding {
            ENCODING_V8 => Ok(KvValue::V8(data.to_vec())),
            ENCODING_LE64 => match <[u8; 8]>::try_from(data) {
                Ok(bytes) => Ok(KvValue::U64(u64::from_le_bytes(bytes))),
                Err(_) => Err(ValueError::Malformed {
                    offset: 1,
                    reason: format!("a KvU64 value must be 8 bytes, found {}", data.len()),
                }),
            },
            ENCODING_BYTES => Ok(KvValue::Bytes(data.to_vec())),
            n => Err(ValueError::UnknownEncoding(n)),
        }
    }
}

impl Value {
    /// The kind of value, as a short English name (`"undefined"`, `"number"`, `"object"`,
    /// `"Map"`, `"KvU64"`, ...), for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Undefined => "undefined",
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::BigInt(_) => "bigint",
            Value::String(_) => "string",
            Value::Bytes(_) => "Uint8Array",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Map(_) => "Map",
            Value::Set(_) => "Set",
            Value::Date(_) => "Date",
            Value::RegExp { .. } => "RegExp",
            Value::U64(_) => "KvU64",
        }
    }

    /// Whether this is `undefined`.
    pub fn is_undefined(&self) -> bool {
        matches!(self, Value::Undefined)
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The bigint, if this is one.
    pub fn as_bigint(&self) -> Option<&KvBigInt> {
        match self {
            Value::BigInt(n) => Some(n),
            _ => None,
        }
    }

    /// The `KvU64`, if this is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(n) => Some(*n),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if this is a `Uint8Array`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The properties, if this is a plain object.
    pub fn as_object(&self) -> Option<&[(String, Value)]> {
        match self {
            Value::Object(properties) => Some(properties),
            _ => None,
        }
    }

    /// The value of the property `name`, if this is a plain object that has it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.as_object()?.iter().find(|(key, _)| key == name).map(|(_, value)| value)
    }

    /// Structural equality with JavaScript's `Object.is` for numbers and dates: `NaN` equals
    /// `NaN`, and `0` differs from `-0`. Order matters everywhere (properties, Map entries,
    /// Set elements), as it does in the serialized form.
    pub fn same_value(&self, other: &Value) -> bool {
        fn same_number(a: f64, b: f64) -> bool {
            (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative())
        }
        match (self, other) {
            (Value::Number(a), Value::Number(b)) | (Value::Date(a), Value::Date(b)) => same_number(*a, *b),
            (Value::Array(a), Value::Array(b)) | (Value::Set(a), Value::Set(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_value(y))
            }
            (Value::Object(a), Value::Object(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b).all(|((ka, va), (kb, vb))| ka == kb && va.same_value(vb))
            }
            (Value::Map(a), Value::Map(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b).all(|((ka, va), (kb, vb))| ka.same_value(kb) && va.same_value(vb))
            }
            (a, b) => a == b,
        }
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Value::Number(value)
    }
}

impl From<i32> for Value {
    fn from(value: i32) -> Self {
        Value::Number(f64::from(value))
    }
}

impl From<u32> for Value {
    fn from(value: u32) -> Self {
        Value::Number(f64::from(value))
    }
}

/// The largest integer magnitude a JavaScript number holds exactly (2^53).
pub(crate) const MAX_EXACT_INTEGER: u64 = 1 << 53;

impl From<i64> for Value {
    /// A number if `|value| <= 2^53` (exact in a double), a bigint otherwise.
    fn from(value: i64) -> Self {
        if value.unsigned_abs() <= MAX_EXACT_INTEGER {
            Value::Number(value as f64)
        } else {
            Value::BigInt(KvBigInt::from(value))
        }
    }
}

impl From<KvBigInt> for Value {
    fn from(value: KvBigInt) -> Self {
        Value::BigInt(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::String(value.to_owned())
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::String(value)
    }
}

impl From<&[u8]> for Value {
    /// A `Uint8Array`.
    fn from(value: &[u8]) -> Self {
        Value::Bytes(value.to_vec())
    }
}

impl From<Vec<u8>> for Value {
    /// A `Uint8Array`.
    fn from(value: Vec<u8>) -> Self {
        Value::Bytes(value)
    }
}

impl From<Vec<Value>> for Value {
    /// An array.
    fn from(value: Vec<Value>) -> Self {
        Value::Array(value)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    /// `None` is `null`.
    fn from(value: Option<T>) -> Self {
        value.map_or(Value::Null, Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_form_round_trips() {
        for value in [KvValue::V8(vec![0xff, 0x0f, 0x5f]), KvValue::U64(258), KvValue::Bytes(vec![1, 2, 3])] {
            let stored = value.encode_stored();
            assert_eq!(stored[0], value.encoding());
            assert_eq!(KvValue::decode_stored(&stored).unwrap(), value);
        }
        assert_eq!(KvValue::U64(258).encode_stored(), [2, 2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(KvValue::Bytes(vec![]).encode_stored(), [3]);
    }

    #[test]
    fn stored_form_errors() {
        assert_eq!(
            KvValue::decode_stored(&[7, 1]).unwrap_err().to_string(),
            "The value encoding 7 is unknown."
        );
        assert_eq!(KvValue::decode_stored(&[0]).unwrap_err().to_string(), "The value encoding 0 is unknown.");
        assert!(matches!(KvValue::decode_stored(&[]), Err(ValueError::Malformed { .. })));
        assert!(matches!(
            KvValue::decode_stored(&[2, 1, 2, 3]),
            Err(ValueError::Malformed { offset: 1, .. })
        ));
        assert!(matches!(KvValue::decode_stored(&[2; 10]), Err(ValueError::Malformed { .. })));
    }

    #[test]
    fn encoding_choice() {
        assert_eq!(KvValue::from_value(&Value::U64(7)).unwrap(), KvValue::U64(7));
        assert_eq!(KvValue::from_value(&Value::Bytes(vec![1])).unwrap(), KvValue::Bytes(vec![1]));
        assert_eq!(KvValue::from_value(&Value::Null).unwrap(), KvValue::V8(vec![0xff, 0x0f, b'0']));
        assert!(matches!(
            KvValue::from_value(&Value::Array(vec![Value::U64(1)])),
            Err(ValueError::NotAllowed(_))
        ));
        assert_eq!(KvValue::U64(3).to_value().unwrap(), Value::U64(3));
        assert_eq!(KvValue::Bytes(vec![9]).to_value().unwrap(), Value::Bytes(vec![9]));
    }

    #[test]
    fn conversions_and_accessors() {
        assert_eq!(Value::from("a").as_str(), Some("a"));
        assert_eq!(Value::from(1i64 << 53), Value::Number(9007199254740992.0));
        assert_eq!(Value::from((1i64 << 53) + 1), Value::BigInt(KvBigInt::from((1i64 << 53) + 1)));
        assert_eq!(Value::from(None::<bool>), Value::Null);
        let object = Value::Object(vec![("a".into(), Value::from(1))]);
        assert_eq!(object.get("a"), Some(&Value::Number(1.0)));
        assert_eq!(object.get("b"), None);
        assert!(Value::Number(f64::NAN).same_value(&Value::Number(f64::NAN)));
        assert!(!Value::Number(0.0).same_value(&Value::Number(-0.0)));
        assert_eq!(Value::Set(vec![]).kind(), "Set");
    }
}
