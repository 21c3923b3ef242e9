//! Opening a database: lock, manifest, WAL replay, new manifest, cleanup.
//!
//! 1. Take the directory lock (a second open fails with [`Error::Locked`]).
//! 2. Read `CURRENT` and replay the manifest it names (or start empty).
//! 3. Replay the WAL segments at or above the manifest's log number into memtables,
//!    writing them to level-0 tables as they fill and at the end.
//! 4. Write a new manifest with the recovered state and a new log number, and point
//!    `CURRENT` at it. Only now are the replayed segments obsolete.
//! 5. Remove files no longer referenced (old segments and manifests, orphan tables left by
//!    an interrupted flush or compaction, temporary files).
//! 6. Create the new WAL segment and start writing.

use super::flush::TableEnv;
use super::gc::GcPoint;
use super::lock_order::{LockRank, OrderedMutex, OrderedRwLock};
use super::{CommitState, DbInner, PublishState, ReadState, RecoveryReport, SnapshotList, WalDir, WorkState};
use crate::batch;
use crate::chunk_pool::ChunkPool;
use crate::filename::{self, FileKind};
use crate::fs::Fs;
use crate::key::MAX_SEQUENCE;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::stats::Counters;
use crate::version::{self, TableFile, Version, VersionSet, NUM_LEVELS};
use crate::{Error, Result};
use parking_lot::Condvar;
use stampkv_wal::{RecoveryMode, SegmentInfo, SegmentReader, Wal, WalOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Opens the database in `dir`.
pub(crate) fn open(fs: Arc<dyn Fs>, dir: &Path, options: Options) -> Result<DbInner> {
    options.validate().map_err(Error::InvalidArgument)?;
    let dir_name = dir.display().to_string();
    if options.create_if_missing {
        fs.create_dir_all(dir).map_err(|e| Error::io(format!("creating {dir_name}"), e))?;
    }
    let lock = fs.lock(&filename::lock_path(dir)).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock => super::dir_files::locked(&*fs, dir),
        io::ErrorKind::NotFound => {
            Error::InvalidArgument(format!("database directory {dir_name} does not exist"))
        }
        _ => Error::io(format!("locking {dir_name}"), e),
    })?;
    let names = fs.list(dir).map_err(|e| Error::io(format!("listing {dir_name}"), e))?;
    let state = load_manifest(&*fs, dir, &names, &options)?;
    let highest_number = names.iter().filter_map(|n| file_number(filename::parse(n)?)).max().unwrap_or(0);
    let next_file = AtomicU64::new(state.next_file_number.max(highest_number + 1).max(1));
    let mut tables = TableEnv::new(
        fs.clone(),
        dir,
        options.table.clone(),
        options.compression_per_level.clone(),
        options.block_cache_bytes,
        options.max_open_files,
        options.cache_index_and_filter_blocks,
    );
    tables.set_prepopulate_block_cache(options.prepopulate_block_cache);
    let mut levels: [Vec<Arc<TableFile>>; NUM_LEVELS] = Default::default();
    for (level_files, files) in levels.iter_mut().zip(state.levels.iter()) {
        for desc in files.values() {
            level_files.push(tables.open_existing(desc.clone())?);
        }
    }
    let mut added = Vec::new();
    let mut replay = LogReplay::new(&options, state.last_seq);
    replay.segments(&*fs, dir, &names, state.log_number, options.wal_recovery_mode, &mut |mem| {
        write_replayed(&tables, &next_file, &mem, &mut added)
    })?;
    let (last_mem, last_seq, report) = replay.finish();
    write_replayed(&tables, &next_file, &last_mem, &mut added)?;
    drop(last_mem); // its entries are in a table now
    levels[0].append(&mut added);
    if !levels[0].is_empty() {
        tables.sync_dir()?;
    }
    let new_log = next_file.fetch_add(1, Ordering::SeqCst);
    let version = Arc::new(
        Version::from_levels(levels)
            .map_err(|reason| Error::corruption("the manifest (CURRENT)", None, reason))?,
    );
    let versions = VersionSet::create(
        fs.clone(),
        dir,
        &next_file,
        version.clone(),
        new_log,
        last_seq,
        options.max_manifest_bytes,
    )?;
    remove_obsolete_files(&*fs, dir, &version, new_log, versions.manifest_number());
    let wal_dir = WalDir { fs: fs.clone(), dir: dir.to_path_buf(), mapped: options.wal_mapped };
    let wal = Wal::create(
        wal_dir,
        new_log,
        WalOptions {
            preallocate_bytes: options.wal_preallocate_bytes,
            writeback_bytes: options.wal_bytes_per_sync,
        },
    )?;
    let chunk_pool = Arc::new(ChunkPool::new(
        Memtable::chunk_bytes(options.write_buffer_size),
        options.write_buffer_size.saturating_mul(options.memtables_per_flush),
    ));
    let mem =
        Arc::new(Memtable::with_pool(new_log, options.write_buffer_size, last_seq, Some(chunk_pool.clone())));
    let read_state = Arc::new(ReadState { mem: mem.clone(), imms: Vec::new(), version });
    Ok(DbInner {
        dir: dir.to_path_buf(),
        fs,
        clock: options.clock.clone(),
        block_cache: tables.cache.clone(),
        tables,
        options,
        next_file,
        commit: OrderedMutex::new(LockRank::Commit, CommitState { last_seq, mem, closed: false }),
        room_cv: Condvar::new(),
        read_state: OrderedRwLock::new(LockRank::ReadState, read_state),
        visible_seq: AtomicU64::new(last_seq),
        busy_commits: Default::default(),
        parked_syncs: OrderedMutex::new(LockRank::ParkedSyncs, Vec::new()),
        forced_flushes: Default::default(),
        idle_flush_pending: Default::default(),
        publish: OrderedMutex::new(
            LockRank::Publish,
            PublishState { applied_seq: last_seq, ..PublishState::default() },
        ),
        publish_cv: Condvar::new(),
        durable: Default::default(),
        versions: OrderedMutex::new(LockRank::Versions, versions),
        snapshots: OrderedMutex::new(LockRank::Snapshots, SnapshotList::default()),
        wal,
        wal_segments: OrderedMutex::new(LockRank::WalSegments, vec![new_log]),
        work: OrderedMutex::new(LockRank::Work, WorkState::default()),
        work_cv: Condvar::new(),
        compaction_lock: OrderedMutex::new(LockRank::Compaction, ()),
        poisoned: AtomicBool::new(false),
        poison_reason: OrderedMutex::new(LockRank::PoisonReason, None),
        counters: Counters::default(),
        heap_trimmer: crate::heap_trim::HeapTrimmer::new(),
        chunk_pool,
        recovery: RecoveryReport { last_sequence: last_seq, ..report },
        lock: OrderedMutex::new(LockRank::FileLock, Some(lock)),
    })
}

fn file_number(kind: FileKind) -> Option<u64> {
    match kind {
        FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n) | FileKind::Temp(n) => Some(n),
        FileKind::Current | FileKind::Lock => None,
    }
}

/// The manifest's state, or an empty state for a new database.
pub(super) fn load_manifest(
    fs: &dyn Fs,
    dir: &Path,
    names: &[String],
    options: &Options,
) -> Result<version::set::ManifestState> {
    match version::read_current(fs, dir)? {
        Some(manifest) => {
            if options.error_if_exists {
                return Err(Error::InvalidArgument(format!("database {} already exists", dir.display())));
            }
            version::recover_manifest(fs, dir, &manifest)
        }
        None => {
            // Every open that completes writes CURRENT before it creates its WAL segment,
            // and a database always keeps one segment. So manifests or temporary files
            // without CURRENT, a WAL or a table are what a crash leaves while a database is
            // first created: nothing was ever committed, and it is created again (the
            // leftovers are removed as obsolete). A WAL or a table without CURRENT is data.
            let has_data = names
                .iter()
                .any(|n| matches!(filename::parse(n), Some(FileKind::Wal(_) | FileKind::Table(_))));
            if has_data {
                return Err(Error::corruption(
                    filename::current_path(dir).display().to_string(),
                    None,
                    "CURRENT is missing but the directory holds database files",
                ));
            }
            if !options.create_if_missing {
                return Err(Error::InvalidArgument(format!("database {} does not exist", dir.display())));
            }
            Ok(version::set::ManifestState { next_file_number: 1, ..Default::default() })
        }
    }
}

/// Replays the log, for both opens: the commits of the WAL segments at or above the
/// manifest's log number, in order, into memtables as large as a flush's worth
/// (`write_buffer_size × memtables_per_flush`, so recovery writes level-0 tables of the
/// usual size). Each memtable that fills is sealed and handed to the caller, who writes it
/// to a level-0 table ([`open`]) or keeps it in memory ([`super::ReadOnlyDb`]);
/// [`LogReplay::finish`] returns the last one.
pub(super) struct LogReplay {
    capacity: usize,
    mem: Arc<Memtable>,
    last_seq: u64,
    report: RecoveryReport,
}

impl LogReplay {
    /// A replay onto a state whose last commit is `last_seq`.
    pub(super) fn new(options: &Options, last_seq: u64) -> Self {
        let capacity = options.write_buffer_size.saturating_mul(options.memtables_per_flush);
        LogReplay {
            capacity,
            mem: Arc::new(Memtable::new(0, capacity, last_seq)),
            last_seq,
            report: RecoveryReport::default(),
        }
    }

    /// Replays the segments among `names` (the directory's files) numbered `log_number` or
    /// above, handing each memtable that fills to `full`. A damaged segment is handled as
    /// `mode` says; replay stops after a segment whose damage ends the log.
    pub(super) fn segments(
        &mut self,
        fs: &dyn Fs,
        dir: &Path,
        names: &[String],
        log_number: u64,
        mode: RecoveryMode,
        full: &mut dyn FnMut(Arc<Memtable>) -> Result<()>,
    ) -> Result<()> {
        let mut numbers: Vec<u64> = names
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some(FileKind::Wal(number)) if number >= log_number => Some(number),
                _ => None,
            })
            .collect();
        numbers.sort_unstable();
        for (index, &number) in numbers.iter().enumerate() {
            let path = filename::wal_path(dir, number);
            let name = path.display().to_string();
            let data = fs.read_all(&path).map_err(|e| Error::io(format!("reading {name}"), e))?;
            let info = SegmentInfo { number, name, is_last: index + 1 == numbers.len() };
            let mut reader = SegmentReader::new(&data, info.clone(), mode);
            while let Some(record) = reader.next_record()? {
                self.apply(record, &info.name, full)?;
            }
            self.report.segments.push(number);
            self.report.segment_ends.push(reader.summary().end);
            if reader.stop_after() {
                break;
            }
        }
        Ok(())
    }

    fn apply(
        &mut self,
        record: &[u8],
        segment: &str,
        full: &mut dyn FnMut(Arc<Memtable>) -> Result<()>,
    ) -> Result<()> {
        let decoded = batch::decode(record).map_err(|e| Error::corruption(segment, None, e.0))?;
        // Every commit in the log is newer than the manifest's state and than the commit
        // before it.
        if decoded.seq <= self.last_seq {
            return Err(Error::corruption(segment, None, "sequence numbers go backwards"));
        }
        if decoded.seq > MAX_SEQUENCE {
            return Err(Error::corruption(segment, None, "sequence number out of range"));
        }
        self.mem.apply(decoded.seq, batch::effective_entries(&decoded.entries));
        self.last_seq = decoded.seq;
        self.report.commits_replayed += 1;
        if self.mem.memory_bytes() >= self.capacity {
            self.mem.seal(self.last_seq);
            let next = Arc::new(Memtable::new(0, self.capacity, self.last_seq));
            full(std::mem::replace(&mut self.mem, next))?;
        }
        Ok(())
    }

    /// The last memtable (sealed; possibly empty), the last commit's sequence number, and
    /// what the replay found.
    pub(super) fn finish(self) -> (Arc<Memtable>, u64, RecoveryReport) {
        self.mem.seal(self.last_seq);
        (self.mem, self.last_seq, self.report)
    }
}

/// Writes a replayed memtable to a level-0 table (no reader exists yet, so every shadowed
/// version can go), adding it to `added`.
fn write_replayed(
    tables: &TableEnv,
    next_file: &AtomicU64,
    mem: &Arc<Memtable>,
    added: &mut Vec<Arc<TableFile>>,
) -> Result<()> {
    if mem.is_empty() {
        return Ok(());
    }
    let point = GcPoint { smallest_snapshot: MAX_SEQUENCE, time_ms: 0 };
    let number = next_file.fetch_add(1, Ordering::SeqCst);
    added.extend(tables.write_memtable(mem, point, number)?);
    Ok(())
}

/// Removes files the new state does not reference. Failures leave orphans for next time.
fn remove_obsolete_files(fs: &dyn Fs, dir: &Path, version: &Version, log_number: u64, manifest_number: u64) {
    let Ok(names) = fs.list(dir) else {
        return;
    };
    let live: std::collections::HashSet<u64> = version.all_files().map(|(_, f)| f.desc.number).collect();
    for name in names {
        let obsolete = match filename::parse(&name) {
            Some(FileKind::Wal(n)) => n < log_number,
            Some(FileKind::Table(n)) => !live.contains(&n),
            Some(FileKind::Manifest(n)) => n != manifest_number,
            Some(FileKind::Temp(_)) => true,
            _ => false,
        };
        if obsolete {
            let _ = fs.remove(&dir.join(&name));
        }
    }
}
