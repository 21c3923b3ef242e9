//! Readahead for iterators that walk a table's data blocks in file order.
//!
//! A forward scan reads data blocks one after another, each by its own positioned read
//! (a system call for a few KiB). Once an iterator has read [`SEQUENTIAL_READS`] blocks
//! in a row, each starting where the previous one ended, [`Readahead`] reads a window of
//! the file instead (16 KiB, doubling on each window up to 256 KiB, never past the data
//! section) and serves the next blocks from it, as RocksDB's iterators do with implicit
//! readahead. A read anywhere else (a seek, a reverse step, a block found in the cache
//! in between) starts the count again. Blocks served from a window are verified exactly
//! as blocks read alone: only where the bytes come from changes.

use std::io;

use crate::read_at::ReadAt;

/// Blocks read back to back before a window is read.
const SEQUENTIAL_READS: u32 = 2;
/// The first window's size.
const FIRST_WINDOW: usize = 16 << 10;
/// The largest window.
const MAX_WINDOW: usize = 256 << 10;

/// One iterator's readahead state and window.
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    /// File offset of `window[0]`.
    window_offset: u64,
    /// Bytes read ahead (empty when there is no window).
    window: Vec<u8>,
    /// Where the last block read ended: the next block starts there if the walk is
    /// sequential.
    next_offset: Option<u64>,
    /// Blocks read back to back so far.
    sequential: u32,
    /// The size of the next window to read.
    next_window: usize,
    /// Windows read (for tests).
    windows_read: u64,
}

impl Readahead {
    /// Reads `len` bytes at `offset` of `file`, whose readable part ends at `limit` (at
    /// least `offset + len`): from the window when it holds them, else by a new window
    /// when the walk is sequential, else by a read of just those bytes.
    pub(crate) fn read(
        &mut self,
        file: &dyn ReadAt,
        offset: u64,
        len: usize,
        limit: u64,
    ) -> io::Result<Vec<u8>> {
        if self.next_offset == Some(offset) {
            self.sequential = self.sequential.saturating_add(1);
        } else {
            self.sequential = 0;
            self.next_window = FIRST_WINDOW;
        }
        self.next_offset = offset.checked_add(len as u64);
        if let Some(bytes) = self.in_window(offset, len) {
            return Ok(bytes.to_vec());
        }
        if self.sequential < SEQUENTIAL_READS {
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, offset)?;
            return Ok(buf);
        }
        let room = usize::try_from(limit.saturating_sub(offset)).unwrap_or(usize::MAX);
        let size = self.next_window.max(FIRST_WINDOW).min(room).max(len);
        // The read overwrites every byte: zero only what the buffer grows by.
        self.window.resize(size, 0);
        if let Err(e) = file.read_exact_at(&mut self.window, offset) {
            // Start over: the next read is a single block's.
            self.window.clear();
            self.next_offset = None;
            return Err(e);
        }
        self.window_offset = offset;
        self.windows_read += 1;
        self.next_window = (size * 2).min(MAX_WINDOW);
        self.in_window(offset, len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| io::Error::other("readahead window shorter than the block it was read for"))
    }

    /// The bytes `offset..offset + len` if the window holds all of them.
    fn in_window(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(offset.checked_sub(self.window_offset)?).ok()?;
        self.window.get(start..start.checked_add(len)?)
    }

    /// Windows read so far.
    #[cfg(test)]
    pub(crate) fn windows_read(&self) -> u64 {
        self.windows_read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A file image that counts its reads.
    struct Counted {
        bytes: Vec<u8>,
        reads: AtomicU64,
    }

    impl ReadAt for Counted {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.bytes.read_exact_at(buf, offset)
        }
        fn size(&self) -> io::Result<u64> {
            Ok(self.bytes.len() as u64)
        }
    }

    fn file(len: usize) -> Counted {
        Counted { bytes: (0..len).map(|i| (i * 7 % 251) as u8).collect(), reads: AtomicU64::new(0) }
    }

    /// A sequential walk of 1 KiB blocks returns the file's bytes and, after the first
    /// blocks, reads windows that grow to the maximum.
    #[test]
    fn sequential_walk_reads_growing_windows() {
        let image = file(4 << 20);
        let limit = (3 << 20) + 100;
        let mut ahead = Readahead::default();
        let (mut offset, block) = (0u64, 1000usize);
        while offset + block as u64 <= limit {
            let bytes = ahead.read(&image, offset, block, limit).unwrap();
            assert_eq!(bytes, image.bytes[offset as usize..offset as usize + block]);
            offset += block as u64;
        }
        let blocks = offset / block as u64;
        let reads = image.reads.load(Ordering::Relaxed);
        // 2 single reads, then windows of 16, 32, 64, 128 KiB and 256 KiB from then on
        // (windows that stayed at 16 KiB would take about 190 reads).
        assert!(reads < 25, "{reads} reads for {blocks} blocks");
        assert_eq!(reads, SEQUENTIAL_READS as u64 + ahead.windows_read());
        assert!(ahead.window.len() <= MAX_WINDOW);
    }

    /// Random reads never read ahead; a window never passes `limit`; a block longer than
    /// the next window is read whole.
    #[test]
    fn random_reads_and_limits() {
        let image = file(1 << 20);
        let mut ahead = Readahead::default();
        for (i, offset) in [5000u64, 100, 70_000, 3, 900_000].into_iter().enumerate() {
            let bytes = ahead.read(&image, offset, 100, 1 << 20).unwrap();
            assert_eq!(bytes, image.bytes[offset as usize..offset as usize + 100]);
            assert_eq!(image.reads.load(Ordering::Relaxed), i as u64 + 1);
        }
        assert_eq!(ahead.windows_read(), 0);

        // Three blocks back to back ending 50 bytes before the limit: the window stops there.
        let limit = 10_250;
        for offset in [10_000, 10_050, 10_100] {
            ahead.read(&image, offset, 50, limit).unwrap();
        }
        assert_eq!(ahead.windows_read(), 1);
        assert_eq!(ahead.window.len(), 150);
        // Served from the window: no new read.
        let before = image.reads.load(Ordering::Relaxed);
        assert_eq!(ahead.read(&image, 10_150, 50, limit).unwrap(), image.bytes[10_150..10_200]);
        assert_eq!(image.reads.load(Ordering::Relaxed), before);

        // A block larger than the next window, in a sequential walk, comes whole.
        let mut ahead = Readahead::default();
        let big = FIRST_WINDOW * 3;
        let mut offset = 0u64;
        for _ in 0..4 {
            let bytes = ahead.read(&image, offset, big, 1 << 20).unwrap();
            assert_eq!(bytes, image.bytes[offset as usize..offset as usize + big]);
            offset += big as u64;
        }
    }

    /// A failed window read is an error, and the next read starts clean.
    #[test]
    fn failed_window_reads_are_errors() {
        let image = file(10_000);
        let mut ahead = Readahead::default();
        ahead.read(&image, 0, 100, 20_000).unwrap();
        ahead.read(&image, 100, 100, 20_000).unwrap();
        // The window would run past the end of the file.
        assert!(ahead.read(&image, 200, 100, 20_000).is_err());
        assert!(ahead.window.is_empty());
        assert_eq!(ahead.read(&image, 300, 100, 20_000).unwrap(), image.bytes[300..400]);
    }
}
