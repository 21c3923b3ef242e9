//! Deferred commits (`Db::write_with_deferred`): acknowledged only once durable and
//! visible, every callback called exactly once (also when the database closes with commits
//! queued), and a failed sync reported to every waiting commit.

use stampkv_engine::fs::{CrashPolicy, FaultOp, FaultyFs, MemFs};
use stampkv_engine::{
    BackgroundMode, Db, DurableCallback, Error, Options, SyncMode, WriteBatch, WriteOptions,
};
use std::io::ErrorKind;
use std::sync::mpsc;
use std::sync::Arc;

fn options() -> Options {
    let mut options = Options::tiny_for_tests();
    options.sync_mode = SyncMode::Always;
    options.background = BackgroundMode::Threads;
    options
}

fn key(writer: u32, i: u32) -> Vec<u8> {
    format!("w{writer}-{i:05}").into_bytes()
}

/// Commits a put of `key` = `value` deferred, with `on_durable` as its callback; the
/// commit's sequence number.
fn put_then(db: &Db, key: &[u8], value: &[u8], on_durable: DurableCallback) -> u64 {
    let (seq, ()) = db
        .write_with_deferred(
            WriteOptions::default(),
            |_| {
                let mut batch = WriteBatch::new();
                batch.put(key, value);
                Ok::<_, Error>((batch, ()))
            },
            on_durable,
        )
        .expect("deferred commit");
    seq
}

/// Commits `key` deferred; the callback reports (key, whether it was visible, result).
fn put_deferred(db: &Arc<Db>, key: Vec<u8>, done: mpsc::Sender<(Vec<u8>, bool, Result<(), String>)>) -> u64 {
    let reader = db.clone();
    let written = key.clone();
    put_then(
        db,
        &written,
        &written,
        Box::new(move |result| {
            let visible = reader.get(&key).ok().flatten().as_deref() == Some(key.as_slice());
            let _ = done.send((key, visible, result.map_err(|e| e.to_string())));
        }),
    )
}

#[test]
fn deferred_commits_are_acknowledged_visible_and_survive_a_power_loss() {
    let mem = MemFs::new();
    let db = Arc::new(Db::open_with_fs(Arc::new(mem.clone()), "/d", options()).expect("open"));
    let (done, acks) = mpsc::channel();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (db, done) = (db.clone(), done.clone());
            std::thread::spawn(move || {
                (0..150).map(|i| put_deferred(&db, key(w, i), done.clone())).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = writers.into_iter().flat_map(|w| w.join().expect("writer")).collect();
    drop(done);
    let acknowledged: Vec<_> = acks.iter().take(600).collect();
    assert_eq!(acknowledged.len(), 600, "every deferred commit is acknowledged once");
    for (key, visible, result) in &acknowledged {
        assert_eq!(result, &Ok(()), "{}", String::from_utf8_lossy(key));
        assert!(visible, "{} acknowledged before it was visible", String::from_utf8_lossy(key));
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 600, "one sequence number per commit");
    // A power loss keeps only what was synced: every acknowledged commit.
    let crashed = mem.crash_clone(CrashPolicy::DropAll);
    let reopened = Db::open_with_fs(Arc::new(crashed), "/d", options()).expect("reopen after the crash");
    for (key, _, _) in &acknowledged {
        assert_eq!(
            reopened.get(key).expect("get"),
            Some(key.clone()),
            "{} lost",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
fn closing_with_deferred_commits_queued_acknowledges_them_all() {
    let mem = MemFs::new();
    let db = Arc::new(Db::open_with_fs(Arc::new(mem.clone()), "/c", options()).expect("open"));
    let (done, acks) = mpsc::channel();
    for i in 0..200 {
        put_deferred(&db, key(0, i), done.clone());
    }
    drop(done);
    db.shutdown().expect("close");
    let acknowledged: Vec<_> = acks.iter().collect();
    assert_eq!(acknowledged.len(), 200, "every callback ran before close returned or soon after");
    assert!(acknowledged.iter().all(|(_, _, result)| result.is_ok()));
    drop(db);
    let crashed = mem.crash_clone(CrashPolicy::DropAll);
    let reopened = Db::open_with_fs(Arc::new(crashed), "/c", options()).expect("reopen");
    for i in 0..200 {
        assert_eq!(reopened.get(&key(0, i)).expect("get"), Some(key(0, i)));
    }
}

#[test]
fn a_failed_sync_is_reported_to_the_waiting_commit_and_stops_later_ones() {
    let faulty = FaultyFs::new(Arc::new(MemFs::new()));
    let db = Arc::new(Db::open_with_fs(Arc::new(faulty.clone()), "/f", options()).expect("open"));
    let (done, acks) = mpsc::channel();
    put_deferred(&db, key(0, 0), done.clone());
    let (_, _, first) = acks.recv().expect("first acknowledgement");
    assert_eq!(first, Ok(()));
    faulty.fail(FaultOp::Sync, faulty.calls(FaultOp::Sync) + 1, ErrorKind::Other, true);
    put_deferred(&db, key(0, 1), done.clone());
    let (key1, visible, second) = acks.recv().expect("second acknowledgement");
    assert!(second.is_err(), "a commit whose sync failed is not acknowledged");
    assert!(!visible, "{} is visible though its sync failed", String::from_utf8_lossy(&key1));
    let later = db.write_with_deferred(
        WriteOptions::default(),
        |_| Ok::<_, Error>((WriteBatch::new(), ())),
        Box::new(|_| panic!("a refused commit has no callback")),
    );
    assert!(later.is_err(), "commits after a failed sync are refused");
}

#[test]
fn a_callback_may_drop_the_last_handle_of_the_database() {
    let mem = MemFs::new();
    let db = Arc::new(Db::open_with_fs(Arc::new(mem.clone()), "/l", options()).expect("open"));
    let (done, closed) = mpsc::channel();
    let last = db.clone();
    put_then(
        &db,
        b"k",
        b"v",
        Box::new(move |result| {
            // The caller has let go by now: this drop closes the database on the
            // durability thread itself.
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(last);
            let _ = done.send(result.is_ok());
        }),
    );
    drop(db);
    assert_eq!(
        closed.recv_timeout(std::time::Duration::from_secs(10)),
        Ok(true),
        "the database closed from its own durability thread"
    );
    let crashed = mem.crash_clone(CrashPolicy::DropAll);
    let reopened = Db::open_with_fs(Arc::new(crashed), "/l", options()).expect("reopen");
    assert_eq!(reopened.get(b"k").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn a_panicking_callback_neither_poisons_the_database_nor_stops_other_acknowledgements() {
    let db = Arc::new(Db::open_with_fs(Arc::new(MemFs::new()), "/p", options()).expect("open"));
    let (done, acks) = mpsc::channel();
    put_then(
        &db,
        b"panics",
        b"v",
        Box::new(|_| panic!("a caller's callback panics (this message is expected)")),
    );
    for i in 0..20 {
        put_deferred(&db, key(1, i), done.clone());
    }
    for _ in 0..20 {
        let (key, visible, result) =
            acks.recv_timeout(std::time::Duration::from_secs(10)).expect("acknowledged after the panic");
        assert_eq!(result, Ok(()), "{}", String::from_utf8_lossy(&key));
        assert!(visible);
    }
    db.put(b"after", b"v").expect("the database still takes commits");
    assert_eq!(db.get(b"panics").expect("get").as_deref(), Some(&b"v"[..]), "the commit itself stands");
}
