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
}

/// How long opening waits for a held `LOCK` before it reports the database as open elsewhere.
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// An `flock`-style exclusive lock, released when the file is closed.
struct StdLock {
    _file: File,
}

impl FsLock for StdLock {}

impl Fs for StdFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        Ok(Arc::new(file))
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
        // An `flock` belongs to the open file description, and a child process shares its
        // parent's descriptions from `fork` until `exec` closes them (the file is opened
        // close-on-exec). So a database just closed by a process that is starting another
        // program on some other thread can stay locked for that moment, a few milliseconds
        // on a loaded machine. Such a lock is let go soon; a database really open elsewhere
        // is still refused after LOCK_WAIT.
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Box::new(StdLock { _file: file })),
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
}
