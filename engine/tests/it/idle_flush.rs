//! Seeks flush an idle memtable: when reads keep positioning the active memtable beside
//! the tables and no write comes in, the memtable is flushed (and then merged into the
//! levels by read-triggered compactions), so that later seeks position one source less.
//! Writes between the seeks keep it, and so does `read_triggered_compaction = false`.

use stampkv_engine::fs::MemFs;
use stampkv_engine::{BackgroundMode, Compression, Db, Options, Stats};
use stampkv_testkit::SplitMix64 as Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIR: &str = "/idle-flush-db";
const KEYS: u64 = 20_000;
/// How long the background threads get to do what the seeks asked for.
const PATIENCE: Duration = Duration::from_secs(30);

fn options() -> Options {
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Threads;
    options.table.compression = Compression::None;
    // A memtable of up to 1 MiB; seeks flush one of at least a quarter of that, after
    // one seek per 16 KiB it holds.
    options.write_buffer_size = 1 << 20;
    options.max_immutable_memtables = 2;
    options
}

fn put_random(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut Rng, puts: usize) {
    for _ in 0..puts {
        let key = format!("key{:08}", rng.below(KEYS)).into_bytes();
        let value: Vec<u8> = (0..100).map(|_| rng.below(256) as u8).collect();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
}

/// A seek to a random key reading three entries.
fn seek(db: &Db, rng: &mut Rng) {
    let key = format!("key{:08}", rng.below(KEYS)).into_bytes();
    let mut cursor = db.cursor(key.as_slice()..);
    for _ in 0..3 {
        if !cursor.next().unwrap() {
            break;
        }
    }
}

fn assert_contents(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|e| e.map(|e| (e.key, e.value)).unwrap()).collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(got == expected, "contents differ: {} entries, {} expected", got.len(), expected.len());
}

/// Tables below, and 3,000 entries (about 350 KiB) in the active memtable.
fn tables_and_a_full_memtable(options: Options) -> (Db, BTreeMap<Vec<u8>, Vec<u8>>, Rng) {
    let db = Db::open_with_fs(Arc::new(MemFs::new()), DIR, options).unwrap();
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(31));
    put_random(&db, &mut model, &mut rng, 6000);
    db.flush().unwrap();
    put_random(&db, &mut model, &mut rng, 3000);
    let stats = db.stats();
    assert!(stats.table_bytes > 0 && stats.immutable_memtables == 0, "{stats:?}");
    assert!(stats.memtable_bytes > 300 << 10, "{stats:?}");
    (db, model, rng)
}

/// No frozen memtable, and an active one with a fraction of what the full one held (an
/// empty memtable still counts the arena chunks it has reserved).
fn memtables_empty(stats: &Stats, full: &Stats) -> bool {
    stats.immutable_memtables == 0 && stats.memtable_bytes < full.memtable_bytes / 3
}

#[test]
fn seeks_flush_an_idle_memtable_and_merge_it_into_the_levels() {
    let (db, mut model, mut rng) = tables_and_a_full_memtable(options());
    let full = db.stats();
    let started = Instant::now();
    let mut seeks = 0;
    // Done once the flush is counted (after its table is installed) and the memtables
    // are empty: one flush, the idle one.
    let flushed = |stats: &Stats| {
        stats.idle_flushes == 1 && stats.flushes == full.flushes + 1 && memtables_empty(stats, &full)
    };
    while !flushed(&db.stats()) {
        assert!(started.elapsed() < PATIENCE, "no idle flush after {seeks} seeks: {:?}", db.stats());
        seek(&db, &mut rng);
        seeks += 1;
    }
    let stats = db.stats();
    // About 350 KiB / 16 KiB = 22 idle seeks were needed (a few more if the flush ran late).
    assert!(seeks >= 20, "flushed after only {seeks} seeks: {stats:?}");
    assert_contents(&db, &model);
    // Further seeks merge the new table down; the empty memtable is not flushed again.
    while db.stats().files_per_level[0] > 0 {
        assert!(started.elapsed() < PATIENCE, "level 0 still holds tables: {:?}", db.stats());
        seek(&db, &mut rng);
    }
    assert_eq!(db.stats().idle_flushes, 1);
    assert_contents(&db, &model);
    // Writes go on as before.
    put_random(&db, &mut model, &mut rng, 2000);
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn writes_between_seeks_keep_the_memtable() {
    let (db, mut model, mut rng) = tables_and_a_full_memtable(options());
    let before = db.stats();
    // A write every 10 seeks: never 22 idle seeks in a row.
    for i in 0..3000 {
        seek(&db, &mut rng);
        if i % 10 == 9 {
            put_random(&db, &mut model, &mut rng, 1);
        }
    }
    let after = db.stats();
    assert_eq!(after.idle_flushes, 0, "{after:?}");
    assert_eq!(after.flushes, before.flushes, "{after:?}");
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn without_read_triggered_compaction_seeks_keep_the_memtable() {
    let mut options = options();
    options.read_triggered_compaction = false;
    let (db, model, mut rng) = tables_and_a_full_memtable(options);
    let before = db.stats();
    for _ in 0..3000 {
        seek(&db, &mut rng);
    }
    let after = db.stats();
    assert_eq!((after.idle_flushes, after.flushes), (0, before.flushes), "{after:?}");
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn a_merge_that_seeks_asked_for_fills_the_block_cache_when_the_tables_fit_half_of_it() {
    let mut options = options();
    options.block_cache_bytes = 32 << 20;
    // Two level-0 tables are then below every compaction trigger: only reads merge them.
    options.l0_compaction_trigger = 4;
    let (db, model, mut rng) = tables_and_a_full_memtable(options);
    let started = Instant::now();
    // The idle flush, then a read-triggered merge of both level-0 tables into the levels.
    while db.stats().idle_flushes == 0 || db.stats().files_per_level[0] > 0 {
        assert!(started.elapsed() < PATIENCE, "no merge after the idle flush: {:?}", db.stats());
        seek(&db, &mut rng);
    }
    let before = db.stats();
    assert!(before.read_compactions >= 1, "{before:?}");
    assert_contents(&db, &model);
    let after = db.stats();
    // Data blocks only (index and filter blocks are counted apart as well).
    let data = |s: &Stats| {
        let (all, index_filter) = (s.block_cache_hits_misses, s.block_cache_index_filter_hits_misses);
        (all.0 - index_filter.0, all.1 - index_filter.1)
    };
    let (hits, misses) = (data(&after).0 - data(&before).0, data(&after).1 - data(&before).1);
    assert!(hits > 100, "a full scan found {hits} blocks in the cache");
    assert_eq!(misses, 0, "a full scan after the merge read {misses} blocks from the files: {after:?}");
    db.close().unwrap();
}
