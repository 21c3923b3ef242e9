//! Test helpers: a deterministic PRNG, log writing and reading shortcuts, and
//! an independent encoder written straight from FORMAT.md.

use stampkv_wal::*;

/// The shared seeded generator of stampkv's tests.
pub use stampkv_testkit::SplitMix64 as Rng;

/// A record length skewed towards small records, up to ~100 KiB.
pub fn record_len(rng: &mut Rng) -> usize {
    match rng.index(100) {
        0..=44 => rng.index(100),
        45..=79 => rng.index(5_000),
        80..=94 => rng.index(40_000),
        _ => rng.index(100 * 1024),
    }
}

/// Multiplier for randomized test sizes (`STAMPKV_TEST_ITERS`, default 1).
pub fn iters() -> usize {
    std::env::var("STAMPKV_TEST_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1)
}

pub fn no_prealloc() -> WalOptions {
    WalOptions { preallocate_bytes: 0, ..WalOptions::default() }
}

pub fn prealloc(bytes: u64) -> WalOptions {
    WalOptions { preallocate_bytes: bytes, ..WalOptions::default() }
}

pub fn info(number: u64, is_last: bool) -> SegmentInfo {
    SegmentInfo { number, name: format!("{number:06}.log"), is_last }
}

/// A log written to memory, with each record's end offset.
pub struct Written {
    pub data: Vec<u8>,
    pub records: Vec<Vec<u8>>,
    pub ends: Vec<u64>,
}

impl Written {
    /// Offset of the first chunk of record `i`.
    pub fn start(&self, i: usize) -> u64 {
        let prev = if i == 0 { 28 } else { self.ends[i - 1] };
        let left = BLOCK_SIZE as u64 - prev % BLOCK_SIZE as u64;
        if left < HEADER_SIZE as u64 {
            prev + left
        } else {
            prev
        }
    }
}

/// How a log is written.
#[derive(Clone, Copy)]
pub struct How {
    pub segment: u64,
    pub prealloc: u64,
    /// Sync after every record.
    pub sync_each: bool,
    pub seal: bool,
}

impl Default for How {
    fn default() -> Self {
        How { segment: 1, prealloc: 0, sync_each: false, seal: false }
    }
}

pub fn write_log(records: &[Vec<u8>], how: How) -> Written {
    let file = MemLogFile::new();
    let mut w = LogWriter::create(&file, how.segment, prealloc(how.prealloc)).unwrap();
    let mut ends = Vec::new();
    for r in records {
        ends.push(w.add_record(r).unwrap());
        if how.sync_each {
            w.sync().unwrap();
        }
    }
    if how.seal {
        w.seal().unwrap();
    }
    Written { data: file.contents(), records: records.to_vec(), ends }
}

pub fn random_records(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| {
            let len = record_len(rng);
            rng.bytes(len)
        })
        .collect()
}

/// Records of random lengths in `0..max_len` until `total` bytes.
pub fn records_totalling(rng: &mut Rng, total: usize, max_len: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut sum = 0;
    while sum < total {
        let len = rng.index(max_len);
        sum += len;
        out.push(rng.bytes(len));
    }
    out
}

/// Everything a read of one segment produced.
#[derive(Debug)]
pub struct Read {
    pub records: Vec<Vec<u8>>,
    pub result: Result<SegmentSummary, WalError>,
    pub stop_after: bool,
}

impl Read {
    pub fn summary(&self) -> &SegmentSummary {
        match &self.result {
            Ok(s) => s,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    pub fn corruption_offset(&self) -> u64 {
        match &self.result {
            Err(WalError::Corruption { offset, .. }) => *offset,
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}

pub fn read_log(data: &[u8], segment: u64, is_last: bool, mode: RecoveryMode) -> Read {
    let mut reader = SegmentReader::new(data, info(segment, is_last), mode);
    let mut records = Vec::new();
    let result = loop {
        match reader.next_record() {
            Ok(Some(r)) => records.push(r.to_vec()),
            Ok(None) => break Ok(reader.summary()),
            Err(e) => break Err(e),
        }
    };
    Read { records, result, stop_after: reader.stop_after() }
}

/// Default mode, last segment.
pub fn recover(data: &[u8], segment: u64) -> Read {
    read_log(data, segment, true, RecoveryMode::default())
}

/// One chunk encoded independently of the crate, from FORMAT.md.
pub fn spec_chunk(segment: u64, kind: u8, synced_to: u32, payload: &[u8]) -> Vec<u8> {
    let mut tail = Vec::new();
    tail.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    tail.push(kind);
    tail.extend_from_slice(&synced_to.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(&tail);
    h.update(payload);
    let crc = h.finalize();
    // Written exactly as FORMAT.md states the mask.
    #[allow(clippy::manual_rotate)]
    let masked = ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8);
    let mut out = masked.to_le_bytes().to_vec();
    out.extend_from_slice(&tail);
    out.extend_from_slice(payload);
    out
}

/// A SEGMENT_HEADER payload from FORMAT.md.
pub fn spec_header_payload(version: u16, checksum_kind: u8, segment: u64) -> Vec<u8> {
    let mut p = b"SKVWAL".to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    p.push(checksum_kind);
    p.extend_from_slice(&segment.to_le_bytes());
    p
}
