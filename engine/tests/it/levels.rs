//! The shape of the tree once compaction is idle: with dynamic level targets the levels
//! above the base level are empty and every level is within its target, bounding the
//! space old versions take; with static targets every level is within `level1_target_bytes`
//! × ratio^(L-1); a database changes shape when reopened with the other setting, keeping
//! its data; a read-only open reports the shape the writer left. Inline background work
//! makes "idle" exact: the last write's compactions have all run before it returns.

use stampkv_engine::fs::MemFs;
use stampkv_engine::{BackgroundMode, Compression, Db, Options, ReadOnlyDb, Stats};
use stampkv_testkit::SplitMix64 as Rng;
use std::collections::BTreeMap;
use std::sync::Arc;

const DIR: &str = "/levels-db";
/// Levels of the tree (the length of the per-level statistics).
const NUM_LEVELS: usize = 7;
const LAST: usize = NUM_LEVELS - 1;

fn options(dynamic: bool) -> Options {
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Inline;
    options.table.compression = Compression::None;
    options.dynamic_level_bytes = dynamic;
    options
}

/// Random puts over `keys` keys (so about half of them overwrite), with random values.
fn fill(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut Rng, puts: usize, keys: u64) {
    for _ in 0..puts {
        let key = format!("key{:08}", rng.below(keys)).into_bytes();
        let value: Vec<u8> = (0..100).map(|_| rng.below(256) as u8).collect();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
}

fn assert_contents(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|e| e.map(|e| (e.key, e.value)).unwrap()).collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(got == expected, "contents differ: {} entries, {} expected", got.len(), expected.len());
}

/// The level that level 0 compacts into: the first level with a target.
fn base_level(stats: &Stats) -> usize {
    (1..NUM_LEVELS).find(|&l| stats.level_target_bytes[l] > 0).expect("a base level")
}

/// Checks the shape of an idle tree with dynamic targets.
fn assert_dynamic_shape(stats: &Stats, options: &Options) {
    let (b, ratio) = (options.level1_target_bytes, options.level_size_ratio);
    let base = base_level(stats);
    let largest = stats.bytes_per_level[LAST];
    assert!(stats.files_per_level[0] < options.l0_compaction_trigger, "{stats:?}");
    for level in 1..base {
        assert_eq!(stats.files_per_level[level], 0, "level {level} above base level {base}: {stats:?}");
        assert_eq!(stats.level_target_bytes[level], 0);
    }
    // The data sinks to the last level first: it is the largest, and sets the targets.
    assert!(stats.bytes_per_level[1..].iter().all(|&bytes| bytes <= largest), "{stats:?}");
    for level in base..LAST {
        let target = stats.level_target_bytes[level];
        let share = largest / ratio.pow((LAST - level) as u32);
        assert_eq!(target, share.max(b), "level {level}: {stats:?}");
        assert!(stats.bytes_per_level[level] < target, "level {level} over its target: {stats:?}");
    }
    // The base level is the first level whose share of the last level is at most the base
    // target, walking up from the last level.
    assert!(base == 1 || largest / ratio.pow((LAST - base) as u32) <= b, "{stats:?}");
    if base < LAST {
        assert!(largest / ratio.pow((LAST - base - 1) as u32) > b, "{stats:?}");
    }
    // Space: the levels above the last hold at most a 1/(ratio-1) share of it, plus the
    // base level's floor.
    let above_last: u64 = stats.bytes_per_level[1..LAST].iter().sum();
    assert!(above_last <= largest / (ratio - 1) + b, "{above_last} above the last level: {stats:?}");
}

#[test]
fn dynamic_targets_shape_the_tree_from_the_last_level_up() {
    let options = options(true);
    let db = Db::open_with_fs(Arc::new(MemFs::new()), DIR, options.clone()).unwrap();
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(17));
    let mut bases = Vec::new();
    // Checked while the database grows: the base level climbs as the last level grows.
    for _ in 0..6 {
        fill(&db, &mut model, &mut rng, 2500, 12_000);
        let stats = db.stats();
        assert_dynamic_shape(&stats, &options);
        bases.push(base_level(&stats));
    }
    assert!(bases.windows(2).all(|w| w[1] <= w[0]), "{bases:?}");
    assert!(bases[0] > bases[5] && bases[5] <= 3, "the base level climbed: {bases:?}");
    assert_contents(&db, &model);
    // A full compaction leaves everything in the last level.
    db.compact().unwrap();
    let stats = db.stats();
    assert_eq!(stats.files_per_level[..LAST].iter().sum::<usize>(), 0, "{stats:?}");
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn static_targets_grow_from_level_1() {
    let options = options(false);
    let db = Db::open_with_fs(Arc::new(MemFs::new()), DIR, options.clone()).unwrap();
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(18));
    fill(&db, &mut model, &mut rng, 12_000, 12_000);
    let stats = db.stats();
    assert_eq!(base_level(&stats), 1);
    assert!(stats.files_per_level[0] < options.l0_compaction_trigger, "{stats:?}");
    let mut target = options.level1_target_bytes;
    for level in 1..LAST {
        assert_eq!(stats.level_target_bytes[level], target);
        assert!(stats.bytes_per_level[level] < target, "level {level} over its target: {stats:?}");
        target *= options.level_size_ratio;
    }
    assert!(stats.files_per_level[1] > 0 && stats.files_per_level[LAST] == 0, "{stats:?}");
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn a_static_tree_reopened_with_dynamic_targets_drains_into_the_base_level_and_back() {
    let fs = MemFs::new();
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(19));
    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options(false)).unwrap();
    fill(&db, &mut model, &mut rng, 10_000, 12_000);
    let before = db.stats();
    assert!(before.files_per_level[1] > 0 && before.files_per_level[2] > 0, "{before:?}");
    db.close().unwrap();

    let dynamic = options(true);
    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, dynamic.clone()).unwrap();
    // Inline work runs at the next flush: the levels above the base level drain.
    db.flush().unwrap();
    let after = db.stats();
    for level in 1..base_level(&after) {
        assert_eq!(after.files_per_level[level], 0, "level {level}: {after:?}");
    }
    assert!(after.files_per_level[LAST] > 0, "{after:?}");
    assert_contents(&db, &model);
    fill(&db, &mut model, &mut rng, 3000, 12_000);
    assert_dynamic_shape(&db.stats(), &dynamic);
    assert_contents(&db, &model);
    db.close().unwrap();

    // And back: static targets leave the last level alone and fill from level 1 again.
    let db = Db::open_with_fs(Arc::new(fs), DIR, options(false)).unwrap();
    fill(&db, &mut model, &mut rng, 3000, 12_000);
    let stats = db.stats();
    assert!(stats.files_per_level[1] > 0 && stats.files_per_level[LAST] > 0, "{stats:?}");
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn a_read_only_open_reports_the_shape_the_writer_left() {
    let fs = MemFs::new();
    let options = options(true);
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(20));
    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options.clone()).unwrap();
    fill(&db, &mut model, &mut rng, 4000, 12_000);
    let written = db.stats();
    let files = db.table_files();
    db.close().unwrap();
    assert!(written.table_bytes > 0 && written.memtable_bytes > 0, "tables and a log to replay: {written:?}");

    let reader = ReadOnlyDb::open_with_fs(Arc::new(fs), DIR, options).unwrap();
    let stats = reader.stats();
    assert_eq!(reader.table_files(), files);
    assert_eq!(stats.files_per_level, written.files_per_level);
    assert_eq!(stats.bytes_per_level, written.bytes_per_level);
    assert_eq!(stats.level_target_bytes, written.level_target_bytes);
    assert_eq!(stats.table_bytes, written.table_bytes);
    assert_eq!(stats.table_bytes_uncompressed, written.table_bytes_uncompressed);
    assert_eq!(stats.visible_sequence, written.visible_sequence);
    assert!(stats.wal_bytes_on_disk > 0 && stats.memtable_bytes > 0, "the log, replayed: {stats:?}");
    assert_eq!((stats.commits, stats.flushes, stats.compactions, stats.wal_bytes_written), (0, 0, 0, 0));
    let usage = reader.space_usage().unwrap();
    assert_eq!(usage.live_entries, model.len() as u64);
    let live: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert_eq!(usage.live_bytes, live as u64);
    assert_eq!(usage.disk_bytes, stats.table_bytes + stats.wal_bytes_on_disk);
}

/// Levels (0 counting each file as a run of its own) that hold files.
fn runs(stats: &Stats) -> usize {
    stats.files_per_level[0] + stats.files_per_level[1..].iter().filter(|&&files| files > 0).count()
}

/// Seeks to random keys, reading a few entries each, and runs the background work the
/// seeks asked for every 50 seeks; the number of seeks until the tree is one run, if it
/// got there within `seeks`.
fn seek_until_one_run(db: &Db, rng: &mut Rng, seeks: usize, keys: u64) -> Option<usize> {
    for i in 0..seeks {
        if runs(&db.stats()) == 1 {
            return Some(i);
        }
        let key = format!("key{:08}", rng.below(keys)).into_bytes();
        let mut cursor = db.cursor(key.as_slice()..);
        for _ in 0..3 {
            if !cursor.next().unwrap() {
                break;
            }
        }
        drop(cursor);
        if i % 50 == 49 {
            // Inline background work runs here (there is nothing to flush).
            db.flush().unwrap();
        }
    }
    None
}

#[test]
fn seeks_that_pay_for_several_runs_merge_them_into_one() {
    let options = options(true);
    let db = Db::open_with_fs(Arc::new(MemFs::new()), DIR, options.clone()).unwrap();
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(23));
    fill(&db, &mut model, &mut rng, 9000, 12_000);
    db.flush().unwrap();
    let before = db.stats();
    assert!(runs(&before) >= 3, "a tree of several runs to begin with: {before:?}");
    assert_eq!(before.read_compactions, 0, "{before:?}");
    let seeks = seek_until_one_run(&db, &mut rng, 100_000, 12_000);
    let after = db.stats();
    assert!(seeks.is_some(), "still {} runs after 100,000 seeks: {after:?}", runs(&after));
    assert!(after.read_compactions > 0, "{after:?}");
    // Reads moved data down, never up: the one run is the last level.
    assert_eq!(after.files_per_level[LAST], after.files_per_level.iter().sum::<usize>(), "{after:?}");
    assert_contents(&db, &model);
    // Writes go on as before on the merged tree.
    fill(&db, &mut model, &mut rng, 2000, 12_000);
    assert_dynamic_shape(&db.stats(), &options);
    assert_contents(&db, &model);
    db.close().unwrap();
}

#[test]
fn without_read_triggered_compaction_seeks_leave_the_tree_as_it_is() {
    let mut options = options(true);
    options.read_triggered_compaction = false;
    let db = Db::open_with_fs(Arc::new(MemFs::new()), DIR, options).unwrap();
    let (mut model, mut rng) = (BTreeMap::new(), Rng::new(23));
    fill(&db, &mut model, &mut rng, 9000, 12_000);
    db.flush().unwrap();
    let before = db.stats();
    assert_eq!(seek_until_one_run(&db, &mut rng, 5_000, 12_000), None);
    let after = db.stats();
    assert_eq!(after.read_compactions, 0, "{after:?}");
    assert_eq!(after.files_per_level, before.files_per_level);
    assert_contents(&db, &model);
    db.close().unwrap();
}
