//! What `close` reports after a failure, what does not count as one, and the engine's lock
//! order under load in both background modes.
//!
//! The lock order is checked by the engine itself: with invariant checks on (debug builds
//! and the `invariants` feature) every lock taken out of order panics — in a background
//! thread that poisons the database, which `close` then reports. So a workload that
//! reaches every locking path in a mode and closes cleanly has kept the order there.

use stampkv_engine::fs::{FaultOp, FaultyFs, MemFs};
use stampkv_engine::{BackgroundMode, Db, Error, Options, SyncMode, WriteBatch, WriteOptions};
use std::io::ErrorKind;
use std::sync::Arc;
use std::thread;

const MODES: [BackgroundMode; 2] = [BackgroundMode::Threads, BackgroundMode::Inline];

fn options(background: BackgroundMode) -> Options {
    let mut options = Options::tiny_for_tests();
    options.background = background;
    options
}

#[test]
fn close_returns_the_failure_of_a_background_flush_in_both_modes() {
    for mode in MODES {
        let faulty = FaultyFs::new(Arc::new(MemFs::new()));
        let db = Db::open_with_fs(Arc::new(faulty.clone()), "/db", options(mode)).expect("open");
        db.put(b"acknowledged", b"1").expect("put");
        // `flush` creates the next WAL segment, then the flush creates a table: fail that.
        faulty.fail(FaultOp::Create, faulty.calls(FaultOp::Create) + 2, ErrorKind::StorageFull, true);
        let flushed = db.flush();
        assert!(flushed.is_err(), "{mode:?}: the failed flush is reported to the waiting caller");
        assert!(db.put(b"after", b"2").is_err(), "{mode:?}: no commit after the failure");
        assert_eq!(db.get(b"acknowledged").expect("reads still work"), Some(b"1".to_vec()));
        match db.close() {
            Err(Error::Poisoned { reason }) => {
                assert!(reason.contains("injected StorageFull"), "{mode:?}: {reason}")
            }
            other => panic!("{mode:?}: close of a poisoned database returned {other:?}"),
        }
    }
}

#[test]
fn close_returns_the_failure_of_a_background_compaction() {
    let faulty = FaultyFs::new(Arc::new(MemFs::new()));
    let db =
        Db::open_with_fs(Arc::new(faulty.clone()), "/db", options(BackgroundMode::Threads)).expect("open");
    for i in 0..200u32 {
        db.put(format!("key{i:05}").as_bytes(), &[7; 64]).expect("put");
    }
    db.flush().expect("flush");
    // Every later file creation fails: the manual compaction's first output table.
    faulty.fail(FaultOp::Create, faulty.calls(FaultOp::Create) + 1, ErrorKind::Other, true);
    assert!(db.compact().is_err(), "the failed compaction is reported");
    assert!(matches!(db.close(), Err(Error::Poisoned { .. })), "close reports it too");
}

#[test]
fn a_closed_healthy_database_closes_ok_and_a_second_shutdown_does_nothing() {
    let db = Db::open_in_memory(options(BackgroundMode::Threads)).expect("open");
    db.put(b"k", b"v").expect("put");
    db.shutdown().expect("first shutdown");
    db.shutdown().expect("a second shutdown does nothing");
    assert!(matches!(db.put(b"k", b"w"), Err(Error::Closed)));
}

#[test]
fn an_oversized_batch_is_refused_without_poisoning_the_database() {
    for mode in MODES {
        let db = Db::open_in_memory(options(mode)).expect("open");
        db.put(b"before", b"1").expect("put");
        let mut batch = WriteBatch::new();
        batch.put(b"huge", &vec![0u8; 128 << 20]);
        match db.write_opt(batch, WriteOptions::with_sync(Some(true))) {
            Err(Error::InvalidArgument(what)) => assert!(what.contains("too large"), "{what}"),
            other => panic!("{mode:?}: an oversized batch gave {other:?}"),
        }
        db.put(b"after", b"2").expect("the database still takes commits");
        assert_eq!(db.get(b"after").expect("get"), Some(b"2".to_vec()));
        db.close().expect("and closes cleanly");
    }
}

/// Writers, builders that read, snapshots and scans, flushes and manual compactions all at
/// once: every path that takes engine locks, in both modes.
#[test]
fn every_locking_path_keeps_the_one_lock_order_in_both_modes() {
    for mode in MODES {
        for sync_mode in [SyncMode::Always, SyncMode::Buffered] {
            let mut options = options(mode);
            options.sync_mode = sync_mode;
            let db = Arc::new(Db::open_in_memory(options).expect("open"));
            let workers: Vec<_> = (0..4u32)
                .map(|t| {
                    let db = db.clone();
                    thread::spawn(move || {
                        for i in 0..150u32 {
                            let key = format!("t{t}-{:03}", i % 40);
                            match i % 6 {
                                0 => {
                                    db.write_with(WriteOptions::default(), |view| {
                                        let seen =
                                            view.get(key.as_bytes())?.map(|e| e.value.len()).unwrap_or(0);
                                        let mut batch = WriteBatch::new();
                                        batch.put(key.as_bytes(), &vec![t as u8; seen % 50 + 10]);
                                        Ok::<_, Error>((batch, ()))
                                    })
                                    .expect("write_with");
                                }
                                1 => {
                                    let snapshot = db.snapshot();
                                    let _ = snapshot.get(key.as_bytes()).expect("snapshot get");
                                    assert!(db
                                        .range(b"t".as_slice()..b"u".as_slice())
                                        .rev()
                                        .take(5)
                                        .all(|e| e.is_ok()));
                                }
                                2 if t == 0 && i % 30 == 2 => db.flush().expect("flush"),
                                3 if t == 1 && i % 50 == 3 => db.compact().expect("compact"),
                                4 => {
                                    let _ = db.stats();
                                    db.delete(key.as_bytes()).expect("delete");
                                }
                                _ => {
                                    db.put(key.as_bytes(), &[i as u8; 90]).expect("put");
                                }
                            }
                        }
                    })
                })
                .collect();
            for worker in workers {
                worker.join().expect("a worker panicked (a lock taken out of order panics)");
            }
            let db = Arc::try_unwrap(db).expect("sole owner");
            db.close().unwrap_or_else(|e| panic!("{mode:?} {sync_mode:?}: close after the workload: {e}"));
        }
    }
}

/// On the real file system, opening waits a moment for a held `LOCK` (a just-closed database
/// whose lock a starting child process still shares) and succeeds once it is let go; a
/// database that stays open is refused with `Error::Locked`.
#[test]
fn opening_waits_briefly_for_a_lock_that_is_let_go_and_refuses_one_that_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let held = Db::open(dir.path(), Options::default()).expect("open");
    let opener = {
        let path = dir.path().to_owned();
        thread::spawn(move || Db::open(&path, Options::default()).map(|db| db.close()))
    };
    thread::sleep(std::time::Duration::from_millis(100));
    held.close().expect("close");
    assert!(matches!(opener.join().expect("join"), Ok(Ok(()))), "the lock let go was not taken");

    let held = Db::open(dir.path(), Options::default()).expect("open");
    let started = std::time::Instant::now();
    let refused = Db::open(dir.path(), Options::default());
    assert!(matches!(refused, Err(Error::Locked { .. })), "a database open elsewhere was opened again");
    assert!(started.elapsed() >= std::time::Duration::from_millis(400), "it was refused without waiting");
    held.close().expect("close");
}
