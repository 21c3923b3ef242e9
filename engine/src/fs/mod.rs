//! File-system abstraction: every file operation of the engine goes through [`Fs`].
//!
//! Three implementations:
//! - [`StdFs`]: the real file system (`pread`/`pwrite`, `fdatasync`, directory `fsync`, `flock`).
//! - [`MemFs`]: an in-memory file system that also tracks what is *durable*; its
//!   [`MemFs::crash_clone`] returns the file system as a machine crash could leave it:
//!   synced data intact, unsynced data dropped, kept or torn, directory operations since the
//!   last directory sync lost after a random point. This is the crash-simulating file system
//!   the model tests use.
//! - [`FaultyFs`]: wraps another `Fs` and makes chosen calls fail (EIO, ENOSPC, ...).
//!
//! Paths are plain `Path`s; the engine only ever uses one directory level (the database
//! directory and the files directly in it).

mod faulty;
#[cfg(unix)]
mod mapped_log;
mod mem;
mod std_fs;

pub use faulty::{FaultOp, FaultyFs};
pub use mem::{CrashPolicy, MemFs};
pub use std_fs::StdFs;

use std::io;
use std::path::Path;
use std::sync::Arc;

/// An open file: positioned reads and writes, shareable between threads.
pub trait FsFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; `UnexpectedEof` if the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes the file's data (and the size needed to read it) durable: `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates or extends (with zeros) the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Current size in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Asks the OS to start writing `[offset, offset + len)` to storage without waiting
    /// (Linux: `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that a later `sync_data` has
    /// less left to write. A hint: it makes nothing durable; the default does nothing.
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A held exclusive lock on a database directory; released on drop.
pub trait FsLock: Send + Sync {}

/// The file-system operations the engine needs.
pub trait Fs: Send + Sync + 'static {
    /// Creates a new file, failing if it exists.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>>;
    /// Creates a new file, failing if it exists, for a log written front to back by one
    /// writer ([`crate::Options::wal_mapped`]). [`StdFs`] writes it through a shared
    /// memory mapping instead of a system call per write; by default, [`Fs::create`].
    fn create_log(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        self.create(path)
    }
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>>;
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creates, renames, removes) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Whether a path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock (creating the lock file if needed); `WouldBlock` if held.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FsLock>>;
    /// Takes a shared lock on an existing lock file: any number of shared holders at once,
    /// `WouldBlock` while an exclusive lock is held (and an exclusive lock is refused while
    /// a shared one is held).
    fn lock_shared(&self, path: &Path) -> io::Result<Box<dyn FsLock>>;
}

/// Adapts an [`FsFile`] to the table reader's [`stampkv_sstable::ReadAt`].
pub(crate) struct TableFile(pub Arc<dyn FsFile>);

impl stampkv_sstable::ReadAt for TableFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
    fn size(&self) -> io::Result<u64> {
        self.0.len()
    }
}

/// Adapts an [`FsFile`] to the log writer's [`stampkv_wal::LogFile`].
#[derive(Clone)]
pub(crate) struct LogFileHandle(pub Arc<dyn FsFile>);

impl stampkv_wal::LogFile for LogFileHandle {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.0.start_writeback(offset, len)
    }
}

/// A buffered sequential writer over an [`FsFile`] (used to write tables).
pub(crate) struct FileWriter {
    file: Arc<dyn FsFile>,
    offset: u64,
    buf: Vec<u8>,
    /// Where the next write-back request starts (see [`FILE_WRITEBACK_BYTES`]).
    writeback_from: u64,
}

const FILE_WRITER_BUFFER_BYTES: usize = 256 * 1024;

/// A table writer asks the OS to start writing back each MiB it has written
/// ([`FsFile::start_writeback`]; RocksDB's `bytes_per_sync`), so that the `fdatasync` that
/// finishes a table does not find it all still in memory, and a compaction's output
/// reaches the disk as a steady stream rather than in bursts that hold up WAL writes.
const FILE_WRITEBACK_BYTES: u64 = 1 << 20;

impl FileWriter {
    pub(crate) fn new(file: Arc<dyn FsFile>) -> Self {
        FileWriter { file, offset: 0, buf: Vec::with_capacity(FILE_WRITER_BUFFER_BYTES), writeback_from: 0 }
    }

    fn flush_buffer(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all_at(&self.buf, self.offset)?;
            self.offset += self.buf.len() as u64;
            self.buf.clear();
            self.start_writeback_if_due();
        }
        Ok(())
    }

    /// Requests write-back of what was written since the last request, once that is at
    /// least [`FILE_WRITEBACK_BYTES`]. An error is ignored: the hint makes nothing durable,
    /// and a failed write reports itself at the sync that does.
    fn start_writeback_if_due(&mut self) {
        if self.offset - self.writeback_from >= FILE_WRITEBACK_BYTES {
            let _ = self.file.start_writeback(self.writeback_from, self.offset - self.writeback_from);
            self.writeback_from = self.offset;
        }
    }

    /// Flushes buffered bytes and `fdatasync`s; returns the file.
    pub(crate) fn finish_synced(mut self) -> io::Result<Arc<dyn FsFile>> {
        self.flush_buffer()?;
        self.file.sync_data()?;
        Ok(self.file)
    }
}

impl io::Write for FileWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.buf.len() + data.len() > FILE_WRITER_BUFFER_BYTES {
            self.flush_buffer()?;
        }
        if data.len() >= FILE_WRITER_BUFFER_BYTES {
            self.file.write_all_at(data, self.offset)?;
            self.offset += data.len() as u64;
            self.start_writeback_if_due();
        } else {
            self.buf.extend_from_slice(data);
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flush_buffer()
    }
}
