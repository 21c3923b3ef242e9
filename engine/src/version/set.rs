//! The version set: the current version, its counters and the manifest that persists them.
//!
//! The manifest is a log in the WAL's record format (one [`VersionEdit`] per record, the
//! file number as the segment number). A new manifest starts with one edit describing the
//! whole state; `CURRENT` names the live manifest and is replaced by writing a temporary
//! file, syncing it, renaming it over `CURRENT` and syncing the directory.

use super::{FileDesc, TableFile, Version, VersionEdit, NUM_LEVELS};
use crate::filename;
use crate::fs::{Fs, LogFileHandle};
use crate::invariants::invariant;
use crate::{Error, Result};
use stampkv_wal::{LogWriter, RecoveryMode, SegmentInfo, SegmentReader, WalOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The state a manifest describes.
#[derive(Debug, Default)]
pub(crate) struct ManifestState {
    /// Live files per level.
    pub levels: [BTreeMap<u64, FileDesc>; NUM_LEVELS],
    pub log_number: u64,
    pub next_file_number: u64,
    pub last_seq: u64,
}

impl ManifestState {
    #[allow(clippy::indexing_slicing, reason = "decoding an edit refuses a level >= NUM_LEVELS")]
    fn apply(&mut self, edit: &VersionEdit, manifest: &str) -> Result<()> {
        let bad = |reason: String| Error::corruption(manifest, None, reason);
        for &(level, number) in &edit.deleted {
            if self.levels[level].remove(&number).is_none() {
                return Err(bad(format!("edit deletes file {number} not in level {level}")));
            }
        }
        for (level, desc) in &edit.added {
            if self.levels.iter().any(|l| l.contains_key(&desc.number)) {
                return Err(bad(format!("edit adds file {} twice", desc.number)));
            }
            self.levels[*level].insert(desc.number, desc.clone());
        }
        self.log_number = edit.log_number.unwrap_or(self.log_number).max(self.log_number);
        self.next_file_number = edit.next_file_number.unwrap_or(0).max(self.next_file_number);
        self.last_seq = edit.last_seq.unwrap_or(0).max(self.last_seq);
        Ok(())
    }
}

/// Reads `CURRENT`: the live manifest's file name, or `None` if there is no `CURRENT`.
pub(crate) fn read_current(fs: &dyn Fs, dir: &Path) -> Result<Option<String>> {
    let path = filename::current_path(dir);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path).map_err(|e| Error::io("reading CURRENT", e))?;
    let text = std::str::from_utf8(&bytes).ok().and_then(|t| t.strip_suffix('\n'));
    match text.map(filename::parse) {
        Some(Some(filename::FileKind::Manifest(_))) => Ok(text.map(str::to_owned)),
        _ => Err(Error::corruption("CURRENT", None, "does not name a manifest")),
    }
}

/// Replays a manifest.
pub(crate) fn recover_manifest(fs: &dyn Fs, dir: &Path, name: &str) -> Result<ManifestState> {
    let Some(filename::FileKind::Manifest(number)) = filename::parse(name) else {
        return Err(Error::corruption("CURRENT", None, "does not name a manifest"));
    };
    let data = fs.read_all(&dir.join(name)).map_err(|e| Error::io(format!("reading {name}"), e))?;
    let info = SegmentInfo { number, name: name.to_owned(), is_last: true };
    // A torn last edit was never acknowledged (its flush or compaction did not finish).
    let mut reader = SegmentReader::new(&data, info, RecoveryMode::TolerateCorruptedTail);
    let mut state = ManifestState::default();
    let mut first = true;
    while let Some(record) = reader.next_record()? {
        let edit = VersionEdit::decode(record).map_err(|reason| Error::corruption(name, None, reason))?;
        if first {
            match edit.format_version {
                Some(super::edit::MANIFEST_FORMAT_VERSION) => {}
                Some(other) => return Err(Error::Unsupported(format!("{name}: manifest format {other}"))),
                None => return Err(Error::corruption(name, None, "first edit has no format version")),
            }
            first = false;
        }
        state.apply(&edit, name)?;
    }
    if first {
        return Err(Error::corruption(name, None, "manifest holds no edit"));
    }
    Ok(state)
}

/// The live version and the manifest being appended to. Guarded by the engine's
/// `versions` mutex; only flushes, compactions and open change it.
pub(crate) struct VersionSet {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    current: Arc<Version>,
    log_number: u64,
    last_seq: u64,
    manifest: LogWriter<LogFileHandle>,
    manifest_number: u64,
    max_manifest_bytes: u64,
}

impl VersionSet {
    /// Writes a new manifest holding `version` and the counters, and points `CURRENT` at it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        dir: &Path,
        next_file: &AtomicU64,
        version: Arc<Version>,
        log_number: u64,
        last_seq: u64,
        max_manifest_bytes: u64,
    ) -> Result<Self> {
        let manifest_number = next_file.fetch_add(1, Ordering::SeqCst);
        let manifest =
            write_new_manifest(&*fs, dir, manifest_number, &version, log_number, next_file, last_seq)?;
        Ok(VersionSet {
            fs,
            dir: dir.to_path_buf(),
            current: version,
            log_number,
            last_seq,
            manifest,
            manifest_number,
            max_manifest_bytes,
        })
    }

    /// The live manifest's number.
    pub(crate) fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Makes `edit` durable in the manifest and installs the version it produces. `added`
    /// holds an open handle for every file the edit adds. On error nothing is installed,
    /// and the caller must stop writing (the manifest may hold a torn record).
    pub(crate) fn log_and_apply(
        &mut self,
        mut edit: VersionEdit,
        added: &[Arc<TableFile>],
        next_file: &AtomicU64,
    ) -> Result<Arc<Version>> {
        let version = Arc::new(self.apply(&edit, added)?);
        edit.next_file_number = Some(next_file.load(Ordering::SeqCst));
        let record = edit.encode();
        self.manifest.add_record(&record)?;
        self.manifest.sync()?;
        self.current = version.clone();
        if let Some(log_number) = edit.log_number {
            self.log_number = self.log_number.max(log_number);
        }
        if let Some(last_seq) = edit.last_seq {
            self.last_seq = self.last_seq.max(last_seq);
        }
        if self.manifest.offset() > self.max_manifest_bytes {
            self.roll_manifest(next_file)?;
        }
        Ok(version)
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "edit levels are < NUM_LEVELS: the engine builds them so, and decoding refuses others"
    )]
    fn apply(&self, edit: &VersionEdit, added: &[Arc<TableFile>]) -> Result<Version> {
        let mut levels = self.current.levels.clone();
        for &(level, number) in &edit.deleted {
            let before = levels[level].len();
            levels[level].retain(|f| f.desc.number != number);
            if levels[level].len() == before {
                return Err(Error::InvalidArgument(format!("edit deletes unknown file {number}")));
            }
        }
        for (level, desc) in &edit.added {
            let file = added
                .iter()
                .find(|f| f.desc.number == desc.number)
                .ok_or_else(|| Error::InvalidArgument(format!("no handle for added file {}", desc.number)))?;
            levels[*level].push(file.clone());
        }
        // Compactions pick their inputs and outputs so that levels >= 1 stay disjoint; an
        // edit that breaks this is a bug in the engine, never the caller's doing.
        let version = Version::from_levels(levels);
        invariant!(
            version.is_ok(),
            "version edit {edit:?} breaks a sorted level: {:?}",
            version.as_ref().err()
        );
        version.map_err(|reason| Error::InvalidArgument(format!("version edit rejected: {reason}")))
    }

    /// Starts a new manifest holding the current state and retires the old one.
    fn roll_manifest(&mut self, next_file: &AtomicU64) -> Result<()> {
        let number = next_file.fetch_add(1, Ordering::SeqCst);
        let manifest = write_new_manifest(
            &*self.fs,
            &self.dir,
            number,
            &self.current,
            self.log_number,
            next_file,
            self.last_seq,
        )?;
        let old = self.dir.join(filename::manifest_name(self.manifest_number));
        self.manifest = manifest;
        self.manifest_number = number;
        // An old manifest left behind is removed as an orphan at the next open.
        let _ = self.fs.remove(&old);
        Ok(())
    }
}

/// Writes manifest `number` with one edit describing everything, syncs it, and makes
/// `CURRENT` name it.
fn write_new_manifest(
    fs: &dyn Fs,
    dir: &Path,
    number: u64,
    version: &Version,
    log_number: u64,
    next_file: &AtomicU64,
    last_seq: u64,
) -> Result<LogWriter<LogFileHandle>> {
    let name = filename::manifest_name(number);
    let path = dir.join(&name);
    let file = fs.create(&path).map_err(|e| Error::io(format!("creating {name}"), e))?;
    let mut writer = LogWriter::create(
        LogFileHandle(file),
        number,
        WalOptions { preallocate_bytes: 0, ..WalOptions::default() },
    )?;
    let snapshot = VersionEdit {
        format_version: Some(super::edit::MANIFEST_FORMAT_VERSION),
        log_number: Some(log_number),
        next_file_number: Some(next_file.load(Ordering::SeqCst)),
        last_seq: Some(last_seq),
        deleted: Vec::new(),
        added: version.all_files().map(|(level, f)| (level, f.desc.clone())).collect(),
    };
    writer.add_record(&snapshot.encode())?;
    writer.sync()?;
    set_current(fs, dir, &name, next_file.fetch_add(1, Ordering::SeqCst))?;
    Ok(writer)
}

/// Atomically points `CURRENT` at `manifest_name`.
fn set_current(fs: &dyn Fs, dir: &Path, manifest_name: &str, temp_number: u64) -> Result<()> {
    let temp = filename::temp_path(dir, temp_number);
    let context = |what: &str| format!("{what} while installing CURRENT");
    let file = fs.create(&temp).map_err(|e| Error::io(context("creating a temporary file"), e))?;
    let contents = format!("{manifest_name}\n");
    file.write_all_at(contents.as_bytes(), 0).map_err(|e| Error::io(context("writing"), e))?;
    file.sync_data().map_err(|e| Error::io(context("syncing"), e))?;
    fs.rename(&temp, &filename::current_path(dir)).map_err(|e| Error::io(context("renaming"), e))?;
    fs.sync_dir(dir).map_err(|e| Error::io(context("syncing the directory"), e))?;
    Ok(())
}
