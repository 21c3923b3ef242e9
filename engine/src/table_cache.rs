//! The table cache: open tables by file number, at most `Options::max_open_files` of them.
//!
//! An open [`Table`] holds a file handle, its properties and, unless they go through the
//! block cache ([`IndexFilterPlacement::BlockCache`], the default), its index and filter
//! blocks, so the number of open tables bounds file descriptors and that memory. A table
//! that the cache does not hold is opened on demand (footer, index, filter and properties
//! are read and their checksums verified), which may evict the least recently used one.
//! Readers get an `Arc<Table>` and keep it while they use it: eviction only drops the
//! cache's reference, so a table in use stays open until its last reader lets go.
//!
//! The cache is split into shards by file number, each a short-held mutex around a map
//! with exact LRU order (a use stamps the entry; eviction removes the oldest stamp, a scan
//! of one shard that only a miss pays for, next to the cost of opening a table).

use crate::filename;
use crate::fs::{Fs, FsFile, TableFile as TableFileAdapter};
use crate::{Error, Result};
use parking_lot::Mutex;
use stampkv_sstable::{BlockCache, IndexFilterPlacement, ReadAt, Table};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Most shards used.
const MAX_SHARDS: usize = 16;
/// Fewest tables per shard worth sharding for (small caches use one shard, exact LRU).
const MIN_SHARD_CAPACITY: usize = 16;

/// File numbers are dense and distinct: a multiplicative mix spreads them over buckets.
#[derive(Default)]
struct NumberHasher(u64);

impl Hasher for NumberHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

struct Entry {
    table: Arc<Table>,
    /// Value of the shard's clock at the last use.
    last_used: u64,
}

#[derive(Default)]
struct Shard {
    map: HashMap<u64, Entry, BuildHasherDefault<NumberHasher>>,
    capacity: usize,
    clock: u64,
    /// Bytes the tables in `map` hold outside the block cache.
    pinned_bytes: usize,
    hits: u64,
    misses: u64,
}

impl Shard {
    fn lookup(&mut self, number: u64) -> Option<Arc<Table>> {
        self.clock += 1;
        match self.map.get_mut(&number) {
            Some(entry) => {
                entry.last_used = self.clock;
                self.hits += 1;
                Some(Arc::clone(&entry.table))
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Caches `table` unless another reader cached the same file first (then that one is
    /// returned and `table` is handed back to be dropped). Evicted tables go to `dropped`,
    /// to be dropped after the lock is released.
    fn insert(&mut self, number: u64, table: Arc<Table>, dropped: &mut Vec<Arc<Table>>) -> Arc<Table> {
        self.clock += 1;
        if let Some(entry) = self.map.get_mut(&number) {
            entry.last_used = self.clock;
            dropped.push(table);
            return Arc::clone(&entry.table);
        }
        while self.map.len() >= self.capacity {
            let Some(oldest) = self.map.iter().min_by_key(|(_, e)| e.last_used).map(|(&n, _)| n) else {
                break;
            };
            if let Some(evicted) = self.remove(oldest) {
                dropped.push(evicted);
            }
        }
        self.pinned_bytes += table.pinned_memory_bytes();
        self.map.insert(number, Entry { table: Arc::clone(&table), last_used: self.clock });
        table
    }

    fn remove(&mut self, number: u64) -> Option<Arc<Table>> {
        let entry = self.map.remove(&number)?;
        self.pinned_bytes -= entry.table.pinned_memory_bytes();
        Some(entry.table)
    }
}

/// What the table cache holds, for [`crate::Stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TableCacheStats {
    /// Tables the cache holds open.
    pub tables: usize,
    /// Table files open now: the cached ones plus evicted ones a reader still uses.
    pub open_files: usize,
    /// Bytes the cached tables hold outside the block cache (see
    /// [`Table::pinned_memory_bytes`]).
    pub pinned_bytes: usize,
    /// Lookups that found the table open.
    pub hits: u64,
    /// Lookups that had to open it.
    pub misses: u64,
}

/// Open tables of one database directory, by file number.
pub(crate) struct TableCache {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    block_cache: Arc<BlockCache>,
    placement: IndexFilterPlacement,
    shards: Box<[Mutex<Shard>]>,
    /// Table files open now (see [`CountedFile`]).
    open_files: Arc<AtomicUsize>,
}

impl TableCache {
    /// A cache holding at most `capacity` (at least 1; `usize::MAX` for no limit) open
    /// tables of `dir`, whose blocks go through `block_cache` (index and filter blocks too
    /// if `placement` says so).
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: &Path,
        block_cache: Arc<BlockCache>,
        capacity: usize,
        placement: IndexFilterPlacement,
    ) -> Self {
        let capacity = capacity.max(1);
        let mut num_shards = MAX_SHARDS;
        while num_shards > 1 && capacity / num_shards < MIN_SHARD_CAPACITY {
            num_shards /= 2;
        }
        // The shards' capacities add up to exactly `capacity`.
        let shards = (0..num_shards)
            .map(|i| {
                let extra = usize::from(i < capacity % num_shards);
                Mutex::new(Shard { capacity: capacity / num_shards + extra, ..Shard::default() })
            })
            .collect();
        TableCache { fs, dir: dir.to_path_buf(), block_cache, placement, shards, open_files: Arc::default() }
    }

    fn shard(&self, number: u64) -> &Mutex<Shard> {
        let index = (number % self.shards.len() as u64) as usize;
        #[allow(clippy::indexing_slicing, reason = "index < shards.len(), which is at least 1")]
        &self.shards[index]
    }

    /// The open table of file `number`, opened again (and cached) if the cache does not
    /// hold it. The table must have been opened once before through
    /// [`TableCache::open_verified`] or [`TableCache::open_file`], which verified its
    /// index and filter: with index and filter blocks in the block cache, a reopen reads
    /// only footer, metaindex and properties, and leaves the index and filter to be read
    /// (checksum verified) when a lookup needs them, if the block cache no longer has them.
    pub(crate) fn get(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(table) = self.shard(number).lock().lookup(number) {
            return Ok(table);
        }
        let placement = match self.placement {
            IndexFilterPlacement::BlockCache => IndexFilterPlacement::BlockCacheOnFirstUse,
            other => other,
        };
        self.open_path(number, placement)
    }

    /// Opens table `number` (verifying its footer, index, filter and properties) unless
    /// the cache holds it open, and caches it.
    pub(crate) fn open_verified(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(table) = self.shard(number).lock().lookup(number) {
            return Ok(table);
        }
        self.open_path(number, self.placement)
    }

    fn open_path(&self, number: u64, placement: IndexFilterPlacement) -> Result<Arc<Table>> {
        let path = filename::table_path(&self.dir, number);
        let file = self.fs.open(&path).map_err(|e| open_error(&path, e))?;
        self.open_with(number, file, placement)
    }

    /// Opens table `number` from an open file (verifying its footer, index, filter and
    /// properties) and caches it.
    pub(crate) fn open_file(&self, number: u64, file: Arc<dyn FsFile>) -> Result<Arc<Table>> {
        self.open_with(number, file, self.placement)
    }

    /// [`TableCache::open_file`] with the index and filter kept as `placement` says,
    /// whatever the cache's own placement. A reopen after eviction uses the cache's.
    pub(crate) fn open_with(
        &self,
        number: u64,
        file: Arc<dyn FsFile>,
        placement: IndexFilterPlacement,
    ) -> Result<Arc<Table>> {
        let name = filename::table_path(&self.dir, number).display().to_string();
        let file: Arc<dyn ReadAt> = Arc::new(CountedFile::new(file, self.open_files.clone()));
        let table = Table::open_with(file, number, name, Some(self.block_cache.clone()), placement)?;
        let mut dropped = Vec::new();
        let table = self.shard(number).lock().insert(number, table, &mut dropped);
        drop(dropped);
        Ok(table)
    }

    /// Drops the cache's reference to table `number` (its file is no longer live) and
    /// returns it, if the cache held it open.
    pub(crate) fn evict(&self, number: u64) -> Option<Arc<Table>> {
        self.shard(number).lock().remove(number)
    }

    /// What the cache holds now.
    pub(crate) fn stats(&self) -> TableCacheStats {
        let mut stats = TableCacheStats::default();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            stats.tables += shard.map.len();
            stats.pinned_bytes += shard.pinned_bytes;
            stats.hits += shard.hits;
            stats.misses += shard.misses;
        }
        stats.open_files = self.open_files.load(Ordering::Relaxed);
        stats
    }
}

/// The error for a table file that cannot be opened.
fn open_error(path: &Path, e: io::Error) -> Error {
    let name = path.display().to_string();
    match e.kind() {
        io::ErrorKind::NotFound => Error::corruption(name, None, "table listed in the manifest is missing"),
        _ => Error::io(format!("opening {name}"), e),
    }
}

/// A table file handle that counts itself in `open` while it exists.
struct CountedFile {
    file: TableFileAdapter,
    open: Arc<AtomicUsize>,
}

impl CountedFile {
    fn new(file: Arc<dyn FsFile>, open: Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        CountedFile { file: TableFileAdapter(file), open }
    }
}

impl Drop for CountedFile {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ReadAt for CountedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        self.file.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use stampkv_sstable::{TableBuilder, TableOptions};

    fn write_table(fs: &MemFs, dir: &Path, number: u64) {
        let file = fs.create(&filename::table_path(dir, number)).unwrap();
        let mut builder = TableBuilder::new(crate::fs::FileWriter::new(file), TableOptions::default());
        builder.add(format!("key{number}").as_bytes(), 1 << 8, b"value").unwrap();
        let (_, writer) = builder.finish(&[]).unwrap();
        writer.finish_synced().unwrap();
    }

    fn cache(capacity: usize, tables: u64) -> TableCache {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        for number in 1..=tables {
            write_table(&fs, dir, number);
        }
        let placement = IndexFilterPlacement::BlockCache;
        TableCache::new(Arc::new(fs), dir, Arc::new(BlockCache::new(1 << 20)), capacity, placement)
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let cache = cache(3, 5);
        for number in [1, 2, 3, 1, 4] {
            cache.get(number).unwrap();
        }
        // 2 was the least recently used when 4 came in.
        let stats = cache.stats();
        assert_eq!((stats.tables, stats.open_files, stats.hits, stats.misses), (3, 3, 1, 4));
        cache.get(1).unwrap();
        cache.get(3).unwrap();
        assert_eq!(cache.stats().hits, 3);
        cache.get(2).unwrap();
        assert_eq!(cache.stats().misses, 5);
        assert!(cache.stats().pinned_bytes > 0);
    }

    #[test]
    fn a_table_in_use_outlives_its_eviction() {
        let cache = cache(2, 4);
        let held = cache.get(1).unwrap();
        cache.get(2).unwrap();
        cache.get(3).unwrap();
        cache.get(4).unwrap();
        assert_eq!(cache.stats().tables, 2);
        // The evicted table 1 is still open: its holder can read it.
        assert_eq!(cache.stats().open_files, 3);
        assert_eq!(held.get(b"key1", u64::MAX).unwrap().map(|(_, v)| v), Some(b"value".to_vec()));
        drop(held);
        assert_eq!(cache.stats().open_files, 2);
        cache.evict(4);
        assert_eq!((cache.stats().tables, cache.stats().open_files), (1, 1));
    }

    #[test]
    fn shards_never_hold_more_than_the_capacity() {
        let cache = cache(40, 100);
        for number in 1..=100 {
            cache.get(number).unwrap();
            assert!(cache.stats().open_files <= 40);
        }
        assert_eq!(cache.stats().tables, 40);
    }

    #[test]
    fn a_missing_table_is_a_corruption_naming_it() {
        let cache = cache(2, 1);
        let error = cache.get(7).unwrap_err();
        assert!(error.is_corruption(), "{error}");
        assert!(error.to_string().contains("000007.sst"), "{error}");
    }
}
