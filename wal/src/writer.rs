//! [`LogWriter`]: writes records into one segment file.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::WalError;
use crate::file::LogFile;
use crate::format::{
    encode_chunk, segment_header_payload, ChunkType, BLOCK_SIZE, HEADER_SIZE, MAX_RECORD_SIZE,
    MAX_SEGMENT_SIZE, SEAL_RESERVE, SEGMENT_HEADER_END,
};
use crate::group::WalStats;

/// Default [`WalOptions::preallocate_bytes`]: 1 MiB.
pub const DEFAULT_PREALLOCATE_BYTES: u64 = 1024 * 1024;

/// Default [`WalOptions::writeback_bytes`]: 1 MiB.
pub const DEFAULT_WRITEBACK_BYTES: u64 = 1024 * 1024;

/// Options of the log writer.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Zero-fill the segment this far ahead of the write position (0: no preallocation).
    pub preallocate_bytes: u64,
    /// Each time this many bytes have been written since the last time, ask the OS to start
    /// writing them to storage ([`LogFile::start_writeback`]; 0: never). Commits that are
    /// not synced one by one then reach storage steadily instead of all at the sync that
    /// seals the segment, which would otherwise have the whole segment to write.
    pub writeback_bytes: u64,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions { preallocate_bytes: DEFAULT_PREALLOCATE_BYTES, writeback_bytes: DEFAULT_WRITEBACK_BYTES }
    }
}

/// Source of zeros for preallocation writes.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// A segment file plus its durable prefix, shared by the writer and the
/// group-commit syncer (which syncs without holding the writer).
pub(crate) struct SegmentFile<F> {
    pub(crate) file: F,
    /// Bytes at the start of the segment known to be durable. Only grows, and
    /// is always a record boundary at most the writer's offset.
    synced: AtomicU64,
}

impl<F: LogFile> SegmentFile<F> {
    /// `fdatasync`s, then records that everything before `offset` (data that
    /// was handed to the OS before this call) is durable.
    pub(crate) fn sync_through(&self, offset: u64) -> io::Result<()> {
        self.file.sync_data()?;
        self.synced.fetch_max(offset, Ordering::AcqRel);
        Ok(())
    }

    fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Sealed,
    /// A write, truncate or sync failed: the file contents are unknown.
    Poisoned,
}

/// Writes records into one segment file (no group commit): used by [`crate::Wal`] and by
/// other logs in the same format (the engine's manifest).
pub struct LogWriter<F: LogFile> {
    shared: Arc<SegmentFile<F>>,
    segment: u64,
    /// Offset just past the last encoded chunk: where the next chunk (or its
    /// block padding) goes.
    offset: u64,
    /// Offset where `buf` starts: everything before it was handed to the OS.
    flushed: u64,
    /// `[0, allocated)` has been written (data or preallocation zeros), so
    /// everything in `[offset, allocated)` reads as zeros.
    allocated: u64,
    preallocate: u64,
    /// [`WalOptions::writeback_bytes`].
    writeback_step: u64,
    /// Where the next [`LogFile::start_writeback`] range starts: everything before it was
    /// handed to the OS and either synced or already asked to be written back.
    writeback_from: u64,
    /// Encoded chunks not yet written (`[flushed, offset)`); written at once by
    /// [`LogWriter::flush`].
    buf: Vec<u8>,
    state: State,
    stats: WalStats,
}

impl<F: LogFile> LogWriter<F> {
    /// Starts a new segment in an empty `file`: writes the segment header chunk.
    pub fn create(file: F, segment_number: u64, options: WalOptions) -> Result<Self, WalError> {
        let mut w = Self::resume(file, segment_number, 0, 0, options);
        w.build_single(ChunkType::SegmentHeader, &segment_header_payload(segment_number));
        w.flush()?;
        Ok(w)
    }

    /// A writer continuing at `offset` of an existing segment whose first
    /// `synced` bytes are durable; `[offset, ..)` must be zeros or absent.
    pub(crate) fn resume(
        file: F,
        segment_number: u64,
        offset: u64,
        synced: u64,
        options: WalOptions,
    ) -> Self {
        LogWriter {
            shared: Arc::new(SegmentFile { file, synced: AtomicU64::new(synced.min(offset)) }),
            segment: segment_number,
            offset,
            flushed: offset,
            allocated: offset,
            preallocate: options.preallocate_bytes,
            writeback_step: options.writeback_bytes,
            writeback_from: synced.min(offset),
            buf: Vec::new(),
            state: State::Open,
            stats: WalStats::default(),
        }
    }

    /// Appends one record, written to the OS on return (with any deferred records before
    /// it); returns the segment offset past it.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<u64, WalError> {
        let end = self.add_record_deferred(payload)?;
        self.flush()?;
        Ok(end)
    }

    /// Encodes one record without writing it: it reaches the OS with the next
    /// [`LogWriter::flush`] (or `add_record`, `sync`, `seal`). Returns the offset past it.
    pub fn add_record_deferred(&mut self, payload: &[u8]) -> Result<u64, WalError> {
        self.check_open()?;
        if payload.len() > MAX_RECORD_SIZE {
            return Err(WalError::RecordTooLarge { len: payload.len() });
        }
        let end = self.build_record(payload);
        // Keep room for the SEAL so that every offset and synced_to fits in u32.
        if end.saturating_add(SEAL_RESERVE) > MAX_SEGMENT_SIZE {
            self.buf.truncate(self.encoded_len());
            return Err(WalError::SegmentFull { offset: self.offset, len: payload.len() });
        }
        self.offset = end;
        self.stats.records_written += 1;
        Ok(end)
    }

    /// Writes the deferred records to the OS with one positioned write.
    pub fn flush(&mut self) -> Result<(), WalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.state == State::Poisoned {
            return Err(WalError::Poisoned);
        }
        let end = self.offset;
        self.preallocate(end)?;
        let start = self.flushed;
        self.io(|w| w.shared.file.write_all_at(&w.buf, start))?;
        self.stats.bytes_written += self.buf.len() as u64;
        self.buf.clear();
        self.flushed = end;
        self.allocated = self.allocated.max(end);
        self.start_writeback_if_due();
        Ok(())
    }

    /// Asks the OS to start writing back what was written since the last request, once that
    /// is at least `writeback_step` bytes. Only a hint: an error here is ignored, since a
    /// failed write reports itself at the next sync, which is what makes data durable.
    fn start_writeback_if_due(&mut self) {
        let from = self.writeback_from.max(self.shared.synced());
        if self.writeback_step == 0 || self.flushed.saturating_sub(from) < self.writeback_step {
            return;
        }
        let _ = self.shared.file.start_writeback(from, self.flushed - from);
        self.stats.writeback_requests += 1;
        self.writeback_from = self.flushed;
    }

    /// Bytes of `buf` that belong to records already accepted.
    fn encoded_len(&self) -> usize {
        (self.offset - self.flushed) as usize
    }

    /// `fdatasync`s everything written so far.
    pub fn sync(&mut self) -> Result<(), WalError> {
        match self.state {
            State::Poisoned => return Err(WalError::Poisoned),
            State::Sealed => return Ok(()),
            State::Open => {}
        }
        self.flush()?;
        let offset = self.offset;
        self.io(|w| w.shared.sync_through(offset))?;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Appends the SEAL chunk, trims preallocated space and syncs.
    ///
    /// Sealing a sealed writer does nothing.
    pub fn seal(&mut self) -> Result<(), WalError> {
        match self.state {
            State::Poisoned => return Err(WalError::Poisoned),
            State::Sealed => return Ok(()),
            State::Open => {}
        }
        let end = self.build_single(ChunkType::Seal, &[]);
        self.flush()?;
        self.io(|w| w.shared.file.set_len(end))?;
        self.io(|w| w.shared.sync_through(end))?;
        self.stats.syncs += 1;
        self.state = State::Sealed;
        Ok(())
    }

    /// Offset just past the last accepted chunk (written or deferred).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The underlying file.
    pub fn file(&self) -> &F {
        &self.shared.file
    }

    /// The segment number this writer writes.
    pub fn segment_number(&self) -> u64 {
        self.segment
    }

    /// Bytes at the start of the segment known to be durable.
    pub fn synced_offset(&self) -> u64 {
        self.shared.synced()
    }

    /// Whether [`LogWriter::seal`] completed.
    pub fn is_sealed(&self) -> bool {
        self.state == State::Sealed
    }

    /// Counters of this writer (`syncs` counts its own syncs and seals only).
    pub fn stats(&self) -> WalStats {
        self.stats
    }

    /// The file and its durable prefix, for the group-commit syncer.
    pub(crate) fn shared(&self) -> Arc<SegmentFile<F>> {
        Arc::clone(&self.shared)
    }

    fn check_open(&self) -> Result<(), WalError> {
        match self.state {
            State::Open => Ok(()),
            State::Sealed => Err(WalError::Closed),
            State::Poisoned => Err(WalError::Poisoned),
        }
    }

    /// Runs an I/O step; a failure poisons the writer.
    fn io(&mut self, step: impl FnOnce(&Self) -> io::Result<()>) -> Result<(), WalError> {
        step(self).map_err(|e| {
            self.state = State::Poisoned;
            WalError::Io(e)
        })
    }

    /// `synced_to` for chunks written now. Never above `offset`, which is at
    /// most `MAX_SEGMENT_SIZE` (= u32::MAX), so the conversion cannot fail.
    fn synced_to_field(&self) -> u32 {
        u32::try_from(self.shared.synced().min(self.offset)).unwrap_or(0)
    }

    /// Appends `payload` as FULL or FIRST, MIDDLE*, LAST chunks (with block
    /// padding) to `buf`, as they will lie from `offset`; returns the end.
    fn build_record(&mut self, payload: &[u8]) -> u64 {
        let synced_to = self.synced_to_field();
        let mut off = self.offset;
        let mut rest = payload;
        let mut first = true;
        loop {
            off = pad_block(&mut self.buf, off);
            let room = BLOCK_SIZE - block_offset(off) - HEADER_SIZE;
            let (frag, tail) = rest.split_at(room.min(rest.len()));
            let kind = match (first, tail.is_empty()) {
                (true, true) => ChunkType::Full,
                (true, false) => ChunkType::First,
                (false, false) => ChunkType::Middle,
                (false, true) => ChunkType::Last,
            };
            encode_chunk(&mut self.buf, self.segment, kind, synced_to, frag);
            off += (HEADER_SIZE + frag.len()) as u64;
            if tail.is_empty() {
                return off;
            }
            rest = tail;
            first = false;
        }
    }

    /// Appends one small chunk (SEGMENT_HEADER or SEAL) to `buf` and accepts it;
    /// returns the end.
    fn build_single(&mut self, kind: ChunkType, payload: &[u8]) -> u64 {
        let synced_to = self.synced_to_field();
        let off = pad_block(&mut self.buf, self.offset);
        encode_chunk(&mut self.buf, self.segment, kind, synced_to, payload);
        self.offset = off + (HEADER_SIZE + payload.len()) as u64;
        self.offset
    }

    /// Before writing up to `end`: if that passes the zero-filled area, writes
    /// zeros from `end` up to the next multiple of the preallocation step, so
    /// the following records overwrite already allocated blocks.
    ///
    /// Only once the segment has been synced: zero-filling keeps block
    /// allocation out of the `fdatasync`s of durable commits, but a segment
    /// nobody syncs (buffered commits, e.g. a bulk load) would have every byte
    /// written twice for nothing.
    fn preallocate(&mut self, end: u64) -> Result<(), WalError> {
        let step = self.preallocate;
        if step == 0 || end <= self.allocated || self.shared.synced() == 0 {
            return Ok(());
        }
        let target = end.div_ceil(step).saturating_mul(step).min(MAX_SEGMENT_SIZE);
        let mut pos = end.max(self.allocated);
        while pos < target {
            let n = (target - pos).min(ZEROS.len() as u64);
            let zeros = ZEROS.get(..n as usize).unwrap_or(&ZEROS);
            self.io(|w| w.shared.file.write_all_at(zeros, pos))?;
            pos += n;
            self.stats.preallocated_bytes += n;
        }
        self.allocated = self.allocated.max(target);
        Ok(())
    }
}

impl<F: LogFile> std::fmt::Debug for LogWriter<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("segment", &self.segment)
            .field("offset", &self.offset)
            .field("allocated", &self.allocated)
            .field("synced", &self.shared.synced())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Offset of `off` within its block.
fn block_offset(off: u64) -> usize {
    (off % BLOCK_SIZE as u64) as usize
}

/// If fewer than `HEADER_SIZE` bytes remain in the block at `off`, appends
/// them as zeros to `buf`; returns where the next chunk starts.
fn pad_block(buf: &mut Vec<u8>, off: u64) -> u64 {
    let left = BLOCK_SIZE - block_offset(off);
    if left >= HEADER_SIZE {
        return off;
    }
    buf.resize(buf.len() + left, 0);
    off + left as u64
}

/// Appends a SEAL to a segment recovered with a torn or clean-but-unsealed tail.
///
/// Truncates the file to `valid_end` (from [`crate::SegmentSummary::valid_end`]),
/// syncs, appends SEAL as a writer resuming at `valid_end` would (its
/// `synced_to` = `valid_end`) and syncs again. If `valid_end` is 0 (no header
/// was ever written), writes a SEGMENT_HEADER then the SEAL.
pub fn seal_recovered_segment<F: LogFile>(
    file: &F,
    segment_number: u64,
    valid_end: u64,
) -> Result<(), WalError> {
    if (valid_end != 0 && valid_end < SEGMENT_HEADER_END)
        || valid_end.saturating_add(SEAL_RESERVE) > MAX_SEGMENT_SIZE
    {
        return Err(WalError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{valid_end} is not a valid segment end"),
        )));
    }
    file.set_len(valid_end)?;
    let options = WalOptions { preallocate_bytes: 0, ..WalOptions::default() };
    let mut writer = if valid_end == 0 {
        LogWriter::create(file, segment_number, options)?
    } else {
        file.sync_data()?;
        LogWriter::resume(file, segment_number, valid_end, valid_end, options)
    };
    writer.seal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemLogFile;

    /// Discards writes: lets a test write near the 4 GiB limit.
    struct NullFile;
    impl LogFile for NullFile {
        fn write_all_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn sync_data(&self) -> io::Result<()> {
            Ok(())
        }
        fn set_len(&self, _: u64) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn segment_full_instead_of_crossing_4gib() {
        let file = NullFile;
        // Pretend the segment is almost full.
        let start = MAX_SEGMENT_SIZE - SEAL_RESERVE - 2 * HEADER_SIZE as u64 - 100;
        let mut w = LogWriter::resume(&file, 1, start, 0, WalOptions::default());
        let err = w.add_record(&[7u8; 200]).unwrap_err();
        assert!(matches!(err, WalError::SegmentFull { len: 200, .. }), "{err}");
        assert_eq!(w.offset(), start);
        let end = w.add_record(&[7u8; 50]).unwrap();
        assert!(end + SEAL_RESERVE <= MAX_SEGMENT_SIZE);
        w.seal().unwrap();
        assert!(w.offset() <= MAX_SEGMENT_SIZE);
    }

    #[test]
    fn record_too_large() {
        let file = MemLogFile::new();
        let mut w = LogWriter::create(&file, 1, WalOptions::default()).unwrap();
        let big = vec![0u8; MAX_RECORD_SIZE + 1];
        assert!(matches!(
            w.add_record(&big),
            Err(WalError::RecordTooLarge { len }) if len == MAX_RECORD_SIZE + 1
        ));
    }

    #[test]
    fn padding_and_zero_length_first_fragment() {
        let file = MemLogFile::new();
        let mut w = LogWriter::create(&file, 1, WalOptions { preallocate_bytes: 0, ..WalOptions::default() })
            .unwrap();
        // Leave exactly HEADER_SIZE bytes in block 0: the next record starts
        // with an empty FIRST chunk there.
        let fill = BLOCK_SIZE - SEGMENT_HEADER_END as usize - 2 * HEADER_SIZE;
        assert_eq!(w.add_record(&vec![1u8; fill]).unwrap(), (BLOCK_SIZE - HEADER_SIZE) as u64);
        let end = w.add_record(b"xy").unwrap();
        let data = file.contents();
        assert_eq!(data[BLOCK_SIZE - HEADER_SIZE + 4..BLOCK_SIZE - HEADER_SIZE + 7], [0, 0, 2]);
        assert_eq!(end, (BLOCK_SIZE + HEADER_SIZE + 2) as u64);
        // Seal after leaving 10 bytes: padded, SEAL at the next block.
        let mut w2 = LogWriter::resume(&file, 1, (BLOCK_SIZE - 10) as u64, 0, WalOptions::default());
        w2.seal().unwrap();
        assert_eq!(w2.offset(), (BLOCK_SIZE + HEADER_SIZE) as u64);
        assert_eq!(file.len(), w2.offset());
    }

    #[test]
    fn failures_poison_the_writer() {
        let file = MemLogFile::new();
        let mut w = LogWriter::create(&file, 1, WalOptions::default()).unwrap();
        file.fail_next_writes(1);
        assert!(matches!(w.add_record(b"a"), Err(WalError::Io(_))));
        assert!(matches!(w.add_record(b"a"), Err(WalError::Poisoned)));
        assert!(matches!(w.sync(), Err(WalError::Poisoned)));
        assert!(matches!(w.seal(), Err(WalError::Poisoned)));
    }

    #[test]
    fn sealed_writer_rejects_records() {
        let file = MemLogFile::new();
        let mut w = LogWriter::create(&file, 1, WalOptions::default()).unwrap();
        w.seal().unwrap();
        w.seal().unwrap();
        assert!(w.is_sealed());
        assert!(matches!(w.add_record(b"a"), Err(WalError::Closed)));
    }
}
