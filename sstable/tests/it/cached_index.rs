//! Index and filter blocks in the block cache (`IndexFilterPlacement::BlockCache`): reads
//! stay correct while a tiny cache evicts and reloads them, the cache never exceeds its
//! budget, damage found on a reload is corruption, and concurrent readers agree.

use std::io;
use std::sync::{Arc, RwLock};
use std::thread;

use stampkv_sstable::{
    BlockCache, BlockKind, IndexFilterPlacement, ReadAt, Table, TableBuilder, TableError, TableOptions,
    FOOTER_SIZE,
};

use crate::common::{build, Entry, Rng};

/// A table image that a test can damage while the table is open.
struct Mutable(RwLock<Vec<u8>>);

impl ReadAt for Mutable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let bytes = self.0.read().unwrap();
        let start = offset as usize;
        let src = bytes.get(start..start + buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.read().unwrap().len() as u64)
    }
}

/// Entries of table `t`: 16-byte keys `t{t:03}-key-{i:06}` (every third `i`), 40-byte values.
fn entries(t: usize, n: usize) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            let key = format!("t{t:03}-key-{:06}", i * 3).into_bytes();
            (key, 10 + i as u64, format!("value {t} {i} ").repeat(8).into_bytes()[..40].to_vec())
        })
        .collect()
}

fn small_blocks() -> TableOptions {
    TableOptions { block_size: 256, restart_interval: 4, ..TableOptions::default() }
}

fn open_cached(file: Arc<dyn ReadAt>, id: u64, cache: &Arc<BlockCache>) -> Arc<Table> {
    let name = format!("table-{id}.sst");
    Table::open_with(file, id, name, Some(cache.clone()), IndexFilterPlacement::BlockCache).unwrap()
}

#[test]
fn many_tables_in_a_tiny_cache_read_correctly_within_the_budget() {
    const TABLES: usize = 24;
    let capacity = 24 << 10;
    let cache = Arc::new(BlockCache::new(capacity));
    let mut tables = Vec::new();
    let mut all = Vec::new();
    for t in 0..TABLES {
        let entries = entries(t, 150);
        let file: Arc<dyn ReadAt> = Arc::new(build(&entries, small_blocks()));
        let table = open_cached(file, t as u64 + 1, &cache);
        assert_eq!(table.index_filter_placement(), IndexFilterPlacement::BlockCache);
        assert!(cache.usage_bytes() <= capacity);
        tables.push(table);
        all.push(entries);
    }
    // An open table pins only its properties and handles: far less than its index.
    let pinned = tables[0].pinned_memory_bytes() as u64;
    assert!(pinned < 1024 && pinned < tables[0].properties().index_bytes, "{pinned} bytes pinned");
    let pinned_open = open_pinned(&all[0]);
    assert!(pinned_open.pinned_memory_bytes() as u64 > pinned + tables[0].properties().index_bytes - 5);

    let mut rng = Rng::new(7);
    for step in 0..3000 {
        let t = rng.index(TABLES);
        let (table, entries) = (&tables[t], &all[t]);
        let i = rng.index(entries.len());
        let (user, trailer, value) = &entries[i];
        match step % 10 {
            0..=5 => assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone()))),
            6 | 7 => {
                // Absent keys: between two present ones, and past the table's range.
                let absent = format!("t{t:03}-key-{:06}", i * 3 + 1).into_bytes();
                assert_eq!(table.get(&absent, u64::MAX).unwrap(), None);
                assert_eq!(table.get(b"zzz", u64::MAX).unwrap(), None);
            }
            8 => {
                let mut it = table.iter();
                it.seek(user, *trailer).unwrap();
                for (u, tr, v) in entries[i..].iter().take(20) {
                    assert!(it.valid());
                    assert_eq!((it.user_key(), it.trailer(), it.value()), (&u[..], *tr, &v[..]));
                    it.next().unwrap();
                }
            }
            _ => {
                let mut it = table.iter();
                it.seek_to_last().unwrap();
                for (u, _, _) in entries.iter().rev().take(10) {
                    assert_eq!(it.user_key(), &u[..]);
                    it.prev().unwrap();
                }
            }
        }
        assert!(cache.usage_bytes() <= capacity, "step {step}: {} > {capacity}", cache.usage_bytes());
    }
    let counters = cache.counters();
    // Everything was cached at open: every miss is a reload after an eviction.
    assert!(counters.index_misses > TABLES as u64, "{counters:?}");
    assert!(counters.filter_misses > TABLES as u64, "{counters:?}");
    assert!(counters.index_hits > 0 && counters.filter_hits > 0 && counters.data_misses > 0, "{counters:?}");
    assert!(cache.entry_count_of(BlockKind::Index) < TABLES, "no index was evicted");
    assert!(cache.entry_count_of(BlockKind::Data) > 0);
}

fn open_pinned(entries: &[Entry]) -> Arc<Table> {
    let file: Arc<dyn ReadAt> = Arc::new(build(entries, small_blocks()));
    Table::open(file, 99, "pinned.sst".into(), None).unwrap()
}

#[test]
fn index_and_filter_outrank_data_blocks() {
    // One table's index and filter, then a flood of another table's data blocks: the
    // metadata survives longer than data blocks inserted after it.
    let cache = Arc::new(BlockCache::new(32 << 10));
    let first = entries(0, 150);
    let table = open_cached(Arc::new(build(&first, small_blocks())), 1, &cache);
    let other = entries(1, 2000);
    let flood = open_cached(Arc::new(build(&other, small_blocks())), 2, &cache);
    let before = cache.counters();
    assert!(table.get(&first[0].0, first[0].1).unwrap().is_some());
    // Read just enough of the other table to fill the cache once (not three times).
    let mut it = flood.iter();
    it.seek_to_first().unwrap();
    for _ in 0..300 {
        it.next().unwrap();
    }
    assert!(table.get(&first[1].0, first[1].1).unwrap().is_some());
    let after = cache.counters();
    assert_eq!(after.index_misses, before.index_misses, "the index was evicted before data blocks");
    assert_eq!(after.filter_misses, before.filter_misses, "the filter was evicted before data blocks");
    assert!(after.data_misses > before.data_misses + 20, "{after:?}");
}

/// A table built from `entries` in a mutable file, opened with a cache, and its blocks' offsets.
struct Victim {
    file: Arc<Mutable>,
    table: Arc<Table>,
    index_offset: u64,
    filter_offset: u64,
}

fn victim(entries: &[Entry], cache: &Arc<BlockCache>) -> Victim {
    let bytes = build(entries, small_blocks());
    let file = Arc::new(Mutable(RwLock::new(bytes)));
    let table = open_cached(file.clone(), 1, cache);
    let p = table.properties();
    let index_offset = table.file_size() - FOOTER_SIZE as u64 - p.index_bytes;
    let filter_offset = p.data_bytes; // the filter is the first block after the data region
    Victim { file, table, index_offset, filter_offset }
}

/// Reads enough of an unrelated table (in a 16 KiB cache) to evict every block of table 1.
fn flood(cache: &Arc<BlockCache>) {
    let other = entries(9, 6000);
    let table = open_cached(Arc::new(build(&other, small_blocks())), 2, cache);
    for _ in 0..4 {
        let mut it = table.iter();
        it.seek_to_first().unwrap();
        while it.valid() {
            it.next().unwrap();
        }
    }
    // The flooding table's index (over 16 KiB) never fits, and scans never look up its
    // filter: no index or filter is left at all.
    assert!(table.properties().index_bytes > 16 << 10);
    assert_eq!(cache.entry_count_of(BlockKind::Index), 0, "an index survived the flood");
    assert_eq!(cache.entry_count_of(BlockKind::Filter), 0, "a filter survived the flood");
}

fn assert_corruption_at(result: Result<impl std::fmt::Debug, TableError>, offset: u64) {
    match result {
        Err(TableError::Corruption { file, offset: at, .. }) => {
            assert_eq!((file.as_str(), at), ("table-1.sst", offset));
        }
        other => panic!("expected corruption at offset {offset}, got {other:?}"),
    }
}

#[test]
fn a_damaged_index_is_corruption_when_reloaded() {
    let cache = Arc::new(BlockCache::new(16 << 10));
    let entries = entries(0, 150);
    let v = victim(&entries, &cache);
    let (user, trailer, value) = &entries[70];
    assert_eq!(v.table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    // Damage a byte in the middle of the index block: the cached copy still serves reads.
    v.file.0.write().unwrap()[v.index_offset as usize + 20] ^= 0x10;
    assert_eq!(v.table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    flood(&cache);
    let misses = cache.counters().index_misses;
    assert_corruption_at(v.table.get(user, *trailer), v.index_offset);
    assert_corruption_at(v.table.iter().seek_to_first(), v.index_offset);
    let mut it = v.table.iter();
    assert_corruption_at(it.seek(user, *trailer), v.index_offset);
    assert!(!it.valid());
    // Nothing damaged was cached: every read tried (and failed) to reload it.
    assert_eq!(cache.counters().index_misses, misses + 3);
    // Undo the damage: the table reads again.
    v.file.0.write().unwrap()[v.index_offset as usize + 20] ^= 0x10;
    assert_eq!(v.table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
}

#[test]
fn a_damaged_filter_is_corruption_when_reloaded() {
    let cache = Arc::new(BlockCache::new(16 << 10));
    let entries = entries(0, 150);
    let v = victim(&entries, &cache);
    let (user, trailer, _) = &entries[3];
    v.file.0.write().unwrap()[v.filter_offset as usize + 7] ^= 0x01;
    flood(&cache);
    assert_corruption_at(v.table.get(user, *trailer), v.filter_offset);
    assert_corruption_at(v.table.may_contain(b"t000-key-000001"), v.filter_offset);
    // Scans do not use the filter.
    let mut it = v.table.iter();
    it.seek_to_first().unwrap();
    assert_eq!(it.user_key(), &entries[0].0[..]);
}

#[test]
fn a_damaged_trailer_or_truncation_is_corruption_when_reloaded() {
    let cache = Arc::new(BlockCache::new(16 << 10));
    let entries = entries(0, 150);
    let v = victim(&entries, &cache);
    let (user, trailer, _) = &entries[100];
    let index_end = v.table.file_size() - FOOTER_SIZE as u64;
    // The checksum byte of the index block's trailer.
    v.file.0.write().unwrap()[index_end as usize - 1] ^= 0xFF;
    flood(&cache);
    assert_corruption_at(v.table.get(user, *trailer), v.index_offset);
    // A file cut short under the open table: a read error, never a panic or wrong data.
    v.file.0.write().unwrap().truncate(v.index_offset as usize + 8);
    assert!(v.table.get(user, *trailer).is_err());
}

#[test]
fn concurrent_readers_share_reloaded_blocks() {
    let cache = Arc::new(BlockCache::new(20 << 10)); // small: constant eviction
    let all: Arc<Vec<Vec<Entry>>> = Arc::new((0..6).map(|t| entries(t, 300)).collect());
    let tables: Arc<Vec<Arc<Table>>> = Arc::new(
        all.iter()
            .enumerate()
            .map(|(t, e)| open_cached(Arc::new(build(e, small_blocks())), t as u64 + 1, &cache))
            .collect(),
    );
    let workers: Vec<_> = (0..4u64)
        .map(|w| {
            let (tables, all, cache) = (tables.clone(), all.clone(), cache.clone());
            thread::spawn(move || {
                let mut rng = Rng::new(w);
                for _ in 0..1500 {
                    let t = rng.index(tables.len());
                    let (user, trailer, value) = &all[t][rng.index(all[t].len())];
                    assert_eq!(tables[t].get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
                    assert!(cache.usage_bytes() <= 20 << 10);
                }
                let t = w as usize % tables.len();
                let mut it = tables[t].iter();
                it.seek_to_first().unwrap();
                let mut n = 0;
                while it.valid() {
                    assert_eq!(it.user_key(), &all[t][n].0[..]);
                    n += 1;
                    it.next().unwrap();
                }
                assert_eq!(n, all[t].len());
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let counters = cache.counters();
    assert!(counters.index_misses > 0 && counters.filter_misses > 0, "{counters:?}");
}

#[test]
fn a_pass_without_caching_uses_cached_blocks_but_adds_none() {
    let entries = entries(0, 600);
    let file: Arc<dyn ReadAt> = Arc::new(build(&entries, small_blocks()));
    let cache = Arc::new(BlockCache::new(4 << 20));
    let table = open_cached(file, 1, &cache);
    let after_open = cache.usage_bytes();

    // A one-pass scan returns everything and leaves the cache as it was.
    let scan = |mut iter: stampkv_sstable::TableIter| {
        let mut seen = Vec::new();
        iter.seek_to_first().unwrap();
        while iter.valid() {
            seen.push(iter.user_key().to_vec());
            iter.next().unwrap();
        }
        seen
    };
    let keys: Vec<Vec<u8>> = entries.iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(scan(table.iter_without_caching()), keys);
    assert_eq!(cache.usage_bytes(), after_open, "a pass without caching added blocks");

    // A caching scan fills the cache; the next pass without caching hits every block.
    assert_eq!(scan(table.iter()), keys);
    let filled = cache.usage_bytes();
    assert!(filled > after_open + 600 * 40, "cache grew only to {filled}");
    let (hits_before, misses_before) = cache.hit_stats();
    assert_eq!(scan(table.iter_without_caching()), keys);
    let (hits, misses) = cache.hit_stats();
    assert_eq!(misses, misses_before, "a cached block was read again");
    assert!(hits > hits_before + 50, "{} hits", hits - hits_before);
    assert_eq!(cache.usage_bytes(), filled);
}

/// A file that counts the bytes read from it.
struct Counted {
    inner: Arc<Mutable>,
    bytes_read: std::sync::atomic::AtomicU64,
}

impl ReadAt for Counted {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.bytes_read.fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_exact_at(buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
}

fn open_on_first_use(file: Arc<Counted>, cache: &Arc<BlockCache>) -> Arc<Table> {
    let placement = IndexFilterPlacement::BlockCacheOnFirstUse;
    Table::open_with(file, 1, "table-1.sst".into(), Some(cache.clone()), placement).unwrap()
}

#[test]
fn an_open_on_first_use_reads_index_and_filter_only_when_a_lookup_needs_them() {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let entries = entries(0, 600);
    let v = victim(&entries, &cache);
    let p = v.table.properties().clone();
    let counted = |v: &Victim| Arc::new(Counted { inner: v.file.clone(), bytes_read: Default::default() });

    // Reopened while the first open's index and filter are cached: open reads only the
    // footer, metaindex and properties, and lookups read nothing more than data blocks.
    let file = counted(&v);
    let table = open_on_first_use(file.clone(), &cache);
    let opened = file.bytes_read.load(std::sync::atomic::Ordering::Relaxed);
    assert!(opened < 1024 && opened < p.index_bytes && opened < p.filter_bytes, "open read {opened} bytes");
    let before = cache.counters();
    for (user, trailer, value) in entries.iter().step_by(7) {
        assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    }
    let after = cache.counters();
    assert_eq!((after.index_misses, after.filter_misses), (before.index_misses, before.filter_misses));

    // In a cache that never saw the table: open still reads neither block; the first
    // lookups read each once, verified, and the answers are the same.
    let fresh = Arc::new(BlockCache::new(1 << 20));
    let file = counted(&v);
    let table = open_on_first_use(file.clone(), &fresh);
    assert!(file.bytes_read.load(std::sync::atomic::Ordering::Relaxed) < 1024);
    assert_eq!(table.get(b"t000-key-000001", u64::MAX).unwrap(), None);
    let c = fresh.counters();
    assert_eq!((c.filter_misses, c.index_misses), (1, 0), "an absent key needs only the filter: {c:?}");
    for (user, trailer, value) in entries.iter().step_by(5) {
        assert_eq!(table.get(user, *trailer).unwrap(), Some((*trailer, value.clone())));
    }
    let c = fresh.counters();
    assert_eq!((c.filter_misses, c.index_misses), (1, 1), "{c:?}");
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        assert_eq!(it.user_key(), &entries[n].0[..]);
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, entries.len());
}

#[test]
fn an_open_on_first_use_finds_damage_when_the_blocks_are_first_read() {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let entries = entries(0, 150);
    let v = victim(&entries, &cache);
    let (user, trailer, _) = &entries[40];
    v.file.0.write().unwrap()[v.index_offset as usize + 20] ^= 0x10;
    v.file.0.write().unwrap()[v.filter_offset as usize + 7] ^= 0x01;
    // The open itself reads neither damaged block and succeeds; every lookup that needs
    // one reports corruption at its offset instead of returning data.
    let fresh = Arc::new(BlockCache::new(1 << 20));
    let file = Arc::new(Counted { inner: v.file.clone(), bytes_read: Default::default() });
    let table = open_on_first_use(file, &fresh);
    assert_corruption_at(table.get(user, *trailer), v.filter_offset);
    assert_corruption_at(table.iter().seek_to_first(), v.index_offset);
    // Damage in what open does read (the footer) still fails the open.
    let len = v.file.0.read().unwrap().len();
    v.file.0.write().unwrap()[len - 2] ^= 0x40;
    let file = Arc::new(Counted { inner: v.file.clone(), bytes_read: Default::default() });
    let placement = IndexFilterPlacement::BlockCacheOnFirstUse;
    assert!(Table::open_with(file, 1, "table-1.sst".into(), Some(fresh), placement).is_err());
}

#[test]
fn a_table_built_into_the_cache_is_read_whole_from_it() {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let entries = entries(0, 2000);
    let mut builder = TableBuilder::new(Vec::new(), small_blocks());
    builder.fill_block_cache(cache.clone(), 7);
    for (user, trailer, value) in &entries {
        builder.add(user, *trailer, value).unwrap();
    }
    let (summary, bytes) = builder.finish(&[]).unwrap();
    let blocks = summary.properties.data_block_count;
    assert!(blocks > 100, "{blocks} data blocks");
    assert_eq!(cache.entry_count_of(BlockKind::Data) as u64, blocks, "every data block cached once");
    let table = open_cached(Arc::new(bytes), 7, &cache);
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    let mut seen = Vec::new();
    while it.valid() {
        seen.push((it.user_key().to_vec(), it.trailer(), it.value().to_vec()));
        it.next().unwrap();
    }
    assert!(seen == entries, "a scan of the cached blocks reads the table's entries");
    let scanned = cache.counters();
    assert_eq!(scanned.data_misses, 0, "the scan read a block from the file: {scanned:?}");
    assert!(scanned.data_hits >= blocks, "{scanned:?}");
    // Point reads and seeks find the same entries in the cached blocks.
    for (user, trailer, value) in entries.iter().step_by(97) {
        let mut it = table.iter();
        it.seek(user, *trailer).unwrap();
        assert!(it.valid() && it.user_key() == &user[..] && it.value() == &value[..]);
    }
    assert_eq!(cache.counters().data_misses, 0);
    // Its file going away, the table takes every block it put in the cache out again:
    // data, index and filter.
    assert_eq!(table.evict_from_block_cache(), blocks);
    assert_eq!((cache.entry_count(), cache.usage_bytes()), (0, 0));
}

/// Builds a table of `entries` with its data blocks put into `cache` as `fill` says, and
/// opens it with its index and filter pinned.
fn build_filling(
    entries: &[Entry],
    id: u64,
    cache: &Arc<BlockCache>,
    fill: fn(&mut TableBuilder<Vec<u8>>, Arc<BlockCache>, u64),
) -> (Arc<Table>, u64) {
    let mut builder = TableBuilder::new(Vec::new(), small_blocks());
    fill(&mut builder, cache.clone(), id);
    for (user, trailer, value) in entries {
        builder.add(user, *trailer, value).unwrap();
    }
    let (summary, bytes) = builder.finish(&[]).unwrap();
    // Index and filter pinned: only data blocks compete for the cache.
    let name = format!("table-{id}.sst");
    let placement = IndexFilterPlacement::Pinned;
    let table = Table::open_with(Arc::new(bytes), id, name, Some(cache.clone()), placement).unwrap();
    (table, summary.properties.data_block_count)
}

/// Scans `table` and returns the data-block (hits, misses) the scan added.
fn scan_counts(table: &Arc<Table>, cache: &BlockCache) -> (u64, u64) {
    let before = cache.counters();
    let mut it = table.iter_without_caching();
    it.seek_to_first().unwrap();
    while it.valid() {
        it.next().unwrap();
    }
    let after = cache.counters();
    (after.data_hits - before.data_hits, after.data_misses - before.data_misses)
}

#[test]
fn a_table_built_into_free_room_takes_what_fits_and_evicts_nothing() {
    // One shard of 160 KiB: the first table (~150 blocks of ~300 bytes) fits, the second
    // (~500 blocks) only in part.
    let cache = Arc::new(BlockCache::new(160 << 10));
    let (first, first_blocks) = build_filling(&entries(0, 600), 1, &cache, TableBuilder::fill_block_cache);
    assert!(first_blocks > 40, "{first_blocks} blocks");
    let held = cache.entry_count_of(BlockKind::Data) as u64;
    assert_eq!(held, first_blocks, "the first table fits whole");
    let (second, second_blocks) =
        build_filling(&entries(1, 2000), 2, &cache, TableBuilder::fill_block_cache_free_room);
    let both = cache.entry_count_of(BlockKind::Data) as u64;
    assert!(both > held, "nothing of the second table was cached");
    assert!(both < held + second_blocks, "the second table fit whole: make the cache smaller");
    assert!(cache.usage_bytes() <= cache.capacity_bytes());
    // The first table's blocks are all still there; the second's are partly.
    assert_eq!(scan_counts(&first, &cache), (first_blocks, 0));
    let (hits, misses) = scan_counts(&second, &cache);
    assert_eq!(hits, both - held);
    assert_eq!(hits + misses, second_blocks);

    // A table going away takes its blocks with it, and only its own.
    let usage = cache.usage_bytes();
    assert_eq!(second.evict_from_block_cache(), second_blocks);
    assert_eq!(cache.entry_count_of(BlockKind::Data) as u64, held);
    assert!(cache.usage_bytes() < usage);
    assert_eq!(scan_counts(&first, &cache), (first_blocks, 0));
    assert_eq!(scan_counts(&second, &cache), (0, second_blocks));
    // Freed room is filled again by the next table built into free room.
    let (third, third_blocks) =
        build_filling(&entries(2, 300), 3, &cache, TableBuilder::fill_block_cache_free_room);
    assert_eq!(scan_counts(&third, &cache), (third_blocks, 0));
    first.evict_from_block_cache();
    third.evict_from_block_cache();
    assert_eq!(cache.entry_count_of(BlockKind::Data), 0);
    assert_eq!(cache.usage_bytes(), 0);
}
