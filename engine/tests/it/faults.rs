//! Fault injection: a write, sync, create, rename or directory sync fails (EIO or ENOSPC)
//! at the N-th call, for every N a workload reaches. Whatever fails, the database must
//! (1) report the failure and refuse every later commit — never acknowledge a commit it
//! cannot make durable — while reads keep working, and (2) after a power loss and reopen,
//! hold every acknowledged commit and nothing after a hole (a prefix of the commits).

use stampkv_engine::fs::{CrashPolicy, FaultOp, FaultyFs, Fs, MemFs};
use stampkv_engine::{BackgroundMode, Db, Error, Options};
use std::io::ErrorKind;
use std::sync::Arc;

const COMMITS: u32 = 120;

fn options() -> Options {
    // Tiny sizes: the workload rotates the WAL, flushes and compacts many times, so
    // failures hit every kind of file operation. Inline background work makes each run
    // deterministic.
    // A small manifest limit makes manifests roll over (a rename of CURRENT) too.
    let mut options = Options::tiny_for_tests();
    options.background = BackgroundMode::Inline;
    options.max_manifest_bytes = 128;
    options
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 40 + (i % 7) as usize * 30]
}

/// Runs the workload with `op` failing at call `nth` (counted after open); returns the
/// number of commits acknowledged and whether a failure was injected.
fn run(op: FaultOp, nth: u64, kind: ErrorKind) -> (u32, bool) {
    let mem = MemFs::new();
    let faulty = FaultyFs::new(Arc::new(mem.clone()));
    let db = Db::open_with_fs(Arc::new(faulty.clone()), "/f", options()).expect("open");
    faulty.fail(op, faulty.calls(op) + nth, kind, false);
    let context = format!("{op:?} #{nth} {kind:?}");
    let mut acknowledged = 0;
    let mut failed = false;
    for i in 0..COMMITS {
        match db.put(&key(i), &value(i)) {
            Ok(_) if !failed => acknowledged = i + 1,
            Ok(_) => panic!("{context}: commit {i} acknowledged after an earlier failure"),
            Err(e) => {
                failed = true;
                assert!(matches!(e, Error::Io { .. } | Error::Poisoned { .. }), "{context}: {e}");
            }
        }
    }
    if failed {
        // Reads go on working; writes, flushes and compactions are refused.
        if acknowledged > 0 {
            let last = acknowledged - 1;
            assert_eq!(db.get(&key(last)).expect("read after failure"), Some(value(last)), "{context}");
        }
        assert!(db.flush().is_err() && db.compact().is_err(), "{context}: maintenance after failure");
    }
    let injected = faulty.injected() > 0;
    assert_eq!(failed, injected, "{context}: an injected failure must surface as an error");
    drop(db);
    // Power loss: everything not synced is gone.
    let crashed = mem.crash_clone(CrashPolicy::DropAll);
    let db = Db::open_with_fs(Arc::new(crashed), "/f", options())
        .unwrap_or_else(|e| panic!("{context}: reopen after failure: {e}"));
    let keys: Vec<Vec<u8>> = db.iter().map(|e| e.expect("scan").key).collect();
    let present = keys.len() as u32;
    assert!(
        present >= acknowledged && present <= acknowledged + 1,
        "{context}: {present} commits survived, {acknowledged} were acknowledged"
    );
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(*k, key(i as u32), "{context}: hole in the recovered commits");
        assert_eq!(db.get(k).expect("get"), Some(value(i as u32)), "{context}");
    }
    (acknowledged, injected)
}

/// Fails the N-th call of `op` for N = 1, 2, ... until a run no longer reaches it.
fn every_call_of(op: FaultOp, kind: ErrorKind) {
    let mut nth = 1;
    loop {
        let (_, injected) = run(op, nth, kind);
        if !injected {
            assert!(nth > 1, "{op:?}: the workload never performed it");
            return;
        }
        nth += 1;
    }
}

#[test]
fn a_failed_fsync_stops_commits_and_loses_nothing_acknowledged() {
    every_call_of(FaultOp::Sync, ErrorKind::Other);
}

#[test]
fn a_failed_write_stops_commits_and_loses_nothing_acknowledged() {
    every_call_of(FaultOp::Write, ErrorKind::StorageFull);
}

#[test]
fn failed_creates_renames_and_directory_syncs_are_reported() {
    every_call_of(FaultOp::Create, ErrorKind::StorageFull);
    every_call_of(FaultOp::Rename, ErrorKind::Other);
    every_call_of(FaultOp::SyncDir, ErrorKind::Other);
}

#[test]
fn a_database_that_hit_a_failure_reopens_cleanly_once_the_disk_recovers() {
    let mem = MemFs::new();
    let faulty = FaultyFs::new(Arc::new(mem.clone()));
    let db = Db::open_with_fs(Arc::new(faulty.clone()), "/r", options()).expect("open");
    db.put(b"before", b"1").expect("put");
    faulty.fail(FaultOp::Sync, faulty.calls(FaultOp::Sync) + 1, ErrorKind::Other, true);
    assert!(db.put(b"during", b"2").is_err());
    drop(db);
    faulty.heal();
    let db = Db::open_with_fs(Arc::new(faulty), "/r", options()).expect("reopen");
    assert_eq!(db.get(b"before").expect("get"), Some(b"1".to_vec()));
    db.put(b"after", b"3").expect("writes work again");
    assert!(mem.list(std::path::Path::new("/r")).expect("list").iter().any(|n| n == "CURRENT"));
}

#[test]
fn a_failure_while_opening_fails_the_open_and_a_later_open_finds_everything() {
    let mem = MemFs::new();
    {
        let db = Db::open_with_fs(Arc::new(mem.clone()), "/o", options()).expect("open");
        for i in 0..COMMITS {
            db.put(&key(i), &value(i)).expect("put");
        }
        // Leave commits in the WAL so that opening replays and flushes them.
        std::mem::forget(db);
    }
    let crashed = mem.crash_clone(CrashPolicy::KeepAll);
    for op in [FaultOp::Write, FaultOp::Sync, FaultOp::Create, FaultOp::Rename, FaultOp::SyncDir] {
        for nth in 1..=3 {
            let faulty = FaultyFs::new(Arc::new(crashed.crash_clone(CrashPolicy::KeepAll)));
            faulty.fail(op, nth, ErrorKind::Other, false);
            let opened = Db::open_with_fs(Arc::new(faulty.clone()), "/o", options());
            assert_eq!(opened.is_err(), faulty.injected() > 0, "{op:?} #{nth}: failure not reported");
            drop(opened);
            faulty.heal();
            let db = Db::open_with_fs(Arc::new(faulty), "/o", options()).expect("reopen after healing");
            let entries: Vec<_> = db.iter().collect::<Result<_, _>>().expect("scan");
            let count = entries.len() as u32;
            assert_eq!(count, COMMITS, "{op:?} #{nth}: acknowledged commits lost");
        }
    }
}
