//! Options of the engine.

use crate::clock::{Clock, SystemClock};
use stampkv_sstable::{Compression, TableOptions};
use stampkv_wal::RecoveryMode;
use std::sync::Arc;
use std::time::Duration;

/// When a commit is durable. See DESIGN.md "Durability" for exactly what survives what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Every commit is `fdatasync`ed before it is acknowledged (concurrent commits share one
    /// sync). Survives process crashes and power loss. The default.
    #[default]
    Always,
    /// Commits are handed to the operating system before they are acknowledged, and synced
    /// by a background thread at this interval. Survives a process crash; a power loss may
    /// lose the commits of the last interval (never a partial commit, never a hole).
    Periodic(Duration),
    /// Commits are handed to the operating system before they are acknowledged and synced
    /// only when a WAL segment is sealed, on `flush`/`sync_wal`, and at close. Survives a
    /// process crash; a power loss may lose any suffix of the unsynced commits.
    Buffered,
}

/// Whether flushes and compactions run on background threads or inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundMode {
    /// A flush thread and a compaction thread. The default.
    #[default]
    Threads,
    /// In the writing thread, at the moment work becomes due: deterministic (tests).
    Inline,
}

/// Options for opening a database. New fields may be added: build them from
/// [`Options::default`] and set the fields that differ.
#[derive(Clone)]
#[non_exhaustive]
pub struct Options {
    /// Create the directory and database if missing (default true).
    pub create_if_missing: bool,
    /// Fail if the database already exists (default false).
    pub error_if_exists: bool,
    /// Memtable size at which it is frozen (default 32 MiB). Small enough that most of
    /// the skiplist a put searches stays in the CPU caches; level-0 tables are
    /// `memtables_per_flush` times larger.
    pub write_buffer_size: usize,
    /// Frozen memtables written together into one level-0 table (default 2; RocksDB's
    /// `min_write_buffer_number_to_merge`). A flush starts once this many are frozen (or
    /// when [`Db::flush`](crate::Db::flush) asks for one) and takes every frozen memtable,
    /// so that level-0 tables, and with them the work of compacting level 0, stay as large
    /// as with one memtable of `write_buffer_size × memtables_per_flush`.
    pub memtables_per_flush: usize,
    /// Frozen memtables waiting for flush before writes stall (default 4; at least
    /// `memtables_per_flush`).
    pub max_immutable_memtables: usize,
    /// Durability of commits (default [`SyncMode::Always`]).
    pub sync_mode: SyncMode,
    /// WAL zero-fill step ahead of the write position, 0 to disable (default 1 MiB). It
    /// starts once a segment has been synced: segments only written with buffered commits
    /// are not zero-filled.
    pub wal_preallocate_bytes: u64,
    /// Each time this many bytes of WAL have been written without a sync, ask the OS to
    /// start writing them to storage without waiting (`sync_file_range` on Linux; 0 to
    /// disable; default 1 MiB; RocksDB's `wal_bytes_per_sync`). With
    /// [`SyncMode::Buffered`] or [`SyncMode::Periodic`] the sync that seals a full segment
    /// (under the commit lock, at a memtable switch) then finds little left to write
    /// instead of the whole segment. It changes nothing about what survives a crash.
    pub wal_bytes_per_sync: u64,
    /// Write WAL segments through a shared memory mapping of the file (default true; on
    /// Unix, with the OS file system): a commit is copied into the file's page cache pages
    /// instead of handed over by a `pwrite`, which saves a system call per commit. What
    /// survives a crash is the same either way: a killed process loses nothing that
    /// returned, and [`SyncMode`] decides what survives losing power. Segments are then
    /// extended with zeros ahead of the write position (a full disk fails
    /// the write that extends, never a later copy). False: one `pwrite` per commit.
    pub wal_mapped: bool,
    /// What to do with damaged WAL data at open (default: drop a torn tail, fail otherwise).
    pub wal_recovery_mode: RecoveryMode,
    /// Table format options (block size, restart interval, bloom bits, compression).
    /// `table.compression` (default [`Compression::Lz4`]) is the compression of every
    /// level that `compression_per_level` does not name.
    pub table: TableOptions,
    /// Compression of the tables written into each level: entry `i` for level `i`, the
    /// last entry for every deeper level; empty (the default) means `table.compression`
    /// everywhere. For example `[None, None, Lz4]` leaves levels 0 and 1 uncompressed.
    /// Flushes write level 0; compactions their output level; ingested tables use level
    /// 0's setting and `repair` the deepest level's. A table moved down a level without
    /// being rewritten keeps its compression, and every table is readable whatever the
    /// current setting.
    pub compression_per_level: Vec<Compression>,
    /// Block cache capacity in bytes (default [`default_block_cache_bytes`]: an eighth of
    /// the memory the process may use, between 32 MiB and 1 GiB). The cache holds
    /// decompressed, verified blocks and takes memory only as reads fill it; when it holds
    /// the tables a read needs, the read makes no system call and verifies no checksum.
    pub block_cache_bytes: usize,
    /// Most tables kept open (default 1000; `usize::MAX` for no limit). Each open table
    /// holds a file descriptor (and, without `cache_index_and_filter_blocks`, its index
    /// and filter blocks); a table not open is opened again when a read needs it, evicting
    /// the least recently used one. Every table is verified in full when the database
    /// opens it or writes it; a reopen reads only its footer, metaindex and properties
    /// when index and filter live in the block cache, and those two blocks are read again
    /// (checksum verified) only if the cache no longer holds them. Tables that readers are
    /// using stay open beyond the limit until they finish.
    pub max_open_files: usize,
    /// Hand memory the allocator keeps after it was freed back to the OS (default true):
    /// with glibc, the compaction thread calls `malloc_trim` at most four times a second, when
    /// block cache misses or compactions freed memory since the last call (`Stats::heap_trims`,
    /// `heap_trim_micros`). Without it, the holes the block cache's churn leaves in
    /// glibc's per-thread heaps stay resident. No effect with other allocators or platforms.
    pub release_freed_memory: bool,
    /// Keep open tables' index and filter blocks in the block cache (default true):
    /// charged to `block_cache_bytes`, evicted like data blocks (after them, see
    /// [`stampkv_sstable::BlockCache`]) and read again, checksum verified, when next needed.
    /// An open table then holds only a few hundred bytes, so memory no longer grows with
    /// the number of open tables. `false` pins them for as long as the table is open
    /// (about 2% of the table: 0.3 MiB for a 16 MiB table): no rereads, memory up to `max_open_files` times that.
    pub cache_index_and_filter_blocks: bool,
    /// Put the data blocks of the tables that flushes and compactions write into the block
    /// cache as they are written, while the cache has free room (default true): a copy of
    /// each block, made only if it fits without evicting anything (RocksDB's "prepopulate
    /// block cache", which RocksDB does for flushes only). A database that was just loaded
    /// then serves its first reads from the cache instead of reading each block once, and
    /// compactions find their inputs there. The blocks of a table a compaction replaced
    /// leave the cache when its file is removed, which frees their room for newer tables.
    /// The cache fills up to `block_cache_bytes` during a load instead of as reads need it.
    pub prepopulate_block_cache: bool,
    /// Level-0 file count that triggers compaction (default 4).
    pub l0_compaction_trigger: usize,
    /// Compact tables that reads keep paying for (default true): a cursor or range that
    /// starts at a key covered by two or more tables of different runs (overlapping
    /// level-0 files, or files of several levels) charges one seek to the newest of them;
    /// once a table has absorbed one seek per 16 KiB of its size (at least 100), and no
    /// level is over its limit, it is merged into the level below. LevelDB's seek
    /// compaction and Pebble's read-triggered compactions work the same way; after a fill,
    /// the first few thousand seeks leave the data in fewer runs, which every later seek
    /// then positions instead of all of them (`Stats::read_compactions`).
    ///
    /// With background threads the same charge goes to the active memtable when a table
    /// covers the key: once the memtable has absorbed one seek per 16 KiB that the
    /// memtables hold, with no write in between, and they hold at least a quarter of
    /// `write_buffer_size`, it is flushed with any frozen ones (`Stats::idle_flushes`), and
    /// later seeks merge the new table down like any other. A database that stopped taking
    /// writes thus ends up as one run that seeks position alone; a write restarts the count.
    pub read_triggered_compaction: bool,
    /// Level-0 file count at which each write is delayed by 1 ms (default 12).
    pub l0_slowdown_trigger: usize,
    /// Level-0 file count at which writes stop until compaction catches up (default 20).
    pub l0_stop_trigger: usize,
    /// Size at which compaction output files are cut (default 16 MiB). Smaller tables
    /// mean smaller index and filter blocks: when those do not all fit in the block cache
    /// (beyond about 50 times `block_cache_bytes` of data), a lookup that misses rereads
    /// one table's index or filter, about 2% of `target_file_size`. Larger tables mean
    /// fewer files (see `max_open_files`).
    pub target_file_size: u64,
    /// Target size of level 1 (default 256 MiB); each deeper level is `level_size_ratio`
    /// times larger. With `dynamic_level_bytes`, the target of the base level, the level
    /// that level 0 compacts into.
    pub level1_target_bytes: u64,
    /// Size ratio between adjacent levels (default 10).
    pub level_size_ratio: u64,
    /// Derive the level targets from the size of the largest level instead of growing
    /// them from level 1 (default true; RocksDB's `level_compaction_dynamic_level_bytes`):
    /// level L gets `largest / level_size_ratio^(6-L)`, level 0 compacts into the first
    /// level whose share is at most `level1_target_bytes`, and the levels above it stay
    /// empty. This bounds the space held by old versions to about `1/(ratio-1)` of the
    /// data at any size. Either setting opens a database written with the other; the
    /// levels then reshape through compaction.
    pub dynamic_level_bytes: bool,
    /// Manifest size at which a new manifest is started (default 4 MiB).
    pub max_manifest_bytes: u64,
    /// Flush and compaction threads, or inline work.
    pub background: BackgroundMode,
    /// Time source for expiry (default: the system clock).
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            write_buffer_size: 32 << 20,
            memtables_per_flush: 2,
            max_immutable_memtables: 4,
            sync_mode: SyncMode::Always,
            wal_preallocate_bytes: 1 << 20,
            wal_bytes_per_sync: 1 << 20,
            wal_mapped: true,
            wal_recovery_mode: RecoveryMode::TolerateCorruptedTail,
            table: TableOptions::default(),
            compression_per_level: Vec::new(),
            block_cache_bytes: default_block_cache_bytes(),
            max_open_files: 1000,
            cache_index_and_filter_blocks: true,
            prepopulate_block_cache: true,
            release_freed_memory: true,
            l0_compaction_trigger: 4,
            read_triggered_compaction: true,
            l0_slowdown_trigger: 12,
            l0_stop_trigger: 20,
            target_file_size: 16 << 20,
            level1_target_bytes: 256 << 20,
            level_size_ratio: 10,
            dynamic_level_bytes: true,
            max_manifest_bytes: 4 << 20,
            background: BackgroundMode::Threads,
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("write_buffer_size", &self.write_buffer_size)
            .field("memtables_per_flush", &self.memtables_per_flush)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field("sync_mode", &self.sync_mode)
            .field("wal_bytes_per_sync", &self.wal_bytes_per_sync)
            .field("wal_mapped", &self.wal_mapped)
            .field("background", &self.background)
            .field("dynamic_level_bytes", &self.dynamic_level_bytes)
            .field("table", &self.table)
            .field("compression_per_level", &self.compression_per_level)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Tiny sizes so that flushes and compactions happen constantly. For tests and fuzzing
    /// only, never for a real database: it exists with the `test-presets` feature, which
    /// the tests' dev-dependencies turn on.
    #[cfg(feature = "test-presets")]
    pub fn tiny_for_tests() -> Self {
        Options {
            write_buffer_size: 4 << 10,
            memtables_per_flush: 2,
            max_immutable_memtables: 3,
            wal_preallocate_bytes: 8 << 10,
            table: TableOptions { block_size: 256, restart_interval: 4, ..TableOptions::default() },
            block_cache_bytes: 64 << 10,
            max_open_files: 8,
            l0_compaction_trigger: 2,
            l0_slowdown_trigger: 6,
            l0_stop_trigger: 10,
            target_file_size: 8 << 10,
            level1_target_bytes: 32 << 10,
            level_size_ratio: 4,
            max_manifest_bytes: 16 << 10,
            ..Options::default()
        }
    }

    /// The compression of tables written into `level`.
    pub fn compression_for_level(&self, level: usize) -> Compression {
        compression_for_level(&self.table, &self.compression_per_level, level)
    }

    /// Checks the options for values the engine cannot work with.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.write_buffer_size < 1024 {
            return Err("write_buffer_size must be at least 1 KiB".into());
        }
        if self.write_buffer_size > (1 << 30) {
            return Err("write_buffer_size must be at most 1 GiB".into());
        }
        if self.max_immutable_memtables == 0 {
            return Err("max_immutable_memtables must be at least 1".into());
        }
        if !(1 <= self.l0_compaction_trigger
            && self.l0_compaction_trigger <= self.l0_slowdown_trigger
            && self.l0_slowdown_trigger <= self.l0_stop_trigger)
        {
            return Err("need 1 <= l0_compaction_trigger <= l0_slowdown_trigger <= l0_stop_trigger".into());
        }
        if self.level_size_ratio < 2 || self.target_file_size < 1024 || self.level1_target_bytes < 1024 {
            return Err("level sizes are too small".into());
        }
        if self.memtables_per_flush == 0 || self.max_immutable_memtables < self.memtables_per_flush {
            return Err("need 1 <= memtables_per_flush <= max_immutable_memtables".into());
        }
        if self.max_open_files == 0 {
            return Err("max_open_files must be at least 1".into());
        }
        if self.table.block_size < 64 || self.table.restart_interval == 0 {
            return Err("table block_size must be >= 64 and restart_interval >= 1".into());
        }
        Ok(())
    }
}

/// `per_level[level]`, else the last entry of `per_level`, else `table.compression`.
pub(crate) fn compression_for_level(
    table: &TableOptions,
    per_level: &[Compression],
    level: usize,
) -> Compression {
    per_level.get(level).or(per_level.last()).copied().unwrap_or(table.compression)
}

/// Options of one write.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Overrides the database's sync mode for this commit: `Some(true)` waits for an
    /// fdatasync, `Some(false)` only hands the commit to the OS.
    pub sync: Option<bool>,
}

impl WriteOptions {
    /// The options of a write that syncs (`Some(true)`), does not (`Some(false)`), or follows
    /// the database's sync mode (`None`).
    pub fn with_sync(sync: Option<bool>) -> WriteOptions {
        WriteOptions { sync }
    }
}

/// The smallest default block cache.
const MIN_DEFAULT_BLOCK_CACHE: usize = 32 << 20;
/// The largest default block cache (redb's default cache is 1 GiB too).
const MAX_DEFAULT_BLOCK_CACHE: usize = 1 << 30;

/// The default block cache: an eighth of the memory this process may use — the machine's
/// (`MemTotal` in `/proc/meminfo`), or its cgroup's limit if that is lower — kept between
/// 32 MiB and 1 GiB; 32 MiB where neither can be read. With 24 GiB that is 1 GiB: a
/// database of up to about that size is read from memory once read once, as with redb's
/// default, instead of going back to the file for every block beyond 32 MiB.
pub fn default_block_cache_bytes() -> usize {
    let limit = [machine_memory_bytes(), cgroup_memory_limit_bytes()].into_iter().flatten().min();
    match limit {
        Some(bytes) => usize::try_from(bytes / 8)
            .unwrap_or(MAX_DEFAULT_BLOCK_CACHE)
            .clamp(MIN_DEFAULT_BLOCK_CACHE, MAX_DEFAULT_BLOCK_CACHE),
        None => MIN_DEFAULT_BLOCK_CACHE,
    }
}

/// The machine's memory from `/proc/meminfo`, if it can be read.
fn machine_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of this process's cgroup (v2 `memory.max`, else v1
/// `memory.limit_in_bytes`), if there is one.
fn cgroup_memory_limit_bytes() -> Option<u64> {
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults the repository's DESIGN.md quotes (memory, flush, compaction, tables):
    /// changing one here means changing the document too.
    #[test]
    fn defaults_are_the_ones_design_md_quotes() {
        let o = Options::default();
        assert_eq!(o.sync_mode, SyncMode::Always);
        assert_eq!(o.write_buffer_size, 32 << 20);
        assert_eq!(o.memtables_per_flush, 2);
        assert_eq!(o.max_immutable_memtables, 4);
        assert_eq!(o.write_buffer_size * (1 + o.max_immutable_memtables), 160 << 20);
        assert_eq!(o.block_cache_bytes, default_block_cache_bytes());
        assert!((MIN_DEFAULT_BLOCK_CACHE..=MAX_DEFAULT_BLOCK_CACHE).contains(&o.block_cache_bytes));
        assert_eq!(o.max_open_files, 1000);
        assert_eq!((o.l0_compaction_trigger, o.l0_slowdown_trigger, o.l0_stop_trigger), (4, 12, 20));
        assert_eq!(o.target_file_size, 16 << 20);
        assert_eq!(o.level1_target_bytes, 256 << 20);
        assert_eq!(o.level_size_ratio, 10);
        assert_eq!(o.max_manifest_bytes, 4 << 20);
        assert_eq!(
            (o.table.block_size, o.table.restart_interval, o.table.bloom_bits_per_key),
            (4096, 16, 10)
        );
        assert_eq!(o.table.restart_bytes, 256);
        assert_eq!(o.table.index_restart_interval, 4);
    }
}
