//! The table cache with very few open files (`max_open_files` 2 to 4) and many tables:
//! reads, scans and iterators held across evictions and across compactions that replace
//! the files they read, reopens, all against a `BTreeMap` model; the number of open table
//! files stays within the capacity plus the tables readers hold; a table damaged while it
//! is closed is reported as corruption when a read opens it again.

use crate::common::{env_or, Rng};
use stampkv_engine::fs::{Fs, MemFs};
use stampkv_engine::{BackgroundMode, Db, DbIter, Options, SyncMode, TableFileInfo};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/tcache-db";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(max_open_files: usize) -> Options {
    let mut options = Options::tiny_for_tests();
    options.max_open_files = max_open_files;
    options.background = BackgroundMode::Inline;
    options.target_file_size = 2 << 10;
    options
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Tables one forward cursor may hold: one per level-0 file, one per other non-empty level.
fn tables_one_cursor_holds(files: &[TableFileInfo]) -> usize {
    let level0 = files.iter().filter(|f| f.level == 0).count();
    let mut deeper: Vec<usize> = files.iter().filter(|f| f.level > 0).map(|f| f.level).collect();
    deeper.dedup();
    level0 + deeper.len()
}

/// An iterator kept open while the database changes, with what it must still yield.
struct HeldIter {
    iter: DbIter,
    expected: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    /// Tables it may hold open.
    holds: usize,
}

impl HeldIter {
    /// Advances `steps` entries, checking each; false once exhausted.
    fn advance(&mut self, steps: usize) -> bool {
        for _ in 0..steps {
            let got = self.iter.next().map(|r| r.expect("iterator read"));
            let want = self.expected.next();
            match (got, want) {
                (None, None) => return false,
                (Some(entry), Some((k, v))) => assert_eq!((entry.key, entry.value), (k, v)),
                (got, want) => panic!("held iterator: got {got:?}, expected {want:?}"),
            }
        }
        true
    }
}

/// Table files in the directory (live ones plus obsolete ones not yet removed).
fn sst_files(fs: &MemFs) -> usize {
    fs.list(Path::new(DIR)).unwrap().iter().filter(|n| n.ends_with(".sst")).count()
}

fn check_open_files(db: &Db, capacity: usize, held: &[HeldIter]) {
    let stats = db.stats();
    assert!(stats.open_tables <= capacity, "{} tables cached, capacity {capacity}", stats.open_tables);
    let in_use: usize = held.iter().map(|h| h.holds).sum();
    assert!(
        stats.open_table_files <= capacity + in_use,
        "{} table files open, capacity {capacity}, {in_use} held by iterators",
        stats.open_table_files
    );
}

fn run_model(seed: u64, capacity: usize, steps: usize) {
    let mut rng = Rng::new(seed);
    let fs = MemFs::new();
    let open = |fs: &MemFs| Db::open_with_fs(Arc::new(fs.clone()), DIR, options(capacity)).unwrap();
    let mut db = open(&fs);
    let mut model = Model::new();
    let mut held: Vec<HeldIter> = Vec::new();
    let mut most_tables = 0;
    for step in 0..steps {
        match rng.below(100) {
            0..=49 => {
                let k = key(rng.below(2000));
                let v = format!("v{step}-{}", "x".repeat(rng.index(150))).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            50..=57 => {
                let k = key(rng.below(2000));
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            58..=79 => {
                let k = key(rng.below(2100));
                assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "seed {seed} step {step} get");
            }
            80..=85 => {
                let (a, b) = (rng.below(2100), rng.below(2100));
                let (lo, hi) = (key(a.min(b)), key(a.max(b)));
                let want: Vec<_> =
                    model.range(lo.clone()..hi.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
                let mut got: Vec<_> = db
                    .range(lo.as_slice()..hi.as_slice())
                    .map(|e| e.map(|e| (e.key, e.value)))
                    .collect::<Result<_, _>>()
                    .unwrap();
                if rng.chance(50) {
                    got = db
                        .range(lo.as_slice()..hi.as_slice())
                        .rev()
                        .map(|e| e.map(|e| (e.key, e.value)))
                        .collect::<Result<Vec<_>, _>>()
                        .unwrap();
                    got.reverse();
                }
                assert_eq!(got, want, "seed {seed} step {step} scan");
            }
            86..=89 if held.len() < 6 => {
                let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                let holds = tables_one_cursor_holds(&db.table_files());
                let mut h = HeldIter { iter: db.iter(), expected: expected.into_iter(), holds };
                h.advance(1);
                held.push(h);
            }
            90..=95 if !held.is_empty() => {
                let i = rng.index(held.len());
                let steps = 1 + rng.index(40);
                if !held[i].advance(steps) || rng.chance(20) {
                    held.swap_remove(i);
                }
            }
            96 => db.compact().unwrap(),
            97 => {
                held.clear();
                db.close().unwrap();
                db = open(&fs);
            }
            _ => db.flush().unwrap(),
        }
        most_tables = most_tables.max(db.table_files().len());
        check_open_files(&db, capacity, &held);
    }
    // The held iterators read the files compactions replaced to the end.
    for mut h in held.drain(..) {
        while h.advance(64) {}
    }
    let stats = db.stats();
    assert_eq!(stats.open_table_files, stats.open_tables, "no reader left: only cached tables are open");
    assert_eq!(sst_files(&fs), db.table_files().len(), "obsolete tables are removed once unused");
    assert!(most_tables > 3 * capacity, "seed {seed}: only {most_tables} tables, too few to evict");
    assert!(stats.table_cache_hits_misses.1 > 0 && stats.table_cache_hits_misses.0 > 0);
    let all: Vec<_> = db.iter().map(|e| e.map(|e| (e.key, e.value))).collect::<Result<_, _>>().unwrap();
    assert_eq!(all, model.into_iter().collect::<Vec<_>>(), "seed {seed}: final contents");
    db.close().unwrap();
}

#[test]
fn model_with_two_to_four_open_tables() {
    for (seed, capacity) in [(1, 2), (2, 3), (3, 4)] {
        run_model(seed, capacity, env_or("STAMPKV_TCACHE_STEPS", 3000) as usize);
    }
}

/// A database whose data sits in many files of the last level, and the files.
fn spread_over_many_files(fs: &MemFs, capacity: usize) -> (Db, Model, Vec<TableFileInfo>) {
    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options(capacity)).unwrap();
    let mut model = Model::new();
    for i in 0..1500 {
        let (k, v) = (key(i), format!("value {i} {}", "y".repeat(40)).into_bytes());
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.compact().unwrap();
    let files = db.table_files();
    assert!(files.len() >= 8 && files.iter().all(|f| f.level == files[0].level), "{files:?}");
    (db, model, files)
}

#[test]
fn tables_in_use_stay_open_beyond_the_capacity_and_close_after() {
    let fs = MemFs::new();
    let capacity = 2;
    let (db, model, files) = spread_over_many_files(&fs, capacity);
    // One iterator positioned in each file: each holds its file open.
    let mut held: Vec<HeldIter> = files
        .iter()
        .map(|f| {
            let expected: Vec<_> =
                model.range(f.smallest_key.clone()..).map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut h = HeldIter {
                iter: db.range(f.smallest_key.as_slice()..),
                expected: expected.into_iter(),
                holds: 1,
            };
            assert!(h.advance(1));
            h
        })
        .collect();
    let stats = db.stats();
    assert!(stats.open_tables <= capacity);
    assert_eq!(stats.open_table_files, files.len(), "every file in use is open, and nothing else");
    // Reads elsewhere evict and reopen; the held iterators read on, across file boundaries.
    for i in 0..held.len() {
        let k = key(i as u64 * 97 % 1500);
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
        held[i].advance(150);
        check_open_files(&db, capacity, &held);
    }
    drop(held);
    let stats = db.stats();
    assert!(stats.open_table_files <= capacity, "{} files open with no reader", stats.open_table_files);
    assert_eq!(stats.open_table_files, stats.open_tables);
    db.close().unwrap();
}

#[test]
fn concurrent_readers_with_two_open_tables() {
    let fs = MemFs::new();
    let (db, model, _) = spread_over_many_files(&fs, 2);
    let db = Arc::new(db);
    let model = Arc::new(model);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (db, model) = (db.clone(), model.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + t);
                for _ in 0..2000 {
                    let k = key(rng.below(1600));
                    assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
                }
                let lo = key(rng.below(1500));
                let scanned = db.range(lo.as_slice()..).take(200).count();
                assert_eq!(scanned, model.range(lo..).take(200).count());
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = db.stats();
    assert!(stats.open_table_files <= 2 && stats.open_tables <= 2, "{stats:?}");
}

#[cfg(unix)]
/// Writes 1,500 keys into a new database at `dir`, compacts it and closes it; its tables.
fn write_compacted(dir: &Path, options: &Options) -> Vec<TableFileInfo> {
    let db = Db::open(dir, options.clone()).unwrap();
    for i in 0..1500 {
        db.put(&key(i), format!("value {i} {}", "z".repeat(40)).as_bytes()).unwrap();
    }
    db.compact().unwrap();
    let files = db.table_files();
    db.close().unwrap();
    files
}

#[test]
fn a_table_damaged_while_closed_is_a_corruption_when_reopened() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let options = options(2);
    let files = write_compacted(&dir, &options);
    assert!(files.len() >= 4);
    let db = Db::open(&dir, options).unwrap();
    let victim = &files[files.len() / 2];
    let name = format!("{:06}.sst", victim.number);
    // Damage the footer, then read two other tables so the cache closes the victim.
    let path = dir.join(&name);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xA5; 16], len - 16).unwrap();
    drop(file);
    for other in [&files[0], &files[files.len() - 1]] {
        assert!(db.get(&other.smallest_key).unwrap().is_some());
    }
    let error = db.get(&victim.smallest_key).unwrap_err();
    assert!(error.is_corruption(), "{error}");
    assert!(error.to_string().contains(&name), "{error}");
    let scan: Result<Vec<_>, _> =
        db.range(victim.smallest_key.as_slice()..=victim.largest_key.as_slice()).collect();
    let error = scan.unwrap_err();
    assert!(error.is_corruption() && error.to_string().contains(&name), "{error}");
    // The other tables still read.
    assert!(db.get(&files[0].largest_key).unwrap().is_some());
    drop(db);
}

/// Options for the tests of index and filter blocks in the block cache: every table stays
/// open, the block cache holds 16 KiB.
fn tiny_block_cache(cache_index_and_filter_blocks: bool) -> Options {
    let mut options = options(1000);
    options.block_cache_bytes = 16 << 10;
    options.cache_index_and_filter_blocks = cache_index_and_filter_blocks;
    options
}

#[test]
fn index_and_filter_blocks_cycle_through_a_tiny_block_cache() {
    let fs = MemFs::new();
    let options = tiny_block_cache(true);
    let budget = options.block_cache_bytes as u64;
    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options).unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(11);
    for i in 0..2000 {
        let (k, v) = (key(rng.below(3000)), format!("value {i} {}", "w".repeat(rng.index(60))).into_bytes());
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    let tables = db.table_files().len();
    assert!(tables >= 20, "only {tables} tables");
    let before = db.stats().block_cache_index_filter_hits_misses;
    for step in 0..2000 {
        if step % 50 == 0 {
            let lo = key(rng.below(3000));
            let got: Vec<_> = db
                .range(lo.as_slice()..)
                .take(30)
                .map(|e| e.map(|e| (e.key, e.value)))
                .collect::<Result<_, _>>()
                .unwrap();
            let want: Vec<_> = model.range(lo..).take(30).map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(got, want, "step {step} scan");
        } else {
            let k = key(rng.below(3100));
            assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "step {step} get");
        }
        let stats = db.stats();
        assert!(stats.block_cache_bytes <= budget, "step {step}: {} bytes cached", stats.block_cache_bytes);
    }
    let stats = db.stats();
    assert_eq!(stats.open_tables, tables, "every table stays open");
    // Each table's index and filter went into the cache when the table was opened: these
    // misses are reloads after evictions.
    let (hits, misses) = stats.block_cache_index_filter_hits_misses;
    assert!(misses - before.1 > tables as u64 && hits > before.0, "{stats:?}");
    // What stays pinned is small and constant per open table; the memory total is bounded
    // by the configuration.
    let per_table = stats.pinned_table_bytes / tables as u64;
    println!("{per_table} bytes pinned per open table ({tables} tables)");
    assert!(per_table < 1024, "{per_table} bytes pinned per open table");
    assert!(stats.memory_bytes() <= stats.memtable_bytes + budget + 1024 * tables as u64);
    db.close().unwrap();

    // The same database with the index and filter pinned: several times the memory.
    let db = Db::open_with_fs(Arc::new(fs), DIR, tiny_block_cache(false)).unwrap();
    assert_eq!(db.get(&key(0)).unwrap(), model.get(&key(0)).cloned());
    let pinned = db.stats();
    assert_eq!(pinned.block_cache_index_filter_hits_misses, (0, 0));
    println!("pinned index and filter: {} bytes per open table", pinned.pinned_table_bytes / tables as u64);
    assert!(pinned.pinned_table_bytes > 2 * stats.pinned_table_bytes, "{pinned:?}");
    db.close().unwrap();
}

#[test]
fn level0_tables_keep_their_index_and_filter_and_deeper_tables_leave_them_to_the_cache() {
    let fs = MemFs::new();
    let mut options = tiny_block_cache(true);
    options.block_cache_bytes = 1 << 20;
    options.write_buffer_size = 256 << 10;
    options.l0_compaction_trigger = 4;
    let db = Db::open_with_fs(Arc::new(fs), DIR, options).unwrap();
    let mut model = Model::new();
    // Two overlapping level-0 tables, so that compacting them writes a new table.
    for round in 0..2 {
        for i in 0..300u64 {
            let (k, v) = (key(i * 7 % 1000), format!("value {i} of round {round}").into_bytes());
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
    }
    let files = db.table_files();
    let level0 = files.iter().filter(|f| f.level == 0).count();
    assert!(level0 == 2 && level0 == files.len(), "{files:?}");
    // Gets through level 0 look nothing up in the cache but data blocks.
    let flushed = db.stats();
    for i in 0..1000u64 {
        assert_eq!(db.get(&key(i)).unwrap(), model.get(&key(i)).cloned(), "get {i}");
    }
    let read = db.stats();
    assert_eq!(read.block_cache_index_filter_hits_misses, flushed.block_cache_index_filter_hits_misses);
    let per_level0_table = read.pinned_table_bytes / level0 as u64;
    // Compacted below level 0, the same data's index and filter go through the cache.
    db.compact().unwrap();
    assert!(db.table_files().iter().all(|f| f.level > 0), "{:?}", db.table_files());
    for i in 0..1000u64 {
        assert_eq!(db.get(&key(i)).unwrap(), model.get(&key(i)).cloned(), "get {i} after compaction");
    }
    let compacted = db.stats();
    let (hits, misses) = compacted.block_cache_index_filter_hits_misses;
    assert!(hits + misses > read.block_cache_index_filter_hits_misses.0 + 1000, "{compacted:?}");
    let per_table = compacted.pinned_table_bytes / compacted.open_tables.max(1) as u64;
    assert!(per_table < 1024, "{per_table} bytes pinned per open table");
    // A level-0 table held its index (one entry per 256-byte block) and filter besides.
    assert!(
        per_level0_table > per_table + 500,
        "level 0: {per_level0_table}, deeper: {per_table} bytes per table"
    );
    db.close().unwrap();
}

#[cfg(unix)]
#[test]
fn an_index_damaged_under_an_open_table_is_a_corruption_when_reloaded() {
    index_damage_is_a_corruption_when_reloaded(1000);
}

#[cfg(unix)]
#[test]
fn an_index_damaged_under_a_closed_table_is_a_corruption_when_a_read_reopens_it() {
    // Two open tables at most: the victim is closed and reopened without reading its
    // index and filter, which the first read after the reopen then reads and verifies.
    index_damage_is_a_corruption_when_reloaded(2);
}

#[cfg(unix)]
fn index_damage_is_a_corruption_when_reloaded(max_open_files: usize) {
    use stampkv_sstable::{ReadAt, Table, FOOTER_SIZE};
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let mut options = tiny_block_cache(true);
    options.max_open_files = max_open_files;
    options.sync_mode = SyncMode::Buffered; // no fdatasync per put: the test is about reads
    let files = write_compacted(&dir, &options);
    assert!(files.len() >= 8);
    let db = Db::open(&dir, options).unwrap();
    let victim = &files[files.len() - 2];
    assert!(db.get(&victim.smallest_key).unwrap().is_some());
    let name = format!("{:06}.sst", victim.number);
    let path = dir.join(&name);
    let index_offset = {
        let file: Arc<dyn ReadAt> = Arc::new(std::fs::File::open(&path).unwrap());
        let table = Table::open(file, 1, name.clone(), None).unwrap();
        table.file_size() - FOOTER_SIZE as u64 - table.properties().index_bytes
    };
    // Damage the index block of the open table, then read the tables before it so that its
    // index and filter are evicted from the cache.
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut byte = [0u8];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut byte, index_offset + 10).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[byte[0] ^ 0x04], index_offset + 10).unwrap();
    drop(file);
    let misses = db.stats().block_cache_index_filter_hits_misses.1;
    for _ in 0..3 {
        let scanned = db.range(..files[files.len() - 3].largest_key.as_slice()).count();
        assert!(scanned > 1000);
    }
    assert!(db.stats().block_cache_index_filter_hits_misses.1 > misses, "nothing was reloaded");
    let error = db.get(&victim.smallest_key).unwrap_err();
    assert!(error.is_corruption(), "{error}");
    assert!(error.to_string().contains(&name), "{error}");
    assert_eq!(db.stats().open_tables, files.len().min(max_open_files), "tables open");
    if max_open_files < files.len() {
        assert!(db.stats().table_cache_hits_misses.1 > files.len() as u64, "no table was reopened");
    }
    // The other tables still read.
    assert!(db.get(&files[0].largest_key).unwrap().is_some());
    assert!(db.get(&files[files.len() - 1].largest_key).unwrap().is_some());
    drop(db);
}

/// Loads 6,000 keys through flushes and compactions into tables of 64 KiB; returns the
/// database and what it holds.
fn load_through_compactions(prepopulate: bool, cache_bytes: usize) -> (Db, Model) {
    let mut options = options(1000);
    options.table.block_size = 4096;
    options.write_buffer_size = 32 << 10;
    options.target_file_size = 64 << 10;
    options.block_cache_bytes = cache_bytes;
    options.prepopulate_block_cache = prepopulate;
    let db = Db::open_with_fs(Arc::new(MemFs::new()), DIR, options).unwrap();
    let mut model = Model::new();
    let mut rng = Rng::new(8);
    for i in 0..6000 {
        let (k, v) = (key(rng.below(8000)), format!("value {i} {}", "p".repeat(rng.index(80))).into_bytes());
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    (db, model)
}

#[test]
fn compactions_leave_the_blocks_they_read_out_of_the_block_cache() {
    // What compactions read, alone (what they write: the tests below).
    let (db, model) = load_through_compactions(false, 16 << 20);
    let stats = db.stats();
    assert!(stats.compactions > 3 && stats.compaction_bytes_read > 200 << 10, "{stats:?}");
    // No read has been made: what is cached is the tables' index and filter blocks, a few
    // percent of each table ever written. Every data block a compaction read, cached,
    // would alone be more than `compaction_bytes_read`.
    assert!(
        stats.block_cache_bytes < stats.compaction_bytes_read / 4,
        "{} bytes cached after compactions read {}",
        stats.block_cache_bytes,
        stats.compaction_bytes_read
    );
    // Reads still fill it.
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    assert!(db.stats().block_cache_bytes > stats.block_cache_bytes + (100 << 10), "{:?}", db.stats());
}

/// Data-block misses so far: every miss less those of index and filter blocks.
fn data_misses(db: &Db) -> u64 {
    let stats = db.stats();
    stats.block_cache_hits_misses.1 - stats.block_cache_index_filter_hits_misses.1
}

#[test]
fn new_tables_fill_the_free_room_of_the_block_cache_and_leave_it_when_replaced() {
    let (db, model) = load_through_compactions(true, 16 << 20);
    let stats = db.stats();
    let written = stats.flush_bytes_uncompressed + stats.compaction_bytes_written_uncompressed;
    assert!(stats.compactions > 3 && written > 3 * stats.table_bytes_uncompressed, "{stats:?}");
    // The cache holds the live tables' blocks and no more: those of the tables that
    // compactions replaced left it with their files (or it would hold `written`).
    let live = stats.table_bytes_uncompressed;
    assert!(stats.block_cache_bytes > live / 2, "{} cached of {live} live", stats.block_cache_bytes);
    assert!(stats.block_cache_bytes < live + live / 4, "{} cached of {live} live", stats.block_cache_bytes);
    // So every read finds its block there.
    let misses = data_misses(&db);
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let scanned: Vec<_> =
        db.range::<&[u8], _>(..).map(|e| e.map(|e| (e.key, e.value))).collect::<Result<_, _>>().unwrap();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(scanned == want, "the scan differs from the model");
    assert_eq!(data_misses(&db), misses, "a read missed the cache");

    // Without the option, the same reads go to the tables.
    let (db, model) = load_through_compactions(false, 16 << 20);
    let misses = data_misses(&db);
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    assert!(data_misses(&db) > misses + 10, "{:?}", db.stats());
}

#[test]
fn new_tables_never_push_cached_blocks_out() {
    // A cache far smaller than the data: full after the load, with the newest blocks.
    let (db, model) = load_through_compactions(true, 64 << 10);
    let stats = db.stats();
    assert!(stats.block_cache_bytes <= 64 << 10);
    assert!(stats.block_cache_bytes > 32 << 10, "{stats:?}");
    // Blocks that reads bring in stay while more tables are written.
    let hot: Vec<_> = model.keys().step_by(400).cloned().collect();
    for k in &hot {
        assert_eq!(db.get(k).unwrap().as_ref(), model.get(k));
    }
    let (misses, compactions) = (data_misses(&db), db.stats().compactions);
    // One more level-0 table, not enough to start a compaction (which would move the hot
    // keys into new tables).
    for i in 0..200 {
        db.put(&key(9000 + i), &[b'n'; 100]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().compactions, compactions, "{:?}", db.stats());
    assert!(db.stats().flushes > 0);
    for k in &hot {
        assert_eq!(db.get(k).unwrap().as_ref(), model.get(k));
    }
    assert_eq!(data_misses(&db), misses, "a new table's blocks evicted a block reads use");
}

/// Reads that miss a tiny block cache while the compaction thread runs: with
/// `release_freed_memory` it hands freed heap memory back (glibc only), at most once a
/// second; without it, never.
#[test]
fn block_cache_churn_is_followed_by_a_heap_trim_only_with_the_option_on() {
    let trims = |release: bool| {
        let fs = MemFs::new();
        let mut options = tiny_block_cache(true);
        options.background = BackgroundMode::Threads;
        options.release_freed_memory = release;
        let db = Db::open_with_fs(Arc::new(fs), DIR, options).unwrap();
        for i in 0..1500 {
            db.put(&key(i), format!("value {i} {}", "t".repeat(60)).as_bytes()).unwrap();
        }
        db.flush().unwrap();
        let start = std::time::Instant::now();
        let mut rng = Rng::new(3);
        // Long enough for two trim intervals; stop early once a trim is seen.
        while start.elapsed() < std::time::Duration::from_millis(2500) && db.stats().heap_trims == 0 {
            for _ in 0..200 {
                assert!(db.get(&key(rng.below(1500))).unwrap().is_some());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(db.stats().block_cache_hits_misses.1 > 100, "the reads did not miss the cache");
        let stats = db.stats();
        db.close().unwrap();
        (stats.heap_trims, start.elapsed())
    };
    let (off, _) = trims(false);
    assert_eq!(off, 0, "trimmed with the option off");
    let (on, elapsed) = trims(true);
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(on >= 1, "no trim in {elapsed:?}");
        // At most one per second since open (the first is due one second after open).
        assert!(on <= elapsed.as_secs(), "{on} trims in {elapsed:?}");
    } else {
        assert_eq!(on, 0);
    }
}
