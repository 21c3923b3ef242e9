//! Block compression: the codecs, the rule for when a compressed block is worth storing,
//! and the checked decoding of stored block bytes.
//!
//! A stored block is `(type, bytes)`. Type 0 is the block itself. Type 1 is
//! `varint32 uncompressed_len ++ lz4 block` (the LZ4 *block* format, no frame). Decoding
//! never trusts the declared length: it is capped before anything is allocated, and the
//! decoder must produce exactly that many bytes.

use std::borrow::Cow;

use stampkv_coding::{get_varint32, put_varint32};

/// Block type byte of a block stored as is.
pub(crate) const BLOCK_TYPE_RAW: u8 = 0;
/// Block type byte of an LZ4-compressed block.
pub(crate) const BLOCK_TYPE_LZ4: u8 = 1;

/// Largest uncompressed size a compressed block may declare (64 MiB). Writers store larger
/// blocks uncompressed; readers reject a larger declaration as corruption before
/// allocating anything.
pub const MAX_UNCOMPRESSED_BLOCK: usize = 64 << 20;

/// Most output bytes one byte of an LZ4 block can produce: a match-length extension
/// byte of 255 adds 255 bytes, and nothing produces more. A declared length above
/// `LZ4_MAX_EXPANSION * compressed length` cannot be honest, so it is rejected before
/// allocating (this bounds every allocation by a multiple of the bytes actually read).
const LZ4_MAX_EXPANSION: usize = 255;

/// How data blocks are compressed. Non-exhaustive: a codec may be added (block types
/// 2..255 are reserved for that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Blocks are stored as they are (block type 0).
    None,
    /// LZ4 block format (block type 1), through the pure-Rust `lz4_flex` crate. Blocks that
    /// do not shrink by more than 1/8 are stored as they are. The default.
    #[default]
    Lz4,
}

impl Compression {
    /// The codec's name as used in options and reports: `"none"` or `"lz4"`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }

    /// Parses [`Compression::name`]'s output.
    pub fn from_name(name: &str) -> Option<Compression> {
        match name {
            "none" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            _ => None,
        }
    }
}

/// Whether a compressed form of `stored_len` bytes is worth storing instead of the
/// `raw_len` bytes it replaces: it must be smaller by more than 1/8 (RocksDB's rule), so
/// that a reader never pays decompression for a small saving.
pub(crate) fn worth_storing(stored_len: usize, raw_len: usize) -> bool {
    stored_len < raw_len - raw_len / 8
}

/// Blocks a builder tries to compress in a row, all in vain, before it starts skipping.
const PROBE_AFTER: u32 = 8;
/// After the first [`PROBE_AFTER`] failures in a row the builder tries every this-many-th
/// block, doubling the gap after each further failure ...
const FIRST_PROBE_GAP: u32 = 8;
/// ... up to this gap. At most this many blocks minus one are stored raw after data turns
/// compressible again (256 KiB of 4 KiB blocks), and incompressible data costs one
/// compression attempt per this many blocks.
const MAX_PROBE_GAP: u32 = 64;

/// When a table builder tries to compress a data block: always while blocks compress,
/// and with an exponentially growing gap (8, 16, 32, then every 64th block) once
/// [`PROBE_AFTER`] attempts in a row have failed. An LZ4 attempt on an incompressible
/// 4 KiB block costs more than building the block did, so trying every one would slow
/// down the flushes and compactions of incompressible data by half or more.
#[derive(Debug)]
pub(crate) struct ProbeSchedule {
    /// Failed attempts since the last block that compressed.
    failures: u32,
    /// Blocks still to store without trying.
    skip: u32,
    /// The gap that follows the next failed attempt, once past [`PROBE_AFTER`].
    gap: u32,
}

impl Default for ProbeSchedule {
    fn default() -> Self {
        ProbeSchedule { failures: 0, skip: 0, gap: FIRST_PROBE_GAP }
    }
}

impl ProbeSchedule {
    /// Whether to try compressing the next block. If not, the block counts as skipped.
    pub(crate) fn should_try(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// Records the outcome of an attempt [`ProbeSchedule::should_try`] allowed.
    pub(crate) fn record(&mut self, compressed: bool) {
        if compressed {
            *self = ProbeSchedule::default();
            return;
        }
        self.failures = self.failures.saturating_add(1);
        if self.failures >= PROBE_AFTER {
            self.skip = self.gap - 1;
            self.gap = (self.gap * 2).min(MAX_PROBE_GAP);
        }
    }
}

/// Compresses `raw` with `codec` into `out` (cleared first). Returns the block type to
/// store: the codec's type if `out` holds a compressed form worth storing, else
/// [`BLOCK_TYPE_RAW`] (and `out` is to be ignored).
pub(crate) fn compress_block(codec: Compression, raw: &[u8], out: &mut Vec<u8>) -> u8 {
    out.clear();
    match codec {
        Compression::None => BLOCK_TYPE_RAW,
        Compression::Lz4 => {
            let len = match u32::try_from(raw.len()) {
                Ok(len) if raw.len() <= MAX_UNCOMPRESSED_BLOCK => len,
                _ => return BLOCK_TYPE_RAW,
            };
            put_varint32(out, len);
            let prefix = out.len();
            out.resize(prefix + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
            let written = match out.get_mut(prefix..) {
                Some(dst) => lz4_flex::block::compress_into(raw, dst),
                None => return BLOCK_TYPE_RAW,
            };
            match written {
                Ok(n) if worth_storing(prefix + n, raw.len()) => {
                    out.truncate(prefix + n);
                    BLOCK_TYPE_LZ4
                }
                _ => BLOCK_TYPE_RAW,
            }
        }
    }
}

/// The block bytes a stored block of type `block_type` holds. Errors describe the damage
/// (the caller names the file and offset): an unknown type, a bad or oversized length
/// prefix, or compressed bytes that do not decode to exactly the declared length.
pub(crate) fn decode_block(block_type: u8, stored: Vec<u8>) -> Result<Vec<u8>, String> {
    match block_type {
        BLOCK_TYPE_RAW => Ok(stored),
        _ => decode_stored_block(block_type, &stored).map(Cow::into_owned),
    }
}

/// Decodes a block read on its own (without a [`crate::Table`]): the block bytes that the
/// stored `bytes` of a block of type `block_type` hold (borrowed for an uncompressed
/// block). For tools that walk a table file block by block; verify the block's checksum
/// first. Errors describe the damage.
pub fn decode_stored_block(block_type: u8, bytes: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    match block_type {
        BLOCK_TYPE_RAW => Ok(Cow::Borrowed(bytes)),
        BLOCK_TYPE_LZ4 => decode_lz4(bytes).map(Cow::Owned),
        other => Err(format!("unsupported block type {other}")),
    }
}

/// Whether `block_type` is a block type this code reads.
pub fn is_known_block_type(block_type: u8) -> bool {
    matches!(block_type, BLOCK_TYPE_RAW | BLOCK_TYPE_LZ4)
}

fn decode_lz4(stored: &[u8]) -> Result<Vec<u8>, String> {
    let (len, prefix) = get_varint32(stored).ok_or("compressed block: bad length prefix")?;
    let compressed = stored.get(prefix..).unwrap_or_default();
    let len = len as usize;
    if len > MAX_UNCOMPRESSED_BLOCK {
        return Err(format!("compressed block: declared length {len} exceeds {MAX_UNCOMPRESSED_BLOCK}"));
    }
    if len > compressed.len().saturating_mul(LZ4_MAX_EXPANSION) {
        return Err(format!(
            "compressed block: declared length {len} is impossible for {} compressed bytes",
            compressed.len()
        ));
    }
    let mut out = vec![0u8; len];
    match lz4_flex::block::decompress_into(compressed, &mut out) {
        Ok(n) if n == len => Ok(out),
        Ok(n) => Err(format!("compressed block: decoded {n} bytes, declared {len}")),
        Err(e) => Err(format!("compressed block does not decode: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]

    use super::*;

    fn round_trip(raw: &[u8]) -> u8 {
        let mut out = Vec::new();
        let block_type = compress_block(Compression::Lz4, raw, &mut out);
        let stored = if block_type == BLOCK_TYPE_RAW { raw.to_vec() } else { out };
        assert_eq!(decode_block(block_type, stored).unwrap(), raw);
        block_type
    }

    #[test]
    fn compressible_blocks_are_compressed_and_round_trip() {
        let raw: Vec<u8> = b"{\"name\":\"value\",\"n\":12}".repeat(100);
        assert_eq!(round_trip(&raw), BLOCK_TYPE_LZ4);
    }

    #[test]
    fn incompressible_and_tiny_blocks_stay_raw() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(round_trip(&raw), BLOCK_TYPE_RAW);
        assert_eq!(round_trip(b""), BLOCK_TYPE_RAW);
        assert_eq!(round_trip(b"abc"), BLOCK_TYPE_RAW);
    }

    #[test]
    fn the_skip_rule_needs_more_than_an_eighth() {
        assert!(!worth_storing(875, 1000));
        assert!(worth_storing(874, 1000));
        assert!(!worth_storing(7, 8));
        assert!(!worth_storing(0, 0));
        let mut out = Vec::new();
        assert_eq!(compress_block(Compression::None, &[0; 4096], &mut out), BLOCK_TYPE_RAW);
    }

    /// Which of `outcomes.len()` blocks the schedule tries, each tried block compressing
    /// as `outcomes` says.
    fn tried_blocks(outcomes: &[bool]) -> Vec<usize> {
        let mut schedule = ProbeSchedule::default();
        let mut tried = Vec::new();
        for (i, &compresses) in outcomes.iter().enumerate() {
            if schedule.should_try() {
                tried.push(i);
                schedule.record(compresses);
            }
        }
        tried
    }

    #[test]
    fn incompressible_blocks_are_tried_ever_more_rarely() {
        let tried = tried_blocks(&[false; 400]);
        let mut expected: Vec<usize> = (0..8).collect();
        // Gaps 8, 16, 32, then 64 for good.
        let mut next = 7;
        for gap in [8, 16, 32].into_iter().chain(std::iter::repeat(64)) {
            next += gap;
            if next >= 400 {
                break;
            }
            expected.push(next);
        }
        assert_eq!(tried, expected);
    }

    #[test]
    fn a_block_that_compresses_restarts_the_schedule() {
        // Incompressible for 100 blocks, compressible afterwards.
        let outcomes: Vec<bool> = (0..300).map(|i| i >= 100).collect();
        let tried = tried_blocks(&outcomes);
        let first_compressed = *tried.iter().find(|&&i| i >= 100).unwrap();
        assert!(first_compressed < 100 + MAX_PROBE_GAP as usize);
        // From then on every block is tried.
        let after: Vec<usize> = tried.iter().copied().filter(|&i| i >= first_compressed).collect();
        assert_eq!(after, (first_compressed..300).collect::<Vec<_>>());
        // A compressible block now and then keeps every block tried.
        let alternating: Vec<bool> = (0..100).map(|i| i % 4 == 0).collect();
        assert_eq!(tried_blocks(&alternating), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn names_round_trip() {
        for codec in [Compression::None, Compression::Lz4] {
            assert_eq!(Compression::from_name(codec.name()), Some(codec));
        }
        assert_eq!(Compression::from_name("zstd"), None);
    }

    #[test]
    fn hostile_lengths_are_rejected_before_allocating() {
        let mut stored = Vec::new();
        put_varint32(&mut stored, u32::MAX);
        stored.extend_from_slice(&[0x1f, 1, 0, 255, 255, 255, 0]);
        assert!(decode_block(BLOCK_TYPE_LZ4, stored).unwrap_err().contains("exceeds"));
        let mut stored = Vec::new();
        put_varint32(&mut stored, 1 << 20);
        stored.extend_from_slice(&[0x1f, 1, 0, 255, 0]);
        assert!(decode_block(BLOCK_TYPE_LZ4, stored).unwrap_err().contains("impossible"));
        assert!(decode_block(BLOCK_TYPE_LZ4, vec![0x80]).unwrap_err().contains("length prefix"));
        assert!(decode_block(BLOCK_TYPE_LZ4, Vec::new()).unwrap_err().contains("length prefix"));
        assert!(decode_block(7, vec![1, 2, 3]).unwrap_err().contains("type 7"));
        assert!(is_known_block_type(1) && !is_known_block_type(2));
    }

    #[test]
    fn a_wrong_declared_length_is_corruption() {
        let raw = b"abcdefgh".repeat(64);
        let mut out = Vec::new();
        assert_eq!(compress_block(Compression::Lz4, &raw, &mut out), BLOCK_TYPE_LZ4);
        let (_, prefix) = get_varint32(&out).unwrap();
        for declared in [raw.len() - 1, raw.len() + 1, 0] {
            let mut stored = Vec::new();
            put_varint32(&mut stored, declared as u32);
            stored.extend_from_slice(&out[prefix..]);
            assert!(decode_block(BLOCK_TYPE_LZ4, stored).is_err(), "declared {declared}");
        }
    }

    #[test]
    fn every_truncation_and_flip_fails_or_decodes_without_panicking() {
        let raw = b"key-0001 value value value value; ".repeat(40);
        let mut out = Vec::new();
        assert_eq!(compress_block(Compression::Lz4, &raw, &mut out), BLOCK_TYPE_LZ4);
        for cut in 0..out.len() {
            assert!(decode_block(BLOCK_TYPE_LZ4, out[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        for pos in 0..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[pos] ^= 1 << bit;
                // Either an error or exactly the declared length: never a panic.
                if let Ok(decoded) = decode_block(BLOCK_TYPE_LZ4, bad.clone()) {
                    let (declared, _) = get_varint32(&bad).unwrap();
                    assert_eq!(decoded.len(), declared as usize);
                }
            }
        }
    }
}
