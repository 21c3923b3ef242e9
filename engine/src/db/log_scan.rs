//! A chunk-by-chunk scan of one log segment (a WAL segment or a manifest) that looks at
//! every byte: what `verify` reports and what `repair` salvages.
//!
//! The recovery reader (`stampkv_wal::SegmentReader`) decides what opening a database does
//! with damage: stop, skip to the next 32 KiB block, or fail. This scan instead finds
//! *every* piece of damage and its offset, and after each one searches byte by byte for the
//! next valid chunk, so that a single damaged chunk costs only the record it belongs to.
//! It also checks the bytes the recovery reader skips without looking: block trailers
//! (padding), the unwritten (preallocated) space after the last chunk, and anything after a
//! SEAL, all of which must be zero. The layout is in `wal/FORMAT.md`.

use stampkv_coding::crc::mask;
use stampkv_wal::{
    BLOCK_SIZE, CHECKSUM_CRC32_MASKED, FORMAT_VERSION, HEADER_SIZE, MAX_RECORD_SIZE, SEGMENT_MAGIC,
};

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;
const SEAL: u8 = 5;
const SEGMENT_HEADER: u8 = 6;
/// Payload of the segment header: magic, version, checksum kind, segment number.
const SEGMENT_HEADER_PAYLOAD: usize = 6 + 2 + 1 + 8;

/// One complete record found by the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScannedRecord {
    /// Offset of its FULL or FIRST chunk.
    pub offset: u64,
    /// The record's payload.
    pub payload: Vec<u8>,
}

/// A damaged part of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// Where the damage starts.
    pub offset: u64,
    /// Where the next valid chunk (or the end of the checked data) starts.
    pub end: u64,
    /// What is wrong.
    pub reason: String,
    /// Whether a record (or part of one) was lost to it: damage only to padding or to
    /// unwritten space loses nothing.
    pub loses_data: bool,
}

/// What a scan found in one segment.
#[derive(Debug, Default)]
pub(crate) struct LogScan {
    /// Records whose every chunk verified, in order.
    pub records: Vec<ScannedRecord>,
    /// Every damaged range, in order.
    pub damage: Vec<Damage>,
    /// Whether a valid SEAL ends the segment.
    pub sealed: bool,
    /// Offset just past the last valid chunk.
    pub valid_end: u64,
}

/// A chunk that passed every check of its own.
struct Chunk<'a> {
    kind: u8,
    payload: &'a [u8],
    end: usize,
}

/// The chunk at `pos`, if it is valid on its own (fits its block, checksum, type,
/// `synced_to`).
fn chunk_at(data: &[u8], pos: usize, segment: u64) -> Option<Chunk<'_>> {
    let header: &[u8; HEADER_SIZE] = data.get(pos..pos.checked_add(HEADER_SIZE)?)?.try_into().ok()?;
    let [c0, c1, c2, c3, l0, l1, kind, s0, s1, s2, s3] = *header;
    if !(FULL..=SEGMENT_HEADER).contains(&kind) {
        return None;
    }
    let length = usize::from(u16::from_le_bytes([l0, l1]));
    let start = pos + HEADER_SIZE;
    let end = start + length;
    let block_end = (pos / BLOCK_SIZE + 1) * BLOCK_SIZE;
    if end > block_end || u64::from(u32::from_le_bytes([s0, s1, s2, s3])) > pos as u64 {
        return None;
    }
    let payload = data.get(start..end)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&segment.to_le_bytes());
    hasher.update(header.get(4..).unwrap_or_default());
    hasher.update(payload);
    (mask(hasher.finalize()) == u32::from_le_bytes([c0, c1, c2, c3])).then_some(Chunk { kind, payload, end })
}

/// Whether `pos` lies in a block trailer (fewer than a header's bytes left in its block).
fn in_trailer(pos: usize) -> bool {
    BLOCK_SIZE - pos % BLOCK_SIZE < HEADER_SIZE
}

fn next_block(pos: usize) -> usize {
    (pos / BLOCK_SIZE + 1) * BLOCK_SIZE
}

/// Scans segment `segment` held in `data`.
pub(crate) fn scan_log(data: &[u8], segment: u64) -> LogScan {
    let mut scan = Scanner { data, segment, out: LogScan::default(), record: None };
    scan.run();
    scan.out
}

struct Scanner<'a> {
    data: &'a [u8],
    segment: u64,
    out: LogScan,
    /// (offset of FIRST, payload so far) of a fragmented record being assembled.
    record: Option<(usize, Vec<u8>)>,
}

impl Scanner<'_> {
    fn run(&mut self) {
        if self.data.iter().all(|&b| b == 0) {
            // Empty, or created and never written: no records, nothing damaged.
            return;
        }
        let mut pos = 0;
        while pos < self.data.len() {
            if in_trailer(pos) {
                let end = next_block(pos).min(self.data.len());
                if let Some(bad) = self.first_nonzero(pos, end) {
                    self.damage(bad, end, "nonzero byte in block padding", false);
                }
                pos = end;
                continue;
            }
            let Some(chunk) = chunk_at(self.data, pos, self.segment) else {
                pos = self.on_invalid(pos);
                continue;
            };
            match self.accept(pos, &chunk) {
                Ok(true) => {
                    self.out.valid_end = chunk.end as u64;
                    pos = chunk.end;
                }
                Ok(false) => {
                    // A SEAL: the segment ends here; anything after it must be zero.
                    self.out.valid_end = chunk.end as u64;
                    self.out.sealed = true;
                    if let Some(bad) = self.first_nonzero(chunk.end, self.data.len()) {
                        let end = self.data.len();
                        self.damage(bad, end, "nonzero bytes after the SEAL", false);
                    }
                    return;
                }
                Err(reason) => {
                    let lost = self.drop_record();
                    self.damage(pos, chunk.end, reason, lost || chunk.kind != SEAL);
                    pos = chunk.end;
                }
            }
        }
        if let Some((start, _)) = self.record.take() {
            let end = self.data.len();
            self.damage(start, end, "record cut off by the end of the segment", true);
        }
    }

    /// Handles a chunk that verified; `Ok(false)` for a SEAL, `Err` when it cannot come
    /// here (the chunk is then skipped).
    fn accept(&mut self, pos: usize, chunk: &Chunk<'_>) -> Result<bool, &'static str> {
        if pos == 0 {
            return if chunk.kind != SEGMENT_HEADER {
                Err("the first chunk is not a segment header")
            } else {
                self.check_segment_header(chunk.payload).map(|()| true)
            };
        }
        match (chunk.kind, self.record.is_some()) {
            (SEGMENT_HEADER, _) => {
                self.drop_record();
                Err("segment header inside the segment")
            }
            (FULL | FIRST | SEAL, true) => {
                // The record in progress lost its last fragment; this chunk is fine.
                if let Some((start, _)) = self.record.take() {
                    self.damage(start, pos, "fragmented record without its LAST chunk", true);
                }
                self.accept(pos, chunk)
            }
            (FULL, false) => {
                self.out.records.push(ScannedRecord { offset: pos as u64, payload: chunk.payload.to_vec() });
                Ok(true)
            }
            (FIRST, false) => {
                self.record = Some((pos, chunk.payload.to_vec()));
                Ok(true)
            }
            (MIDDLE | LAST, false) => Err("record fragment without its FIRST chunk"),
            (MIDDLE | LAST, true) => {
                let Some((start, mut payload)) = self.record.take() else {
                    return Err("record fragment without its FIRST chunk");
                };
                if payload.len() + chunk.payload.len() > MAX_RECORD_SIZE {
                    return Err("record larger than the maximum record size");
                }
                payload.extend_from_slice(chunk.payload);
                if chunk.kind == LAST {
                    self.out.records.push(ScannedRecord { offset: start as u64, payload });
                } else {
                    self.record = Some((start, payload));
                }
                Ok(true)
            }
            (SEAL, false) if !chunk.payload.is_empty() => Err("SEAL chunk with a payload"),
            (SEAL, false) => Ok(false),
            _ => Err("unknown chunk type"),
        }
    }

    fn check_segment_header(&self, payload: &[u8]) -> Result<(), &'static str> {
        if payload.len() != SEGMENT_HEADER_PAYLOAD || payload.get(..6) != Some(&SEGMENT_MAGIC[..]) {
            return Err("malformed segment header");
        }
        let version = payload.get(6..8).and_then(|v| v.try_into().ok()).map(u16::from_le_bytes);
        if version != Some(FORMAT_VERSION) || payload.get(8) != Some(&CHECKSUM_CRC32_MASKED) {
            return Err("segment header of an unknown format version or checksum kind");
        }
        let number = payload.get(9..17).and_then(|n| n.try_into().ok()).map(u64::from_le_bytes);
        if number != Some(self.segment) {
            return Err("segment header names another segment");
        }
        Ok(())
    }

    /// No valid chunk at `pos`: unwritten space or damage. Returns where to go on.
    fn on_invalid(&mut self, pos: usize) -> usize {
        let len = self.data.len();
        let next = self.next_valid_chunk(pos + 1);
        let end = next.unwrap_or(len);
        let header = self.data.get(pos..(pos + HEADER_SIZE).min(len)).unwrap_or_default();
        // Unwritten space: an all-zero header, or, with nothing valid after it, one whose
        // checksum field is (all but at most one byte) zero — a written chunk keeps its
        // four checksum bytes, of which a damaged byte changes one; a stray byte in
        // preallocated zeros leaves the rest zero.
        let checksum_zeros = header.iter().take(4).filter(|&&b| b == 0).count();
        let zero_header = header.iter().all(|&b| b == 0) || (next.is_none() && checksum_zeros >= 3);
        match (zero_header, next) {
            (true, None) => {
                // The end of the written data: the rest must be unwritten (zero) space.
                if let Some((start, _)) = self.record.take() {
                    self.damage(start, pos, "fragmented record cut off by the end of the written data", true);
                }
                if let Some(bad) = self.first_nonzero(pos, end) {
                    self.damage(bad, end, "nonzero byte in unwritten space", false);
                }
            }
            (true, Some(_)) => {
                self.drop_record();
                self.damage(pos, end, "zeros inside the written data", true);
            }
            (false, _) => {
                self.drop_record();
                let reason = match next {
                    _ if pos + HEADER_SIZE > len => "truncated chunk header",
                    Some(_) => "damaged chunk",
                    // Nothing valid follows: a write a crash cut short looks the same.
                    None => "damaged chunk, or a last record whose write a crash cut short",
                };
                // Only the segment header lies before the first record.
                let header_only = pos == 0 && end == HEADER_SIZE + SEGMENT_HEADER_PAYLOAD;
                self.damage(pos, end, reason, !header_only);
            }
        }
        end
    }

    /// The next offset at or after `from` holding a valid chunk (never in a trailer).
    fn next_valid_chunk(&self, from: usize) -> Option<usize> {
        let mut q = from;
        while q + HEADER_SIZE <= self.data.len() {
            if in_trailer(q) {
                q = next_block(q);
                continue;
            }
            if self.data.get(q).is_some_and(|&b| b == 0)
                && self.data.get(q..q + HEADER_SIZE).is_some_and(|h| h.iter().all(|&b| b == 0))
            {
                // Skip a run of zeros quickly: no chunk header is all zero.
                let run = self.data.get(q..).map_or(0, |rest| rest.iter().take_while(|&&b| b == 0).count());
                q += run.saturating_sub(HEADER_SIZE - 1).max(1);
                continue;
            }
            if chunk_at(self.data, q, self.segment).is_some() {
                return Some(q);
            }
            q += 1;
        }
        None
    }

    fn first_nonzero(&self, from: usize, to: usize) -> Option<usize> {
        self.data.get(from..to)?.iter().position(|&b| b != 0).map(|i| from + i)
    }

    /// Drops the record being assembled; whether there was one.
    fn drop_record(&mut self) -> bool {
        self.record.take().is_some()
    }

    fn damage(&mut self, offset: usize, end: usize, reason: &str, loses_data: bool) {
        self.out.damage.push(Damage {
            offset: offset as u64,
            end: end as u64,
            reason: reason.to_owned(),
            loses_data,
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

    use super::*;
    use stampkv_wal::{LogWriter, MemLogFile, WalOptions};

    fn segment(records: &[Vec<u8>], seal: bool, preallocate: u64) -> Vec<u8> {
        let file = MemLogFile::new();
        let mut writer = LogWriter::create(
            &file,
            9,
            WalOptions { preallocate_bytes: preallocate, ..WalOptions::default() },
        )
        .unwrap();
        for record in records {
            writer.add_record(record).unwrap();
        }
        if seal {
            writer.seal().unwrap();
        }
        file.contents()
    }

    fn records() -> Vec<Vec<u8>> {
        (0..40u8).map(|i| vec![i; 100 + usize::from(i) * 700]).collect()
    }

    #[test]
    fn a_clean_segment_scans_without_damage() {
        for (seal, prealloc) in [(true, 0), (false, 0), (false, 64 << 10)] {
            let data = segment(&records(), seal, prealloc);
            let scan = scan_log(&data, 9);
            assert!(scan.damage.is_empty(), "{:?}", scan.damage);
            assert_eq!(scan.sealed, seal);
            let payloads: Vec<_> = scan.records.iter().map(|r| r.payload.clone()).collect();
            assert_eq!(payloads, records());
        }
        assert!(scan_log(&[], 9).damage.is_empty());
        assert!(scan_log(&[0; 100], 9).damage.is_empty());
    }

    #[test]
    fn every_flipped_byte_is_found_and_costs_at_most_its_record() {
        for (seal, prealloc) in [(true, 0), (false, 40 << 10)] {
            let data = segment(&records(), seal, prealloc);
            let clean = scan_log(&data, 9);
            // Every byte of the first blocks (header, records, padding), then a sample.
            let sampled = (0..3000).chain((3000..data.len()).step_by(997));
            for pos in sampled.chain([32_767, 32_768, data.len() - 1]) {
                let mut bad = data.clone();
                bad[pos] ^= 0x41;
                let scan = scan_log(&bad, 9);
                assert!(!scan.damage.is_empty(), "flip at {pos} not found (seal {seal})");
                assert!(scan.damage.iter().any(|d| d.offset <= pos as u64 && pos as u64 <= d.end), "{pos}");
                let lost = clean.records.len() - scan.records.len();
                assert!(lost <= 1, "flip at {pos} lost {lost} records");
                for record in &scan.records {
                    assert!(clean.records.contains(record), "flip at {pos} invented a record");
                }
            }
        }
    }

    #[test]
    fn a_flipped_byte_in_block_padding_is_found_and_loses_nothing() {
        // The segment header takes 28 bytes; a record of 32724 bytes then ends 5 bytes
        // before the end of block 0: those 5 bytes are padding, and the next record starts
        // at 32768.
        let records = vec![vec![7; 32_724], b"next".to_vec()];
        let data = segment(&records, true, 0);
        assert_eq!(&data[32_763..32_768], &[0; 5]);
        assert!(scan_log(&data, 9).damage.is_empty());
        for pos in 32_763..32_768 {
            let mut bad = data.clone();
            bad[pos] = 0x5A;
            let scan = scan_log(&bad, 9);
            let damage: Vec<_> =
                scan.damage.iter().map(|d| (d.offset, d.reason.as_str(), d.loses_data)).collect();
            assert_eq!(damage, vec![(pos as u64, "nonzero byte in block padding", false)]);
            assert_eq!(scan.records.len(), 2);
        }
    }

    #[test]
    fn a_foreign_segment_is_damage() {
        let data = segment(&records(), true, 0);
        let scan = scan_log(&data, 10);
        assert!(!scan.damage.is_empty());
        assert!(scan.records.is_empty());
    }
}
