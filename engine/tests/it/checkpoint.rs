//! Online checkpoints: a copy taken while commits, flushes and compactions run holds
//! exactly the commits up to some point, including every commit acknowledged before the
//! checkpoint started; it restores into a database that verifies clean. Taken in process
//! (`Db::checkpoint`) and from the directory alone, as another process does
//! (`checkpoint`), on the real file system (hard links) and in memory (copies).

use stampkv_engine::fs::{Fs, MemFs, StdFs};
use stampkv_engine::{
    checkpoint, checkpoint_with_fs, restore, verify, BackgroundMode, CheckpointInfo, Db, Error, Options,
    SyncMode, WriteBatch, BACKUP_FILE,
};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn key(i: u64) -> Vec<u8> {
    format!("commit/{i:07}").into_bytes()
}

/// Commit `i` writes its own key and overwrites a shared one, so that tables hold several
/// versions and compactions have work to do.
fn commit(db: &Db, i: u64) -> u64 {
    let mut batch = WriteBatch::new();
    batch.put(&key(i), format!("value of {i} {}", "x".repeat((i % 50) as usize)).as_bytes());
    batch.put(b"last", &i.to_le_bytes());
    db.write(batch).unwrap()
}

fn options(sync_mode: SyncMode) -> Options {
    let mut options = Options::tiny_for_tests();
    options.sync_mode = sync_mode;
    options
}

/// The commits a restored copy holds: checks they are exactly commits `0..n` and returns n.
fn commits_in(fs: Arc<dyn Fs>, dir: &Path) -> u64 {
    let mut options = Options::tiny_for_tests();
    options.create_if_missing = false;
    let db = Db::open_with_fs(fs, dir, options).unwrap();
    let mut n = 0;
    for entry in db.range(b"commit/".as_slice()..b"commit0".as_slice()) {
        let entry = entry.unwrap();
        assert_eq!(entry.key, key(n), "commits are not a prefix: missing commit {n}");
        n += 1;
    }
    let last = db.get(b"last").unwrap().map(|v| u64::from_le_bytes(v.try_into().unwrap()));
    assert_eq!(last, n.checked_sub(1), "the shared key is not the last commit's");
    assert_eq!(db.last_sequence(), n, "commit i has sequence i + 1");
    db.close().unwrap();
    n
}

/// Runs a writer on `db` while `take` takes `rounds` checkpoints; checks each restored
/// copy. Returns the checkpoints' infos.
fn under_load(
    fs: Arc<dyn Fs>,
    root: &Path,
    db: Arc<Db>,
    rounds: usize,
    take: impl Fn(&Path) -> CheckpointInfo,
) -> Vec<CheckpointInfo> {
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Acquire) {
                assert_eq!(commit(&db, i), i + 1);
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    let mut infos = Vec::new();
    let mut bounds = Vec::new();
    let mut previous = 0;
    for round in 0..rounds {
        // Enough commits between rounds that memtables fill and flushes run.
        while acked.load(Ordering::Acquire) < previous + 120 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let before = acked.load(Ordering::Acquire);
        previous = before;
        let dest = root.join(format!("checkpoint-{round}"));
        let info = take(&dest);
        let after = acked.load(Ordering::Acquire);
        bounds.push((dest, before, info.sequence));
        infos.push(info);
        assert!(after >= before);
    }
    while acked.load(Ordering::Acquire) < previous + 50 {
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    let total = acked.load(Ordering::Acquire);
    for (round, (dest, before, sequence)) in bounds.into_iter().enumerate() {
        let restored = root.join(format!("restored-{round}"));
        let info = restore(&*fs, &dest, &restored, &mut |_, _| {}).unwrap();
        assert_eq!(info.sequence, sequence);
        assert!(verify(&*fs, &restored, &mut |_, _| {}).unwrap().is_clean());
        let n = commits_in(fs.clone(), &restored);
        assert_eq!(n, sequence, "round {round}: the copy's sequence is its last commit");
        assert!(n >= before, "round {round}: {n} commits, but {before} were acknowledged before it began");
        assert!(n <= total, "round {round}: {n} commits, only {total} were made");
    }
    // Flushes and compactions ran while the copies were taken.
    let stats = db.stats();
    assert!(stats.flushes > rounds as u64 && stats.compactions > 0, "{stats:?}");
    infos
}

#[test]
fn db_checkpoint_under_load_on_disk_hard_links_and_holds_a_prefix() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let db = Arc::new(Db::open(&dir, options(SyncMode::Buffered)).unwrap());
    let fs: Arc<dyn Fs> = Arc::new(StdFs);
    let infos = under_load(fs, root.path(), db.clone(), 6, |dest| db.checkpoint(dest).unwrap());
    assert!(infos.iter().all(|i| i.linked > 0 && i.tables > 0), "{infos:?}");
    // A linked table is one file with two names until the database lets go of it.
    let checkpoint = root.path().join("checkpoint-5");
    let linked = std::fs::read_dir(&checkpoint)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .any(|p| std::fs::metadata(p).unwrap().nlink() >= 2);
    assert!(linked, "no table of the last checkpoint shares its file with the database");
    Arc::into_inner(db).unwrap().close().unwrap();
}

#[test]
fn a_checkpoint_of_the_directory_alone_under_load_holds_a_prefix() {
    // What another process does: only the directory's files, no handle on the database.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let db = Arc::new(Db::open(&dir, options(SyncMode::Always)).unwrap());
    let fs: Arc<dyn Fs> = Arc::new(StdFs);
    under_load(fs, root.path(), db.clone(), 5, |dest| checkpoint(&dir, dest, &mut |_, _| {}).unwrap());
    Arc::into_inner(db).unwrap().close().unwrap();
}

#[test]
fn in_memory_checkpoints_copy_and_hold_a_prefix() {
    let fs = MemFs::new();
    let shared: Arc<dyn Fs> = Arc::new(fs.clone());
    let db = Arc::new(Db::open_with_fs(shared.clone(), "/db", options(SyncMode::Buffered)).unwrap());
    let infos = under_load(shared, Path::new("/"), db.clone(), 4, |dest| db.checkpoint(dest).unwrap());
    assert!(infos.iter().all(|i| i.linked == 0 && i.copied > i.tables), "{infos:?}");
    Arc::into_inner(db).unwrap().close().unwrap();
}

#[test]
fn a_checkpoint_of_a_closed_database_is_the_same_database() {
    let fs = MemFs::new();
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/db", options(SyncMode::Buffered)).unwrap();
    for i in 0..500 {
        commit(&db, i);
    }
    db.close().unwrap();
    let mut calls = Vec::new();
    let info =
        checkpoint_with_fs(&fs, "/db", "/copy", false, &mut |done, total| calls.push((done, total))).unwrap();
    assert_eq!((info.sequence, info.attempts), (500, 1));
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0) && calls.last().is_some_and(|(d, t)| d == t));
    assert!(verify(&fs, "/copy", &mut |_, _| {}).unwrap().is_clean());
    assert_eq!(commits_in(Arc::new(fs.clone()), Path::new("/copy")), 500);
    // Opening the copy directly works too (it is a database directory of its own).
    assert_eq!(commits_in(Arc::new(fs.clone()), Path::new("/db")), 500);
}

fn closed_database(fs: &MemFs) {
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/db", options(SyncMode::Buffered)).unwrap();
    for i in 0..300 {
        commit(&db, i);
    }
    db.close().unwrap();
}

#[test]
fn bad_sources_and_destinations_are_refused_with_a_clear_error() {
    let fs = MemFs::new();
    closed_database(&fs);
    let no_db = checkpoint_with_fs(&fs, "/nowhere", "/c1", false, &mut |_, _| {}).unwrap_err();
    assert!(matches!(&no_db, Error::InvalidArgument(m) if m.contains("does not exist")), "{no_db}");
    fs.create_dir_all(Path::new("/plain")).unwrap();
    fs.create(Path::new("/plain/readme")).unwrap();
    let foreign = checkpoint_with_fs(&fs, "/plain", "/c2", false, &mut |_, _| {}).unwrap_err();
    assert!(
        matches!(&foreign, Error::InvalidArgument(m) if m.contains("not a stampkv database")),
        "{foreign}"
    );
    let busy = checkpoint_with_fs(&fs, "/db", "/plain", false, &mut |_, _| {}).unwrap_err();
    assert!(matches!(&busy, Error::InvalidArgument(m) if m.contains("not empty")), "{busy}");
    assert_eq!(fs.list(Path::new("/plain")).unwrap(), vec!["readme".to_owned()]);
}

#[test]
fn restore_refuses_incomplete_or_damaged_checkpoints() {
    let fs = MemFs::new();
    closed_database(&fs);
    checkpoint_with_fs(&fs, "/db", "/copy", false, &mut |_, _| {}).unwrap();
    // Not empty.
    let busy = restore(&fs, "/copy", "/db", &mut |_, _| {}).unwrap_err();
    assert!(matches!(&busy, Error::InvalidArgument(m) if m.contains("not empty")), "{busy}");
    // A table damaged after the checkpoint: the restored copy fails verification.
    let table = fs.list(Path::new("/copy")).unwrap().into_iter().find(|n| n.ends_with(".sst")).unwrap();
    let path = PathBuf::from("/copy").join(&table);
    let mut data = fs.read_all(&path).unwrap();
    data[3] ^= 1;
    fs.remove(&path).unwrap();
    fs.create(&path).unwrap().write_all_at(&data, 0).unwrap();
    let damaged = restore(&fs, "/copy", "/r1", &mut |_, _| {}).unwrap_err();
    assert!(matches!(&damaged, Error::Corruption { file, .. } if file.ends_with(&table)), "{damaged}");
    // A file missing, or no BACKUP file: incomplete.
    fs.remove(&path).unwrap();
    let missing = restore(&fs, "/copy", "/r2", &mut |_, _| {}).unwrap_err();
    assert!(matches!(&missing, Error::InvalidArgument(m) if m.contains(&table)), "{missing}");
    fs.remove(&Path::new("/copy").join(BACKUP_FILE)).unwrap();
    let incomplete = restore(&fs, "/copy", "/r3", &mut |_, _| {}).unwrap_err();
    assert!(matches!(&incomplete, Error::InvalidArgument(m) if m.contains("not a complete")), "{incomplete}");
    let nothing = restore(&fs, "/none", "/r4", &mut |_, _| {}).unwrap_err();
    assert!(matches!(&nothing, Error::InvalidArgument(m) if m.contains("does not exist")), "{nothing}");
}

/// Changes the database the first time the checkpoint reports progress (once it has read
/// the manifest, before it lists the directory and pins the files it needs): the attempt in
/// flight must notice and start over.
fn disrupted_checkpoint(change: impl Fn(&Db, &mut u64)) {
    let fs = MemFs::new();
    let mut options = options(SyncMode::Buffered);
    options.background = BackgroundMode::Inline;
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/db", options).unwrap();
    let mut n = 0;
    while n < 400 {
        commit(&db, n);
        n += 1;
    }
    let mut fired = false;
    let info = checkpoint_with_fs(&fs, "/db", "/copy", false, &mut |_, _| {
        if !fired {
            fired = true;
            change(&db, &mut n);
        }
    })
    .unwrap();
    assert!(fired);
    assert!(info.attempts >= 2, "the first attempt should have been given up: {info:?}");
    assert_eq!(info.sequence, n, "the second attempt sees every commit");
    let report = verify(&fs, "/copy", &mut |_, _| {}).unwrap();
    assert!(report.is_clean() && report.notes.is_empty(), "leftovers of the first attempt: {report:?}");
    db.close().unwrap();
    assert_eq!(commits_in(Arc::new(fs.clone()), Path::new("/copy")), n);
}

#[test]
fn a_checkpoint_starts_over_when_a_compaction_removes_a_table_under_it() {
    disrupted_checkpoint(|db, n| {
        for _ in 0..50 {
            commit(db, *n);
            *n += 1;
        }
        db.compact().unwrap();
    });
}

/// The segment the manifest's log number names is gone before the directory is listed:
/// only the gap in the commits shows it.
#[test]
fn a_checkpoint_starts_over_when_a_flush_removes_a_log_segment_under_it() {
    disrupted_checkpoint(|db, n| {
        commit(db, *n);
        *n += 1;
        db.flush().unwrap();
    });
}

#[test]
fn a_database_whose_log_was_not_created_yet_is_copied_from_its_tables() {
    // An open writes the manifest, then creates the log segment it names: a crash (or a
    // checkpoint) in between finds no log at all, and every commit in tables.
    let fs = MemFs::new();
    closed_database(&fs);
    let db = Db::open_with_fs(Arc::new(fs.clone()), "/db", options(SyncMode::Buffered)).unwrap();
    db.close().unwrap();
    for name in fs.list(Path::new("/db")).unwrap() {
        if name.ends_with(".log") {
            fs.remove(&Path::new("/db").join(name)).unwrap();
        }
    }
    let info = checkpoint_with_fs(&fs, "/db", "/copy", false, &mut |_, _| {}).unwrap();
    assert_eq!((info.sequence, info.log_segments, info.attempts), (300, 0, 1));
    assert_eq!(commits_in(Arc::new(fs.clone()), Path::new("/copy")), 300);
}

/// A commit record as the engine writes it (`engine/FORMAT.md`): one put.
fn record(seq: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = seq.to_le_bytes().to_vec();
    out.extend(1u32.to_le_bytes());
    out.push(1);
    out.push(key.len() as u8);
    out.extend(key);
    out.push(value.len() as u8);
    out.extend(value);
    out
}

#[test]
fn a_hole_in_the_log_is_never_copied_as_a_prefix() {
    // Segments whose commits do not follow one another (here one was deleted; under load,
    // one a directory listing missed): the copy would not be a prefix, so it is refused.
    let fs = MemFs::new();
    closed_database(&fs);
    let highest = fs
        .list(Path::new("/db"))
        .unwrap()
        .iter()
        .filter_map(|n| n.split('.').next().and_then(|s| s.parse::<u64>().ok()))
        .max()
        .unwrap();
    let newest = highest + 2;
    let file = fs.create(&Path::new("/db").join(format!("{newest:06}.log"))).unwrap();
    let handle = stampkv_wal::MemLogFile::new();
    let mut writer = stampkv_wal::LogWriter::create(&handle, newest, Default::default()).unwrap();
    writer.add_record(&record(302, b"commit/0000301", b"after a hole")).unwrap();
    file.write_all_at(&handle.contents(), 0).unwrap();
    let error = checkpoint_with_fs(&fs, "/db", "/copy", false, &mut |_, _| {}).unwrap_err();
    assert!(error.to_string().contains("holds commit 302 after commit 300"), "{error}");
    assert!(fs.list(Path::new("/copy")).unwrap().is_empty(), "the failed attempts left files");
}
