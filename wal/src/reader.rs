//! [`SegmentReader`]: reads the records of one segment and decides what its
//! damage, if any, means (see the crate docs and `FORMAT.md`).

use crate::crc::chunk_checksum;
use crate::error::WalError;
use crate::format::{
    decode_segment_header, header_at, in_trailer, next_block_start, parse_chunk, Chunk, ChunkType, Parsed,
    CHECKSUM_CRC32_MASKED, FORMAT_VERSION, HEADER_SIZE, MAX_RECORD_SIZE, SEGMENT_HEADER_PAYLOAD,
};
use crate::scan::{evidence_after, Evidence};

/// What recovery does with damage (modelled on RocksDB's `WALRecoveryMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Default. A torn tail of the last segment is dropped silently; any other damage is an error.
    #[default]
    TolerateCorruptedTail,
    /// Any damage, including a torn tail, is an error.
    AbsoluteConsistency,
    /// Stop at the first damage, never an error; later segments are ignored.
    PointInTime,
    /// Skip damaged chunks and continue (salvage).
    SkipAnyCorrupted,
}

/// Identifies a segment being read.
#[derive(Debug, Clone)]
pub struct SegmentInfo {
    /// Segment number (mixed into every chunk checksum).
    pub number: u64,
    /// File name used in error messages.
    pub name: String,
    /// Whether this is the newest segment (only it may have a torn tail).
    pub is_last: bool,
}

/// How a segment read ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentEnd {
    /// A SEAL record was found.
    Sealed,
    /// The written data ended cleanly (zeros or end of file) with no seal.
    Unsealed,
    /// A torn tail was discarded, starting at this offset.
    TornTail {
        /// Start of the discarded data (the record that was being written).
        offset: u64,
    },
    /// PointInTime / SkipAnyCorrupted dropped damaged data; first damaged offset.
    Salvaged {
        /// Offset of the first damaged chunk.
        offset: u64,
    },
}

/// Summary after all records of a segment have been read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Offset just past the last complete record (where a writer may resume).
    pub valid_end: u64,
    /// How the segment ended.
    pub end: SegmentEnd,
}

/// What the damage at some offset turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// End of written data between records, with nothing valid after it.
    CleanEnd,
    /// Damage only in data that had never been synced.
    TornTail,
    /// Damage in data that a later chunk proves had been synced.
    Corrupt { at: usize, synced_to: u64 },
}

/// One parsing step.
enum Step<'a> {
    /// A FULL record (borrowed from the input).
    Record(&'a [u8]),
    /// A fragmented record, assembled in `scratch`.
    Assembled,
    /// Keep parsing.
    Continue,
    /// The segment is finished.
    Done,
}

/// Reads the records of one segment held in memory.
pub struct SegmentReader<'a> {
    data: &'a [u8],
    info: SegmentInfo,
    mode: RecoveryMode,
    /// Offset of the next chunk to parse.
    pos: usize,
    /// Offset of the FIRST chunk of the record being assembled in `scratch`.
    record_start: Option<usize>,
    scratch: Vec<u8>,
    /// Offset just past the last complete record, SEAL or segment header.
    valid_end: usize,
    /// SkipAnyCorrupted: offset of the first damaged chunk skipped.
    first_skipped: Option<usize>,
    /// Set once the segment is finished (also after an error).
    end: Option<SegmentEnd>,
    stop_after: bool,
}

impl std::fmt::Debug for SegmentReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentReader")
            .field("info", &self.info)
            .field("mode", &self.mode)
            .field("len", &self.data.len())
            .field("pos", &self.pos)
            .field("valid_end", &self.valid_end)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

impl<'a> SegmentReader<'a> {
    /// Starts reading `data` (the whole segment file).
    pub fn new(data: &'a [u8], info: SegmentInfo, mode: RecoveryMode) -> Self {
        SegmentReader {
            data,
            info,
            mode,
            pos: 0,
            record_start: None,
            scratch: Vec::new(),
            valid_end: 0,
            first_skipped: None,
            end: None,
            stop_after: false,
        }
    }

    /// The next complete record, `None` at the end.
    ///
    /// A FULL record is borrowed from the input, a fragmented one from an
    /// internal buffer. After an error the reader is finished (`Ok(None)`).
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, WalError> {
        loop {
            if self.end.is_some() {
                return Ok(None);
            }
            match self.step()? {
                Step::Record(record) => return Ok(Some(record)),
                Step::Assembled => return Ok(Some(&self.scratch)),
                Step::Continue => {}
                Step::Done => return Ok(None),
            }
        }
    }

    /// Valid after `next_record` returned `Ok(None)`. (After an error it
    /// describes the records returned before it, with `end` = `Salvaged`.)
    pub fn summary(&self) -> SegmentSummary {
        SegmentSummary {
            valid_end: self.valid_end as u64,
            end: self.end.clone().unwrap_or(SegmentEnd::Unsealed),
        }
    }

    /// Whether recovery must stop after this segment (PointInTime hit damage).
    pub fn stop_after(&self) -> bool {
        self.stop_after
    }

    /// Parses the chunk at `pos`.
    fn step(&mut self) -> Result<Step<'a>, WalError> {
        if in_trailer(self.pos) {
            // Fewer than HEADER_SIZE bytes left in the block: zero padding.
            self.pos = next_block_start(self.pos);
        }
        let p = self.pos.min(self.data.len());
        match parse_chunk(self.data, self.pos, self.info.number) {
            Parsed::End => self.on_damage(p, "end of written data", true),
            Parsed::Damaged(reason) => {
                if p == 0 {
                    self.check_foreign_header()?;
                }
                self.on_damage(p, reason, false)
            }
            Parsed::Chunk(c) if p == 0 => self.on_segment_header(c),
            Parsed::Chunk(c) => self.on_chunk(p, c),
        }
    }

    /// The first chunk: it must be a SEGMENT_HEADER of this segment.
    fn on_segment_header(&mut self, c: Chunk<'a>) -> Result<Step<'a>, WalError> {
        if c.kind != ChunkType::SegmentHeader {
            return self.on_damage(0, "first chunk is not a segment header", false);
        }
        let Some(h) = decode_segment_header(c.payload) else {
            return self.on_damage(0, "malformed segment header", false);
        };
        // The header chunk is always masked CRC-32 (frozen across versions),
        // so its verified version and checksum kind can be trusted here.
        if h.version != FORMAT_VERSION || h.checksum_kind != CHECKSUM_CRC32_MASKED {
            self.end = Some(SegmentEnd::Salvaged { offset: 0 });
            return Err(WalError::Unsupported {
                file: self.info.name.clone(),
                version: u32::from(h.version),
            });
        }
        if h.number != self.info.number {
            return Err(self.fail(0, format!("segment header names segment {}", h.number)));
        }
        self.advance_past(c.end);
        Ok(Step::Continue)
    }

    /// A verified chunk after the segment header.
    fn on_chunk(&mut self, p: usize, c: Chunk<'a>) -> Result<Step<'a>, WalError> {
        if let Some(reason) = self.sequence_violation(&c) {
            if self.mode == RecoveryMode::SkipAnyCorrupted {
                return Ok(self.skip_violation(p, &c));
            }
            return self.on_damage(p, reason, false);
        }
        match c.kind {
            ChunkType::Full => {
                self.advance_past(c.end);
                Ok(Step::Record(c.payload))
            }
            ChunkType::First => {
                self.scratch.clear();
                self.scratch.extend_from_slice(c.payload);
                self.record_start = Some(p);
                self.pos = c.end;
                Ok(Step::Continue)
            }
            ChunkType::Middle => {
                self.scratch.extend_from_slice(c.payload);
                self.pos = c.end;
                Ok(Step::Continue)
            }
            ChunkType::Last => {
                self.scratch.extend_from_slice(c.payload);
                self.record_start = None;
                self.advance_past(c.end);
                Ok(Step::Assembled)
            }
            ChunkType::Seal => {
                self.advance_past(c.end);
                Ok(self.finish(SegmentEnd::Sealed))
            }
            // Excluded by `sequence_violation`.
            ChunkType::SegmentHeader => self.on_damage(p, "segment header inside the segment", false),
        }
    }

    /// Why a verified chunk cannot come next, if it cannot.
    fn sequence_violation(&self, c: &Chunk<'a>) -> Option<&'static str> {
        let in_record = self.record_start.is_some();
        match c.kind {
            ChunkType::SegmentHeader => Some("segment header inside the segment"),
            ChunkType::Full | ChunkType::First if in_record => Some("new record inside a fragmented record"),
            ChunkType::Middle | ChunkType::Last if !in_record => {
                Some("record fragment without a FIRST chunk")
            }
            ChunkType::Seal if in_record => Some("SEAL inside a fragmented record"),
            ChunkType::Seal if !c.payload.is_empty() => Some("SEAL chunk with a payload"),
            ChunkType::Middle | ChunkType::Last
                if self.scratch.len().saturating_add(c.payload.len()) > MAX_RECORD_SIZE =>
            {
                Some("record larger than the maximum record size")
            }
            _ => None,
        }
    }

    /// SkipAnyCorrupted: a verified chunk out of sequence. The record in
    /// progress is dropped; a FULL, FIRST or SEAL is then read again as the
    /// start of something new, any other chunk is skipped.
    fn skip_violation(&mut self, p: usize, c: &Chunk<'a>) -> Step<'a> {
        self.first_skipped.get_or_insert(p);
        let restart = self.record_start.is_some()
            && matches!(c.kind, ChunkType::Full | ChunkType::First | ChunkType::Seal);
        self.record_start = None;
        self.scratch.clear();
        if !restart {
            self.pos = c.end;
        }
        Step::Continue
    }

    /// A complete item ends at `end`: a writer may resume there.
    fn advance_past(&mut self, end: usize) {
        self.pos = end;
        self.valid_end = end;
    }

    /// Damage (or, with `at_end`, the end of written data) at `p`.
    fn on_damage(&mut self, p: usize, reason: &str, at_end: bool) -> Result<Step<'a>, WalError> {
        let r = self.record_start.unwrap_or(p);
        let skipping = self.mode == RecoveryMode::SkipAnyCorrupted;
        let evidence = evidence_after(self.data, self.info.number, p, r, skipping);
        if skipping && evidence != Evidence::Nothing {
            // Valid data follows: drop the damaged record, resume at the next block.
            self.first_skipped.get_or_insert(p);
            self.record_start = None;
            self.scratch.clear();
            self.pos = next_block_start(p);
            return Ok(Step::Continue);
        }
        let verdict = match evidence {
            Evidence::Synced { at, synced_to } => Verdict::Corrupt { at, synced_to },
            Evidence::Nothing if at_end && self.record_start.is_none() => Verdict::CleanEnd,
            _ => Verdict::TornTail,
        };
        self.conclude(p, r, verdict, reason)
    }

    /// Applies the recovery mode to a verdict about the damage at `p`.
    fn conclude(&mut self, p: usize, r: usize, verdict: Verdict, reason: &str) -> Result<Step<'a>, WalError> {
        let last = self.info.is_last;
        let tolerated = match (verdict, last, self.mode) {
            (Verdict::CleanEnd, true, _) => Some(SegmentEnd::Unsealed),
            (Verdict::TornTail, true, mode) if mode != RecoveryMode::AbsoluteConsistency => {
                Some(SegmentEnd::TornTail { offset: r as u64 })
            }
            (_, _, RecoveryMode::PointInTime) => {
                self.stop_after = true;
                Some(SegmentEnd::Salvaged { offset: p as u64 })
            }
            (_, _, RecoveryMode::SkipAnyCorrupted) => Some(SegmentEnd::Salvaged { offset: p as u64 }),
            _ => None,
        };
        if let Some(end) = tolerated {
            return Ok(self.finish(end));
        }
        let why = match verdict {
            Verdict::Corrupt { at, synced_to } => format!(
                "{reason}; the chunk at offset {at} shows the first {synced_to} bytes had been synced"
            ),
            _ if !last => format!("{reason} before a SEAL, in a segment that is not the last"),
            _ => format!("{reason} (torn tail, not accepted in AbsoluteConsistency mode)"),
        };
        Err(self.fail(p, why))
    }

    /// Finishes the segment; a SkipAnyCorrupted read that skipped anything
    /// always reports `Salvaged` with the first skipped offset.
    fn finish(&mut self, end: SegmentEnd) -> Step<'a> {
        let end = match self.first_skipped {
            Some(first) => SegmentEnd::Salvaged { offset: first as u64 },
            None => end,
        };
        self.end = Some(end);
        Step::Done
    }

    /// Finishes the segment with a corruption error at `p`.
    fn fail(&mut self, p: usize, reason: String) -> WalError {
        self.end = Some(SegmentEnd::Salvaged { offset: p as u64 });
        WalError::Corruption { file: self.info.name.clone(), offset: p as u64, reason }
    }

    /// A first chunk that fails verification but is a valid segment header
    /// of *another* segment means a misnamed file: an error in every mode
    /// (otherwise every chunk would fail and the file would read as empty).
    fn check_foreign_header(&mut self) -> Result<(), WalError> {
        let Ok(h) = header_at(self.data, 0) else {
            return Ok(());
        };
        if h.kind != ChunkType::SegmentHeader as u8 || usize::from(h.length) != SEGMENT_HEADER_PAYLOAD {
            return Ok(());
        }
        let end = HEADER_SIZE + SEGMENT_HEADER_PAYLOAD;
        let Some(payload) = self.data.get(HEADER_SIZE..end) else {
            return Ok(());
        };
        match decode_segment_header(payload) {
            Some(sh)
                if sh.number != self.info.number
                    && chunk_checksum(sh.number, &h.tail(), payload) == h.checksum =>
            {
                Err(self.fail(
                    0,
                    format!("file holds segment {}, expected segment {}", sh.number, self.info.number),
                ))
            }
            _ => Ok(()),
        }
    }
}
