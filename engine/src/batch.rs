//! Write batches: the unit of atomicity, and the payload of one WAL record.
//!
//! Encoding (also the WAL record payload; see DESIGN.md):
//! ```text
//! batch   := seq: u64 LE | count: u32 LE | entry{count}
//! entry   := kind: u8 | key_len: varint | key | (kind != Delete: value_len: varint | value)
//! ```
//! `kind` is 0 Delete, 1 Put, 2 PutExpiring (value = expires_at_ms: u64 LE ++ user value).
//! All entries of a batch share its sequence number. If a batch writes the same key more
//! than once, the last write wins (earlier ones are not applied).

use crate::key::EntryKind;
use stampkv_coding::{put_length_prefixed, Reader};

const HEADER_BYTES: usize = 12;

/// An ordered set of puts and deletes applied atomically.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    user_bytes: u64,
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch").field("count", &self.count).finish_non_exhaustive()
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// One decoded entry of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// Put, PutExpiring or Delete.
    pub kind: EntryKind,
    /// The user key.
    pub key: &'a [u8],
    /// The stored value (empty for deletes; with the expiry prefix for PutExpiring).
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch { rep: vec![0; HEADER_BYTES], count: 0, user_bytes: 0 }
    }

    /// An empty batch with room for about `bytes` of keys and values.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_BYTES + bytes + 16);
        rep.resize(HEADER_BYTES, 0);
        WriteBatch { rep, count: 0, user_bytes: 0 }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.push(EntryKind::Put, key, &[value]);
        self
    }

    /// Sets `key` to `value` until `expires_at_ms` (milliseconds on the engine's clock); from
    /// that instant on the entry reads as absent.
    pub fn put_expiring(&mut self, key: &[u8], value: &[u8], expires_at_ms: u64) -> &mut Self {
        self.push(EntryKind::PutExpiring, key, &[&expires_at_ms.to_le_bytes(), value]);
        self
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.push(EntryKind::Delete, key, &[]);
        self
    }

    fn push(&mut self, kind: EntryKind, key: &[u8], value_parts: &[&[u8]]) {
        self.rep.push(kind as u8);
        put_length_prefixed(&mut self.rep, key);
        let value_len: usize = value_parts.iter().map(|p| p.len()).sum();
        if kind != EntryKind::Delete {
            stampkv_coding::put_varint64(&mut self.rep, value_len as u64);
            for part in value_parts {
                self.rep.extend_from_slice(part);
            }
        }
        self.count += 1;
        // The expiry prefix is bookkeeping, not user data.
        let user_value_len = value_parts.last().map_or(0, |v| v.len());
        self.user_bytes += (key.len() + user_value_len) as u64;
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch has no entries (it still commits and gets a sequence number).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Key and value bytes the user asked to write.
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// Removes all entries.
    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_BYTES);
        self.count = 0;
        self.user_bytes = 0;
    }

    /// The encoded batch with `seq` stamped in: the WAL record payload.
    pub(crate) fn encode_with_seq(&mut self, seq: u64) -> &[u8] {
        let header = seq.to_le_bytes().into_iter().chain(self.count.to_le_bytes());
        for (slot, byte) in self.rep.iter_mut().zip(header) {
            *slot = byte;
        }
        &self.rep
    }

    /// The entries in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = BatchEntry<'_>> {
        // The representation was built by `push`, so decoding cannot fail.
        EntryDecoder {
            reader: Reader::new(self.rep.get(HEADER_BYTES..).unwrap_or_default()),
            left: self.count,
        }
        .map_while(Result::ok)
    }
}

/// A decoded WAL record: its sequence number and entries.
pub(crate) struct DecodedBatch<'a> {
    pub seq: u64,
    pub entries: Vec<BatchEntry<'a>>,
}

/// Why a WAL record could not be decoded as a batch.
#[derive(Debug)]
pub(crate) struct BadBatch(pub &'static str);

/// Decodes a WAL record payload.
pub(crate) fn decode(payload: &[u8]) -> Result<DecodedBatch<'_>, BadBatch> {
    let mut reader = Reader::new(payload);
    let seq = reader.u64_le().ok_or(BadBatch("batch header truncated"))?;
    let count = reader.u32_le().ok_or(BadBatch("batch header truncated"))?;
    // Each entry takes at least 2 bytes: bound the allocation by the payload size.
    if count as usize > reader.remaining() / 2 {
        return Err(BadBatch("batch entry count larger than the record"));
    }
    let entries: Vec<_> = EntryDecoder { reader, left: count }.collect::<Result<_, _>>()?;
    Ok(DecodedBatch { seq, entries })
}

struct EntryDecoder<'a> {
    reader: Reader<'a>,
    left: u32,
}

impl<'a> Iterator for EntryDecoder<'a> {
    type Item = Result<BatchEntry<'a>, BadBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return if self.reader.is_empty() {
                None
            } else {
                self.left = 0;
                self.reader = Reader::new(&[]);
                Some(Err(BadBatch("bytes after the last batch entry")))
            };
        }
        self.left -= 1;
        Some(self.decode_entry())
    }
}

impl<'a> EntryDecoder<'a> {
    fn decode_entry(&mut self) -> Result<BatchEntry<'a>, BadBatch> {
        const TRUNCATED: BadBatch = BadBatch("batch entry truncated");
        let kind = self.reader.u8().ok_or(TRUNCATED)?;
        let kind = EntryKind::from_byte(kind).ok_or(BadBatch("unknown batch entry kind"))?;
        let key = self.reader.length_prefixed().ok_or(TRUNCATED)?;
        let value = match kind {
            EntryKind::Delete => &[][..],
            _ => self.reader.length_prefixed().ok_or(TRUNCATED)?,
        };
        if kind == EntryKind::PutExpiring && value.len() < 8 {
            return Err(BadBatch("expiring value without its expiry"));
        }
        Ok(BatchEntry { kind, key, value })
    }
}

/// The entries to apply: all of them, except earlier writes to a key written again later
/// in the same batch (they would share a sequence number with the later write).
pub(crate) fn effective_entries<'a>(entries: &[BatchEntry<'a>]) -> Vec<BatchEntry<'a>> {
    if entries.len() <= 1 {
        return entries.to_vec();
    }
    // (key, position), sorted: the writes to one key end up together, the last one last.
    let mut order: Vec<(&[u8], usize)> = entries.iter().map(|e| e.key).zip(0..).collect();
    order.sort_unstable();
    let mut keep = vec![true; entries.len()];
    for pair in order.windows(2) {
        if let [(key, earlier), (next_key, _)] = pair {
            if key == next_key {
                if let Some(kept) = keep.get_mut(*earlier) {
                    *kept = false;
                }
            }
        }
    }
    entries.iter().zip(keep).filter(|(_, k)| *k).map(|(e, _)| *e).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_through_their_encoding() {
        let mut batch = WriteBatch::new();
        batch.put(b"k1", b"v1").delete(b"k2").put_expiring(b"k3", b"v3", 99).put(b"", b"");
        let payload = batch.encode_with_seq(42).to_vec();
        let decoded = decode(&payload).unwrap();
        assert_eq!(decoded.seq, 42);
        let expected: Vec<_> = batch.iter().collect();
        assert_eq!(decoded.entries, expected);
        assert_eq!(expected.len(), 4);
        assert_eq!(expected[1], BatchEntry { kind: EntryKind::Delete, key: b"k2", value: b"" });
        assert_eq!(crate::key::split_expiring(expected[2].value), Some((99, &b"v3"[..])));
        assert_eq!(batch.user_bytes(), 2 + 2 + 2 + 2 + 2);
    }

    #[test]
    fn every_truncation_or_garbage_is_rejected_without_panic() {
        let mut batch = WriteBatch::new();
        batch.put(b"key", b"value").delete(b"gone").put_expiring(b"e", b"x", 5);
        let payload = batch.encode_with_seq(7).to_vec();
        for len in 0..payload.len() {
            assert!(decode(&payload[..len]).is_err(), "prefix {len} accepted");
        }
        let mut extra = payload.clone();
        extra.push(0);
        assert!(decode(&extra).is_err());
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 0xFF;
            let _ = decode(&bad);
        }
    }

    #[test]
    fn the_last_write_to_a_key_in_a_batch_wins() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"1").put(b"b", b"2").delete(b"a").put(b"c", b"3").put(b"b", b"4");
        let entries: Vec<_> = batch.iter().collect();
        let effective = effective_entries(&entries);
        let summary: Vec<_> = effective.iter().map(|e| (e.key, e.kind, e.value)).collect();
        assert_eq!(
            summary,
            vec![
                (&b"a"[..], EntryKind::Delete, &b""[..]),
                (&b"c"[..], EntryKind::Put, &b"3"[..]),
                (&b"b"[..], EntryKind::Put, &b"4"[..]),
            ]
        );
    }
}
