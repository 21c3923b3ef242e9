//! Values in their protobuf form: the data and an encoding number (1 V8, 2 little-endian
//! `u64`, 3 bytes), the same numbers as the stored form's encoding byte.

use crate::{KvValue as ProtoValue, VE_BYTES, VE_LE64, VE_V8};
use stampkv_model::KvValue;
use std::fmt;

/// Why a protobuf value is not a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidEncoding {
    /// An encoding number other than 1, 2 and 3.
    Unknown(i32),
    /// A `KvU64` (encoding 2) whose data is not 8 bytes long; the length it had.
    U64Length(usize),
}

impl fmt::Display for InvalidEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidEncoding::Unknown(n) => write!(f, "Unknown value encoding {n}."),
            InvalidEncoding::U64Length(_) => f.write_str("A KvU64 value (encoding 2) must be 8 bytes."),
        }
    }
}

impl std::error::Error for InvalidEncoding {}

/// A value as KV Connect carries it.
pub fn value_to_proto(value: KvValue) -> ProtoValue {
    match value {
        KvValue::V8(data) => ProtoValue { data, encoding: VE_V8 },
        KvValue::U64(n) => ProtoValue { data: n.to_le_bytes().to_vec(), encoding: VE_LE64 },
        KvValue::Bytes(data) => ProtoValue { data, encoding: VE_BYTES },
    }
}

/// The value KV Connect's `data` and `encoding` carry.
pub fn value_from_proto(data: Vec<u8>, encoding: i32) -> Result<KvValue, InvalidEncoding> {
    match encoding {
        VE_V8 => Ok(KvValue::V8(data)),
        VE_LE64 => {
            let length = data.len();
            let bytes: [u8; 8] = data.try_into().map_err(|_| InvalidEncoding::U64Length(length))?;
            Ok(KvValue::U64(u64::from_le_bytes(bytes)))
        }
        VE_BYTES => Ok(KvValue::Bytes(data)),
        other => Err(InvalidEncoding::Unknown(other)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values_round_trip_and_bad_encodings_are_refused() {
        for value in
            [KvValue::V8(vec![0xff, 0x0f, 0x22, 0]), KvValue::U64(u64::MAX - 7), KvValue::Bytes(vec![])]
        {
            let sent = value_to_proto(value.clone());
            assert_eq!(value_from_proto(sent.data, sent.encoding).unwrap(), value);
        }
        assert_eq!(value_from_proto(vec![1; 7], VE_LE64), Err(InvalidEncoding::U64Length(7)));
        assert_eq!(value_from_proto(vec![], 0), Err(InvalidEncoding::Unknown(0)));
        assert_eq!(value_from_proto(vec![], 4), Err(InvalidEncoding::Unknown(4)));
    }
}
