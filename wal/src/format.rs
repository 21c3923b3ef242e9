//! On-disk constants and chunk encoding/decoding (see `FORMAT.md`).
//!
//! Decoding never panics: every access into the input is checked.

use crate::crc::chunk_checksum;

/// Size of one log block. Chunks never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Size of a chunk header: checksum u32, length u16, type u8, synced_to u32.
pub const HEADER_SIZE: usize = 11;

/// Largest logical record [`crate::LogWriter::add_record`] accepts (256 MiB).
pub const MAX_RECORD_SIZE: usize = 256 * 1024 * 1024;

/// A segment never grows to this size or beyond: every offset, and so every
/// `synced_to`, must fit in the u32 field of a chunk header.
pub const MAX_SEGMENT_SIZE: u64 = u32::MAX as u64;

/// Magic at the start of the segment header payload.
pub const SEGMENT_MAGIC: &[u8; 6] = b"SKVWAL";

/// The only format version this crate writes and reads.
pub const FORMAT_VERSION: u16 = 1;

/// Checksum kind 1: masked CRC-32 (IEEE polynomial).
pub const CHECKSUM_CRC32_MASKED: u8 = 1;

/// Length of the SEGMENT_HEADER payload: magic, version, checksum kind, number.
pub(crate) const SEGMENT_HEADER_PAYLOAD: usize = 6 + 2 + 1 + 8;

/// Offset just past the SEGMENT_HEADER chunk (it is always the first chunk).
pub(crate) const SEGMENT_HEADER_END: u64 = (HEADER_SIZE + SEGMENT_HEADER_PAYLOAD) as u64;

/// Room kept free at the end of a segment so that a SEAL always fits:
/// up to `HEADER_SIZE - 1` bytes of block padding plus the SEAL chunk.
pub(crate) const SEAL_RESERVE: u64 = 2 * HEADER_SIZE as u64;

/// The type byte of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkType {
    /// A whole logical record.
    Full = 1,
    /// First fragment of a record.
    First = 2,
    /// Inner fragment of a record.
    Middle = 3,
    /// Last fragment of a record.
    Last = 4,
    /// The segment was finished cleanly; nothing after it is read.
    Seal = 5,
    /// First chunk of every segment.
    SegmentHeader = 6,
}

impl ChunkType {
    /// Decodes a type byte; `None` for 0 and unknown values.
    pub(crate) fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(ChunkType::Full),
            2 => Some(ChunkType::First),
            3 => Some(ChunkType::Middle),
            4 => Some(ChunkType::Last),
            5 => Some(ChunkType::Seal),
            6 => Some(ChunkType::SegmentHeader),
            _ => None,
        }
    }
}

/// A decoded (not yet verified) chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawHeader {
    pub(crate) checksum: u32,
    pub(crate) length: u16,
    pub(crate) kind: u8,
    pub(crate) synced_to: u32,
}

impl RawHeader {
    /// Splits 11 header bytes into their fields.
    pub(crate) fn decode(b: [u8; HEADER_SIZE]) -> Self {
        let [c0, c1, c2, c3, l0, l1, kind, s0, s1, s2, s3] = b;
        RawHeader {
            checksum: u32::from_le_bytes([c0, c1, c2, c3]),
            length: u16::from_le_bytes([l0, l1]),
            kind,
            synced_to: u32::from_le_bytes([s0, s1, s2, s3]),
        }
    }

    /// Header bytes 4..11 (length, type, synced_to): the part that is checksummed.
    pub(crate) fn tail(&self) -> [u8; 7] {
        let [l0, l1] = self.length.to_le_bytes();
        let [s0, s1, s2, s3] = self.synced_to.to_le_bytes();
        [l0, l1, self.kind, s0, s1, s2, s3]
    }

    /// Whether all 11 bytes were zero: unwritten (preallocated or padding) space.
    pub(crate) fn is_zero(&self) -> bool {
        self.checksum == 0 && self.length == 0 && self.kind == 0 && self.synced_to == 0
    }
}

/// Appends one chunk (header + payload) to `buf`.
///
/// The caller guarantees that the chunk fits in the rest of its block, so
/// `payload.len()` is below `BLOCK_SIZE` and fits the u16 length field.
pub(crate) fn encode_chunk(buf: &mut Vec<u8>, segment: u64, kind: ChunkType, synced_to: u32, payload: &[u8]) {
    debug_assert!(payload.len() <= BLOCK_SIZE - HEADER_SIZE);
    let header = RawHeader {
        checksum: 0,
        length: u16::try_from(payload.len()).unwrap_or(u16::MAX),
        kind: kind as u8,
        synced_to,
    };
    let tail = header.tail();
    buf.extend_from_slice(&chunk_checksum(segment, &tail, payload).to_le_bytes());
    buf.extend_from_slice(&tail);
    buf.extend_from_slice(payload);
}

/// The SEGMENT_HEADER payload of segment `number`.
pub(crate) fn segment_header_payload(number: u64) -> [u8; SEGMENT_HEADER_PAYLOAD] {
    let mut p = [0u8; SEGMENT_HEADER_PAYLOAD];
    let fields = SEGMENT_MAGIC
        .iter()
        .copied()
        .chain(FORMAT_VERSION.to_le_bytes())
        .chain([CHECKSUM_CRC32_MASKED])
        .chain(number.to_le_bytes());
    for (dst, src) in p.iter_mut().zip(fields) {
        *dst = src;
    }
    p
}

/// A decoded SEGMENT_HEADER payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    pub(crate) version: u16,
    pub(crate) checksum_kind: u8,
    pub(crate) number: u64,
}

/// Decodes a SEGMENT_HEADER payload; `None` if the length or magic is wrong.
pub(crate) fn decode_segment_header(payload: &[u8]) -> Option<SegmentHeader> {
    let p: [u8; SEGMENT_HEADER_PAYLOAD] = payload.try_into().ok()?;
    let [m0, m1, m2, m3, m4, m5, v0, v1, kind, n0, n1, n2, n3, n4, n5, n6, n7] = p;
    if [m0, m1, m2, m3, m4, m5] != *SEGMENT_MAGIC {
        return None;
    }
    Some(SegmentHeader {
        version: u16::from_le_bytes([v0, v1]),
        checksum_kind: kind,
        number: u64::from_le_bytes([n0, n1, n2, n3, n4, n5, n6, n7]),
    })
}

/// Offset of the first block boundary strictly after `pos`.
pub(crate) fn next_block_start(pos: usize) -> usize {
    (pos / BLOCK_SIZE).saturating_add(1).saturating_mul(BLOCK_SIZE)
}

/// A chunk whose framing and checksum verified.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunk<'a> {
    pub(crate) kind: ChunkType,
    pub(crate) payload: &'a [u8],
    pub(crate) synced_to: u64,
    /// Offset just past the chunk.
    pub(crate) end: usize,
}

/// Result of parsing the chunk that starts at some offset.
#[derive(Debug, Clone)]
pub(crate) enum Parsed<'a> {
    /// End of written data: end of input, an all-zero header, or an all-zero
    /// partial header cut by the end of input.
    End,
    /// A verified chunk.
    Chunk(Chunk<'a>),
    /// A damaged chunk, with the reason.
    Damaged(&'static str),
}

/// Reads the 11 header bytes at `pos`: `Err(Parsed)` at the end of data or
/// for a header cut off by it.
pub(crate) fn header_at(data: &[u8], pos: usize) -> Result<RawHeader, Parsed<'_>> {
    let rest = data.get(pos..).unwrap_or(&[]);
    match rest.get(..HEADER_SIZE) {
        Some(h) => {
            let arr: [u8; HEADER_SIZE] = h.try_into().map_err(|_| Parsed::End)?;
            Ok(RawHeader::decode(arr))
        }
        None if rest.iter().all(|&b| b == 0) => Err(Parsed::End),
        None => Err(Parsed::Damaged("chunk header cut off by end of data")),
    }
}

/// Parses and verifies the chunk at `pos` of segment `segment`.
///
/// `pos` must not lie in a block trailer (the caller skips those). Checks:
/// zero header, length within the block, payload within the data,
/// checksum, known type, `synced_to <= pos`.
pub(crate) fn parse_chunk(data: &[u8], pos: usize, segment: u64) -> Parsed<'_> {
    let header = match header_at(data, pos) {
        Ok(h) => h,
        Err(p) => return p,
    };
    if header.is_zero() {
        return Parsed::End;
    }
    let block_end = next_block_start(pos);
    let start = pos.saturating_add(HEADER_SIZE);
    let end = start.saturating_add(usize::from(header.length));
    if end > block_end {
        return Parsed::Damaged("chunk length crosses the block boundary");
    }
    let Some(payload) = data.get(start..end) else {
        return Parsed::Damaged("chunk payload cut off by end of data");
    };
    if chunk_checksum(segment, &header.tail(), payload) != header.checksum {
        return Parsed::Damaged("checksum mismatch");
    }
    let Some(kind) = ChunkType::from_u8(header.kind) else {
        return Parsed::Damaged("unknown chunk type");
    };
    let synced_to = u64::from(header.synced_to);
    if synced_to > pos as u64 {
        return Parsed::Damaged("synced_to beyond the chunk's own offset");
    }
    Parsed::Chunk(Chunk { kind, payload, synced_to, end })
}

/// Whether `pos` lies in a block trailer too short for a chunk header.
pub(crate) fn in_trailer(pos: usize) -> bool {
    BLOCK_SIZE - pos % BLOCK_SIZE < HEADER_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let mut buf = Vec::new();
        encode_chunk(&mut buf, 9, ChunkType::First, 0x0102_0304, b"hello");
        assert_eq!(buf.len(), HEADER_SIZE + 5);
        let h = RawHeader::decode(buf[..HEADER_SIZE].try_into().unwrap());
        assert_eq!(h.length, 5);
        assert_eq!(h.kind, 2);
        assert_eq!(h.synced_to, 0x0102_0304);
        assert_eq!(&buf[4..11], &h.tail());
    }

    #[test]
    fn segment_header_round_trip() {
        let p = segment_header_payload(0x1122_3344_5566_7788);
        assert_eq!(&p[..6], b"SKVWAL");
        assert_eq!(p[6..8], [1, 0]);
        assert_eq!(p[8], 1);
        let h = decode_segment_header(&p).unwrap();
        assert_eq!(h.number, 0x1122_3344_5566_7788);
        assert_eq!(h.version, 1);
        assert_eq!(h.checksum_kind, 1);
        assert!(decode_segment_header(&p[..16]).is_none());
        let mut bad = p;
        bad[0] = b'X';
        assert!(decode_segment_header(&bad).is_none());
    }

    #[test]
    fn parse_chunk_checks() {
        let mut buf = Vec::new();
        encode_chunk(&mut buf, 3, ChunkType::Full, 0, b"abc");
        assert!(matches!(parse_chunk(&buf, 0, 3), Parsed::Chunk(c) if c.payload == b"abc"));
        assert!(matches!(parse_chunk(&buf, 0, 4), Parsed::Damaged(_)));
        assert!(matches!(parse_chunk(&buf[..12], 0, 3), Parsed::Damaged(_)));
        assert!(matches!(parse_chunk(&buf[..5], 0, 3), Parsed::Damaged(_)));
        assert!(matches!(parse_chunk(&[0u8; 5], 0, 3), Parsed::End));
        assert!(matches!(parse_chunk(&[], 0, 3), Parsed::End));
        assert!(matches!(parse_chunk(&buf, 100, 3), Parsed::End));
        // synced_to must not exceed the chunk's own offset.
        let mut late = Vec::new();
        encode_chunk(&mut late, 3, ChunkType::Full, 1, b"");
        assert!(matches!(parse_chunk(&late, 0, 3), Parsed::Damaged(_)));
        // Unknown type with a valid checksum.
        let h = RawHeader { checksum: 0, length: 0, kind: 7, synced_to: 0 };
        let mut raw = chunk_checksum(3, &h.tail(), b"").to_le_bytes().to_vec();
        raw.extend_from_slice(&h.tail());
        assert!(matches!(parse_chunk(&raw, 0, 3), Parsed::Damaged("unknown chunk type")));
    }

    #[test]
    fn block_math() {
        assert_eq!(next_block_start(0), BLOCK_SIZE);
        assert_eq!(next_block_start(BLOCK_SIZE - 1), BLOCK_SIZE);
        assert_eq!(next_block_start(BLOCK_SIZE), 2 * BLOCK_SIZE);
        assert!(!in_trailer(BLOCK_SIZE - HEADER_SIZE));
        assert!(in_trailer(BLOCK_SIZE - HEADER_SIZE + 1));
        assert!(!in_trailer(BLOCK_SIZE));
    }
}
