//! An in-memory file system that models durability, for tests and the in-memory mode.
//!
//! Each file keeps its current bytes plus, for every 4 KiB page changed since the file's
//! last `sync_data`, the page's durable content (an undo record) and the durable length.
//! Directory operations (create, rename, remove) are logged until `sync_dir` of their
//! directory makes them durable. [`MemFs::crash_clone`] builds what a machine crash could
//! leave behind: every synced byte and every synced directory entry, plus — chosen by a
//! seeded random generator — some unsynced pages (whole, missing or torn), an unsynced
//! file length, and a prefix of the unsynced directory operations (a journaling file
//! system commits metadata operations in order).

use super::{Fs, FsFile, FsLock};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PAGE_SIZE: usize = 4096;

/// What a simulated crash keeps of the unsynced state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPolicy {
    /// Everything written survives (a process crash: the OS still has the data).
    KeepAll,
    /// Everything not synced is lost.
    DropAll,
    /// Each unsynced page is kept, lost or torn, and a random prefix of unsynced directory
    /// operations survives; decided by this seed.
    Random(u64),
}

/// A directory operation not yet made durable by `sync_dir`.
#[derive(Debug, Clone)]
enum DirOp {
    Link { path: PathBuf, inode: u64 },
    Unlink { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf },
}

impl DirOp {
    fn dir(&self) -> Option<&Path> {
        match self {
            DirOp::Link { path, .. } | DirOp::Unlink { path } => path.parent(),
            DirOp::Rename { to, .. } => to.parent(),
        }
    }

    fn apply(&self, names: &mut BTreeMap<PathBuf, u64>) {
        match self {
            DirOp::Link { path, inode } => {
                names.insert(path.clone(), *inode);
            }
            DirOp::Unlink { path } => {
                names.remove(path);
            }
            DirOp::Rename { from, to } => {
                if let Some(inode) = names.remove(from) {
                    names.insert(to.clone(), inode);
                }
            }
        }
    }
}

/// Bytes of one file and what of them is durable.
#[derive(Debug, Default, Clone)]
struct FileData {
    current: Vec<u8>,
    /// Length as of the last sync.
    durable_len: usize,
    /// Durable content of every page changed since the last sync (zero-padded).
    undo: BTreeMap<usize, Vec<u8>>,
}

/// Copies `src` over `dst`. Callers compute both ranges inside their buffers and of the same
/// length; a range that is not would be a bug here, caught in debug builds.
fn copy_checked(dst: Option<&mut [u8]>, src: Option<&[u8]>) {
    match (dst, src) {
        (Some(dst), Some(src)) if dst.len() == src.len() => dst.copy_from_slice(src),
        _ => debug_assert!(false, "page copy out of bounds"),
    }
}

impl FileData {
    /// Saves the durable content of the pages covering `[start, end)` before they change.
    fn remember_pages(&mut self, start: usize, end: usize) {
        if end <= start {
            return;
        }
        for page in start / PAGE_SIZE..=(end - 1) / PAGE_SIZE {
            if self.undo.contains_key(&page) {
                continue;
            }
            let mut old = vec![0u8; PAGE_SIZE];
            let from = page * PAGE_SIZE;
            // Bytes past the durable length read as zeros after a crash.
            let durable_end = self.durable_len.min(self.current.len());
            if from < durable_end {
                let to = (from + PAGE_SIZE).min(durable_end);
                copy_checked(old.get_mut(..to - from), self.current.get(from..to));
            }
            self.undo.insert(page, old);
        }
    }

    fn write_at(&mut self, buf: &[u8], offset: usize) {
        let end = offset + buf.len();
        self.remember_pages(offset, end);
        if self.current.len() < end {
            self.current.resize(end, 0);
        }
        copy_checked(self.current.get_mut(offset..end), Some(buf));
    }

    fn set_len(&mut self, len: usize) {
        let (lo, hi) =
            if len < self.current.len() { (len, self.current.len()) } else { (self.current.len(), len) };
        self.remember_pages(lo, hi);
        self.current.resize(len, 0);
    }

    fn sync(&mut self) {
        self.durable_len = self.current.len();
        self.undo.clear();
    }

    /// The contents a crash could leave.
    fn crashed(&self, rng: &mut Option<SplitMix>, policy: CrashPolicy) -> Vec<u8> {
        let Some(rng) = rng.as_mut() else {
            return match policy {
                CrashPolicy::DropAll => self.durable_image(),
                _ => self.current.clone(),
            };
        };
        let longest = self.current.len().max(self.durable_len);
        let mut data = self.current.clone();
        data.resize(longest, 0);
        for (page, old) in &self.undo {
            let from = page * PAGE_SIZE;
            if from >= longest {
                continue;
            }
            let to = (from + PAGE_SIZE).min(longest);
            let keep_new_bytes = match rng.below(3) {
                0 => to - from,
                1 => 0,
                _ => rng.below((to - from) as u64) as usize,
            };
            let old_from = from + keep_new_bytes;
            copy_checked(data.get_mut(old_from..to), old.get(keep_new_bytes..to - from));
        }
        let (short, long) =
            (self.current.len().min(self.durable_len), self.current.len().max(self.durable_len));
        let len = match rng.below(3) {
            0 => self.durable_len,
            1 => self.current.len(),
            _ => short + rng.below((long - short) as u64 + 1) as usize,
        };
        data.truncate(len);
        data
    }

    fn durable_image(&self) -> Vec<u8> {
        let mut data = self.current.clone();
        data.resize(self.current.len().max(self.durable_len), 0);
        for (page, old) in &self.undo {
            let from = page * PAGE_SIZE;
            if from < data.len() {
                let to = (from + PAGE_SIZE).min(data.len());
                copy_checked(data.get_mut(from..to), old.get(..to - from));
            }
        }
        data.truncate(self.durable_len);
        data
    }
}

/// A small deterministic generator (SplitMix64) for crash choices.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[derive(Default)]
struct MemState {
    inodes: HashMap<u64, Arc<MemFile>>,
    /// The namespace as the running system sees it.
    names: BTreeMap<PathBuf, u64>,
    /// The namespace as of the directory syncs.
    durable_names: BTreeMap<PathBuf, u64>,
    pending_ops: Vec<DirOp>,
    dirs: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
    /// Shared locks held, by path.
    shared_locks: HashMap<PathBuf, usize>,
    next_inode: u64,
}

/// An in-memory file system with crash simulation. Cloning shares the same files.
#[derive(Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<MemState>>,
}

impl std::fmt::Debug for MemFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemFs").finish_non_exhaustive()
    }
}

/// One in-memory file.
struct MemFile {
    data: Mutex<FileData>,
}

impl FsFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let data = self.data.lock();
        let start = usize::try_from(offset).map_err(|_| eof())?;
        let end = start.checked_add(buf.len()).ok_or_else(eof)?;
        let src = data.current.get(start..end).ok_or_else(eof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let offset = usize::try_from(offset).map_err(|_| too_large())?;
        self.data.lock().write_at(buf, offset);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.data.lock().sync();
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| too_large())?;
        self.data.lock().set_len(len);
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.data.lock().current.len() as u64)
    }
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the file")
}

fn too_large() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "offset too large")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{}: no such file", path.display()))
}

struct MemLock {
    state: Arc<Mutex<MemState>>,
    path: PathBuf,
    shared: bool,
}

impl FsLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut state = self.state.lock();
        if !self.shared {
            state.locks.remove(&self.path);
            return;
        }
        if let Some(count) = state.shared_locks.get_mut(&self.path) {
            *count -= 1;
            if *count == 0 {
                state.shared_locks.remove(&self.path);
            }
        }
    }
}

fn lock_held() -> io::Error {
    io::Error::new(io::ErrorKind::WouldBlock, "the lock is held by another open database")
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file system as a crash now could leave it (see the module docs). Locks are not
    /// carried over. The original is unchanged and may go on being used.
    pub fn crash_clone(&self, policy: CrashPolicy) -> MemFs {
        let state = self.state.lock();
        let mut rng = match policy {
            CrashPolicy::Random(seed) => Some(SplitMix(seed)),
            _ => None,
        };
        let mut names = state.durable_names.clone();
        let kept_ops = match (&mut rng, policy) {
            (Some(rng), _) => rng.below(state.pending_ops.len() as u64 + 1) as usize,
            (None, CrashPolicy::DropAll) => 0,
            (None, _) => state.pending_ops.len(),
        };
        for op in state.pending_ops.iter().take(kept_ops) {
            op.apply(&mut names);
        }
        let mut inodes = HashMap::new();
        for inode in names.values() {
            if inodes.contains_key(inode) {
                continue;
            }
            if let Some(file) = state.inodes.get(inode) {
                let current = file.data.lock().crashed(&mut rng, policy);
                let data = FileData { durable_len: current.len(), current, undo: BTreeMap::new() };
                inodes.insert(*inode, Arc::new(MemFile { data: Mutex::new(data) }));
            }
        }
        let new_state = MemState {
            inodes,
            durable_names: names.clone(),
            names,
            pending_ops: Vec::new(),
            dirs: state.dirs.clone(),
            locks: HashSet::new(),
            shared_locks: HashMap::new(),
            next_inode: state.next_inode,
        };
        MemFs { state: Arc::new(Mutex::new(new_state)) }
    }

    /// Total bytes held by files that have a name.
    pub fn total_file_bytes(&self) -> u64 {
        let state = self.state.lock();
        state
            .names
            .values()
            .filter_map(|inode| state.inodes.get(inode))
            .map(|f| f.data.lock().current.len() as u64)
            .sum()
    }

    /// Overwrites bytes of a named file in place (tests that inject corruption).
    pub fn corrupt(&self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let file = self.file(path)?;
        let mut data = file.data.lock();
        let start = usize::try_from(offset).map_err(|_| too_large())?;
        let end = start + bytes.len();
        let target = data.current.get_mut(start..end).ok_or_else(eof)?;
        target.copy_from_slice(bytes);
        Ok(())
    }

    fn file(&self, path: &Path) -> io::Result<Arc<MemFile>> {
        let state = self.state.lock();
        let inode = state.names.get(path).ok_or_else(|| not_found(path))?;
        state.inodes.get(inode).cloned().ok_or_else(|| not_found(path))
    }
}

impl Fs for MemFs {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        let mut state = self.state.lock();
        if state.names.contains_key(path) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{}", path.display())));
        }
        state.next_inode += 1;
        let inode = state.next_inode;
        let file = Arc::new(MemFile { data: Mutex::new(FileData::default()) });
        state.inodes.insert(inode, file.clone());
        state.names.insert(path.to_path_buf(), inode);
        state.pending_ops.push(DirOp::Link { path: path.to_path_buf(), inode });
        Ok(file)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn FsFile>> {
        Ok(self.file(path)?)
    }
    fn read_all(&self, path: &Path) -> io::Result<Vec<u8>> {
        Ok(self.file(path)?.data.lock().current.clone())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        let inode = state.names.remove(from).ok_or_else(|| not_found(from))?;
        state.names.insert(to.to_path_buf(), inode);
        state.pending_ops.push(DirOp::Rename { from: from.to_path_buf(), to: to.to_path_buf() });
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.names.remove(path).ok_or_else(|| not_found(path))?;
        state.pending_ops.push(DirOp::Unlink { path: path.to_path_buf() });
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.state.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        Ok(state
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        let state = &mut *state;
        let mut remaining = Vec::new();
        for op in state.pending_ops.drain(..) {
            if op.dir() == Some(dir) {
                op.apply(&mut state.durable_names);
            } else {
                remaining.push(op);
            }
        }
        state.pending_ops = remaining;
        // Inodes no name refers to, durably or not, can go.
        let live: HashSet<u64> = state.names.values().chain(state.durable_names.values()).copied().collect();
        state.inodes.retain(|inode, _| live.contains(inode));
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        let state = self.state.lock();
        state.names.contains_key(path) || state.dirs.contains(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FsLock>> {
        let mut state = self.state.lock();
        if state.shared_locks.contains_key(path) || !state.locks.insert(path.to_path_buf()) {
            return Err(lock_held());
        }
        Ok(Box::new(MemLock { state: self.state.clone(), path: path.to_path_buf(), shared: false }))
    }
    fn lock_shared(&self, path: &Path) -> io::Result<Box<dyn FsLock>> {
        // Locks here are names, not files: as with `lock`, nothing needs to exist.
        let mut state = self.state.lock();
        if state.locks.contains(path) {
            return Err(lock_held());
        }
        *state.shared_locks.entry(path.to_path_buf()).or_insert(0) += 1;
        Ok(Box::new(MemLock { state: self.state.clone(), path: path.to_path_buf(), shared: true }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_file(fs: &MemFs, name: &str, data: &[u8]) -> Arc<dyn FsFile> {
        let file = fs.create(Path::new(name)).unwrap();
        file.write_all_at(data, 0).unwrap();
        file
    }

    #[test]
    fn synced_data_and_entries_survive_a_crash_that_drops_everything_else() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/db")).unwrap();
        let file = write_file(&fs, "/db/a", b"durable");
        file.sync_data().unwrap();
        fs.sync_dir(Path::new("/db")).unwrap();
        file.write_all_at(b"-lost", 7).unwrap();
        write_file(&fs, "/db/b", b"never linked durably");

        let crashed = fs.crash_clone(CrashPolicy::DropAll);
        assert_eq!(crashed.read_all(Path::new("/db/a")).unwrap(), b"durable");
        assert!(!crashed.exists(Path::new("/db/b")));
        let kept = fs.crash_clone(CrashPolicy::KeepAll);
        assert_eq!(kept.read_all(Path::new("/db/a")).unwrap(), b"durable-lost");
        assert_eq!(kept.read_all(Path::new("/db/b")).unwrap(), b"never linked durably");
    }

    #[test]
    fn random_crashes_keep_synced_bytes_and_tear_only_unsynced_ones() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let synced: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let file = write_file(&fs, "/d/f", &synced);
        file.sync_data().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        let extra = vec![0xAB; 9_000];
        file.write_all_at(&extra, 10_000).unwrap();
        file.write_all_at(&[0xCD; 100], 50).unwrap();
        let mut saw_torn = false;
        for seed in 0..200 {
            let crashed = fs.crash_clone(CrashPolicy::Random(seed));
            let data = crashed.read_all(Path::new("/d/f")).unwrap();
            assert!(data.len() >= 10_000 && data.len() <= 19_000);
            for (i, byte) in data.iter().enumerate() {
                let old = if i < 10_000 { synced[i] } else { 0 };
                let new = if (50..150).contains(&i) {
                    0xCD
                } else if i >= 10_000 {
                    0xAB
                } else {
                    old
                };
                assert!(*byte == old || *byte == new, "seed {seed} byte {i}");
            }
            let tail = &data[10_000..];
            saw_torn |= tail.contains(&0xAB) && tail.contains(&0);
        }
        assert!(saw_torn, "some crash should tear the unsynced tail");
    }

    #[test]
    fn renames_are_atomic_and_ordered_at_a_crash() {
        let fs = MemFs::new();
        let dir = Path::new("/x");
        fs.create_dir_all(dir).unwrap();
        let a = write_file(&fs, "/x/CURRENT", b"old");
        a.sync_data().unwrap();
        fs.sync_dir(dir).unwrap();
        let t = write_file(&fs, "/x/CURRENT.tmp", b"new");
        t.sync_data().unwrap();
        fs.rename(Path::new("/x/CURRENT.tmp"), Path::new("/x/CURRENT")).unwrap();
        for seed in 0..50 {
            let crashed = fs.crash_clone(CrashPolicy::Random(seed));
            let current = crashed.read_all(Path::new("/x/CURRENT")).unwrap();
            assert!(current == b"old" || current == b"new");
            if current == b"new" {
                assert!(!crashed.exists(Path::new("/x/CURRENT.tmp")));
            }
        }
    }

    #[test]
    fn shared_locks_exclude_an_exclusive_one_and_not_each_other() {
        let fs = MemFs::new();
        let first = fs.lock_shared(Path::new("/LOCK")).unwrap();
        let second = fs.lock_shared(Path::new("/LOCK")).unwrap();
        assert_eq!(fs.lock(Path::new("/LOCK")).err().unwrap().kind(), io::ErrorKind::WouldBlock);
        drop(first);
        assert_eq!(fs.lock(Path::new("/LOCK")).err().unwrap().kind(), io::ErrorKind::WouldBlock);
        drop(second);
        let exclusive = fs.lock(Path::new("/LOCK")).unwrap();
        assert_eq!(fs.lock_shared(Path::new("/LOCK")).err().unwrap().kind(), io::ErrorKind::WouldBlock);
        drop(exclusive);
    }

    #[test]
    fn locks_are_exclusive_until_dropped() {
        let fs = MemFs::new();
        let lock = fs.lock(Path::new("/LOCK")).unwrap();
        assert_eq!(fs.lock(Path::new("/LOCK")).err().unwrap().kind(), io::ErrorKind::WouldBlock);
        drop(lock);
        fs.lock(Path::new("/LOCK")).unwrap();
    }
}
