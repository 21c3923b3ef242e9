//! Between stored entries and read results: the point-read key check, and the decoding of a
//! stored entry (or its absence) into a [`KvEntryMaybe`] or a [`KvEntry`]. An entry's
//! versionstamp is the store's version of the commit that wrote it (8 bytes big-endian)
//! followed by two zero bytes.

use crate::key::DecodedPrefix;
use crate::store::StoredEntry;
use crate::{FromKvValue, Key, KvEntry, KvEntryMaybe, KvError, KvValue, Limits, Versionstamp};

/// Encodes a key for a point read: the read covers `[key, key ++ 00)`, so the key plus one
/// byte must fit the read limit.
pub(crate) fn encode_read_key(key: &Key, limits: &Limits) -> Result<Vec<u8>, KvError> {
    let encoded = key.encode()?;
    if encoded.len() + 1 > limits.max_read_key_bytes {
        return Err(KvError::KeyTooLargeForRead { max: limits.max_read_key_bytes });
    }
    Ok(encoded)
}

/// Converts an engine entry (or its absence) into a read result.
pub(crate) fn maybe_entry<T: FromKvValue>(
    key: Key,
    found: Option<StoredEntry>,
) -> Result<KvEntryMaybe<T>, KvError> {
    match found {
        None => Ok(KvEntryMaybe { key, value: None, versionstamp: None }),
        Some(entry) => {
            let value = T::from_kv_value(KvValue::decode_stored(&entry.value)?)?;
            Ok(KvEntryMaybe {
                key,
                value: Some(value),
                versionstamp: Some(Versionstamp::from_sequence(entry.version)),
            })
        }
    }
}

/// Decodes a listed entry's stored key, value and sequence number into a read result;
/// the key starts with `prefix` (the listing's common prefix), whose decoded parts are
/// reused.
#[inline]
pub(crate) fn decode_entry_after<T: FromKvValue>(
    prefix: &DecodedPrefix,
    key: &[u8],
    value: &[u8],
    seq: u64,
) -> Result<KvEntry<T>, KvError> {
    let mut parts = prefix.parts_buffer();
    prefix.decode_into(key, &mut parts)?;
    let value = T::from_kv_value(KvValue::decode_stored(value)?)?;
    Ok(KvEntry { key: Key(parts), value, versionstamp: Versionstamp::from_sequence(seq) })
}
