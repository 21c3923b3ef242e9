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
use stampkv_coding::{put_length_prefixed, put_varint64, Reader};

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
    let rest = key.strip_prefix(&QUEUE_PREFIX)?;
    let (deadline, rest) = rest.split_first_chunk::<8>()?;
    let (sequence, rest) = rest.split_first_chunk::<8>()?;
    let index: [u8; 4] = rest.try_into().ok()?;
    Some((u64::from_be_bytes(*deadline), u64::from_be_bytes(*sequence), u32::from_be_bytes(index)))
}

/// A queued message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageRecord {
    pub attempts: u32,
    pub payload: KvValue,
    pub backoff_ms: Vec<u32>,
    pub keys_if_undelivered: Vec<Vec<u8>>,
}

impl MessageRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let payload = self.payload.encode_stored();
        let mut out = Vec::with_capacity(payload.len() + 16);
        out.push(RECORD_VERSION);
        put_varint64(&mut out, u64::from(self.attempts));
        put_length_prefixed(&mut out, &payload);
        put_varint64(&mut out, self.backoff_ms.len() as u64);
        for interval in &self.backoff_ms {
            put_varint64(&mut out, u64::from(*interval));
        }
        put_varint64(&mut out, self.keys_if_undelivered.len() as u64);
        for key in &self.keys_if_undelivered {
            put_length_prefixed(&mut out, key);
        }
        out
    }

    /// Decodes a record; a malformed one is corruption.
    pub fn decode(bytes: &[u8]) -> Result<MessageRecord, KvError> {
        Self::parse(bytes).ok_or_else(|| {
            crate::storage_error::from_engine(stampkv_engine::Error::Corruption {
                file: "(queue)".into(),
                offset: None,
                reason: "malformed queue message record".into(),
            })
        })
    }

    fn parse(bytes: &[u8]) -> Option<MessageRecord> {
        let mut input = Reader::new(bytes);
        if input.u8()? != RECORD_VERSION {
            return None;
        }
        let attempts = u32::try_from(input.varint()?).ok()?;
        let payload = KvValue::decode_stored(input.length_prefixed()?).ok()?;
        let count = usize::try_from(input.varint()?).ok()?;
        let backoff_ms = (0..count.min(input.remaining()))
            .map(|_| input.varint().and_then(|v| u32::try_from(v).ok()))
            .collect::<Option<Vec<_>>>()?;
        if backoff_ms.len() != count {
            return None;
        }
        let count = usize::try_from(input.varint()?).ok()?;
        let keys = (0..count.min(input.remaining()))
            .map(|_| input.length_prefixed().map(<[u8]>::to_vec))
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
    fn overflowing_varints_are_refused() {
        let record = MessageRecord {
            attempts: 0,
            payload: KvValue::Bytes(b"m".to_vec()),
            backoff_ms: vec![],
            keys_if_undelivered: vec![vec![1]],
        };
        let good = record.encode();
        assert_eq!(MessageRecord::decode(&good).unwrap(), record);
        // The key count (second to last field) as a ten-byte varint whose last byte
        // carries bits past the 64th: the old reader dropped them and read the count as 1.
        let key_count_at = good.len() - 3;
        assert_eq!(good[key_count_at], 1);
        let mut overflowing = good[..key_count_at].to_vec();
        overflowing.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7e]);
        overflowing.extend_from_slice(&good[key_count_at + 1..]);
        assert!(MessageRecord::decode(&overflowing).is_err());
        // The same count as an overlong but representable ten-byte varint still reads.
        let mut representable = good[..key_count_at].to_vec();
        representable.extend_from_slice(&[0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]);
        representable.extend_from_slice(&good[key_count_at + 1..]);
        assert_eq!(MessageRecord::decode(&representable).unwrap(), record);
        // An attempts field past u64 (ten bytes, tenth above 1), and one of eleven bytes.
        for attempts in [&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02][..], &[0x80; 11][..]] {
            let mut bytes = vec![RECORD_VERSION];
            bytes.extend_from_slice(attempts);
            bytes.extend_from_slice(&good[2..]);
            assert!(MessageRecord::decode(&bytes).is_err());
        }
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
