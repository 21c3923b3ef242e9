//! A file system wrapper that fails chosen operations, for fault-injection tests.
//!
//! Every operation is counted by kind; a plan makes the N-th call of a kind (counting
//! from 1) — and, if asked, every later one — fail with an I/O error such as EIO or
//! ENOSPC. A failing data write writes nothing; a failing sync leaves the data
//! unsynced, as a real failed `fdatasync` may.

use super::{Fs, FsFile, FsLock};
use parking_lot::Mutex;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The kinds of operations that can be made to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// `write_all_at` and `set_len` on a file.
    Write,
    /// `sync_data` on a file.
    Sync,
    /// Creating a file.
    Create,
    /// Renaming a file.
    Rename,
    /// Syncing a directory.
    SyncDir,
}

const OPS: [FaultOp; 5] = [FaultOp::Write, FaultOp::Sync, FaultOp::Create, FaultOp::Rename, FaultOp::SyncDir];

#[derive(Debug, Default)]
struct Plan {
    counts: [u64; 5],
    /// (operation, call number, error kind, keep failing afterwards)
    fault: Option<(FaultOp, u64, io::ErrorKind, bool)>,
    injected: u64,
}

impl Plan {
    /// Counts a call of `op`; the error to return if it must fail.
    fn check(&mut self, op: FaultOp) -> io::Result<()> {
        let index = OPS.iter().position(|o| *o == op).unwrap_or(0);
        let count = self.counts.get_mut(index).map_or(0, |count| {
            *count += 1;
            *count
        });
        if let Some((fault_op, nth, kind, sticky)) = self.fault {
            if fault_op == op && (count == nth || (sticky && count > nth)) {
                self.injected += 1;
                return Err(io::Error::new(kind, format!("injected {kind:?} on {op:?} call {count}")));
            }
        }
        Ok(())
    }
}

/// Wraps a file system and injects failures.
#[derive(Clone)]
pub struct FaultyFs {
    inner: Arc<dyn Fs>,
    plan: Arc<Mutex<Plan>>,
}

impl FaultyFs {
    /// Wraps `inner` with no failure planned.
    pub fn new(inner: Arc<dyn Fs>) -> Self {
        FaultyFs { inner, plan: Arc::new(Mutex::new(Plan::default())) }
    }

    /// Makes call number `nth` (from 1, counted from the start) of `op` fail with `kind`,
    /// and every later call too if `sticky`.
    pub fn fail(&self, op: FaultOp, nth: u64, kind: io::ErrorKind, sticky: bool) {
        self.plan.lock().fault = Some((op, nth, kind, sticky));
    }

    /// Stops injecting failures.
    pub fn heal(&self) {
        self.plan.lock().fault = None;
    }

    /// Calls of `op` so far.
    pub fn calls(&self, op: FaultOp) -> u64 {
        let index = OPS.iter().position(|o| *o == op).unwrap_or(0);
        self.plan.lock().counts.get(index).copied().unwrap_or(0)
    }

    /// Failures injected so far.
    pub fn injected(&self) -> u64 {
        self.plan.lock().injected
    }

    fn check(&self, op: FaultOp) -> io::Result<()> {
        self.plan.lock().check(op)
    }

    fn wrap(&self, file: Arc<dyn FsFile>) -> Arc<dyn FsFile> {
        Arc::new(FaultyFile { inner: file, plan: self.plan.clone() })
    }
}

struct FaultyFile {
    inner: Arc<dyn FsFile>,
    plan: Arc<Mutex<Plan>>,
}

impl FsFile for FaultyFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.plan.lock().check(FaultOp::Write)?;
        self.inner.write_all_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.plan.lock().check(FaultOp::Sync)?;
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.plan.lock().check(FaultOp::Write)?;
        self.inner.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl Fs for FaultyFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        self.check(FaultOp::Create)?;
        Ok(self.wrap(self.inner.create(path)?))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        Ok(self.wrap(self.inner.open(path)?))
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(FaultOp::Rename)?;
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(FaultOp::SyncDir)?;
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FsLock>> {
        self.inner.lock(path)
    }

    fn lock_shared(&self, path: &Path) -> io::Result<Box<dyn FsLock>> {
        self.inner.lock_shared(path)
    }
}
