//! The file abstraction segments are written through.

use std::io;
use std::sync::Arc;

/// A file a log segment is written to. Positioned writes, so that a writer can
/// overwrite zero-filled preallocated space and a syncer can run on another thread.
pub trait LogFile: Send + Sync {
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Asks the OS to start writing `[offset, offset + len)` to storage without waiting
    /// for it (Linux: `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that a later
    /// [`LogFile::sync_data`] finds less to do. A hint: it makes nothing durable, and the
    /// default does nothing.
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
}

/// Creates segment files and makes their directory entries durable.
pub trait SegmentDir: Send + Sync {
    /// The file type segments are written to.
    type File: LogFile;
    /// Creates (exclusively) a new empty segment file with this number.
    fn create_segment(&self, number: u64) -> io::Result<Self::File>;
    /// Makes created/removed directory entries durable (`fsync` of the directory).
    fn sync_dir(&self) -> io::Result<()>;
}

/// A shared file is a file: lets a test keep a handle to a file a writer owns.
impl<F: LogFile + ?Sized> LogFile for Arc<F> {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        (**self).sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        (**self).set_len(len)
    }
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).start_writeback(offset, len)
    }
}

/// A borrowed file is a file: lets a writer work on a file the caller keeps.
impl<F: LogFile + ?Sized> LogFile for &F {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        (**self).sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        (**self).set_len(len)
    }
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).start_writeback(offset, len)
    }
}

/// Lets a shared directory (e.g. `Arc<MemSegmentDir>`) be handed to a
/// [`crate::Wal`] while a test keeps a handle.
impl<D: SegmentDir + ?Sized> SegmentDir for Arc<D> {
    type File = D::File;
    fn create_segment(&self, number: u64) -> io::Result<D::File> {
        (**self).create_segment(number)
    }
    fn sync_dir(&self) -> io::Result<()> {
        (**self).sync_dir()
    }
}
