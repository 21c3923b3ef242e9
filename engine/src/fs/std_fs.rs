//! The real file system.

use super::{Fs, FsFile, FsLock};
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

impl FsFile for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    #[cfg(target_os = "linux")]
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (libc::off64_t::try_from(offset), libc::off64_t::try_from(len)) else {
            return Ok(()); // beyond what the call can name: nothing to hint
        };
        // SAFETY: `sync_file_range` only reads its integer arguments; the descriptor is
        // this open file's, valid for the duration of the call, and the call neither
        // writes to our memory nor changes the file's contents.
        #[allow(unsafe_code, reason = "a system call the standard library does not wrap")]
        let result =
            unsafe { libc::sync_file_range(self.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// How long opening waits for a held `LOCK` before it reports the database as open elsewhere.
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// An `flock` on the `LOCK` file, released when the file is closed. The holder of the
/// exclusive lock writes its process id into the file (so that a refused open can name
/// it) and empties it again when it lets go.
struct StdLock {
    file: File,
    exclusive: bool,
}

impl FsLock for StdLock {}

impl Drop for StdLock {
    fn drop(&mut self) {
        if self.exclusive {
            let _ = self.file.set_len(0);
        }
    }
}

impl Fs for StdFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        Ok(Arc::new(file))
    }
    #[cfg(unix)]
    fn create_log(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        Ok(Arc::new(super::mapped_log::MappedLogFile::new(file)?))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(file))
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FsLock>> {
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let file = acquire(file, File::try_lock)?;
        // Naming the holder is a courtesy: a failure to write it changes nothing.
        let pid = format!("{}\n", std::process::id());
        let _ = file.set_len(0).and_then(|()| FileExt::write_all_at(&file, pid.as_bytes(), 0));
        Ok(Box::new(StdLock { file, exclusive: true }))
    }
    fn lock_shared(&self, path: &Path) -> io::Result<Box<dyn FsLock>> {
        // The lock file must exist: a reader never creates anything.
        let file = OpenOptions::new().read(true).open(path)?;
        let file = acquire(file, File::try_lock_shared)?;
        Ok(Box::new(StdLock { file, exclusive: false }))
    }
}

/// Takes an `flock` on `file` with `try_lock`, waiting up to [`LOCK_WAIT`] while it is held.
///
/// An `flock` belongs to the open file description, and a child process shares its
/// parent's descriptions from `fork` until `exec` closes them (the file is opened
/// close-on-exec). So a database just closed by a process that is starting another
/// program on some other thread can stay locked for that moment, a few milliseconds on a
/// loaded machine. Such a lock is let go soon; a database really open elsewhere is still
/// refused after `LOCK_WAIT`.
fn acquire(file: File, try_lock: fn(&File) -> Result<(), TryLockError>) -> io::Result<File> {
    let started = Instant::now();
    loop {
        match try_lock(&file) {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the lock is held by another open database",
                ))
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_back_hints_reach_the_kernel_and_change_no_contents() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = StdFs;
        let path = dir.path().join("hinted");
        let file = fs.create(&path).expect("create");
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
        file.write_all_at(&data, 0).expect("write");
        // In range, past the end, and zero-length (Linux: "to the end of the file").
        file.start_writeback(0, 1 << 20).expect("hint");
        file.start_writeback(8 << 20, 1 << 20).expect("hint past the end");
        file.start_writeback(1 << 20, 0).expect("hint to the end");
        file.sync_data().expect("sync");
        assert_eq!(fs.read_all(&path).expect("read"), data);
    }

    #[test]
    fn a_range_the_system_call_cannot_name_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("small");
        std::fs::write(&path, b"x").expect("write");
        let file = File::open(&path).expect("open");
        FsFile::start_writeback(&file, u64::MAX, 1).expect("an offset beyond i64 is skipped");
        FsFile::start_writeback(&file, 0, u64::MAX).expect("a length beyond i64 is skipped");
    }
}
