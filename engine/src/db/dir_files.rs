//! The files of a database directory as the maintenance tools (verify, repair, checkpoint)
//! see them: what is there, whether it is a database at all, its lock, and the manifest
//! read strictly.

use crate::filename::{self, FileKind};
use crate::fs::{Fs, FsLock};
use crate::version::set::ManifestState;
use crate::version::VersionEdit;
use crate::{Error, Result};
use std::collections::BTreeSet;
use std::io;
use std::path::Path;

/// The manifest format version this code reads (`engine/FORMAT.md`).
const MANIFEST_FORMAT_VERSION: u64 = 1;

/// The database files found in a directory, by kind.
#[derive(Debug, Default)]
pub(crate) struct Inventory {
    pub has_current: bool,
    pub tables: BTreeSet<u64>,
    pub logs: BTreeSet<u64>,
    pub manifests: BTreeSet<u64>,
    pub temps: BTreeSet<u64>,
}

impl Inventory {
    /// Lists `dir`. A directory that does not exist, or holds no database file at all, is
    /// [`Error::InvalidArgument`] with a message saying so.
    pub(super) fn read(fs: &dyn Fs, dir: &Path) -> Result<Inventory> {
        let shown = dir.display();
        let names = fs.list(dir).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::InvalidArgument(format!("{shown} does not exist")),
            io::ErrorKind::NotADirectory => Error::InvalidArgument(format!("{shown} is not a directory")),
            _ => Error::io(format!("listing {shown}"), e),
        })?;
        let mut inventory = Inventory::default();
        for name in &names {
            match filename::parse(name) {
                Some(FileKind::Current) => inventory.has_current = true,
                Some(FileKind::Table(n)) => drop(inventory.tables.insert(n)),
                Some(FileKind::Wal(n)) => drop(inventory.logs.insert(n)),
                Some(FileKind::Manifest(n)) => drop(inventory.manifests.insert(n)),
                Some(FileKind::Temp(n)) => drop(inventory.temps.insert(n)),
                Some(FileKind::Lock) | None => {}
            }
        }
        let any_data =
            !inventory.tables.is_empty() || !inventory.logs.is_empty() || !inventory.manifests.is_empty();
        if !inventory.has_current && !any_data {
            return Err(Error::InvalidArgument(format!(
                "{shown} is not a stampkv database (no CURRENT, manifest, table or log file)"
            )));
        }
        Ok(inventory)
    }

    /// The highest file number in use.
    pub(super) fn highest_number(&self) -> u64 {
        [&self.tables, &self.logs, &self.manifests, &self.temps]
            .iter()
            .filter_map(|set| set.last().copied())
            .max()
            .unwrap_or(0)
    }
}

/// Takes the directory's lock, as opening the database does.
pub(crate) fn lock(fs: &dyn Fs, dir: &Path) -> Result<Box<dyn FsLock>> {
    fs.lock(&filename::lock_path(dir)).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => locked(fs, dir),
        _ => Error::io(format!("locking {}", dir.display()), e),
    })
}

/// Takes the directory's lock shared, for a job that only reads: other readers may hold it
/// too, a writer may not. Nothing is created: without a lock file (a directory no writer
/// ever opened) there is nothing to share, and a lock file this process may not read
/// (another user's backup) cannot be opened for writing by anyone either, so in both
/// cases the job goes on without the lock.
pub(crate) fn lock_for_reading(fs: &dyn Fs, dir: &Path) -> Result<Option<Box<dyn FsLock>>> {
    match fs.lock_shared(&filename::lock_path(dir)) {
        Ok(lock) => Ok(Some(lock)),
        Err(e) if matches!(e.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(locked(fs, dir)),
        Err(e) => Err(Error::io(format!("locking {}", dir.display()), e)),
    }
}

/// The error for a directory whose lock is held, naming the process that holds it for
/// writing if its `LOCK` file names one that is still running.
pub(crate) fn locked(fs: &dyn Fs, dir: &Path) -> Error {
    let holder = fs
        .read_all(&filename::lock_path(dir))
        .ok()
        .and_then(|text| std::str::from_utf8(&text).ok()?.trim().parse::<u32>().ok())
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists());
    Error::Locked { path: dir.display().to_string(), holder }
}

/// Size of a file, 0 if it cannot be read.
pub(crate) fn file_len(fs: &dyn Fs, path: &Path) -> u64 {
    fs.open(path).and_then(|f| f.len()).unwrap_or(0)
}

/// The manifest `CURRENT` names, if `CURRENT` reads and names one: `Err` says what is
/// wrong with it.
pub(crate) fn current_manifest(fs: &dyn Fs, dir: &Path) -> Result<u64, String> {
    let bytes = fs.read_all(&filename::current_path(dir)).map_err(|e| format!("cannot be read: {e}"))?;
    let text = std::str::from_utf8(&bytes).ok().and_then(|t| t.strip_suffix('\n'));
    match text.map(filename::parse) {
        Some(Some(FileKind::Manifest(number))) => Ok(number),
        _ => Err(format!("does not name a manifest: {:?}", String::from_utf8_lossy(&bytes))),
    }
}

/// Applies one manifest edit, with the checks recovery makes: a deleted file must be live,
/// an added one must not be; counters only grow.
#[allow(clippy::indexing_slicing, reason = "decoding an edit refuses a level >= NUM_LEVELS")]
pub(crate) fn apply_edit(state: &mut ManifestState, edit: &VersionEdit) -> Result<(), String> {
    for &(level, number) in &edit.deleted {
        if state.levels[level].remove(&number).is_none() {
            return Err(format!("edit deletes file {number}, which is not in level {level}"));
        }
    }
    for (level, desc) in &edit.added {
        if state.levels.iter().any(|l| l.contains_key(&desc.number)) {
            return Err(format!("edit adds file {} twice", desc.number));
        }
        state.levels[*level].insert(desc.number, desc.clone());
    }
    state.log_number = state.log_number.max(edit.log_number.unwrap_or(0));
    state.next_file_number = state.next_file_number.max(edit.next_file_number.unwrap_or(0));
    state.last_seq = state.last_seq.max(edit.last_seq.unwrap_or(0));
    Ok(())
}

/// A manifest read record by record with every check: the state its intact edits describe,
/// and every problem found, as (offset, what).
pub(crate) struct StrictManifest {
    /// The state, if the first edit (the full state) was readable.
    pub state: Option<ManifestState>,
    pub problems: Vec<(Option<u64>, String)>,
}

/// Reads manifest `number` from its bytes.
pub(crate) fn read_manifest_strictly(data: &[u8], number: u64) -> StrictManifest {
    let scan = super::log_scan::scan_log(data, number);
    let mut problems: Vec<(Option<u64>, String)> =
        scan.damage.iter().map(|d| (Some(d.offset), d.reason.clone())).collect();
    let mut state: Option<ManifestState> = None;
    for record in &scan.records {
        let at = Some(record.offset);
        let edit = match VersionEdit::decode(&record.payload) {
            Ok(edit) => edit,
            Err(reason) => {
                problems.push((at, format!("bad version edit: {reason}")));
                continue;
            }
        };
        let current = match state.as_mut() {
            Some(current) => current,
            None if edit.format_version == Some(MANIFEST_FORMAT_VERSION) => {
                state.insert(ManifestState::default())
            }
            None => {
                problems.push((at, "the first edit is not a full state of format version 1".into()));
                continue;
            }
        };
        if let Err(reason) = apply_edit(current, &edit) {
            problems.push((at, reason));
        }
    }
    if scan.records.is_empty() && problems.is_empty() {
        problems.push((None, "holds no edit".into()));
    }
    StrictManifest { state, problems }
}
