//! Behaviour of the engine's public API, one behaviour per test.

use stampkv_engine::fs::{CrashPolicy, Fs, MemFs};
use stampkv_engine::{
    BackgroundMode, Compression, Db, Entry, Error, ManualClock, Options, RecoveryMode, SyncMode, WriteBatch,
    WriteOptions,
};
use std::path::Path;
use std::sync::Arc;

fn collect(iter: impl Iterator<Item = stampkv_engine::Result<Entry>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|e| e.expect("read")).map(|e| (e.key, e.value)).collect()
}

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

fn tiny_inline() -> Options {
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Inline;
    options
}

#[test]
fn puts_overwrites_and_deletes_are_read_back() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let s1 = db.put(b"a", b"1").unwrap();
    let s2 = db.put(b"b", b"2").unwrap();
    let s3 = db.put(b"a", b"3").unwrap();
    assert!(s1 < s2 && s2 < s3);
    assert_eq!(db.get(b"a").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get_entry(b"a").unwrap().unwrap().seq, s3);
    db.delete(b"b").unwrap();
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"missing").unwrap(), None);
    assert_eq!(db.get(b"").unwrap(), None);
    assert_eq!(collect(db.iter()), vec![kv("a", "3")]);
}

#[test]
fn a_batch_shares_one_sequence_number_and_the_last_write_to_a_key_wins() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"x", b"1").put(b"y", b"2").delete(b"x").put(b"z", b"3").put(b"y", b"4");
    let seq = db.write(batch).unwrap();
    assert_eq!(db.get(b"x").unwrap(), None);
    let entries: Vec<Entry> = db.iter().map(Result::unwrap).collect();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e.seq == seq));
    assert_eq!(db.get(b"y").unwrap(), Some(b"4".to_vec()));
}

#[test]
fn empty_commits_use_a_sequence_number_that_survives_restarts() {
    let fs = MemFs::new();
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/db", Options::default()).unwrap();
    let first = db.write(WriteBatch::new()).unwrap();
    let second = db.write(WriteBatch::new()).unwrap();
    assert_eq!(second, first + 1);
    let crashed = fs.crash_clone(CrashPolicy::DropAll);
    drop(db);
    let db = Db::open_with_fs(Arc::new(crashed), "/db", Options::default()).unwrap();
    assert_eq!(db.last_sequence(), second, "synced empty commits are durable");
    assert!(db.write(WriteBatch::new()).unwrap() > second);
}

#[test]
fn ranges_respect_bounds_in_both_directions_across_memtables_and_levels() {
    let mut options = tiny_inline();
    options.sync_mode = SyncMode::Buffered;
    let db = Db::open_in_memory(options).unwrap();
    for i in 0..3000u32 {
        db.put(format!("key{i:04}").as_bytes(), format!("value-{i:020}").as_bytes()).unwrap();
        if i % 3 == 0 {
            db.delete(format!("key{:04}", i / 2).as_bytes()).unwrap();
        }
    }
    let stats = db.stats();
    assert!(stats.files_per_level.iter().sum::<usize>() > 1, "data spread over tables: {stats:?}");
    let all: Vec<_> = collect(db.iter());
    let lo = b"key1100".as_slice();
    let hi = b"key2200".as_slice();
    let inside: Vec<_> =
        all.iter().filter(|(k, _)| k.as_slice() >= lo && k.as_slice() < hi).cloned().collect();
    assert!(!inside.is_empty());
    assert_eq!(collect(db.range(lo..hi)), inside);
    let mut rev = collect(db.range(lo..hi).rev());
    rev.reverse();
    assert_eq!(rev, inside);
    let inclusive: Vec<_> =
        all.iter().filter(|(k, _)| k.as_slice() >= lo && k.as_slice() <= hi).cloned().collect();
    assert_eq!(collect(db.range(lo..=hi)), inclusive);
    assert_eq!(collect(db.range(..lo)).len(), all.iter().filter(|(k, _)| k.as_slice() < lo).count());
    assert_eq!(collect(db.range(hi..)).len(), all.iter().filter(|(k, _)| k.as_slice() >= hi).count());
    // Alternating ends meet exactly once.
    let mut iter = db.range(lo..hi);
    let mut seen = Vec::new();
    while let Some(e) = if seen.len() % 2 == 0 { iter.next() } else { iter.next_back() } {
        seen.push(e.unwrap().key);
    }
    seen.sort();
    assert_eq!(seen, inside.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());
}

#[test]
fn snapshots_keep_their_view_through_overwrites_flushes_and_compactions() {
    let db = Db::open_in_memory(tiny_inline()).unwrap();
    for i in 0..200u32 {
        db.put(format!("k{i:03}").as_bytes(), b"old").unwrap();
    }
    let snapshot = db.snapshot();
    let before = collect(snapshot.range::<&[u8], _>(..));
    for i in 0..200u32 {
        if i % 2 == 0 {
            db.delete(format!("k{i:03}").as_bytes()).unwrap();
        } else {
            db.put(format!("k{i:03}").as_bytes(), b"new").unwrap();
        }
    }
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(collect(snapshot.range::<&[u8], _>(..)), before);
    assert_eq!(snapshot.get(b"k000").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get(b"k000").unwrap(), None);
    assert_eq!(db.get(b"k001").unwrap(), Some(b"new".to_vec()));
    drop(snapshot);
    db.compact().unwrap();
    assert_eq!(collect(db.iter()).len(), 100);
}

#[test]
fn data_survives_close_and_reopen_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::tiny_for_tests();
    options.sync_mode = SyncMode::Buffered;
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..500u32 {
            db.put(format!("k{i:04}").as_bytes(), &i.to_le_bytes()).unwrap();
        }
        db.delete(b"k0007").unwrap();
        db.flush().unwrap();
        db.put(b"after-flush", b"in the wal only").unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"k0007").unwrap(), None);
    assert_eq!(db.get(b"k0499").unwrap(), Some(499u32.to_le_bytes().to_vec()));
    assert_eq!(db.get(b"after-flush").unwrap(), Some(b"in the wal only".to_vec()));
    assert_eq!(collect(db.iter()).len(), 500);
}

#[test]
fn a_second_open_of_the_same_directory_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("already open"), "{err}");
    db.close().unwrap();
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn expired_entries_vanish_at_their_deadline_and_compaction_removes_them() {
    let clock = Arc::new(ManualClock::new(10_000));
    let mut options = tiny_inline();
    options.clock = clock.clone();
    let db = Db::open_in_memory(options).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..300u32 {
        batch.put_expiring(format!("t{i:03}").as_bytes(), &[7; 40], 10_500);
    }
    batch.put(b"keep", b"forever");
    db.write(batch).unwrap();
    let entry = db.get_entry(b"t000").unwrap().unwrap();
    assert_eq!(entry.expires_at_ms, Some(10_500));
    clock.set(10_499);
    assert_eq!(collect(db.iter()).len(), 301);
    clock.set(10_500);
    assert_eq!(db.get(b"t000").unwrap(), None);
    assert_eq!(collect(db.iter()), vec![kv("keep", "forever")]);
    db.compact().unwrap();
    let stats = db.stats();
    let usage = db.space_usage().unwrap();
    assert_eq!(usage.live_entries, 1);
    assert!(stats.table_bytes < 2_000, "expired values still on disk: {} bytes", stats.table_bytes);
}

#[test]
fn write_with_sees_the_latest_state_and_an_error_commits_nothing() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    db.put(b"counter", &5u64.to_le_bytes()).unwrap();
    let (seq, old) = db
        .write_with(WriteOptions::default(), |view| {
            let current = view.get(b"counter")?.expect("present");
            let value = u64::from_le_bytes(current.value.try_into().unwrap());
            let mut batch = WriteBatch::new();
            batch.put(b"counter", &(value + 1).to_le_bytes());
            Ok::<_, Error>((batch, value))
        })
        .unwrap();
    assert_eq!(old, 5);
    assert_eq!(db.get_entry(b"counter").unwrap().unwrap().seq, seq);
    let before = db.last_sequence();
    let refused: Result<(u64, ()), Error> =
        db.write_with(WriteOptions::default(), |_| Err(Error::InvalidArgument("check failed".into())));
    assert!(refused.is_err());
    assert_eq!(db.last_sequence(), before, "a refused commit uses no sequence number");
    assert_eq!(db.get(b"counter").unwrap(), Some(6u64.to_le_bytes().to_vec()));
}

#[test]
fn a_damaged_table_is_reported_as_corruption_never_as_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::tiny_for_tests();
    options.block_cache_bytes = 0;
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..300u32 {
            db.put(format!("k{i:04}").as_bytes(), &[i as u8; 50]).unwrap();
        }
        db.compact().unwrap();
        db.close().unwrap();
    }
    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .expect("a table");
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&table, &bytes).unwrap();
    // Either the open notices (footer/index) or reads do; no read may return wrong data.
    let Ok(db) = Db::open(dir.path(), options) else {
        return;
    };
    let mut saw_error = false;
    for entry in db.iter() {
        match entry {
            Ok(e) => {
                let i: u32 = std::str::from_utf8(&e.key[1..]).unwrap().parse().unwrap();
                assert_eq!(e.value, vec![i as u8; 50], "wrong data returned");
            }
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                assert!(e.to_string().contains(".sst"), "the error names the file: {e}");
                saw_error = true;
            }
        }
    }
    assert!(saw_error, "the damaged block was read without an error");
}

/// Writes `count` synced single-key commits and returns the WAL segment's path.
fn synced_wal(fs: &MemFs, count: u32) -> std::path::PathBuf {
    let mut options = Options::default();
    options.wal_preallocate_bytes = 0;
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/w", options).unwrap();
    for i in 0..count {
        db.put(format!("k{i:03}").as_bytes(), &[1; 200]).unwrap();
    }
    std::mem::forget(db); // no clean close: keep the log as a crash leaves it
    let name = fs.list(Path::new("/w")).unwrap().into_iter().find(|n| n.ends_with(".log")).unwrap();
    Path::new("/w").join(name)
}

#[test]
fn damage_inside_synced_wal_data_fails_the_open_unless_salvage_is_asked_for() {
    let fs = MemFs::new();
    let wal = synced_wal(&fs, 50);
    let crashed = fs.crash_clone(CrashPolicy::DropAll);
    crashed.corrupt(&wal, 2_000, &[0xFF; 4]).unwrap();
    let err = Db::open_with_fs(Arc::new(crashed.clone()), "/w", Options::default()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(".log"), "{err}");
    let mut salvage = Options::default();
    salvage.wal_recovery_mode = RecoveryMode::PointInTime;
    let db = Db::open_with_fs(Arc::new(crashed), "/w", salvage).unwrap();
    let recovered = collect(db.iter());
    assert!(!recovered.is_empty() && recovered.len() < 50, "a prefix: {}", recovered.len());
    for (i, (key, _)) in recovered.iter().enumerate() {
        assert_eq!(key, format!("k{i:03}").as_bytes(), "no hole");
    }
}

#[test]
fn a_torn_wal_tail_is_dropped_silently() {
    let fs = MemFs::new();
    let wal = synced_wal(&fs, 20);
    let crashed = fs.crash_clone(CrashPolicy::DropAll);
    let len = crashed.read_all(&wal).unwrap().len() as u64;
    // A last record cut short, as a crash mid-write leaves it.
    let file = crashed.open(&wal).unwrap();
    file.set_len(len - 50).unwrap();
    let db = Db::open_with_fs(Arc::new(crashed), "/w", Options::default()).unwrap();
    assert_eq!(collect(db.iter()).len(), 19);
    assert_eq!(db.recovery_report().commits_replayed, 19);
}

#[test]
fn orphan_files_are_removed_at_open() {
    let fs = MemFs::new();
    let dir = Path::new("/o");
    Db::open_with_fs(Arc::new(fs.clone()), dir, Options::default()).unwrap().close().unwrap();
    for orphan in ["999990.sst", "999991.dbtmp", "MANIFEST-999992", "000000.log"] {
        fs.create(&dir.join(orphan)).unwrap().write_all_at(b"junk", 0).unwrap();
    }
    fs.create(&dir.join("user-notes.txt")).unwrap();
    let db = Db::open_with_fs(Arc::new(fs.clone()), dir, Options::default()).unwrap();
    let names = fs.list(dir).unwrap();
    for orphan in ["999990.sst", "999991.dbtmp", "MANIFEST-999992", "000000.log"] {
        assert!(!names.iter().any(|n| n == orphan), "{orphan} left behind: {names:?}");
    }
    assert!(names.iter().any(|n| n == "user-notes.txt"), "foreign files are left alone");
    db.close().unwrap();
}

#[test]
fn a_directory_with_data_but_no_current_is_refused() {
    let fs = MemFs::new();
    let dir = Path::new("/n");
    Db::open_with_fs(Arc::new(fs.clone()), dir, Options::default()).unwrap().close().unwrap();
    fs.remove(&dir.join("CURRENT")).unwrap();
    let err = Db::open_with_fs(Arc::new(fs), dir, Options::default()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("CURRENT"), "{err}");
}

#[test]
fn a_crash_while_a_database_is_first_created_leaves_one_that_opens() {
    use stampkv_engine::fs::{FaultOp, FaultyFs};
    let fs = MemFs::new();
    let dir = Path::new("/c");
    // The first open writes its manifest, then fails to rename CURRENT into place: what a
    // kill between the two leaves behind.
    let faulty = FaultyFs::new(Arc::new(fs.clone()));
    faulty.fail(FaultOp::Rename, 1, std::io::ErrorKind::Other, true);
    assert!(Db::open_with_fs(Arc::new(faulty), dir, Options::default()).is_err());
    let crashed = fs.crash_clone(CrashPolicy::KeepAll);
    let left = crashed.list(dir).unwrap();
    assert!(left.iter().any(|n| n.starts_with("MANIFEST-")), "the manifest was written: {left:?}");
    assert!(!left.iter().any(|n| n == "CURRENT" || n.ends_with(".log")), "{left:?}");
    let db = Db::open_with_fs(Arc::new(crashed.clone()), dir, Options::default()).expect("created again");
    assert_eq!(db.iter().count(), 0);
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let names = crashed.list(dir).unwrap();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("MANIFEST-")).count(),
        1,
        "leftovers removed: {names:?}"
    );
    assert!(!names.iter().any(|n| n.ends_with(".dbtmp")), "{names:?}");
}

#[test]
fn statistics_report_levels_and_write_amplification() {
    let db = Db::open_in_memory(tiny_inline()).unwrap();
    for i in 0..2_000u32 {
        db.put(format!("k{:05}", (i * 7919) % 2_000).as_bytes(), &[3; 100]).unwrap();
    }
    let stats = db.stats();
    assert_eq!(stats.commits, 2_000);
    assert_eq!(stats.user_bytes_written, 2_000 * 106);
    assert!(stats.flushes > 10 && stats.compactions > 0, "{stats:?}");
    assert!(stats.files_per_level[1..].iter().sum::<usize>() > 0, "{stats:?}");
    let wa = stats.write_amplification();
    assert!(wa > 2.0 && wa < 50.0, "write amplification {wa}");
    let usage = db.space_usage().unwrap();
    assert_eq!(usage.live_entries, 2_000);
    // The repeated-byte values compress (LZ4 is on by default): the tables hold less than
    // the live data, but without compression they would hold at least half of it.
    let now = db.stats();
    let disk_uncompressed = usage.disk_bytes - now.table_bytes + now.table_bytes_uncompressed;
    assert!(disk_uncompressed * 2 >= usage.live_bytes, "{usage:?} {now:?}");
    assert!(usage.disk_bytes * 2 < disk_uncompressed, "{usage:?} {now:?}");
}

#[test]
fn writes_stall_instead_of_growing_memory_without_bound() {
    let mut options = Options::tiny_for_tests();
    options.max_immutable_memtables = 1;
    options.memtables_per_flush = 1;
    let db = Db::open_in_memory(options.clone()).unwrap();
    let mut peak = 0;
    for i in 0..5_000u32 {
        db.put(format!("k{i:06}").as_bytes(), &[9; 100]).unwrap();
        peak = peak.max(db.stats().memtable_bytes);
    }
    let bound = (options.write_buffer_size * 2 + 4096) as u64;
    assert!(peak <= bound, "memtables reached {peak} bytes (bound {bound})");
    assert_eq!(collect(db.iter()).len(), 5_000);
}

#[test]
fn bad_options_are_rejected_with_a_message() {
    let mut options = Options::default();
    options.write_buffer_size = 10;
    let err = Db::open_in_memory(options).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("write_buffer_size")), "{err}");
    let mut options = Options::default();
    options.create_if_missing = false;
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(dir.path().join("absent"), options).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn snapshots_outlive_a_closed_database() {
    let db = Db::open_in_memory(Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let snapshot = db.snapshot();
    db.close().unwrap();
    assert_eq!(snapshot.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn expired_values_in_cold_tables_are_reclaimed_without_further_writes() {
    let clock = Arc::new(ManualClock::new(50_000));
    // Uncompressed: the repeated-byte values would otherwise shrink to almost nothing.
    let mut options = Options::tiny_for_tests();
    options.clock = clock.clone();
    options.table.compression = Compression::None;
    let db = Db::open_in_memory(options).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..200u32 {
        batch.put_expiring(format!("e{i:03}").as_bytes(), &[5; 100], 60_000);
    }
    batch.put(b"stays", b"1");
    db.write(batch).unwrap();
    db.compact().unwrap();
    let before = db.stats().table_bytes;
    assert!(before > 20_000, "the values are in tables: {before}");
    clock.set(60_000);
    // Nothing is written any more: the compaction thread notices the expiry on its own.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.stats().table_bytes > before / 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "expired values still occupy {} bytes",
            db.stats().table_bytes
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(collect(db.iter()), vec![kv("stays", "1")]);
}

/// A 100-byte JSON-like value: the same field names every time, a few varying digits.
fn json_value(i: u32) -> Vec<u8> {
    let value = format!(
        "{{\"id\":{i:06},\"owner\":\"user{:04}\",\"state\":\"active\",\"tags\":[\"alpha\",\"beta\"]}}",
        i % 997
    );
    format!("{value:<100}").into_bytes()
}

/// Writes compressible entries through flushes and compactions, then compacts all;
/// returns the stats and checks that everything reads back.
fn write_compressible(mut options: Options) -> stampkv_engine::Stats {
    options.background = BackgroundMode::Inline;
    let db = Db::open_in_memory(options).unwrap();
    for i in 0..3000u32 {
        db.put(format!("key{i:06}").as_bytes(), &json_value(i)).unwrap();
    }
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.flushes > 10 && stats.compactions > 3, "{stats:?}");
    db.compact().unwrap();
    for i in (0..3000u32).step_by(7) {
        assert_eq!(db.get(format!("key{i:06}").as_bytes()).unwrap(), Some(json_value(i)));
    }
    assert_eq!(db.iter().count(), 3000);
    db.stats()
}

#[test]
fn tables_are_compressed_by_default_and_stats_report_the_saving() {
    let options = Options::tiny_for_tests();
    assert_eq!(options.table.compression, Compression::Lz4);
    let stats = write_compressible(options);
    assert!(stats.flush_bytes_uncompressed > stats.flush_bytes_written * 3 / 2, "{stats:?}");
    let (written, uncompressed) =
        (stats.compaction_bytes_written, stats.compaction_bytes_written_uncompressed);
    assert!(uncompressed > written * 3 / 2, "{written} {uncompressed}");
    assert!(stats.table_bytes_uncompressed > stats.table_bytes * 3 / 2, "{stats:?}");
}

#[test]
fn compression_can_be_turned_off() {
    let mut options = Options::tiny_for_tests();
    options.table.compression = Compression::None;
    let stats = write_compressible(options);
    assert_eq!(stats.flush_bytes_uncompressed, stats.flush_bytes_written);
    assert_eq!(stats.compaction_bytes_written_uncompressed, stats.compaction_bytes_written);
    assert_eq!(stats.table_bytes_uncompressed, stats.table_bytes);
    assert!(stats.table_bytes > 3000 * 100);
}

#[test]
fn compression_follows_the_level_written() {
    // Level 0 uncompressed, every deeper level LZ4.
    let mut options = Options::tiny_for_tests();
    options.compression_per_level = vec![Compression::None, Compression::Lz4];
    assert_eq!(options.compression_for_level(0), Compression::None);
    assert_eq!(options.compression_for_level(1), Compression::Lz4);
    assert_eq!(options.compression_for_level(6), Compression::Lz4);
    let stats = write_compressible(options);
    assert_eq!(stats.flush_bytes_uncompressed, stats.flush_bytes_written, "flushes write level 0");
    let (written, uncompressed) =
        (stats.compaction_bytes_written, stats.compaction_bytes_written_uncompressed);
    assert!(uncompressed > written * 3 / 2, "{written} {uncompressed}");
    assert_eq!(stats.files_per_level[0], 0);
    assert!(stats.table_bytes_uncompressed > stats.table_bytes * 3 / 2, "{stats:?}");
}

#[test]
fn frozen_memtables_wait_for_a_full_flush_and_are_merged_into_one_table() {
    let mut options = tiny_inline();
    options.memtables_per_flush = 3;
    options.max_immutable_memtables = 3;
    // No level-0 compaction, so that level 0 shows each flush's table.
    options.l0_compaction_trigger = 50;
    options.l0_slowdown_trigger = 50;
    options.l0_stop_trigger = 50;
    let fs = MemFs::new();
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/m", options.clone()).unwrap();
    let mut model = std::collections::BTreeMap::new();
    let mut most_frozen = 0;
    let mut i = 0u32;
    while db.stats().flushes == 0 {
        // Keys repeat every 40 puts, so later memtables overwrite and delete keys of earlier ones.
        let key = format!("k{:03}", i % 40).into_bytes();
        if i % 7 == 3 {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("v{i}-{}", "x".repeat(60)).into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        let stats = db.stats();
        if stats.flushes == 0 {
            assert_eq!(stats.files_per_level[0], 0, "a table appeared before three memtables were frozen");
            most_frozen = most_frozen.max(stats.immutable_memtables);
        }
        i += 1;
        assert!(i < 10_000, "no flush happened");
    }
    assert_eq!(most_frozen, 2, "frozen memtables should wait until there are three");
    let stats = db.stats();
    assert_eq!((stats.flushes, stats.files_per_level[0], stats.immutable_memtables), (1, 1, 0));
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(collect(db.iter()), expected);

    // A frozen memtable short of a full flush is written when asked to.
    for j in 0..60u32 {
        let key = format!("k{:03}", j % 40).into_bytes();
        let value = format!("w{j}").into_bytes();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    db.flush().unwrap();
    let stats = db.stats();
    assert_eq!((stats.flushes, stats.immutable_memtables, stats.files_per_level[0]), (2, 0, 2), "{stats:?}");
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(collect(db.iter()), expected);
    drop(db);
    let db = Db::open_with_fs(Arc::new(fs), "/m", options).unwrap();
    assert_eq!(collect(db.iter()), expected);
}

#[test]
fn flush_writes_frozen_memtables_short_of_a_full_flush_with_background_threads() {
    let mut options = Options::tiny_for_tests();
    options.memtables_per_flush = 3;
    options.max_immutable_memtables = 3;
    let db = Db::open_in_memory(options).unwrap();
    let mut i = 0u32;
    // One frozen memtable, which waits for two more before the flush thread takes it.
    while db.stats().immutable_memtables == 0 {
        db.put(format!("k{i:05}").as_bytes(), &[7u8; 50]).unwrap();
        i += 1;
        assert!(i < 10_000, "the memtable never froze");
    }
    assert_eq!(db.stats().flushes, 0);
    db.flush().unwrap();
    let stats = db.stats();
    assert_eq!((stats.immutable_memtables, stats.flushes), (0, 1), "{stats:?}");
    assert_eq!(db.iter().count(), i as usize);
}
