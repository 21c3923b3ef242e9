//! The database: ties the WAL, memtables, versions and background work together.
//!
//! The locks and the one order they are taken in, in both background modes, are in
//! [`lock_order`], which also checks that order at run time. Readers take only
//! `read_state` for reading, briefly.

mod background;
mod checkpoint;
mod compaction;
mod cursor;
mod dir_files;
mod durable;
mod flush;
mod gc;
mod ingest;
mod level_targets;
mod lock_order;
mod log_scan;
mod open;
mod read;
mod read_only;
mod repair;
mod table_files;
mod table_scan;
mod verify;
mod write;

pub use checkpoint::{checkpoint, checkpoint_with_fs, restore, CheckpointInfo, BACKUP_FILE};
pub use cursor::DbCursor;
pub use durable::DurableCallback;
pub use ingest::{Ingest, IngestSummary};
pub use read::{DbIter, Entry, LatestView, Snapshot};
pub use read_only::{ReadOnlyDb, ReadOnlySnapshot};
pub use repair::{repair, Loss, RepairReport};
pub use table_files::TableFileInfo;
pub use verify::{verify, Problem, VerifyReport};

use crate::clock::Clock;
use crate::fs::{Fs, FsLock, LogFileHandle, MemFs, StdFs};
use crate::memtable::Memtable;
use crate::options::{BackgroundMode, Options, WriteOptions};
use crate::stats::{Counters, SpaceUsage, Stats};
use crate::version::{Version, VersionSet};
use crate::{filename, Error, Result, WriteBatch};
use lock_order::{OrderedMutex, OrderedRwLock};
use parking_lot::{Condvar, Mutex};
use stampkv_sstable::BlockCache;
use stampkv_wal::{LogPosition, SegmentDir, Wal};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What readers need to find data: the memtables and the table files, swapped as a whole.
pub(crate) struct ReadState {
    /// The memtable receiving writes.
    pub mem: Arc<Memtable>,
    /// Frozen memtables awaiting flush, newest first.
    pub imms: Vec<Arc<Memtable>>,
    /// The live table files.
    pub version: Arc<Version>,
}

/// State of the writer side, under the `commit` lock.
pub(crate) struct CommitState {
    /// Sequence number of the last applied commit (it may not be visible yet).
    pub last_seq: u64,
    /// The memtable receiving writes.
    pub mem: Arc<Memtable>,
    /// Set by `close`.
    pub closed: bool,
}

/// Commits applied but waiting for their WAL sync before they may become visible.
#[derive(Default)]
pub(crate) struct PublishState {
    /// (sequence, end of its WAL record) of commits that asked for a sync, in order.
    pub pending_sync: VecDeque<(u64, LogPosition)>,
    /// Sequence number of the last applied commit.
    pub applied_seq: u64,
}

/// Seeks flush an idle active memtable only while the memtables hold at least this
/// fraction of `Options::write_buffer_size`: a smaller table would cost its compaction
/// into the levels below more than it spares the seeks.
pub(crate) const IDLE_FLUSH_MIN_FRACTION: usize = 4;

/// Requests to the background threads.
#[derive(Default)]
pub(crate) struct WorkState {
    pub flush_pending: bool,
    /// Seeks found the active memtable idle: its WAL segment and entry count then
    /// ([`DbInner::flush_idle_memtable`]).
    pub idle_flush: Option<(u64, usize)>,
    pub compaction_pending: bool,
    pub shutdown: bool,
}

/// Live snapshots: id → (sequence, read time).
#[derive(Default)]
pub(crate) struct SnapshotList {
    next_id: u64,
    live: BTreeMap<u64, (u64, u64)>,
}

/// Creates WAL segment files through the engine's [`Fs`].
pub(crate) struct WalDir {
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) dir: PathBuf,
    /// [`crate::Options::wal_mapped`].
    pub(crate) mapped: bool,
}

impl SegmentDir for WalDir {
    type File = LogFileHandle;
    fn create_segment(&self, number: u64) -> io::Result<LogFileHandle> {
        let path = filename::wal_path(&self.dir, number);
        let file = if self.mapped { self.fs.create_log(&path)? } else { self.fs.create(&path)? };
        Ok(LogFileHandle(file))
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.fs.sync_dir(&self.dir)
    }
}

/// What opening the database found in the write-ahead log. New fields may be added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// WAL segments replayed.
    pub segments: Vec<u64>,
    /// Commits replayed from the WAL.
    pub commits_replayed: u64,
    /// How each replayed segment ended.
    pub segment_ends: Vec<stampkv_wal::SegmentEnd>,
    /// Last sequence number after recovery.
    pub last_sequence: u64,
}

/// Shared state of an open database.
pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub fs: Arc<dyn Fs>,
    pub options: Options,
    pub clock: Arc<dyn Clock>,
    pub block_cache: Arc<BlockCache>,
    pub tables: flush::TableEnv,
    pub next_file: AtomicU64,
    pub commit: OrderedMutex<CommitState>,
    /// Wakes writers waiting for room (flush or compaction progress) and `flush` callers.
    pub room_cv: Condvar,
    pub read_state: OrderedRwLock<Arc<ReadState>>,
    /// Commits up to this sequence number are visible to readers.
    pub visible_seq: AtomicU64,
    /// Commits running and not waiting for a WAL sync (group commit gathers them).
    pub busy_commits: std::sync::atomic::AtomicUsize,
    /// WAL positions commits are waiting in `sync_to` for (group commit).
    pub parked_syncs: OrderedMutex<Vec<u64>>,
    /// Callers of [`DbInner::flush`] waiting: while any is, a flush takes the frozen
    /// memtables even when fewer than `memtables_per_flush`.
    pub forced_flushes: std::sync::atomic::AtomicUsize,
    /// Seeks asked for an idle memtable flush that has not run yet: read-triggered
    /// compactions wait for it, so that one compaction merges its table with the level-0
    /// tables already charged instead of a second one following.
    pub idle_flush_pending: AtomicBool,
    pub publish: OrderedMutex<PublishState>,
    pub publish_cv: Condvar,
    /// Deferred commits waiting for their WAL sync ([`Db::write_with_deferred`]).
    pub durable: durable::DurableQueue,
    pub versions: OrderedMutex<VersionSet>,
    pub snapshots: OrderedMutex<SnapshotList>,
    pub wal: Wal<WalDir>,
    /// Live WAL segment numbers, ascending.
    pub wal_segments: OrderedMutex<Vec<u64>>,
    pub work: OrderedMutex<WorkState>,
    pub work_cv: Condvar,
    /// Held by whoever runs a compaction (background or manual).
    pub compaction_lock: OrderedMutex<()>,
    poisoned: AtomicBool,
    poison_reason: OrderedMutex<Option<String>>,
    pub counters: Counters,
    /// Returns freed heap memory to the OS (`Options::release_freed_memory`).
    pub heap_trimmer: crate::heap_trim::HeapTrimmer,
    /// Arena chunks of dropped memtables, for the next ones.
    pub chunk_pool: Arc<crate::chunk_pool::ChunkPool>,
    pub recovery: RecoveryReport,
    lock: OrderedMutex<Option<Box<dyn FsLock>>>,
}

/// An open database. Share it between threads by reference or `Arc`; every method takes
/// `&self`. Dropping it closes it (use [`Db::close`] to see errors).
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Opened with [`Db::open`]: its paths are real, so checkpoints can hard-link files.
    on_std_fs: bool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (or creates) the database in directory `path` on the real file system.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let mut db = Self::open_with_fs(Arc::new(StdFs), path, options)?;
        db.on_std_fs = true;
        Ok(db)
    }

    /// Opens a new database that lives in memory only (tests, scratch data).
    pub fn open_in_memory(options: Options) -> Result<Db> {
        Self::open_with_fs(Arc::new(MemFs::new()), "/stampkv", options)
    }

    /// Opens (or creates) the database in `path` on the given file system.
    pub fn open_with_fs(fs: Arc<dyn Fs>, path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = Arc::new(open::open(fs, path.as_ref(), options)?);
        let threads = background::start(&inner);
        Ok(Db { inner, threads: Mutex::new(threads), on_std_fs: false })
    }

    /// Applies `batch` atomically with the database's sync mode; returns its sequence number.
    pub fn write(&self, batch: WriteBatch) -> Result<u64> {
        self.write_opt(batch, WriteOptions::default())
    }

    /// Applies `batch` atomically; returns its sequence number.
    pub fn write_opt(&self, batch: WriteBatch, options: WriteOptions) -> Result<u64> {
        self.inner.commit(options, |_| Ok::<_, Error>((batch, ()))).map(|(seq, ())| seq)
    }

    /// Builds a batch from the latest state and commits it, atomically: no other commit
    /// runs between `build` reading and the batch being applied. `build` may return an error
    /// to commit nothing. Used for optimistic checks and read-modify-write operations.
    pub fn write_with<T, E: From<Error>>(
        &self,
        options: WriteOptions,
        build: impl FnOnce(&LatestView<'_>) -> Result<(WriteBatch, T), E>,
    ) -> Result<(u64, T), E> {
        self.inner.commit(options, build)
    }

    /// [`Db::write_with`] without waiting for the WAL sync: returns once the commit is
    /// applied (its sequence number and `build`'s value) and calls `on_durable` when the
    /// commit is durable and visible to readers — on the engine's durability thread, which
    /// syncs once for every deferred commit waiting. A commit that needs no sync (or a
    /// database without background threads) is finished before this returns, and
    /// `on_durable` called on this thread. `on_durable` is never called if this returns an
    /// error, and is called with an error if the sync fails (the database is then poisoned).
    /// A panic in `on_durable` on the durability thread is caught there (the panic hook
    /// reports it): the commit stands, and other commits are acknowledged as before.
    ///
    /// For callers that must not block on I/O (an async server): they hand the
    /// acknowledgement to the callback instead of parking a thread per commit. The commit
    /// itself still takes the commit lock and may wait for room (see
    /// [`Db::under_write_pressure`]).
    pub fn write_with_deferred<T, E: From<Error>>(
        &self,
        options: WriteOptions,
        build: impl FnOnce(&LatestView<'_>) -> Result<(WriteBatch, T), E>,
        on_durable: DurableCallback,
    ) -> Result<(u64, T), E> {
        self.inner.commit_deferred(options, build, on_durable)
    }

    /// Whether a commit might wait now for flushes or compactions to make room (level 0 at
    /// its slowdown trigger, or as many frozen memtables as allowed), or for its own sync
    /// (a database without background threads finishes deferred commits on the caller's
    /// thread): a caller that must not block then commits from a thread that may.
    pub fn under_write_pressure(&self) -> bool {
        if !self.inner.threads_mode() {
            return true;
        }
        let state = self.inner.read_state.read();
        state.version.files(0).len() >= self.inner.options.l0_slowdown_trigger
            || state.imms.len() >= self.inner.options.max_immutable_memtables
    }

    /// Sets one key.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        let mut batch = WriteBatch::with_capacity(key.len() + value.len());
        batch.put(key, value);
        self.write(batch)
    }

    /// Deletes one key.
    pub fn delete(&self, key: &[u8]) -> Result<u64> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch)
    }

    /// The current value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (seq, state) = self.inner.read_view();
        Ok(read::lookup_in(&state, key, seq, || self.inner.clock.now_ms())?.map(|found| found.value))
    }

    /// The current entry of `key`, with its sequence number and expiry.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        let (seq, state) = self.inner.read_view();
        read::get_in(&state, key, seq, || self.inner.clock.now_ms())
    }

    /// Entries with keys in `range`, in key order; reverse with `.rev()` (double-ended).
    /// One consistent view of the database is used for the whole iteration.
    pub fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> DbIter {
        let (seq, state) = self.inner.read_view();
        self.inner.charge_read(&state, &range);
        DbIter::new(state, seq, self.inner.clock.now_ms(), &range)
    }

    /// A forward cursor over the entries with keys in `range`, lending each key and value
    /// instead of copying them ([`DbCursor`]): the fastest way to scan. One consistent view
    /// of the database is used throughout, as by [`Db::range`].
    pub fn cursor<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> DbCursor {
        let (seq, state) = self.inner.read_view();
        self.inner.charge_read(&state, &range);
        DbCursor::new(&state, seq, self.inner.clock.now_ms(), &range)
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> DbIter {
        self.range::<&[u8], _>(..)
    }

    /// A consistent read-only view at the current state; versions it can see are kept
    /// until it is dropped.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(&self.inner)
    }

    /// The clock expiry is evaluated on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Sequence number of the last visible commit.
    pub fn last_sequence(&self) -> u64 {
        self.inner.visible_seq.load(Ordering::Acquire)
    }

    /// Freezes the memtable and waits until every frozen memtable is written to a table.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Makes every acknowledged commit durable (`fdatasync` of the WAL).
    pub fn sync_wal(&self) -> Result<()> {
        let end = self.inner.wal.written_position();
        self.inner.wal.sync_to(end).map_err(|e| self.inner.poison(e.into()))
    }

    /// Flushes, then compacts every level down into the deepest one, dropping every
    /// version, tombstone and expired entry no reader can see.
    pub fn compact(&self) -> Result<()> {
        self.inner.flush()?;
        let result = compaction::compact_all(&self.inner);
        self.inner.poison_on_failure(result)
    }

    /// Statistics (counters since open and the current shape of the tree).
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Live bytes versus disk bytes, by scanning everything (costly on large databases).
    pub fn space_usage(&self) -> Result<SpaceUsage> {
        let mut usage = live_data(self.iter())?;
        let stats = self.stats();
        usage.disk_bytes = stats.table_bytes + stats.wal_bytes_on_disk;
        Ok(usage)
    }

    /// What open found in the write-ahead log.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// Stops background work, syncs and seals the WAL and releases the directory lock.
    /// Snapshots and iterators still alive can go on reading.
    ///
    /// A database that an earlier failure poisoned (a failed WAL write or sync, or a
    /// background flush or compaction that failed) is closed all the same, but `close`
    /// returns [`Error::Poisoned`] with that failure: commits acknowledged before it are
    /// durable as the sync mode promises; the failed work is redone on the next open.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// [`Db::close`] through a shared reference (for wrappers that hand out clones): the
    /// database stops accepting writes; later calls do nothing and return `Ok`.
    pub fn shutdown(&self) -> Result<()> {
        {
            let mut commit = self.inner.commit.lock();
            if commit.closed {
                return Ok(());
            }
            commit.closed = true;
        }
        self.inner.work.lock().shutdown = true;
        self.inner.work_cv.notify_all();
        self.inner.durable.shut_down();
        for handle in self.threads.lock().drain(..) {
            // A deferred commit's callback may drop the last handle, closing the database on
            // the durability thread itself: that thread ends on its own once this returns.
            if handle.thread().id() == std::thread::current().id() {
                continue;
            }
            // A background thread reports its failures by poisoning, panics included.
            let _ = handle.join();
        }
        // Queued removals finish while the directory is still ours.
        self.inner.tables.remover.stop();
        let result = match self.inner.poison_error() {
            Some(poisoned) => Err(poisoned),
            None => self.inner.wal.close().map_err(Error::from),
        };
        self.inner.lock.lock().take();
        self.inner.publish_cv.notify_all();
        result
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl DbInner {
    /// The sequence number and read state a new read uses, taken atomically with respect
    /// to memtable switches and version installs.
    pub(crate) fn read_view(&self) -> (u64, Arc<ReadState>) {
        let state = self.read_state.read();
        let seq = self.visible_seq.load(Ordering::Acquire);
        (seq, state.clone())
    }

    /// Whether a failure has stopped writes.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Records the first failure; from now on writes fail. Returns the error to report.
    pub(crate) fn poison(&self, error: Error) -> Error {
        let mut reason = self.poison_reason.lock();
        if reason.is_none() {
            *reason = Some(match &error {
                Error::Poisoned { reason } => reason.clone(),
                other => other.to_string(),
            });
        }
        self.poisoned.store(true, Ordering::Release);
        drop(reason);
        self.publish_cv.notify_all();
        self.room_cv.notify_all();
        self.work_cv.notify_all();
        error
    }

    /// The error a write gets once the database is poisoned or closed.
    pub(crate) fn check_writable(&self, commit: &CommitState) -> Result<()> {
        if commit.closed {
            return Err(Error::Closed);
        }
        match self.poison_error() {
            Some(poisoned) => Err(poisoned),
            None => Ok(()),
        }
    }

    /// [`Error::Poisoned`] with the first failure, if the database is poisoned.
    pub(crate) fn poison_error(&self) -> Option<Error> {
        self.is_poisoned()
            .then(|| Error::Poisoned { reason: self.poison_reason.lock().clone().unwrap_or_default() })
    }

    pub(crate) fn threads_mode(&self) -> bool {
        self.options.background == BackgroundMode::Threads
    }

    /// Wakes writers waiting for room. Takes the commit lock so a waiter cannot miss it.
    pub(crate) fn notify_room(&self) {
        if self.threads_mode() {
            drop(self.commit.lock());
            self.room_cv.notify_all();
        }
    }

    /// Hands freed heap memory back to the OS if the option is on and a trim is due, and
    /// memtable chunks pooled but unused for a while.
    pub(crate) fn trim_heap_if_due(&self) {
        if self.options.release_freed_memory {
            let (_, misses) = self.block_cache.hit_stats();
            let churn =
                misses.wrapping_add(self.counters.compactions.load(std::sync::atomic::Ordering::Relaxed));
            self.heap_trimmer.trim_if_due(churn);
        }
        self.chunk_pool.release_if_idle(crate::chunk_pool::IDLE_RELEASE);
    }

    pub(crate) fn request_flush(&self) {
        self.work.lock().flush_pending = true;
        self.work_cv.notify_all();
    }

    /// Charges a read that starts at the start of `range` (without one, at its end) to the
    /// newest table covering that key when an older run covers it too, and asks for a
    /// compaction once a table's allowance is used up (`Options::read_triggered_compaction`).
    /// With background threads, also charges the active memtable when a table covers the
    /// key, and asks for it to be flushed once it has been idle (no insert) for its
    /// allowance of such reads, if the memtables hold enough to be worth a table of their
    /// own ([`IDLE_FLUSH_MIN_FRACTION`]).
    pub(crate) fn charge_read<K: AsRef<[u8]>, R: std::ops::RangeBounds<K> + ?Sized>(
        &self,
        state: &ReadState,
        range: &R,
    ) {
        use std::ops::Bound;
        if !self.options.read_triggered_compaction {
            return;
        }
        let key = match (range.start_bound(), range.end_bound()) {
            (Bound::Included(k) | Bound::Excluded(k), _) => k.as_ref(),
            (Bound::Unbounded, Bound::Included(k) | Bound::Excluded(k)) => k.as_ref(),
            (Bound::Unbounded, Bound::Unbounded) => return,
        };
        let charge = state.version.charge_read(key);
        if charge.compaction_due {
            self.request_compaction();
        }
        if charge.covered && self.threads_mode() {
            let memtable_bytes =
                std::iter::once(&state.mem).chain(&state.imms).map(|m| m.memory_bytes()).sum::<usize>();
            if memtable_bytes >= self.options.write_buffer_size / IDLE_FLUSH_MIN_FRACTION {
                let allowance = memtable_bytes as u64 / crate::version::BYTES_PER_ALLOWED_SEEK;
                if state.mem.charge_idle_seek(allowance.max(1)) {
                    self.idle_flush_pending.store(true, Ordering::Release);
                    self.work.lock().idle_flush = Some((state.mem.wal_segment(), state.mem.len()));
                    self.work_cv.notify_all();
                }
            }
        }
    }

    pub(crate) fn request_compaction(&self) {
        self.work.lock().compaction_pending = true;
        self.work_cv.notify_all();
    }

    pub(crate) fn shutting_down(&self) -> bool {
        self.work.lock().shutdown
    }

    fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        stats.fill_counters(&self.counters);
        (stats.heap_trims, stats.heap_trim_micros) = self.heap_trimmer.counts();
        let wal = self.wal.stats();
        stats.wal_bytes_written = wal.bytes_written;
        stats.wal_syncs = wal.syncs;
        let (_, state) = self.read_view();
        fill_tree_stats(&mut stats, &self.options, &state, &self.tables);
        stats.pooled_memtable_bytes = self.chunk_pool.pooled_bytes() as u64;
        stats.visible_sequence = self.visible_seq.load(Ordering::Acquire);
        stats.wal_bytes_on_disk = wal_bytes_on_disk(&*self.fs, &self.dir, &self.wal_segments.lock());
        stats
    }
}

/// The statistics a database has whether it is open for writing or to read only: the
/// shape of the tree (from the manifest's tables), the memtables, the block and table
/// caches.
fn fill_tree_stats(stats: &mut Stats, options: &Options, state: &ReadState, tables: &flush::TableEnv) {
    let per_level = stats.files_per_level.iter_mut().zip(stats.bytes_per_level.iter_mut());
    for (level, (files, bytes)) in per_level.enumerate() {
        *files = state.version.files(level).len();
        *bytes = state.version.level_bytes(level);
    }
    stats.level_target_bytes = level_targets::LevelTargets::of(options, &state.version).bytes;
    stats.table_bytes = state.version.total_bytes();
    stats.table_bytes_uncompressed = state.version.all_files().map(|(_, f)| f.uncompressed_size()).sum();
    let table_cache = tables.table_cache.stats();
    stats.pinned_table_bytes = table_cache.pinned_bytes as u64;
    stats.open_tables = table_cache.tables;
    stats.open_table_files = table_cache.open_files;
    stats.table_cache_hits_misses = (table_cache.hits, table_cache.misses);
    stats.memtable_bytes = std::iter::once(&state.mem)
        .chain(state.imms.iter())
        .map(|m| (m.memory_bytes() + m.filter_bytes()) as u64)
        .sum();
    stats.immutable_memtables = state.imms.len();
    stats.block_cache_bytes = tables.cache.usage_bytes() as u64;
    stats.block_cache_hits_misses = tables.cache.hit_stats();
    let counters = tables.cache.counters();
    stats.block_cache_index_filter_hits_misses =
        (counters.index_hits + counters.filter_hits, counters.index_misses + counters.filter_misses);
}

/// The live entries and their key and value bytes, by reading all of `iter`.
fn live_data(iter: DbIter) -> Result<SpaceUsage> {
    let mut usage = SpaceUsage::default();
    for entry in iter {
        let entry = entry?;
        usage.live_entries += 1;
        usage.live_bytes += (entry.key.len() + entry.value.len()) as u64;
    }
    Ok(usage)
}

/// Bytes of the WAL segments `segments` of `dir` (a segment that cannot be read counts 0).
fn wal_bytes_on_disk(fs: &dyn Fs, dir: &Path, segments: &[u64]) -> u64 {
    segments.iter().map(|n| dir_files::file_len(fs, &filename::wal_path(dir, *n))).sum()
}
