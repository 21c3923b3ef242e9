//! `stampkv backup` and `stampkv restore`: a backup taken by the `stampkv` process while
//! this (another) process holds the database open and commits continuously restores to a
//! database that passes `verify` and holds exactly a prefix of the acknowledged commits,
//! including every commit acknowledged before the backup began. Bad input: one clear line
//! and a non-zero exit.

use crate::common::{fails_with, stampkv};
use stampkv::engine::{Options, SyncMode};
use stampkv::{key, Kv, KvOptions, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The engine sizes of a test: tiny memtables and files, so flushes and compactions run
/// all the time while the backup reads the directory.
fn kv_options() -> KvOptions {
    let mut engine = Options::tiny_for_tests();
    engine.sync_mode = SyncMode::Always;
    KvOptions::with_engine(engine)
}

/// The commits a database holds: `["n", i]` for i in 0..n, each with value i. Checks that
/// they are a prefix and returns n.
fn prefix_in(dir: &Path) -> u64 {
    let kv = Kv::open(dir, kv_options()).unwrap();
    let mut n = 0;
    loop {
        let entry = kv.get::<Value>(&key!["n", n as f64]).unwrap();
        match entry.value {
            Some(value) => assert_eq!(value, Value::from(n as f64), "commit {n}"),
            None => break,
        }
        n += 1;
    }
    // Nothing after the gap: a prefix, not a selection.
    for later in n + 1..n + 50 {
        assert!(
            kv.get::<Value>(&key!["n", later as f64]).unwrap().value.is_none(),
            "commit {later} after a hole"
        );
    }
    kv.close().unwrap();
    n
}

#[test]
fn a_backup_taken_while_another_process_commits_restores_a_verified_prefix() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    let kv = Kv::open(&db_dir, kv_options()).unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (kv, acked, stop) = (kv.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) {
                kv.set(&key!["n", i as f64], &Value::from(i as f64)).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    let mut rounds = Vec::new();
    let mut previous = 0;
    for round in 0..4 {
        // Enough commits between backups that memtables fill, flush and compact.
        while acked.load(Ordering::Acquire) < previous + 100 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let before = acked.load(Ordering::Acquire);
        previous = before;
        let dest = root.path().join(format!("backup-{round}"));
        let (code, stdout, stderr) = stampkv(&["backup", "--path", s(&db_dir), s(&dest)]);
        assert_eq!(code, 0, "{stdout} {stderr}");
        assert!(stderr.is_empty(), "no progress bar when stderr is not a terminal: {stderr:?}");
        assert!(
            stdout.starts_with(&format!("backed up {} into {}", db_dir.display(), dest.display())),
            "{stdout}"
        );
        let sequence: u64 =
            stdout.split("at commit ").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
        rounds.push((dest, before, sequence));
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    let total = acked.load(Ordering::Acquire);
    kv.close().unwrap();
    for (round, (dest, before, sequence)) in rounds.into_iter().enumerate() {
        let restored = root.path().join(format!("restored-{round}"));
        let (code, stdout, stderr) = stampkv(&["restore", "--path", s(&restored), s(&dest)]);
        assert_eq!(code, 0, "{stdout} {stderr}");
        assert!(stdout.contains(&format!("at commit {sequence}")) && stdout.contains("verified"), "{stdout}");
        let (code, stdout, _) = stampkv(&["verify", "--path", s(&restored)]);
        assert_eq!(code, 0, "{stdout}");
        let n = prefix_in(&restored);
        assert!(
            n >= before,
            "round {round}: {n} commits, {before} were acknowledged before the backup began"
        );
        assert!(n <= total, "round {round}: {n} commits, only {total} were made");
        assert_eq!(n, sequence, "round {round}: each set is one commit, numbered from 1");
    }
}

#[test]
fn a_backup_of_a_closed_database_is_complete_and_the_backup_is_a_database() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    let kv = Kv::open(&db_dir, kv_options()).unwrap();
    for i in 0..300u64 {
        kv.set(&key!["n", i as f64], &Value::from(i as f64)).unwrap();
    }
    kv.close().unwrap();
    let dest = root.path().join("backup");
    let (code, stdout, _) = stampkv(&["backup", "--path", s(&db_dir), s(&dest)]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("at commit 300:") && stdout.contains("hard-linked"), "{stdout}");
    assert!(dest.join("BACKUP").exists());
    // The backup directory verifies as it is.
    assert_eq!(stampkv(&["verify", "--path", s(&dest)]).0, 0);
    let restored = root.path().join("restored");
    assert_eq!(stampkv(&["restore", "--path", s(&restored), s(&dest)]).0, 0);
    assert_eq!(prefix_in(&restored), 300);
}

#[test]
fn bad_input_gets_one_clear_line_and_a_non_zero_exit() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    let kv = Kv::open(&db_dir, kv_options()).unwrap();
    kv.set(&key!["a"], &Value::from(1.0)).unwrap();
    kv.close().unwrap();
    let missing = root.path().join("missing");
    let plain = root.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "not a database").unwrap();
    let dest = root.path().join("dest");

    fails_with(stampkv(&["backup", "--path", s(&missing), s(&dest)]), "does not exist");
    fails_with(stampkv(&["backup", "--path", s(&plain), s(&dest)]), "is not a stampkv database");
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 1, "nothing was created in the plain directory");
    fails_with(stampkv(&["backup", "--path", s(&db_dir), s(&plain)]), "exists and is not empty");
    let file = plain.join("notes.txt");
    fails_with(stampkv(&["backup", "--path", s(&db_dir), s(&file)]), "is not a directory");

    let backup = root.path().join("backup");
    assert_eq!(stampkv(&["backup", "--path", s(&db_dir), s(&backup)]).0, 0);
    fails_with(stampkv(&["restore", "--path", s(&db_dir), s(&backup)]), "exists and is not empty");
    fails_with(stampkv(&["restore", "--path", s(&dest), s(&missing)]), "does not exist");
    fails_with(stampkv(&["restore", "--path", s(&dest), s(&plain)]), "not a complete stampkv backup");
    // A truncated BACKUP file: the backup is incomplete.
    let text = std::fs::read_to_string(backup.join("BACKUP")).unwrap();
    std::fs::write(backup.join("BACKUP"), &text[..text.len() / 2]).unwrap();
    fails_with(stampkv(&["restore", "--path", s(&dest), s(&backup)]), "its BACKUP file is cut short");
    // Missing arguments: clap's usage error (exit 2), no panic.
    let (code, _, stderr) = stampkv(&["backup", "--path", s(&db_dir)]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn a_backup_works_on_a_database_another_process_holds_locked() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    let kv = Kv::open(&db_dir, kv_options()).unwrap();
    for i in 0..50u64 {
        kv.set(&key!["n", i as f64], &Value::from(i as f64)).unwrap();
    }
    // This process holds the lock: commands that need the database closed refuse clearly,
    // the backup does not need it.
    fails_with(stampkv(&["verify", "--path", s(&db_dir)]), "is open in another process");
    let dest = root.path().join("backup");
    let (code, stdout, stderr) = stampkv(&["backup", "--path", s(&db_dir), s(&dest)]);
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert!(stdout.contains("at commit 50:"), "{stdout}");
    // Restoring over the open database is refused, and touches nothing.
    fails_with(stampkv(&["restore", "--path", s(&db_dir), s(&dest)]), "exists and is not empty");
    kv.close().unwrap();
    let restored = root.path().join("restored");
    assert_eq!(stampkv(&["restore", "--path", s(&restored), s(&dest)]).0, 0);
    assert_eq!(prefix_in(&restored), 50);
}

#[test]
fn an_application_checkpoints_its_own_open_database_and_the_cli_restores_it() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    let kv = Kv::open(&db_dir, kv_options()).unwrap();
    for i in 0..200u64 {
        kv.set(&key!["n", i as f64], &Value::from(i as f64)).unwrap();
    }
    let dest = root.path().join("backup");
    let info = kv.engine().checkpoint(&dest).unwrap();
    assert_eq!(info.sequence, 200);
    assert!(info.linked > 0, "tables are hard-linked: {info:?}");
    // The database goes on after the checkpoint; the checkpoint does not.
    kv.set(&key!["n", 200.0], &Value::from(200.0)).unwrap();
    kv.close().unwrap();
    let restored = root.path().join("restored");
    let (code, stdout, _) = stampkv(&["restore", "--path", s(&restored), s(&dest)]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(prefix_in(&restored), 200);
    assert_eq!(prefix_in(&db_dir), 201);
}
