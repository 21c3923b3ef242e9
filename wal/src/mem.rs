//! In-memory files and directories for tests (with failure injection).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::file::{LogFile, SegmentDir};

/// An in-memory [`LogFile`] over a `Vec<u8>`, with injectable failures.
#[derive(Default)]
pub struct MemLogFile {
    data: Mutex<Vec<u8>>,
    fail_writes: AtomicU32,
    fail_syncs: AtomicU32,
    syncs: AtomicU64,
}

impl MemLogFile {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// A file holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MemLogFile { data: Mutex::new(bytes), ..Self::default() }
    }

    /// A copy of the current contents.
    pub fn contents(&self) -> Vec<u8> {
        self.data.lock().clone()
    }

    /// Takes the contents, leaving the file empty.
    pub fn take_bytes(&self) -> Vec<u8> {
        std::mem::take(&mut *self.data.lock())
    }

    /// Current length in bytes.
    pub fn len(&self) -> u64 {
        self.data.lock().len() as u64
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.data.lock().is_empty()
    }

    /// The next `n` calls of `sync_data` fail (without syncing).
    pub fn fail_next_syncs(&self, n: u32) {
        self.fail_syncs.store(n, Ordering::SeqCst);
    }

    /// The next `n` calls of `write_all_at` fail (without writing).
    pub fn fail_next_writes(&self, n: u32) {
        self.fail_writes.store(n, Ordering::SeqCst);
    }

    /// Number of successful `sync_data` calls.
    pub fn sync_count(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for MemLogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemLogFile")
            .field("len", &self.len())
            .field("syncs", &self.sync_count())
            .finish_non_exhaustive()
    }
}

/// Consumes one injected failure from `counter`, if any is left.
fn take_failure(counter: &AtomicU32) -> bool {
    counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

fn to_usize(v: u64) -> io::Result<usize> {
    usize::try_from(v).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))
}

impl LogFile for MemLogFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if take_failure(&self.fail_writes) {
            return Err(injected("write"));
        }
        let start = to_usize(offset)?;
        let end = start
            .checked_add(buf.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "write overflows"))?;
        let mut data = self.data.lock();
        if data.len() < end {
            data.resize(end, 0);
        }
        let dst = data.get_mut(start..end).ok_or_else(|| io::Error::other("range check failed"))?;
        dst.copy_from_slice(buf);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        if take_failure(&self.fail_syncs) {
            return Err(injected("sync"));
        }
        self.syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = to_usize(len)?;
        self.data.lock().resize(len, 0);
        Ok(())
    }
}

/// An in-memory [`SegmentDir`] whose segments stay reachable for inspection.
#[derive(Debug, Default)]
pub struct MemSegmentDir {
    segments: Mutex<BTreeMap<u64, Arc<MemLogFile>>>,
    dir_syncs: AtomicU64,
}

impl MemSegmentDir {
    /// An empty directory.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file of segment `number`, if it was created.
    pub fn segment(&self, number: u64) -> Option<Arc<MemLogFile>> {
        self.segments.lock().get(&number).cloned()
    }

    /// Numbers of all created segments, ascending.
    pub fn segment_numbers(&self) -> Vec<u64> {
        self.segments.lock().keys().copied().collect()
    }

    /// Number of `sync_dir` calls.
    pub fn dir_syncs(&self) -> u64 {
        self.dir_syncs.load(Ordering::SeqCst)
    }
}

impl SegmentDir for MemSegmentDir {
    type File = Arc<MemLogFile>;

    fn create_segment(&self, number: u64) -> io::Result<Arc<MemLogFile>> {
        let mut segments = self.segments.lock();
        if segments.contains_key(&number) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("segment {number} exists")));
        }
        let file = Arc::new(MemLogFile::new());
        segments.insert(number, Arc::clone(&file));
        Ok(file)
    }

    fn sync_dir(&self) -> io::Result<()> {
        self.dir_syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}
