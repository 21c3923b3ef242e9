//! Opening a database to read only: [`ReadOnlyDb`]. It writes nothing — no new log segment,
//! no manifest, no table, no removal, not even a lock file — and takes the lock shared, so
//! several readers (and `verify`) may have a closed database open at once, while a writer
//! (which takes the lock exclusively) keeps them out and they keep it out.
//!
//! The state is what a normal open would recover: the manifest's tables, and the commits
//! of the log segments replayed into memtables (by the same [`LogReplay`] as a normal
//! open, but kept in memory instead of being written to level-0 tables).

use super::dir_files::lock_for_reading;
use super::flush::TableEnv;
use super::open::{load_manifest, LogReplay};
use super::read::get_in;
use super::table_files::table_files_of;
use super::{
    fill_tree_stats, live_data, wal_bytes_on_disk, DbCursor, DbIter, Entry, ReadState, RecoveryReport,
    TableFileInfo,
};
use crate::clock::Clock;
use crate::fs::{Fs, FsLock, StdFs};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::stats::{SpaceUsage, Stats};
use crate::version::{TableFile, Version, NUM_LEVELS};
use crate::{Error, Result};
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

/// A database opened to read only; see the module documentation.
pub struct ReadOnlyDb {
    state: Arc<ReadState>,
    last_seq: u64,
    clock: Arc<dyn Clock>,
    recovery: RecoveryReport,
    options: Options,
    /// The table files' readers and caches.
    tables: TableEnv,
    _lock: Option<Box<dyn FsLock>>,
}

impl std::fmt::Debug for ReadOnlyDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlyDb").field("last_seq", &self.last_seq).finish()
    }
}

impl ReadOnlyDb {
    /// Opens the existing database in `dir` to read only (`options.create_if_missing` is
    /// ignored: nothing is created). Fails with [`Error::Locked`] while a writer has it open.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<ReadOnlyDb> {
        Self::open_with_fs(Arc::new(StdFs), dir, options)
    }

    /// [`ReadOnlyDb::open`] on a given file system.
    pub fn open_with_fs(fs: Arc<dyn Fs>, dir: impl AsRef<Path>, options: Options) -> Result<ReadOnlyDb> {
        let dir = dir.as_ref();
        options.validate().map_err(Error::InvalidArgument)?;
        let dir_name = dir.display().to_string();
        let lock = lock_for_reading(&*fs, dir)?;
        let names = fs.list(dir).map_err(|e| Error::io(format!("listing {dir_name}"), e))?;
        let existing = Options { create_if_missing: false, error_if_exists: false, ..options.clone() };
        let manifest = load_manifest(&*fs, dir, &names, &existing)?;
        let tables = TableEnv::new(
            fs.clone(),
            dir,
            options.table.clone(),
            options.compression_per_level.clone(),
            options.block_cache_bytes,
            options.max_open_files,
            options.cache_index_and_filter_blocks,
        );
        let mut levels: [Vec<Arc<TableFile>>; NUM_LEVELS] = Default::default();
        for (level_files, files) in levels.iter_mut().zip(manifest.levels.iter()) {
            for desc in files.values() {
                level_files.push(tables.open_existing(desc.clone())?);
            }
        }
        let version = Arc::new(
            Version::from_levels(levels)
                .map_err(|reason| Error::corruption("the manifest (CURRENT)", None, reason))?,
        );
        let mut frozen = Vec::new();
        let mut replay = LogReplay::new(&options, manifest.last_seq);
        replay.segments(&*fs, dir, &names, manifest.log_number, options.wal_recovery_mode, &mut |mem| {
            frozen.push(mem);
            Ok(())
        })?;
        let (mem, last_seq, report) = replay.finish();
        frozen.push(mem);
        // Newest first, as the read path expects; the newest one stands in for the
        // memtable receiving writes (none come).
        frozen.reverse();
        let mut memtables = frozen.into_iter();
        let newest = memtables.next().unwrap_or_else(|| Arc::new(Memtable::new(0, 4096, last_seq)));
        let state = Arc::new(ReadState { mem: newest, imms: memtables.collect(), version });
        Ok(ReadOnlyDb {
            state,
            last_seq,
            clock: options.clock.clone(),
            recovery: RecoveryReport { last_sequence: last_seq, ..report },
            options,
            tables,
            _lock: lock,
        })
    }

    /// Sequence number of the last commit.
    pub fn last_sequence(&self) -> u64 {
        self.last_seq
    }

    /// The clock expiry is evaluated on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// What replaying the log found.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The live table files, level by level (level 0 newest first, deeper levels in key
    /// order), as the manifest lists them.
    pub fn table_files(&self) -> Vec<TableFileInfo> {
        table_files_of(&self.state.version)
    }

    /// Statistics: the shape of the tree (as [`Db::stats`](super::Db::stats) reports it),
    /// the memtables holding the replayed log, the caches, and the size of the log
    /// segments replayed. The counters of work done since open (commits, flushes,
    /// compactions, stalls, WAL bytes written) are zero: a read-only database does none.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        fill_tree_stats(&mut stats, &self.options, &self.state, &self.tables);
        stats.visible_sequence = self.last_seq;
        stats.wal_bytes_on_disk =
            wal_bytes_on_disk(&*self.tables.fs, &self.tables.dir, &self.recovery.segments);
        stats
    }

    /// Live bytes versus disk bytes, by scanning everything (costly on large databases).
    pub fn space_usage(&self) -> Result<SpaceUsage> {
        let mut usage = live_data(self.snapshot().range::<&[u8], _>(..))?;
        let stats = self.stats();
        usage.disk_bytes = stats.table_bytes + stats.wal_bytes_on_disk;
        Ok(usage)
    }

    /// A view of the database with expiry evaluated now.
    pub fn snapshot(&self) -> ReadOnlySnapshot {
        ReadOnlySnapshot { state: self.state.clone(), seq: self.last_seq, read_time_ms: self.clock.now_ms() }
    }
}

/// A view of a [`ReadOnlyDb`] with expiry evaluated at one time.
#[derive(Clone)]
pub struct ReadOnlySnapshot {
    state: Arc<ReadState>,
    seq: u64,
    read_time_ms: u64,
}

impl ReadOnlySnapshot {
    /// Sequence number of the last commit.
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// The time expiry is evaluated at.
    pub fn read_time_ms(&self) -> u64 {
        self.read_time_ms
    }

    /// The entry of `key`.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        get_in(&self.state, key, self.seq, || self.read_time_ms)
    }

    /// The live entries with keys in `range` (reversible).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIter {
        DbIter::new(self.state.clone(), self.seq, self.read_time_ms, &range)
    }

    /// A cursor over the live entries with keys in `range`.
    pub fn cursor<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbCursor {
        DbCursor::new(&self.state, self.seq, self.read_time_ms, &range)
    }
}
