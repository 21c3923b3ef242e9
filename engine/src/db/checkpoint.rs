//! Online checkpoints (consistent point-in-time copies of a database that may be open and
//! written, in this process or another) and restoring them.
//!
//! A checkpoint takes no lock: it works on a directory whose `LOCK` another process holds.
//! It relies on how the engine changes its files:
//!
//! - tables are immutable; a compaction deletes one only after a manifest edit no longer
//!   lists it;
//! - the manifest is append-only, each edit synced, and `CURRENT` is replaced atomically;
//! - every commit is one WAL record, commits are appended in sequence order with no gap
//!   (commit `n + 1` follows commit `n`), the first record at or after the manifest's
//!   `log_number` is commit `last_sequence + 1`, and only segments every commit of which is
//!   in a table listed by a durable edit are deleted;
//! - a commit is acknowledged only after its record was handed to the operating system.
//!
//! So one attempt: read the state `S` the manifest names (as opening would: a torn last
//! edit is ignored); then, in a short window, pin every file the copy needs — hard-link
//! each table of `S` into the destination, or open it, and open every log segment from
//! `S`'s log number on — so that no compaction or flush finishing later can take one away
//! (an open file stays readable after it is deleted); then copy at leisure: the tables not
//! linked, and the log segments, stopping at the first incomplete record of the newest one
//! (a commit being written right now). The
//! copy holds every commit up to the last complete record: a prefix of the commits, and
//! every commit acknowledged before the checkpoint started. If the database moved on
//! meanwhile so that this is not provably consistent — a table or a segment was deleted
//! before it could be pinned, or the commits read do not run from `S.last_sequence + 1`
//! without a gap (a segment deleted before the directory was listed) — the attempt is
//! discarded and the next one starts from a fresh `S`: that takes a compaction or flush
//! finishing in the short window between reading the manifest and pinning the files.
//!
//! The destination is a database directory of its own, which opens as it is: the tables,
//! the log segments (sealed; the newest cut at the last complete record), a new manifest
//! describing `S`, `CURRENT`, and last a `BACKUP` file naming the sequence number and
//! every file with its size. A checkpoint without a valid `BACKUP` is incomplete.
//! The format is in `engine/FORMAT.md`.

use super::dir_files::{self, Inventory};
use super::verify::{log_name, table_name, verify};
use super::Db;
use crate::filename::{self, FileKind};
use crate::fs::{Fs, FsFile, LogFileHandle, StdFs};
use crate::invariants::invariant;
use crate::version::{self, VersionEdit};
use crate::{batch, Error, Result};
use stampkv_coding::crc::mask;
use stampkv_wal::{
    seal_recovered_segment, LogWriter, MemLogFile, RecoveryMode, SegmentEnd, SegmentInfo, SegmentReader,
    WalOptions,
};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Name of the file that completes a checkpoint.
pub const BACKUP_FILE: &str = "BACKUP";
/// First line of a `BACKUP` file.
const BACKUP_MAGIC: &str = "stampkv-backup 1";
/// Attempts before a checkpoint gives up on a database that keeps changing under it.
const MAX_ATTEMPTS: u32 = 50;
/// Bytes copied per read.
const COPY_CHUNK: usize = 1 << 20;

/// What a checkpoint (or a restore) holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Every commit up to this sequence number is in the copy, and none after it.
    pub sequence: u64,
    /// Table files.
    pub tables: usize,
    /// Log segments.
    pub log_segments: usize,
    /// Files hard-linked to the source's (tables and sealed log segments).
    pub linked: usize,
    /// Files written (copies, the cut newest log segment, manifest, `CURRENT`, `BACKUP`).
    pub copied: usize,
    /// Bytes of all files of the copy.
    pub bytes: u64,
    /// Attempts it took (more than 1 when the database changed under a first attempt).
    pub attempts: u32,
}

impl Db {
    /// Takes a consistent point-in-time copy of this database into the directory `dest`
    /// (which must not exist, or be empty), while it stays open and writable. See
    /// [`checkpoint`]; tables are hard-linked when the database is on the real file system.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<CheckpointInfo> {
        let mut run = Run {
            fs: &*self.inner.fs,
            src: &self.inner.dir,
            dest: dest.as_ref(),
            hard_links: self.on_std_fs,
            progress: &mut |_, _| {},
            created: Vec::new(),
            info: CheckpointInfo::default(),
            done: 0,
            total: 0,
        };
        run.run()
    }
}

/// Takes a consistent point-in-time copy of the database in `src` into `dest` (which must
/// not exist, or be an empty directory), on the real file system, hard-linking tables and
/// sealed log segments where the file system allows it. The database may be open and
/// written by another process meanwhile, or closed. `progress` is called with (bytes done,
/// bytes expected).
pub fn checkpoint(
    src: impl AsRef<Path>,
    dest: impl AsRef<Path>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CheckpointInfo> {
    checkpoint_with_fs(&StdFs, src, dest, true, progress)
}

/// [`checkpoint`] on any file system; `hard_links` (only for a file system whose paths are
/// the real ones, such as [`StdFs`]) links files instead of copying them.
pub fn checkpoint_with_fs(
    fs: &dyn Fs,
    src: impl AsRef<Path>,
    dest: impl AsRef<Path>,
    hard_links: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CheckpointInfo> {
    let mut run = Run {
        fs,
        src: src.as_ref(),
        dest: dest.as_ref(),
        hard_links,
        progress,
        created: Vec::new(),
        info: CheckpointInfo::default(),
        done: 0,
        total: 0,
    };
    run.run()
}

/// A table of the state, secured against deletion.
enum Pinned {
    /// Hard-linked into the copy.
    Linked,
    /// Open, to be copied.
    Open(Arc<dyn FsFile>),
}

/// Reads all of an open file.
fn read_whole(file: &dyn FsFile) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(|_| io::Error::other("file too large"))?;
    let mut data = vec![0; len];
    file.read_exact_at(&mut data, 0)?;
    Ok(data)
}

/// Why an attempt was given up.
enum Abort {
    /// The database changed under it: try again.
    Moved(String),
    /// Damage, or a file read while it was being written: try again, and report this
    /// error if it persists.
    Damaged(Error),
    /// A real failure.
    Failed(Error),
}

impl From<Error> for Abort {
    fn from(e: Error) -> Self {
        Abort::Failed(e)
    }
}

struct Run<'a> {
    fs: &'a dyn Fs,
    src: &'a Path,
    dest: &'a Path,
    hard_links: bool,
    progress: &'a mut dyn FnMut(u64, u64),
    /// Files this attempt created in `dest`.
    created: Vec<PathBuf>,
    info: CheckpointInfo,
    done: u64,
    total: u64,
}

impl Run<'_> {
    fn run(&mut self) -> Result<CheckpointInfo> {
        let inventory = Inventory::read(self.fs, self.src)?;
        if !inventory.has_current {
            return Err(Error::InvalidArgument(format!(
                "{} has no CURRENT file: it is damaged or not a database",
                self.src.display()
            )));
        }
        prepare_empty_dir(self.fs, self.dest)?;
        let mut last_reason = String::new();
        for attempt in 1..=MAX_ATTEMPTS {
            self.info = CheckpointInfo { attempts: attempt, ..CheckpointInfo::default() };
            match self.attempt() {
                Ok(()) => return Ok(self.info.clone()),
                Err(abort) => {
                    self.discard();
                    match abort {
                        Abort::Failed(e) => return Err(e),
                        Abort::Moved(reason) => last_reason = reason,
                        Abort::Damaged(e) if attempt == MAX_ATTEMPTS => return Err(e),
                        Abort::Damaged(e) => last_reason = e.to_string(),
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(u64::from(attempt.min(20))));
        }
        Err(Error::io(
            format!("copying {}", self.src.display()),
            io::Error::other(format!(
                "no consistent copy in {MAX_ATTEMPTS} attempts (the database kept changing, or it is \
                 damaged: verify tells); last: {last_reason}"
            )),
        ))
    }

    /// Removes what a failed attempt created.
    fn discard(&mut self) {
        for path in self.created.drain(..) {
            let _ = self.fs.remove(&path);
        }
    }

    fn advance(&mut self, bytes: u64) {
        self.done += bytes;
        self.info.bytes += bytes;
        (self.progress)(self.done, self.total.max(self.done));
    }

    fn attempt(&mut self) -> Result<(), Abort> {
        let manifest_number = dir_files::current_manifest(self.fs, self.src)
            .map_err(|what| Error::corruption("CURRENT", Some(0), what))?;
        let manifest_name = filename::manifest_name(manifest_number);
        let state = match version::recover_manifest(self.fs, self.src, &manifest_name) {
            Ok(state) => state,
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Err(Abort::Moved(format!("{manifest_name} was replaced")));
            }
            // Damage, or the last edit read while it was being appended.
            Err(e @ Error::Corruption { .. }) => return Err(Abort::Damaged(e)),
            Err(e) => return Err(e.into()),
        };
        let tables: Vec<(usize, version::FileDesc)> = state
            .levels
            .iter()
            .enumerate()
            .flat_map(|(level, files)| files.values().map(move |d| (level, d.clone())))
            .collect();
        self.total = self.done + tables.iter().map(|(_, d)| d.size).sum::<u64>();
        (self.progress)(self.done, self.total);
        let names =
            self.fs.list(self.src).map_err(|e| Error::io(format!("listing {}", self.src.display()), e))?;
        let mut logs: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some(FileKind::Wal(number)) if number >= state.log_number => Some(number),
                _ => None,
            })
            .collect();
        logs.sort_unstable();
        // Pin every file the copy needs first, in a short window, so that a compaction or
        // flush finishing later cannot take any away: a hard link, or an open handle that
        // keeps a file readable after it is deleted. Copying then takes as long as it takes.
        let mut pinned_tables = Vec::with_capacity(tables.len());
        for (_, desc) in &tables {
            pinned_tables.push((desc, self.pin_table(desc)?));
        }
        let mut pinned_logs = Vec::with_capacity(logs.len());
        for &number in &logs {
            let name = log_name(number);
            match self.fs.open(&self.src.join(&name)) {
                Ok(file) => pinned_logs.push((number, file)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(Abort::Moved(format!("{name} was removed by a flush")));
                }
                Err(e) => return Err(Error::io(format!("opening {name}"), e).into()),
            }
        }
        if !logs.contains(&state.log_number) {
            self.check_log_is_empty(&state)?;
        }
        self.total = self.done
            + tables.iter().map(|(_, d)| d.size).sum::<u64>()
            + pinned_logs.iter().map(|(_, f)| f.len().unwrap_or(0)).sum::<u64>();
        for (desc, pinned) in pinned_tables {
            self.place_table(desc, pinned)?;
        }
        let sequence = self.copy_logs(&pinned_logs, state.last_seq)?;
        // The copy holds the state's commits and the log's after them, never fewer.
        invariant!(
            sequence >= state.last_seq,
            "checkpoint at {sequence} before the manifest's {}",
            state.last_seq
        );
        // The copy's own manifest: the state S, with numbers above every file of the source.
        let highest = names.iter().filter_map(|n| file_number(filename::parse(n)?)).max().unwrap_or(0);
        let number = state.next_file_number.max(highest + 1);
        let edit = VersionEdit {
            format_version: Some(1),
            log_number: Some(state.log_number),
            next_file_number: Some(number + 2),
            last_seq: Some(state.last_seq),
            deleted: Vec::new(),
            added: tables,
        };
        let name = filename::manifest_name(number);
        let path = self.dest.join(&name);
        let file = self.fs.create(&path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        self.created.push(path);
        let mut writer = LogWriter::create(
            LogFileHandle(file),
            number,
            WalOptions { preallocate_bytes: 0, ..WalOptions::default() },
        )
        .map_err(Error::from)?;
        writer.add_record(&edit.encode()).map_err(Error::from)?;
        writer.sync().map_err(Error::from)?;
        self.info.copied += 1;
        self.info.bytes += writer.offset();
        self.created.push(filename::current_path(self.dest));
        write_current(self.fs, self.dest, &name, number + 1)?;
        self.info.copied += 1;
        self.info.bytes += name.len() as u64 + 1;
        self.info.sequence = sequence;
        self.write_backup_file()?;
        Ok(())
    }

    /// The segment the state's log number names was not in the directory. A flush that
    /// finished meanwhile removes it only after a durable edit moving the log number past
    /// it: if the manifest still names the same log number, no segment was removed, and the
    /// log simply does not exist yet (an open that wrote the manifest and has not created
    /// the segment, or crashed in between): every commit is in the state's tables.
    fn check_log_is_empty(&mut self, state: &version::set::ManifestState) -> Result<(), Abort> {
        let again = dir_files::current_manifest(self.fs, self.src).ok().and_then(|number| {
            version::recover_manifest(self.fs, self.src, &filename::manifest_name(number)).ok()
        });
        match again {
            Some(now) if now.log_number == state.log_number => Ok(()),
            _ => Err(Abort::Moved(format!("{} was removed by a flush", log_name(state.log_number)))),
        }
    }

    /// Hard-links a table of the state into the copy, or opens it to be copied.
    fn pin_table(&mut self, desc: &version::FileDesc) -> Result<Pinned, Abort> {
        let name = table_name(desc.number);
        let from = self.src.join(&name);
        let to = self.dest.join(&name);
        if self.hard_links && std::fs::hard_link(&from, &to).is_ok() {
            self.created.push(to);
            return Ok(Pinned::Linked);
        }
        match self.fs.open(&from) {
            Ok(file) => Ok(Pinned::Open(file)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(Abort::Moved(format!("{name} was removed by a compaction")))
            }
            Err(e) => Err(Error::io(format!("opening {name}"), e).into()),
        }
    }

    /// Finishes placing a pinned table: copies it if it is not linked, checks its size.
    fn place_table(&mut self, desc: &version::FileDesc, pinned: Pinned) -> Result<(), Abort> {
        let name = table_name(desc.number);
        let to = self.dest.join(&name);
        match pinned {
            Pinned::Linked => self.info.linked += 1,
            Pinned::Open(file) => {
                self.copy_from(&*file, &to).map_err(|e| Error::io(format!("copying {name}"), e))?;
                self.info.copied += 1;
            }
        }
        if dir_files::file_len(self.fs, &to) != desc.size {
            let what = format!("{name} is not {} bytes long as the manifest says", desc.size);
            let from = self.src.join(&name).display().to_string();
            return Err(Error::corruption(from, None, what).into());
        }
        self.info.tables += 1;
        self.advance(desc.size);
        Ok(())
    }

    /// Copies a file through the file system, syncing it.
    fn copy_file(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let source = self.fs.open(from)?;
        self.copy_from(&*source, to)
    }

    /// Copies an open file to `to`, syncing it.
    fn copy_from(&mut self, source: &dyn FsFile, to: &Path) -> io::Result<()> {
        let len = source.len()?;
        let target = self.fs.create(to)?;
        self.created.push(to.to_path_buf());
        let mut buf = vec![0; COPY_CHUNK];
        let mut offset = 0;
        while offset < len {
            let n = usize::try_from((len - offset).min(COPY_CHUNK as u64)).unwrap_or(COPY_CHUNK);
            let chunk = buf.get_mut(..n).unwrap_or_default();
            source.read_exact_at(chunk, offset)?;
            target.write_all_at(chunk, offset)?;
            offset += n as u64;
        }
        target.sync_data()
    }

    /// Copies the log segments `numbers` (ascending, from the state's log number on): every
    /// one but the newest must be sealed; the newest is cut after its last complete record.
    /// The commits must run from `last_seq + 1` without a gap. Returns the last one.
    fn copy_logs(&mut self, segments: &[(u64, Arc<dyn FsFile>)], last_seq: u64) -> Result<u64, Abort> {
        let mut sequence = last_seq;
        for (index, (number, file)) in segments.iter().enumerate() {
            let number = *number;
            let name = log_name(number);
            let from = self.src.join(&name);
            let data = match read_whole(&**file) {
                Ok(data) => data,
                // Sealing trims the preallocated end of the newest segment meanwhile.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(Abort::Moved(format!("{name} was sealed while being read")));
                }
                Err(e) => return Err(Error::io(format!("reading {name}"), e).into()),
            };
            let newest = index + 1 == segments.len();
            let info = SegmentInfo { number, name: name.clone(), is_last: newest };
            let mut reader = SegmentReader::new(&data, info, RecoveryMode::TolerateCorruptedTail);
            loop {
                match reader.next_record() {
                    Ok(Some(record)) => {
                        let seq = batch::decode(record)
                            .map_err(|bad| Error::corruption(from.display().to_string(), None, bad.0))?
                            .seq;
                        if seq != sequence + 1 {
                            return Err(Abort::Moved(format!(
                                "{name} holds commit {seq} after commit {sequence}: a segment was removed meanwhile"
                            )));
                        }
                        sequence = seq;
                    }
                    Ok(None) => break,
                    // The newest segment may be being written: read it again.
                    Err(e) if newest => return Err(Abort::Damaged(e.into())),
                    Err(e) => return Err(Error::from(e).into()),
                }
            }
            let summary = reader.summary();
            let to = self.dest.join(&name);
            let sealed_whole = summary.end == SegmentEnd::Sealed && summary.valid_end == data.len() as u64;
            let placed = if sealed_whole && self.hard_links && std::fs::hard_link(&from, &to).is_ok() {
                self.created.push(to);
                self.info.linked += 1;
                data.len()
            } else {
                let valid = usize::try_from(summary.valid_end).unwrap_or(usize::MAX);
                let mut bytes = data.get(..valid).unwrap_or(&data).to_vec();
                if summary.end != SegmentEnd::Sealed {
                    let file = MemLogFile::from_bytes(bytes);
                    seal_recovered_segment(&file, number, summary.valid_end).map_err(Error::from)?;
                    bytes = file.contents();
                }
                self.write_file(&to, &bytes)?;
                bytes.len()
            };
            self.info.log_segments += 1;
            self.advance(data.len() as u64);
            // The copy holds the cut segment, not the whole file read.
            self.info.bytes = self.info.bytes + placed as u64 - data.len() as u64;
        }
        Ok(sequence)
    }

    /// Creates `path` holding `bytes`, synced.
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let shown = path.display().to_string();
        let file = self.fs.create(path).map_err(|e| Error::io(format!("creating {shown}"), e))?;
        self.created.push(path.to_path_buf());
        file.write_all_at(bytes, 0).map_err(|e| Error::io(format!("writing {shown}"), e))?;
        file.sync_data().map_err(|e| Error::io(format!("syncing {shown}"), e))?;
        self.info.copied += 1;
        Ok(())
    }

    /// Syncs the directory, then writes `BACKUP`, which makes the checkpoint complete.
    fn write_backup_file(&mut self) -> Result<()> {
        let sync = |fs: &dyn Fs, dir: &Path| {
            fs.sync_dir(dir).map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
        };
        sync(self.fs, self.dest)?;
        let mut files: Vec<(String, u64)> = Vec::new();
        for name in self.fs.list(self.dest).map_err(|e| Error::io("listing the checkpoint", e))? {
            if filename::parse(&name).is_some_and(|k| k != FileKind::Lock) {
                files.push((name.clone(), dir_files::file_len(self.fs, &self.dest.join(&name))));
            }
        }
        files.sort();
        let created_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let text = BackupFile { sequence: self.info.sequence, created_ms, files }.encode();
        self.info.copied += 1;
        self.info.bytes += text.len() as u64;
        let path = self.dest.join(BACKUP_FILE);
        self.write_file(&path, text.as_bytes())?;
        self.info.copied -= 1;
        sync(self.fs, self.dest)
    }
}

fn file_number(kind: FileKind) -> Option<u64> {
    match kind {
        FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n) | FileKind::Temp(n) => Some(n),
        FileKind::Current | FileKind::Lock => None,
    }
}

/// Creates `dir`, or accepts it if it exists and is empty.
fn prepare_empty_dir(fs: &dyn Fs, dir: &Path) -> Result<()> {
    if let Ok(names) = fs.list(dir) {
        if !names.is_empty() {
            return Err(Error::InvalidArgument(format!("{} exists and is not empty", dir.display())));
        }
    } else if fs.exists(dir) {
        return Err(Error::InvalidArgument(format!("{} exists and is not a directory", dir.display())));
    }
    fs.create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))
}

/// Atomically points `CURRENT` in `dir` at `manifest_name`: a temporary file is written,
/// synced and renamed over `CURRENT`, then the directory is synced.
pub(crate) fn write_current(fs: &dyn Fs, dir: &Path, manifest_name: &str, temp_number: u64) -> Result<()> {
    let temp = filename::temp_path(dir, temp_number);
    let context = |what: &str| format!("{what} while installing CURRENT in {}", dir.display());
    let file = fs.create(&temp).map_err(|e| Error::io(context("creating a temporary file"), e))?;
    file.write_all_at(format!("{manifest_name}\n").as_bytes(), 0)
        .map_err(|e| Error::io(context("writing"), e))?;
    file.sync_data().map_err(|e| Error::io(context("syncing"), e))?;
    fs.rename(&temp, &filename::current_path(dir)).map_err(|e| Error::io(context("renaming"), e))?;
    fs.sync_dir(dir).map_err(|e| Error::io(context("syncing the directory"), e))
}

/// The contents of a `BACKUP` file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BackupFile {
    sequence: u64,
    created_ms: u128,
    /// (name, size) of every database file of the checkpoint.
    files: Vec<(String, u64)>,
}

impl BackupFile {
    fn encode(&self) -> String {
        let mut text =
            format!("{BACKUP_MAGIC}\nsequence {}\ncreated-unix-ms {}\n", self.sequence, self.created_ms);
        for (name, size) in &self.files {
            text.push_str(&format!("file {name} {size}\n"));
        }
        let crc = mask(crc32fast::hash(text.as_bytes()));
        text.push_str(&format!("crc32 {crc:08x}\n"));
        text
    }

    fn decode(bytes: &[u8]) -> Result<BackupFile, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "is not text")?;
        if !text.ends_with('\n') {
            return Err("is cut short".into());
        }
        let body_end = text.trim_end_matches('\n').rfind('\n').map(|i| i + 1).ok_or("is cut short")?;
        let (body, last) = text.split_at(body_end);
        let crc = last.strip_prefix("crc32 ").and_then(|c| u32::from_str_radix(c.trim_end(), 16).ok());
        if crc != Some(mask(crc32fast::hash(body.as_bytes()))) {
            return Err("fails its checksum (cut short or damaged)".into());
        }
        let mut lines = body.lines();
        if lines.next() != Some(BACKUP_MAGIC) {
            return Err("is not of a known version".into());
        }
        let mut field = |prefix: &str| lines.next().and_then(|l| l.strip_prefix(prefix)).map(str::to_owned);
        let sequence = field("sequence ").and_then(|s| s.parse().ok()).ok_or("has a bad sequence line")?;
        let created_ms =
            field("created-unix-ms ").and_then(|s| s.parse().ok()).ok_or("has a bad time line")?;
        let mut files = Vec::new();
        for line in lines {
            let mut parts = line.strip_prefix("file ").ok_or("has a bad file line")?.rsplitn(2, ' ');
            let size = parts.next().and_then(|s| s.parse().ok()).ok_or("has a bad file size")?;
            let name = parts.next().ok_or("has a bad file line")?;
            if filename::parse(name).is_none() {
                return Err(format!("names a file that is not a database file: {name:?}"));
            }
            files.push((name.to_owned(), size));
        }
        Ok(BackupFile { sequence, created_ms, files })
    }
}

/// Restores the checkpoint in `backup` into `dest` (which must not exist, or be empty):
/// checks that the checkpoint is complete (its `BACKUP` file and every file it lists, with
/// its size), copies every file, and verifies the result. The copy shares no file with the
/// checkpoint. `progress` is called with (bytes done, bytes in all).
pub fn restore(
    fs: &dyn Fs,
    backup: impl AsRef<Path>,
    dest: impl AsRef<Path>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<CheckpointInfo> {
    let (backup, dest) = (backup.as_ref(), dest.as_ref());
    let shown = backup.display();
    if !fs.exists(backup) {
        return Err(Error::InvalidArgument(format!("{shown} does not exist")));
    }
    let bytes = fs.read_all(&backup.join(BACKUP_FILE)).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::InvalidArgument(format!(
            "{shown} is not a complete stampkv backup (it has no {BACKUP_FILE} file)"
        )),
        _ => Error::io(format!("reading {shown}/{BACKUP_FILE}"), e),
    })?;
    let incomplete =
        |why: String| Error::InvalidArgument(format!("{shown} is not a complete stampkv backup: {why}"));
    let listing =
        BackupFile::decode(&bytes).map_err(|why| incomplete(format!("its {BACKUP_FILE} file {why}")))?;
    for (name, size) in &listing.files {
        match fs.open(&backup.join(name)).and_then(|f| f.len()) {
            Ok(len) if len == *size => {}
            Ok(len) => return Err(incomplete(format!("{name} is {len} bytes, {BACKUP_FILE} says {size}"))),
            Err(e) => return Err(incomplete(format!("{name} cannot be read: {e}"))),
        }
    }
    prepare_empty_dir(fs, dest)?;
    let mut run = Run {
        fs,
        src: backup,
        dest,
        hard_links: false,
        progress,
        created: Vec::new(),
        info: CheckpointInfo { sequence: listing.sequence, attempts: 1, ..CheckpointInfo::default() },
        done: 0,
        total: listing.files.iter().map(|(_, s)| s).sum(),
    };
    for (name, size) in &listing.files {
        let copied = run.copy_file(&backup.join(name), &dest.join(name));
        if let Err(e) = copied {
            run.discard();
            return Err(Error::io(format!("copying {name}"), e));
        }
        match filename::parse(name) {
            Some(FileKind::Table(_)) => run.info.tables += 1,
            Some(FileKind::Wal(_)) => run.info.log_segments += 1,
            _ => {}
        }
        run.info.copied += 1;
        run.advance(*size);
    }
    fs.sync_dir(dest).map_err(|e| Error::io(format!("syncing {}", dest.display()), e))?;
    let report = verify(fs, dest, &mut |_, _| {})?;
    if let Some(problem) = report.problems.first() {
        return Err(Error::corruption(
            dest.join(&problem.file).display().to_string(),
            problem.offset,
            format!("the restored database fails verification: {}", problem.what),
        ));
    }
    Ok(run.info)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    #[test]
    fn backup_files_round_trip_and_refuse_damage() {
        let file = BackupFile {
            sequence: 77,
            created_ms: 1_700_000_000_000,
            files: vec![("000004.sst".into(), 1234), ("CURRENT".into(), 16), ("MANIFEST-000009".into(), 99)],
        };
        let text = file.encode();
        assert_eq!(BackupFile::decode(text.as_bytes()).unwrap(), file);
        for cut in 0..text.len() {
            assert!(BackupFile::decode(&text.as_bytes()[..cut]).is_err(), "cut at {cut}");
        }
        let mut bytes = text.into_bytes();
        for i in 0..bytes.len() {
            bytes[i] ^= 0x01;
            assert!(BackupFile::decode(&bytes).is_err(), "flip at {i}");
            bytes[i] ^= 0x01;
        }
        let foreign = BackupFile { files: vec![("../etc/passwd".into(), 1)], ..file };
        assert!(BackupFile::decode(foreign.encode().as_bytes()).is_err());
    }
}
