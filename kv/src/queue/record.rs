//! How a queued message is stored in the engine.
//!
//! ```text
//! key    := 0xFF 'q' deadline_ms: u64 BE | sequence: u64 BE | index: u32 BE
//! record := version: u8 (= 1)
//!           attempts: varint                 deliveries that failed so far
//!           payload_len: varint, payload     the value's stored form (encoding byte + data)
//!           interval_count: varint, interval_ms: varint*      backoff left, next first
//!           key_count: varint, (key_len: varint, key)*        keys_if_undelivered, encoded
//! ```
//! Keys sort by deadline, then by the sequence number of the commit that enqueued the
//! message, then by its position in that commit: messages with the same deadline come out
//! in enqueue order. A retried message keeps its sequence and index and gets a new deadline.
//! No user key starts with 0xFF, and no list range reaches these keys.

use crate::{KvError, KvValue};

/// The engine-key prefix of queued messages.
pub(crate) const QUEUE_PREFIX: [u8; 2] = [0xFF, b'q'];
const KEY_BYTES: usize = 2 + 8 + 8 + 4;
const RECORD_VERSION: u8 = 1;

/// The engine key of a message.
pub(crate) fn message_key(deadline_ms: u64, sequence: u64, index: u32) -> Vec<u8> {
    let mut key = Vec::with_capacity(KEY_BYTES);
    key.extend_from_slice(&QUEUE_PREFIX);
    key.extend_from_slice(&deadline_ms.to_be_bytes());
    key.extend_from_slice(&sequence.to_be_bytes());
    key.extend_from_slice(&index.to_be_bytes());
    key
}

/// The parts of a message key: (deadline, sequence, index).
pub(crate) fn parse_message_key(key: &[u8]) -> Option<(u64, u64, u32)> {
    if key.len() != KEY_BYTES || key[..2] != QUEUE_PREFIX {
        return None;
    }
    let deadline = u64::from_be_bytes(key[2..10].try_into().ok()?);
    let sequence = u64::from_be_bytes(key[10..18].try_into().ok()?);
    let index = u32::from_be_bytes(key[18..22].try_into().ok()?);
    Some((deadline, sequence, index))
}

/// A queued message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageRecord {
    pub attempts: u32,
    pub payload: KvValue,
    pub backoff_ms: Vec<u32>,
    pub keys_if_undelivered: Vec<Vec<u8>>,
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read_varint(input: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first()?;
        *input = rest;
        value |= u64::from(byte & 0x7F) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

fn read_bytes<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(read_varint(input)?).ok()?;
    let (bytes, rest) = input.split_at_checked(len)?;
    *input = rest;
    Some(bytes)
}

impl MessageRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let payload = self.payload.encode_stored();
        let mut out = Vec::with_capacity(payload.len() + 16);
        out.push(RECORD_VERSION);
        put_varint(&mut out, u64::from(self.attempts));
        put_varint(&mut out, payload.len() as u64);
        out.extend_from_slice(&payload);
        put_varint(&mut out, self.backoff_ms.len() as u64);
        for interval in &self.backoff_ms {
            put_varint(&mut out, u64::from(*interval));
        }
        put_varint(&mut out, self.keys_if_undelivered.len() as u64);
        for key in &self.keys_if_undelivered {
            put_varint(&mut out, key.len() as u64);
            out.extend_from_slice(key);
        }
        out
    }

    /// Decodes a record; a malformed one is corruption.
    pub fn decode(bytes: &[u8]) -> Result<MessageRecord, KvError> {
        Self::parse(bytes).ok_or_else(|| {
            KvError::Engine(stampkv_engine::Error::Corruption {
                file: "(queue)".into(),
                offset: None,
                reason: "malformed queue message record".into(),
            })
        })
    }

    fn parse(bytes: &[u8]) -> Option<MessageRecord> {
        let (&version, mut input) = bytes.split_first()?;
        if version != RECORD_VERSION {
            return None;
        }
        let attempts = u32::try_from(read_varint(&mut input)?).ok()?;
        let payload = KvValue::decode_stored(read_bytes(&mut input)?).ok()?;
        let count = usize::try_from(read_varint(&mut input)?).ok()?;
        let backoff_ms = (0..count.min(input.len()))
            .map(|_| read_varint(&mut input).and_then(|v| u32::try_from(v).ok()))
            .collect::<Option<Vec<_>>>()?;
        if backoff_ms.len() != count {
            return None;
        }
        let count = usize::try_from(read_varint(&mut input)?).ok()?;
        let keys = (0..count.min(input.len()))
            .map(|_| read_bytes(&mut input).map(<[u8]>::to_vec))
            .collect::<Option<Vec<_>>>()?;
        if keys.len() != count || !input.is_empty() {
            return None;
        }
        Some(MessageRecord { attempts, payload, backoff_ms, keys_if_undelivered: keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let record = MessageRecord {
            attempts: 3,
            payload: KvValue::V8(vec![0xff, 0x0f, 0x22, 0x01, 0x61]),
            backoff_ms: vec![100, 3_600_000],
            keys_if_undelivered: vec![vec![2, b'a', 0], vec![]],
        };
        let bytes = record.encode();
        assert_eq!(MessageRecord::decode(&bytes).unwrap(), record);
        for len in 0..bytes.len() {
            assert!(MessageRecord::decode(&bytes[..len]).is_err(), "prefix {len}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(MessageRecord::decode(&extra).is_err());
    }

    #[test]
    fn keys_order_by_deadline_then_enqueue_order() {
        let a = message_key(5, 9, 0);
        let b = message_key(5, 9, 1);
        let c = message_key(5, 10, 0);
        let d = message_key(6, 1, 0);
        assert!(a < b && b < c && c < d);
        assert_eq!(parse_message_key(&c), Some((5, 10, 0)));
        assert_eq!(parse_message_key(&c[..21]), None);
    }
}
