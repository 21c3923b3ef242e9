//! Bulk ingestion: entries in key order, each with its own sequence number, written
//! straight to table files and installed with one manifest edit.
//!
//! This is how a whole database is restored (a dump, another store's file) with the
//! sequence numbers it had: an ordinary commit gives every entry of a batch the next
//! sequence number, so entries written in key order could not keep sequence numbers that
//! are not in key order. An ingest bypasses the write-ahead log and the memtable:
//!
//! 1. [`Db::ingest`] flushes the memtable and notes the last sequence number (the *base*).
//! 2. [`Ingest::put`] takes entries in strictly ascending key order, any sequence number in
//!    `1..=MAX_SEQUENCE`, with an optional expiry, and writes them to new table files of
//!    about `target_file_size` bytes (synced as they are finished). Nothing is visible yet.
//! 3. [`Ingest::finish`], under the commit lock and with no compaction running, checks
//!    that no commit happened since the base and installs the files with one manifest edit
//!    that also raises the last sequence number to cover every ingested one. After that
//!    the files are visible and durable as one unit.
//!
//! Where the files go:
//! - **Into a database that holds no table** (a new one, or one whose data is all gone):
//!   the deepest level. The sequence numbers may be anything, but every live snapshot must
//!   be older than the smallest of them (a snapshot must not see data appear).
//! - **Otherwise**: level 0, as its newest files. Every sequence number must then be newer
//!   than the last commit, so the ingested entries shadow older versions of their keys as a
//!   commit would.
//!
//! Dropping an [`Ingest`] without finishing it (or a failed `finish`) removes its files:
//! the database is unchanged. A crash before the manifest edit leaves orphan files that the
//! next open removes.

use super::flush::TableOutput;
use super::gc::Decision;
use super::Db;
use crate::filename;
use crate::key::{self, EntryKind, MAX_SEQUENCE};
use crate::version::{TableFile, VersionEdit, NUM_LEVELS};
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What [`Ingest::finish`] installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestSummary {
    /// Entries ingested.
    pub entries: u64,
    /// Table files installed.
    pub files: usize,
    /// The level they went to (0, or the deepest level for a database without tables).
    pub level: usize,
    /// The database's last sequence number afterwards.
    pub last_sequence: u64,
}

/// A bulk load in progress; see the module docs. Not visible until [`Ingest::finish`].
pub struct Ingest<'a> {
    db: &'a Db,
    base_seq: u64,
    output: Option<TableOutput>,
    /// Finished files, in key order.
    files: Vec<Arc<TableFile>>,
    /// Numbers of every file created (finished or not), removed unless installed.
    created: Vec<u64>,
    last_key: Option<Vec<u8>>,
    min_seq: u64,
    max_seq: u64,
    entries: u64,
    installed: bool,
    stored: Vec<u8>,
}

impl std::fmt::Debug for Ingest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("base_seq", &self.base_seq)
            .field("entries", &self.entries)
            .field("files", &self.created.len())
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Starts a bulk load of sorted entries with their own sequence numbers (see
    /// [`Ingest`]). Fails if the database is closed or poisoned.
    pub fn ingest(&self) -> Result<Ingest<'_>> {
        // Commits still in the memtable (or only in the log) would be read before level-0
        // files, and replayed after the new last sequence number: flush them first, before
        // the ingest numbers its files (level 0 is ordered by file number).
        self.inner.flush()?;
        let commit = self.inner.commit.lock();
        self.inner.check_writable(&commit)?;
        let base_seq = commit.last_seq;
        drop(commit);
        Ok(Ingest {
            db: self,
            base_seq,
            output: None,
            files: Vec::new(),
            created: Vec::new(),
            last_key: None,
            min_seq: u64::MAX,
            max_seq: 0,
            entries: 0,
            installed: false,
            stored: Vec::new(),
        })
    }
}

impl Ingest<'_> {
    /// The last sequence number when the ingest started; `finish` fails if a commit
    /// happened since. `base_sequence() + 1` is the number the next commit would have had.
    pub fn base_sequence(&self) -> u64 {
        self.base_seq
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Adds `key` = `value` with sequence number `seq`, expiring at `expires_at_ms` (on the
    /// engine's clock) if given. Keys must be strictly ascending, and `seq` in
    /// `1..=2^56-1`; both are refused with [`Error::InvalidArgument`] otherwise.
    pub fn put(&mut self, key: &[u8], value: &[u8], seq: u64, expires_at_ms: Option<u64>) -> Result<()> {
        if seq == 0 || seq > MAX_SEQUENCE {
            return Err(Error::InvalidArgument(format!(
                "ingested sequence number {seq} is outside 1..={MAX_SEQUENCE}"
            )));
        }
        if let Some(last) = &self.last_key {
            if key <= last.as_slice() {
                return Err(Error::InvalidArgument("ingested keys must be strictly ascending".into()));
            }
        }
        let inner = &self.db.inner;
        if self.output.is_none() {
            // The level is chosen at `finish`; ingested tables compress as level 0 does.
            let output = inner.start_table(0)?;
            self.created.push(output.number);
            self.output = Some(output);
        }
        let Some(output) = self.output.as_mut() else {
            return Err(Error::InvalidArgument("no table output".into()));
        };
        let (kind, stored) = match expires_at_ms {
            None => (EntryKind::Put, value),
            Some(at) => {
                self.stored.clear();
                self.stored.extend_from_slice(&at.to_le_bytes());
                self.stored.extend_from_slice(value);
                (EntryKind::PutExpiring, self.stored.as_slice())
            }
        };
        output.add(key, key::trailer(seq, kind), stored, Decision::Keep)?;
        match &mut self.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        self.min_seq = self.min_seq.min(seq);
        self.max_seq = self.max_seq.max(seq);
        self.entries += 1;
        if output.size() >= inner.options.target_file_size {
            self.finish_output()?;
        }
        Ok(())
    }

    fn finish_output(&mut self) -> Result<()> {
        if let Some(output) = self.output.take() {
            if let Some(file) = self.db.inner.finish_table(output)? {
                self.files.push(file);
            }
        }
        Ok(())
    }

    /// Installs the ingested files (see the module docs) and raises the database's last
    /// sequence number to at least `last_sequence` and every ingested sequence number.
    /// Fails with [`Error::InvalidArgument`], leaving the database unchanged, if a commit
    /// happened since [`Db::ingest`], if the database holds tables and a sequence number
    /// is not newer than its last commit, or if a live snapshot could see the entries.
    pub fn finish(mut self, last_sequence: u64) -> Result<IngestSummary> {
        if last_sequence > MAX_SEQUENCE {
            return Err(Error::InvalidArgument(format!(
                "last sequence number {last_sequence} is beyond {MAX_SEQUENCE}"
            )));
        }
        self.finish_output()?;
        let inner = &self.db.inner;
        if !self.files.is_empty() {
            inner.sync_dir()?;
        }
        let mut commit = inner.commit.lock();
        inner.check_writable(&commit)?;
        let changed = || Error::InvalidArgument("the database changed during the ingest".into());
        if commit.last_seq != self.base_seq
            || inner.visible_seq.load(Ordering::Acquire) != commit.last_seq
            || !commit.mem.is_empty()
            || commit.mem.base_seq() != commit.last_seq
        {
            return Err(changed());
        }
        let _compaction = inner.compaction_lock.lock();
        let mut versions = inner.versions.lock();
        let current = inner.read_state.read().clone();
        if !current.imms.is_empty() {
            return Err(changed());
        }
        let no_tables = current.version.all_files().next().is_none();
        let level = if no_tables { NUM_LEVELS - 1 } else { 0 };
        if self.entries > 0 {
            if no_tables {
                let newest_snapshot = inner.snapshots.lock().live.values().map(|&(seq, _)| seq).max();
                if newest_snapshot.is_some_and(|seq| seq >= self.min_seq) {
                    return Err(Error::InvalidArgument(format!(
                        "a snapshot at sequence {} would see ingested entries from sequence {}",
                        newest_snapshot.unwrap_or_default(),
                        self.min_seq
                    )));
                }
            } else {
                if self.min_seq <= commit.last_seq {
                    return Err(Error::InvalidArgument(format!(
                        "ingested sequence number {} is not newer than the last commit ({}) of a database that holds data",
                        self.min_seq, commit.last_seq
                    )));
                }
                let first_new = self.created.iter().copied().min().unwrap_or(u64::MAX);
                if current.version.files(0).iter().any(|f| f.desc.number > first_new) {
                    return Err(changed());
                }
            }
        }
        let new_last = commit.last_seq.max(self.max_seq).max(last_sequence);
        let edit = VersionEdit {
            last_seq: Some(new_last),
            added: self.files.iter().map(|f| (level, f.desc.clone())).collect(),
            ..VersionEdit::default()
        };
        let version = match versions.log_and_apply(edit, &self.files, &inner.next_file) {
            Ok(version) => version,
            // The manifest may hold a torn record: stop writing, as a failed flush does.
            Err(e) => return Err(inner.poison(e)),
        };
        self.installed = true;
        {
            let mut state = inner.read_state.write();
            *state = Arc::new(super::ReadState { mem: state.mem.clone(), imms: state.imms.clone(), version });
        }
        drop(versions);
        commit.last_seq = new_last;
        {
            let mut publish = inner.publish.lock();
            publish.applied_seq = new_last;
            inner.visible_seq.fetch_max(new_last, Ordering::AcqRel);
        }
        inner.publish_cv.notify_all();
        drop(_compaction);
        drop(commit);
        if level == 0 && !self.files.is_empty() {
            inner.request_compaction();
        }
        Ok(IngestSummary { entries: self.entries, files: self.files.len(), level, last_sequence: new_last })
    }
}

impl Drop for Ingest<'_> {
    fn drop(&mut self) {
        if self.installed {
            return;
        }
        drop(self.output.take());
        self.files.clear();
        let inner = &self.db.inner;
        for number in &self.created {
            // A file that cannot be removed now is an orphan the next open removes.
            let _ = inner.fs.remove(&filename::table_path(&inner.dir, *number));
        }
    }
}
