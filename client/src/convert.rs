//! Between stampkv's types and the protobuf messages: entries and values, and encoded
//! keys checked against Deno's size limits.

use crate::RemoteError;
use stampkv_kvconnect as proto;
use stampkv_model::{Key, KvError, KvValue, Limits, Versionstamp};

/// Decodes an entry: its key, value and versionstamp.
pub(crate) fn entry_from_proto(entry: proto::KvEntry) -> Result<(Key, KvValue, Versionstamp), RemoteError> {
    let key = Key::decode(&entry.key)
        .map_err(|e| RemoteError::Decode(format!("an entry's key cannot be decoded: {e}")))?;
    let value = value_from_proto(entry.value, entry.encoding)?;
    let versionstamp = versionstamp(&entry.versionstamp)?;
    Ok((key, value, versionstamp))
}

/// A 10-byte versionstamp.
pub(crate) fn versionstamp(bytes: &[u8]) -> Result<Versionstamp, RemoteError> {
    let stamp: [u8; 10] = bytes
        .try_into()
        .map_err(|_| RemoteError::Decode(format!("a versionstamp must be 10 bytes, not {}", bytes.len())))?;
    Ok(Versionstamp(stamp))
}

/// A value as received.
pub(crate) fn value_from_proto(data: Vec<u8>, encoding: i32) -> Result<KvValue, RemoteError> {
    proto::value_from_proto(data, encoding).map_err(|e| match e {
        proto::InvalidEncoding::Unknown(n) => RemoteError::UnknownEncoding(n),
        proto::InvalidEncoding::U64Length(n) => {
            RemoteError::Decode(format!("a KvU64 value must be 8 bytes, not {n}"))
        }
    })
}

/// A value as sent.
pub(crate) fn value_to_proto(value: &KvValue) -> proto::KvValue {
    proto::value_to_proto(value.clone())
}

/// The size a value counts for in the limits: its data (a `KvU64` counts 8).
pub(crate) fn value_size(value: &KvValue) -> usize {
    match value {
        KvValue::V8(data) | KvValue::Bytes(data) => data.len(),
        KvValue::U64(_) => 8,
    }
}

/// A key encoded for a point read: its range ends at `key ++ 00`, which must fit the read
/// key limit (so the key itself may have at most 2048 bytes).
pub(crate) fn point_read_key(key: &Key, limits: &Limits) -> Result<Vec<u8>, RemoteError> {
    let encoded = key.encode()?;
    if encoded.len() + 1 > limits.max_read_key_bytes {
        return Err(KvError::KeyTooLargeForRead { max: limits.max_read_key_bytes }.into());
    }
    Ok(encoded)
}

/// The point range `[key, key ++ 00)`.
pub(crate) fn point_range(encoded: Vec<u8>) -> proto::ReadRange {
    let mut end = encoded.clone();
    end.push(0);
    proto::ReadRange { start: encoded, end, limit: 1, reverse: false }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a panic is a failed test")]

    use super::*;

    #[test]
    fn values_round_trip_and_unknown_encodings_are_refused() {
        for value in [KvValue::V8(vec![0xff, 0x0f, 0x54]), KvValue::U64(258), KvValue::Bytes(vec![1, 2])] {
            let p = value_to_proto(&value);
            assert_eq!(value_from_proto(p.data, p.encoding).unwrap(), value);
        }
        assert_eq!(value_to_proto(&KvValue::U64(258)).data, [2, 1, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(value_from_proto(vec![], 9), Err(RemoteError::UnknownEncoding(9))));
        assert!(matches!(value_from_proto(vec![1], proto::VE_LE64), Err(RemoteError::Decode(_))));
        assert!(matches!(versionstamp(&[0; 9]), Err(RemoteError::Decode(_))));
    }

    #[test]
    fn point_reads_stop_at_2048_key_bytes() {
        let limits = Limits::default();
        // A byte string of n non-zero bytes encodes to n + 2 bytes.
        let ok = Key::from(vec![stampkv_model::KeyPart::from(vec![1u8; 2046])]);
        assert_eq!(point_read_key(&ok, &limits).unwrap().len(), 2048);
        let too_large = Key::from(vec![stampkv_model::KeyPart::from(vec![1u8; 2047])]);
        let error = point_read_key(&too_large, &limits).unwrap_err().to_string();
        assert_eq!(error, "Key too large for read (max 2049 bytes)");
    }
}
