//! A database opened to read only (`Kv::open_read_only`): it sees everything a normal open
//! would recover, writes nothing to the directory, shares the database with other readers
//! and excludes writers (and is excluded by them).

use stampkv::{key, Kv, KvError, KvOptions, KvValue, ListOptions, Selector, SetOptions, StorageErrorKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Every file of the directory with its length and contents' checksum.
fn files(dir: &Path) -> BTreeMap<String, (u64, u32)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let data = std::fs::read(entry.path()).unwrap();
            (entry.file_name().into_string().unwrap(), (data.len() as u64, crc32fast::hash(&data)))
        })
        .collect()
}

fn storage_kind(error: &KvError) -> Option<StorageErrorKind> {
    match error {
        KvError::Storage(e) => Some(e.kind()),
        _ => None,
    }
}

#[test]
fn readers_see_the_recovered_state_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kv = Kv::open(dir.path(), KvOptions::default()).unwrap();
    for i in 0..200u64 {
        kv.set(&key!["n", i], &KvValue::U64(i)).unwrap();
    }
    kv.engine().flush().unwrap();
    // These stay in the log only: a reader must replay them.
    kv.set(&key!["n", 7u64], &KvValue::U64(700)).unwrap();
    kv.delete(&key!["n", 8u64]).unwrap();
    let short = SetOptions { expire_in: Some(Duration::from_millis(1)) };
    kv.set_with(&key!["gone"], &KvValue::U64(1), short).unwrap();
    let last = kv.set(&key!["last"], &KvValue::U64(1)).unwrap();
    kv.close().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let before = files(dir.path());

    let first = Kv::open_read_only(dir.path(), KvOptions::default()).unwrap();
    let second = Kv::open_read_only(dir.path(), KvOptions::default()).unwrap();
    for reader in [&first, &second] {
        assert_eq!(reader.get::<KvValue>(&key!["n", 7u64]).unwrap().value, Some(KvValue::U64(700)));
        assert_eq!(reader.get::<KvValue>(&key!["n", 8u64]).unwrap().value, None);
        assert_eq!(reader.get::<KvValue>(&key!["gone"]).unwrap().value, None, "expired");
        assert_eq!(reader.get::<KvValue>(&key!["last"]).unwrap().versionstamp, Some(last));
        let listed: Vec<_> =
            reader.list::<KvValue>(&Selector::prefix(key!["n"]), &ListOptions::default()).unwrap().collect();
        assert_eq!(listed.len(), 199);
        let reverse = ListOptions { reverse: true, limit: Some(1), ..ListOptions::default() };
        let newest = reader.list::<KvValue>(&Selector::prefix(key!["n"]), &reverse).unwrap().next().unwrap();
        assert_eq!(newest.unwrap().key, key!["n", 199u64]);
        let refused = reader.set(&key!["x"], &KvValue::U64(1)).unwrap_err();
        assert_eq!(storage_kind(&refused), Some(StorageErrorKind::ReadOnly), "{refused}");
    }
    drop((first, second));
    assert_eq!(files(dir.path()), before, "a read-only open wrote to the directory");
}

#[test]
fn readers_and_a_writer_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    Kv::open(dir.path(), KvOptions::default()).unwrap().close().unwrap();
    let writer = Kv::open(dir.path(), KvOptions::default()).unwrap();
    let refused = Kv::open_read_only(dir.path(), KvOptions::default()).unwrap_err();
    assert_eq!(storage_kind(&refused), Some(StorageErrorKind::Locked), "{refused}");
    let holder = format!("held by process {}", std::process::id());
    assert!(refused.to_string().contains(&holder), "the writer is named: {refused}");
    writer.close().unwrap();
    let reader = Kv::open_read_only(dir.path(), KvOptions::default()).unwrap();
    let refused = Kv::open(dir.path(), KvOptions::default()).unwrap_err();
    assert_eq!(storage_kind(&refused), Some(StorageErrorKind::Locked), "{refused}");
    drop(reader);
    Kv::open(dir.path(), KvOptions::default()).unwrap().close().unwrap();
}

#[test]
fn a_directory_that_is_not_a_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let refused = Kv::open_read_only(dir.path(), KvOptions::default()).unwrap_err();
    assert!(refused.to_string().contains("does not exist"), "{refused}");
    assert!(files(dir.path()).is_empty());
}
