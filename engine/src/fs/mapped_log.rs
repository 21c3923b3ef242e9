//! A log file whose appends are copied into a shared memory mapping of the file.
//!
//! A buffered commit must reach the OS before it returns, so that a killed process loses
//! nothing; with `pwrite` that is one system call per commit. Here the log is written
//! through a `MAP_SHARED` mapping of a window of the file instead: the mapped pages *are*
//! the file's page cache pages, so a copy into them is in the OS the moment it is made (it
//! survives the process being killed exactly as a returned `pwrite` does), and
//! `fdatasync` writes them to storage like any other dirty page of the file (Linux tracks
//! pages dirtied through shared mappings). What survives a crash is unchanged.
//!
//! The file is written in windows: the first [`FIRST_WINDOW_BYTES`], then each as long as
//! everything before it up to [`WINDOW_BYTES`], then [`WINDOW_BYTES`] each (so a short
//! log, like a memtable's worth of small test commits, is not extended by megabytes of
//! zeros, and a long one is mapped 4 MiB at a time). Before a window is mapped,
//! the part of it beyond the file's end is written with zeros by `pwrite`: the file then
//! covers the whole window (touching a mapped page past the end of a file raises SIGBUS),
//! and the file system has reserved the space, so a full disk is an error returned by that
//! `pwrite`, never a signal on a later copy. The log format treats zeros as unwritten
//! space, so a crash that leaves part of a zero-filled window behind reads as the end of
//! the log. A write that does not fit in one window goes through `pwrite` (coherent with
//! the mapping: both reach the same page cache pages). Only one window is mapped at a
//! time, so the mapping adds at most [`WINDOW_BYTES`] to the process's resident memory.
//!
//! A sync writes the mapped pages back, and the kernel write-protects them in the mapping
//! to do so: the next copy into such a page faults, and the file system's fault handler
//! (`page_mkwrite`) cost more than a `pwrite` of the same bytes: 140 against 114 µs per
//! durable commit of a single writer (five runs each way, alternating). So writes into the
//! page that held the end of the data at the last sync go through `pwrite`
//! ([`WindowState::pwrite_page`]): a writer that syncs every commit never faults on a
//! synced page, and one that syncs rarely pays at most a page's worth of `pwrite`s per
//! sync.

#![allow(
    unsafe_code,
    reason = "mapping a file is unsafe in memmap2: the mapping's soundness depends on no one else shrinking the file"
)]

use super::FsFile;
use memmap2::{MmapMut, MmapOptions};
use parking_lot::Mutex;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Size and alignment of a mapped window past the first few (a multiple of every page
/// size in use).
pub(crate) const WINDOW_BYTES: u64 = 4 << 20;

/// Size of the first window, at the start of the file (a multiple of every page size).
pub(crate) const FIRST_WINDOW_BYTES: u64 = 64 << 10;

/// The window holding `offset`: `(start, len)`, `start` a multiple of `len`.
fn window_of(offset: u64) -> (u64, u64) {
    if offset < FIRST_WINDOW_BYTES {
        (0, FIRST_WINDOW_BYTES)
    } else if offset < WINDOW_BYTES {
        // [2^k, 2^(k+1)): as long as everything before it.
        let start = 1 << offset.ilog2();
        (start, start)
    } else {
        (offset - offset % WINDOW_BYTES, WINDOW_BYTES)
    }
}

/// The page size assumed by the synced-page rule (module docs). Where pages are larger,
/// writes past the first 4 KiB of a synced page fault as before: correct, only slower.
const PAGE_BYTES: u64 = 4096;

/// Zeros written ahead of a window, this many bytes per `pwrite`.
static ZERO_CHUNK: [u8; 64 << 10] = [0; 64 << 10];

/// A log file written through a mapped window; see the module docs.
pub(crate) struct MappedLogFile {
    file: File,
    state: Mutex<WindowState>,
}

/// The mapped window and the file length it was prepared against.
struct WindowState {
    /// The window: its start offset and the mapping of `[start, start + map.len())`.
    window: Option<(u64, MmapMut)>,
    /// The file's length: this type is the only writer, so it tracks it instead of asking.
    len: u64,
    /// Write-back was asked for everything before this offset ...
    writeback_wanted: u64,
    /// ... and requested from the OS for everything before this one (see
    /// [`WindowState::request_writeback`]).
    writeback_requested: u64,
    /// End of the latest write: the end of the data, since a log writer writes any zeros
    /// ahead of its data before the data.
    last_write_end: u64,
    /// Start of the page that held `last_write_end` at the last sync: writes that touch it go
    /// through `pwrite`, since the sync left it write-protected in the mapping (module docs).
    pwrite_page: Option<u64>,
    /// Writes that went through `pwrite` rather than the mapping (for tests and probes).
    pwrites: u64,
}

impl MappedLogFile {
    /// Wraps a file opened for reading and writing.
    pub(crate) fn new(file: File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        let state = WindowState {
            window: None,
            len,
            writeback_wanted: 0,
            writeback_requested: 0,
            last_write_end: 0,
            pwrite_page: None,
            pwrites: 0,
        };
        Ok(MappedLogFile { file, state: Mutex::new(state) })
    }
}

impl WindowState {
    /// Whether a write of `[offset, end)` touches the page the last sync write-protected.
    fn touches_synced_page(&self, offset: u64, end: u64) -> bool {
        self.pwrite_page.is_some_and(|page| offset < page + PAGE_BYTES && end > page)
    }

    /// The window's bytes `[offset, offset + len)`, if the window covers them.
    fn slice(&mut self, offset: u64, len: usize) -> Option<&mut [u8]> {
        let (start, map) = self.window.as_mut()?;
        let from = usize::try_from(offset.checked_sub(*start)?).ok()?;
        map.get_mut(from..from.checked_add(len)?)
    }

    /// Asks the OS to start writing back what was asked for, except the mapped window.
    /// Writing back a page that is mapped writable makes the kernel write-protect it in
    /// every mapping (a TLB shootdown across CPUs per page) so that the next write to it
    /// faults: that doubled the cost of the hint. So the window's pages are written back
    /// once the window has moved on (at most one window later). A hint: errors are ignored,
    /// a failed write reports itself at the sync that makes data durable.
    fn request_writeback(&mut self, file: &File) {
        let mapped_from = self.window.as_ref().map_or(u64::MAX, |(start, _)| *start);
        let to = self.writeback_wanted.min(mapped_from);
        if to > self.writeback_requested {
            let _ = FsFile::start_writeback(file, self.writeback_requested, to - self.writeback_requested);
            self.writeback_requested = to;
        }
    }

    /// Extends the file with zeros up to `end` (nothing if it is already that long).
    fn extend_with_zeros(&mut self, file: &File, end: u64) -> io::Result<()> {
        while self.len < end {
            let n = (end - self.len).min(ZERO_CHUNK.len() as u64);
            FileExt::write_all_at(file, ZERO_CHUNK.get(..n as usize).unwrap_or(&ZERO_CHUNK), self.len)?;
            self.len += n;
        }
        Ok(())
    }

    /// Maps the window holding `offset`, first extending the file with zeros to the
    /// window's end.
    fn map_window(&mut self, file: &File, offset: u64) -> io::Result<()> {
        self.window = None;
        let (start, len) = window_of(offset);
        self.extend_with_zeros(file, start + len)?;
        let len = usize::try_from(len).map_err(io::Error::other)?;
        // SAFETY: the mapping covers `[start, end)`, all inside the file (extended just
        // above). The file is a log segment of a database directory this process holds the
        // lock on; within this process only this type writes it or changes its length, and
        // `set_len` drops the mapping before it shrinks the file, so no mapped page is ever
        // past the end of the file while the mapping lives. The mapping is only ever
        // written through the `&mut` borrow in `write_all_at`, under the state mutex.
        let map = unsafe { MmapOptions::new().offset(start).len(len).map_mut(file)? };
        self.window = Some((start, map));
        self.request_writeback(file);
        Ok(())
    }
}

impl FsFile for MappedLogFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // Reads see the mapping's writes: both are the same page cache pages.
        FileExt::read_exact_at(&self.file, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        let end =
            offset.checked_add(buf.len() as u64).ok_or_else(|| io::Error::other("log offset overflows"))?;
        let via_mapping = !buf.is_empty() && !state.touches_synced_page(offset, end);
        if via_mapping && state.slice(offset, buf.len()).is_none() && window_of(offset) == window_of(end - 1)
        {
            state.map_window(&self.file, offset)?;
        }
        match state.slice(offset, buf.len()).filter(|_| via_mapping) {
            Some(target) => target.copy_from_slice(buf),
            None => {
                // Crosses a window boundary, is empty or touches the synced page: an
                // ordinary write, after zeros up to it so that the file never has a hole a
                // later window could map.
                state.extend_with_zeros(&self.file, offset)?;
                FileExt::write_all_at(&self.file, buf, offset)?;
                state.len = state.len.max(end);
                state.pwrites += 1;
            }
        }
        state.last_write_end = end;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        {
            // Set before the sync starts: a write racing with it may find its page already
            // write-protected.
            let mut state = self.state.lock();
            state.pwrite_page = Some(state.last_write_end - state.last_write_end % PAGE_BYTES);
        }
        // `fdatasync` also writes back the pages dirtied through the mapping.
        self.file.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        // Unmap first: the window may reach past the new end.
        state.window = None;
        self.file.set_len(len)?;
        state.len = len;
        state.writeback_wanted = state.writeback_wanted.min(len);
        state.writeback_requested = state.writeback_requested.min(len);
        state.last_write_end = state.last_write_end.min(len);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().len)
    }

    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let mut state = self.state.lock();
        state.writeback_wanted = state.writeback_wanted.max(offset.saturating_add(len));
        state.request_writeback(&self.file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn create(dir: &std::path::Path) -> (std::path::PathBuf, MappedLogFile) {
        let path = dir.join("log");
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).expect("create");
        (path.clone(), MappedLogFile::new(file).expect("wrap"))
    }

    #[test]
    fn windows_double_up_to_the_full_size_then_repeat() {
        assert_eq!(window_of(0), (0, FIRST_WINDOW_BYTES));
        assert_eq!(window_of(FIRST_WINDOW_BYTES - 1), (0, FIRST_WINDOW_BYTES));
        assert_eq!(window_of(FIRST_WINDOW_BYTES), (FIRST_WINDOW_BYTES, FIRST_WINDOW_BYTES));
        assert_eq!(window_of(3 * FIRST_WINDOW_BYTES), (2 * FIRST_WINDOW_BYTES, 2 * FIRST_WINDOW_BYTES));
        assert_eq!(window_of(WINDOW_BYTES - 1), (WINDOW_BYTES / 2, WINDOW_BYTES / 2));
        assert_eq!(window_of(WINDOW_BYTES), (WINDOW_BYTES, WINDOW_BYTES));
        assert_eq!(window_of(3 * WINDOW_BYTES + 7), (3 * WINDOW_BYTES, WINDOW_BYTES));
        // Every window is page aligned and the windows tile the file.
        let mut end = 0;
        while end < 3 * WINDOW_BYTES {
            let (start, len) = window_of(end);
            assert_eq!((start, start % 4096, len % 4096), (end, 0, 0));
            end = start + len;
        }
    }

    /// Writes of every shape (inside a window, across a boundary, far ahead, overwriting)
    /// read back through the file, and the file is the window-rounded zero-extended length.
    #[test]
    fn writes_inside_and_across_windows_read_back_through_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, log) = create(dir.path());
        let mut model = Vec::new();
        let mut write = |data: &[u8], offset: u64| {
            log.write_all_at(data, offset).expect("write");
            let end = offset as usize + data.len();
            if model.len() < end {
                model.resize(end, 0);
            }
            model[offset as usize..end].copy_from_slice(data);
        };
        write(b"header", 0);
        write(&[7; 1000], 6);
        write(&[9; 300], WINDOW_BYTES - 100); // crosses into the full-size windows
        write(b"next window", WINDOW_BYTES + 200);
        write(b"far", 3 * WINDOW_BYTES + 5);
        write(b"back", 10); // an earlier window again
        let on_disk = std::fs::read(&path).expect("read");
        assert_eq!(on_disk.len() as u64, 4 * WINDOW_BYTES, "extended with zeros to the last window's end");
        assert_eq!(&on_disk[..model.len()], &model[..]);
        assert!(on_disk[model.len()..].iter().all(|&b| b == 0));
        assert_eq!(log.len().expect("len"), 4 * WINDOW_BYTES);
        let mut back = [0u8; 11];
        log.read_exact_at(&mut back, WINDOW_BYTES + 200).expect("read back");
        assert_eq!(&back, b"next window");
    }

    /// Write-back of the mapped window waits until the window has moved on.
    #[test]
    fn write_back_of_the_mapped_window_waits_for_the_next_window() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_path, log) = create(dir.path());
        log.write_all_at(&[1; 1000], 0).expect("write");
        log.start_writeback(0, 1000).expect("hint");
        assert_eq!(log.state.lock().writeback_requested, 0, "the first window is still mapped");
        log.write_all_at(&[2; 10], FIRST_WINDOW_BYTES).expect("write in the next window");
        assert_eq!(log.state.lock().writeback_requested, 1000, "requested once unmapped");
        log.set_len(500).expect("trim");
        assert_eq!(log.state.lock().writeback_requested, 500);
    }

    /// After a sync, writes into the page that held the end of the data go through
    /// `pwrite` (the sync write-protected it in the mapping); later pages through the
    /// mapping again; everything reads back.
    #[test]
    fn writes_into_the_synced_page_go_through_pwrite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, log) = create(dir.path());
        let pwrites = || log.state.lock().pwrites;
        log.write_all_at(&[1; 100], 0).expect("write");
        assert_eq!(pwrites(), 0, "through the mapping");
        // Zeros ahead of the data, then the data: the sync point is the data's end.
        log.write_all_at(&[0; 8192], 200).expect("preallocate");
        log.write_all_at(&[1; 100], 100).expect("write");
        assert_eq!(pwrites(), 0, "through the mapping");
        log.sync_data().expect("sync");
        log.write_all_at(&[2; 100], 200).expect("write");
        log.write_all_at(&[3; 4000], 300).expect("write");
        assert_eq!(pwrites(), 2, "both touch the synced page [0, 4096)");
        log.write_all_at(&[4; 100], 4300).expect("write");
        assert_eq!(pwrites(), 2, "the next page is not write-protected: through the mapping");
        log.sync_data().expect("sync");
        log.write_all_at(&[5; 100], 4400).expect("write");
        assert_eq!(pwrites(), 3, "the page of the new sync point");
        let on_disk = std::fs::read(&path).expect("read");
        let mut expected = vec![1; 200];
        expected.extend([2; 100]);
        expected.extend([3; 4000]);
        expected.extend([4; 100]);
        expected.extend([5; 100]);
        assert_eq!(&on_disk[..expected.len()], &expected[..]);
        assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
    }

    /// Shrinking unmaps the window, so later writes past the new end extend the file again
    /// instead of touching pages beyond it.
    #[test]
    fn set_len_shrinks_and_later_writes_extend_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, log) = create(dir.path());
        log.write_all_at(b"abcdef", 0).expect("write");
        log.set_len(6).expect("trim");
        assert_eq!(std::fs::read(&path).expect("read"), b"abcdef");
        log.write_all_at(b"gh", 6).expect("write after trim");
        log.sync_data().expect("sync");
        let on_disk = std::fs::read(&path).expect("read");
        assert_eq!(&on_disk[..8], b"abcdefgh");
        assert_eq!(on_disk.len() as u64, FIRST_WINDOW_BYTES);
        log.set_len(8).expect("trim");
        assert_eq!(std::fs::read(&path).expect("read"), b"abcdefgh");
    }
}
