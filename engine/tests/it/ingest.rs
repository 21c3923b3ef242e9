//! Bulk ingestion (`Db::ingest`): entries with their own sequence numbers, installed as one
//! unit, durable, and refused whenever installing them would break what readers see.

use stampkv_engine::{BackgroundMode, Db, Error, Options, WriteBatch};
use std::path::Path;

fn options() -> Options {
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Inline;
    options
}

fn table_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Sequence numbers that are not in key order: what a restore must keep.
fn seq_of(i: u32) -> u64 {
    u64::from((i * 7919) % 1000) + 1
}

#[test]
fn a_new_database_takes_entries_with_their_own_sequence_numbers_and_keeps_them_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let mut ingest = db.ingest().unwrap();
        assert_eq!(ingest.base_sequence(), 0);
        for i in 0..600 {
            let expiry = match i % 3 {
                0 => Some(u64::MAX - 1),
                1 => Some(1), // long expired
                _ => None,
            };
            ingest.put(&key(i), format!("value {i}").as_bytes(), seq_of(i), expiry).unwrap();
        }
        assert_eq!(ingest.entries(), 600);
        // Nothing is visible before `finish`.
        assert_eq!(db.get(&key(0)).unwrap(), None);
        let summary = ingest.finish(5000).unwrap();
        assert_eq!(summary.entries, 600);
        assert!(summary.files > 1, "tiny tables: several files");
        assert_eq!(summary.level, 6, "the deepest level of a database without tables");
        assert_eq!(summary.last_sequence, 5000);
        assert_eq!(db.last_sequence(), 5000);
        let next = db.put(b"after", b"x").unwrap();
        assert_eq!(next, 5001);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.last_sequence(), 5001);
    for i in 0..600 {
        let found = db.get_entry(&key(i)).unwrap();
        if i % 3 == 1 {
            assert_eq!(found, None, "expired entry {i}");
            continue;
        }
        let entry = found.unwrap();
        assert_eq!(entry.value, format!("value {i}").into_bytes());
        assert_eq!(entry.seq, seq_of(i));
        assert_eq!(entry.expires_at_ms, (i % 3 == 0).then_some(u64::MAX - 1));
    }
    assert_eq!(db.iter().count(), 401);
    db.compact().unwrap();
    assert_eq!(db.get_entry(&key(3)).unwrap().unwrap().seq, seq_of(3));
}

#[test]
fn keys_out_of_order_and_sequence_numbers_out_of_range_are_refused() {
    let db = Db::open_in_memory(options()).unwrap();
    let mut ingest = db.ingest().unwrap();
    ingest.put(b"b", b"1", 1, None).unwrap();
    for bad in [&b"b"[..], b"a"] {
        match ingest.put(bad, b"2", 2, None) {
            Err(Error::InvalidArgument(message)) => assert!(message.contains("ascending"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
    for seq in [0, 1 << 56] {
        assert!(matches!(ingest.put(b"c", b"3", seq, None), Err(Error::InvalidArgument(_))));
    }
    ingest.put(b"c", b"3", (1 << 56) - 1, None).unwrap();
    ingest.finish(0).unwrap();
    assert_eq!(db.last_sequence(), (1 << 56) - 1);
}

#[test]
fn an_unfinished_ingest_leaves_the_database_and_its_directory_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"existing", b"1").unwrap();
    db.flush().unwrap();
    let before = table_files(dir.path());
    {
        let mut ingest = db.ingest().unwrap();
        for i in 0..300 {
            ingest.put(&key(i), b"v", 10 + u64::from(i), None).unwrap();
        }
        assert!(table_files(dir.path()).len() > before.len());
    }
    assert_eq!(table_files(dir.path()), before);
    assert_eq!(db.get(&key(0)).unwrap(), None);
    assert_eq!(db.last_sequence(), 1);
}

#[test]
fn a_commit_during_the_ingest_makes_finish_fail_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut ingest = db.ingest().unwrap();
    ingest.put(b"a", b"ingested", 1, None).unwrap();
    db.put(b"z", b"committed").unwrap();
    match ingest.finish(0) {
        Err(Error::InvalidArgument(message)) => assert!(message.contains("changed"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"z").unwrap(), Some(b"committed".to_vec()));
    assert_eq!(db.last_sequence(), 1);
    let files = table_files(dir.path());
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert!(table_files(dir.path()).len() <= files.len() + 1);
}

#[test]
fn into_a_database_with_data_only_newer_sequence_numbers_go_and_they_shadow_older_versions() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        db.put(b"k1", b"old").unwrap(); // 1
        db.put(b"k2", b"old").unwrap(); // 2
        db.delete(b"k3").unwrap(); // 3: a tombstone only, in the log

        // Sequence numbers at or below the last commit: refused, nothing changes.
        let mut ingest = db.ingest().unwrap();
        ingest.put(b"k1", b"stale", 3, None).unwrap();
        ingest.put(b"k4", b"stale", 9, None).unwrap();
        match ingest.finish(0) {
            Err(Error::InvalidArgument(message)) => assert!(message.contains("not newer"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(db.get(b"k1").unwrap(), Some(b"old".to_vec()));
        assert_eq!(db.get(b"k4").unwrap(), None);

        let mut ingest = db.ingest().unwrap();
        assert_eq!(ingest.base_sequence(), 3);
        ingest.put(b"k1", b"new", 7, None).unwrap();
        ingest.put(b"k3", b"new", 4, None).unwrap();
        let summary = ingest.finish(0).unwrap();
        assert_eq!(summary.level, 0);
        assert_eq!(summary.last_sequence, 7);
        let entry = db.get_entry(b"k1").unwrap().unwrap();
        assert_eq!((entry.value.as_slice(), entry.seq), (&b"new"[..], 7));
        assert_eq!(db.get(b"k2").unwrap(), Some(b"old".to_vec()));
        assert_eq!(db.get_entry(b"k3").unwrap().unwrap().seq, 4);
        let mut batch = WriteBatch::new();
        batch.put(b"k2", b"newest");
        assert_eq!(db.write(batch).unwrap(), 8);
        db.close().unwrap();
    }
    // The log replays after the new last sequence number without complaint.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.last_sequence(), 8);
    let seen: Vec<(Vec<u8>, Vec<u8>, u64)> =
        db.iter().map(|e| e.unwrap()).map(|e| (e.key, e.value, e.seq)).collect();
    assert_eq!(
        seen,
        vec![
            (b"k1".to_vec(), b"new".to_vec(), 7),
            (b"k2".to_vec(), b"newest".to_vec(), 8),
            (b"k3".to_vec(), b"new".to_vec(), 4),
        ]
    );
    db.compact().unwrap();
    assert_eq!(db.iter().count(), 3);
    assert_eq!(db.get_entry(b"k1").unwrap().unwrap().seq, 7);
}

#[test]
fn commits_that_left_no_table_are_flushed_before_the_ingest_so_reopening_replays_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        // Empty commits: sequence numbers used, nothing in the memtable, records in the log.
        db.write(WriteBatch::new()).unwrap();
        db.write(WriteBatch::new()).unwrap();
        let mut ingest = db.ingest().unwrap();
        ingest.put(b"a", b"1", 1, None).unwrap();
        let summary = ingest.finish(0).unwrap();
        assert_eq!(summary.level, 6);
        assert_eq!(summary.last_sequence, 2);
        assert_eq!(db.get_entry(b"a").unwrap().unwrap().seq, 1);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.last_sequence(), 2);
    assert_eq!(db.get_entry(b"a").unwrap().unwrap().seq, 1);
}

#[test]
fn a_live_snapshot_must_not_see_ingested_entries_appear() {
    let db = Db::open_in_memory(options()).unwrap();
    db.write(WriteBatch::new()).unwrap();
    db.write(WriteBatch::new()).unwrap();
    let snapshot = db.snapshot();
    assert_eq!(snapshot.sequence(), 2);
    let mut ingest = db.ingest().unwrap();
    ingest.put(b"a", b"1", 2, None).unwrap();
    match ingest.finish(0) {
        Err(Error::InvalidArgument(message)) => assert!(message.contains("snapshot"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(snapshot.get(b"a").unwrap(), None);
    // Newer than the snapshot: allowed, and the snapshot still does not see it.
    let mut ingest = db.ingest().unwrap();
    ingest.put(b"a", b"1", 3, None).unwrap();
    ingest.finish(0).unwrap();
    assert_eq!(snapshot.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn ingesting_with_background_threads_works_and_compacts_level_zero_later() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::tiny_for_tests()).unwrap();
    for i in 0..200 {
        db.put(&key(i), b"committed").unwrap();
    }
    let base = db.last_sequence();
    let mut ingest = db.ingest().unwrap();
    for i in 100..400 {
        ingest.put(&key(i), b"ingested", base + 1, None).unwrap();
    }
    let summary = ingest.finish(0).unwrap();
    assert_eq!(summary.level, 0);
    for i in 0..400 {
        let expected: &[u8] = if i < 100 { b"committed" } else { b"ingested" };
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(expected), "key {i}");
    }
    db.compact().unwrap();
    assert_eq!(db.iter().count(), 400);
    assert_eq!(db.get_entry(&key(150)).unwrap().unwrap().seq, base + 1);
}
