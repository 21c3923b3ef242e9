//! Counters of work done, and the statistics snapshot users read.

use crate::version::NUM_LEVELS;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, updated with relaxed atomics.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_bytes: AtomicU64,
    pub commits: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub flush_bytes_uncompressed: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub read_compactions: AtomicU64,
    pub idle_flushes: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compaction_bytes_written_uncompressed: AtomicU64,
    pub stall_micros: AtomicU64,
    pub max_stall_micros: AtomicU64,
    pub stalls: AtomicU64,
    pub slowdowns: AtomicU64,
    pub memtable_switches: AtomicU64,
    pub max_memtable_switch_micros: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, value: u64) {
        counter.fetch_add(value, Ordering::Relaxed);
    }

    pub(crate) fn max(counter: &AtomicU64, value: u64) {
        counter.fetch_max(value, Ordering::Relaxed);
    }
}

fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// A snapshot of the engine's statistics.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Key and value bytes of all commits since open.
    pub user_bytes_written: u64,
    /// Commits since open.
    pub commits: u64,
    /// Bytes written to the write-ahead log since open (records, headers, padding).
    pub wal_bytes_written: u64,
    /// `fdatasync` calls on the write-ahead log since open.
    pub wal_syncs: u64,
    /// Memtable flushes since open.
    pub flushes: u64,
    /// Bytes of tables written by flushes since open.
    pub flush_bytes_written: u64,
    /// What `flush_bytes_written` would have been with every data block uncompressed.
    pub flush_bytes_uncompressed: u64,
    /// Compactions since open (trivial moves included).
    pub compactions: u64,
    /// Compactions that moved a file down a level without rewriting it.
    pub trivial_moves: u64,
    /// Compactions asked for by reads (`Options::read_triggered_compaction`), trivial moves
    /// included.
    pub read_compactions: u64,
    /// Flushes of an active memtable that seeks found idle (`Options::read_triggered_compaction`).
    pub idle_flushes: u64,
    /// Bytes of tables read by compactions since open.
    pub compaction_bytes_read: u64,
    /// Bytes of tables written by compactions since open.
    pub compaction_bytes_written: u64,
    /// What `compaction_bytes_written` would have been with every data block uncompressed.
    pub compaction_bytes_written_uncompressed: u64,
    /// Time writers spent delayed or stopped by backpressure, in microseconds.
    pub stall_micros: u64,
    /// The longest time one write spent delayed or stopped by backpressure, in
    /// microseconds.
    pub max_stall_micros: u64,
    /// Writes that had to wait for a flush or a level-0 compaction.
    pub stalls: u64,
    /// Writes delayed by 1 ms because level 0 had many files.
    pub slowdowns: u64,
    /// Memtable switches since open (each seals and syncs a WAL segment and starts the
    /// next one, on the thread of the commit that filled the memtable).
    pub memtable_switches: u64,
    /// The longest memtable switch, in microseconds: time the committing thread spent
    /// (under the commit lock) sealing and syncing the full segment and creating the next.
    pub max_memtable_switch_micros: u64,
    /// Times freed heap memory was handed back to the OS (`Options::release_freed_memory`).
    pub heap_trims: u64,
    /// Microseconds those took in all (on the compaction thread).
    pub heap_trim_micros: u64,
    /// Table files per level.
    pub files_per_level: [usize; NUM_LEVELS],
    /// Table bytes per level.
    pub bytes_per_level: [u64; NUM_LEVELS],
    /// Size each level is compacted down to (see `Options::dynamic_level_bytes`): 0 for
    /// level 0 (it compacts at a file count) and for the levels above the base level,
    /// the level that level 0 compacts into. The last level's target is not enforced.
    pub level_target_bytes: [u64; NUM_LEVELS],
    /// Bytes of all live table files.
    pub table_bytes: u64,
    /// What `table_bytes` would be with every data block stored uncompressed;
    /// `table_bytes / table_bytes_uncompressed` is the space compression saves.
    pub table_bytes_uncompressed: u64,
    /// Bytes of live write-ahead log segments.
    pub wal_bytes_on_disk: u64,
    /// Memory of the mutable and frozen memtables.
    pub memtable_bytes: u64,
    /// Memory of memtable arena chunks kept for the next memtables (at most what one flush
    /// frees; released when the database goes idle).
    pub pooled_memtable_bytes: u64,
    /// Frozen memtables waiting to be flushed.
    pub immutable_memtables: usize,
    /// Bytes held by the block cache.
    pub block_cache_bytes: u64,
    /// Block cache (hits, misses), every kind of block.
    pub block_cache_hits_misses: (u64, u64),
    /// Block cache (hits, misses) of index and filter blocks alone (zero unless
    /// `Options::cache_index_and_filter_blocks`); a miss rereads the block from its table.
    pub block_cache_index_filter_hits_misses: (u64, u64),
    /// Memory the tables the table cache holds open keep outside the block cache: a few
    /// hundred bytes each (name, properties, handles), plus their index and filter unless
    /// `Options::cache_index_and_filter_blocks`.
    pub pinned_table_bytes: u64,
    /// Tables the table cache holds open (at most `Options::max_open_files`).
    pub open_tables: usize,
    /// Table files open now: those the table cache holds plus evicted ones that a reader
    /// (an iterator, a read, a compaction) still uses.
    pub open_table_files: usize,
    /// Table cache (hits, misses); a miss opens the table.
    pub table_cache_hits_misses: (u64, u64),
    /// Last sequence number made visible.
    pub visible_sequence: u64,
}

impl Stats {
    pub(crate) fn fill_counters(&mut self, c: &Counters) {
        self.user_bytes_written = load(&c.user_bytes);
        self.commits = load(&c.commits);
        self.flushes = load(&c.flushes);
        self.flush_bytes_written = load(&c.flush_bytes);
        self.flush_bytes_uncompressed = load(&c.flush_bytes_uncompressed);
        self.compactions = load(&c.compactions);
        self.trivial_moves = load(&c.trivial_moves);
        self.read_compactions = load(&c.read_compactions);
        self.idle_flushes = load(&c.idle_flushes);
        self.compaction_bytes_read = load(&c.compaction_bytes_read);
        self.compaction_bytes_written = load(&c.compaction_bytes_written);
        self.compaction_bytes_written_uncompressed = load(&c.compaction_bytes_written_uncompressed);
        self.stall_micros = load(&c.stall_micros);
        self.max_stall_micros = load(&c.max_stall_micros);
        self.stalls = load(&c.stalls);
        self.slowdowns = load(&c.slowdowns);
        self.memtable_switches = load(&c.memtable_switches);
        self.max_memtable_switch_micros = load(&c.max_memtable_switch_micros);
    }

    /// Memory of the engine's main components: memtables, block cache, and what open tables
    /// hold outside it (`pinned_table_bytes`).
    pub fn memory_bytes(&self) -> u64 {
        self.memtable_bytes + self.pooled_memtable_bytes + self.block_cache_bytes + self.pinned_table_bytes
    }

    /// Bytes written to storage (WAL, flushes, compactions) per user byte; 0 before any write.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        let device = self.wal_bytes_written + self.flush_bytes_written + self.compaction_bytes_written;
        device as f64 / self.user_bytes_written as f64
    }
}

/// Live data versus bytes on disk, from a full scan (see `Db::space_usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct SpaceUsage {
    /// Key and value bytes of the entries a read would see now.
    pub live_bytes: u64,
    /// Number of such entries.
    pub live_entries: u64,
    /// Bytes of table files plus WAL segments.
    pub disk_bytes: u64,
}

impl SpaceUsage {
    /// Disk bytes per live byte (0 when nothing is live).
    pub fn space_amplification(&self) -> f64 {
        if self.live_bytes == 0 {
            0.0
        } else {
            self.disk_bytes as f64 / self.live_bytes as f64
        }
    }
}
