//! `verify` and `repair`: every single flipped byte, wherever it lands, is reported, and
//! repair then yields a database that opens, verifies clean and holds every entry that the
//! damaged place did not hold. Also: the errors (not a database, open elsewhere), a clean
//! database left alone, a missing table, damage in several places.
//!
//! More flips: `STAMPKV_FLIP_TRIALS=5000 STAMPKV_FLIP_SEED=7 cargo test -p stampkv-engine --test
//! it verify_repair::`.

use crate::common::{env_or, Rng};
use stampkv_engine::fs::{CrashPolicy, Fs, MemFs};
use stampkv_engine::{
    repair, verify, BackgroundMode, Db, Error, Loss, Options, RepairReport, VerifyReport, WriteBatch,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/db";

fn options() -> Options {
    let mut options = Options::default();
    options.background = BackgroundMode::Inline;
    options.create_if_missing = true;
    options.write_buffer_size = 6 << 10;
    options.wal_preallocate_bytes = 16 << 10;
    options.table.block_size = 256;
    options.table.restart_interval = 4;
    options.l0_compaction_trigger = 3;
    options.target_file_size = 6 << 10;
    options.level1_target_bytes = 16 << 10;
    options.level_size_ratio = 4;
    options.max_manifest_bytes = 64 << 10;
    options
}

/// Every version each key had: (sequence, value or deletion), oldest first.
type History = BTreeMap<Vec<u8>, Vec<(u64, Option<Vec<u8>>)>>;

/// Writes a workload of puts, overwrites and deletes (with a compaction halfway, so that
/// several levels hold tables) and closes the database; returns every key's history.
fn build(fs: &MemFs, seed: u64, commits: u64) -> History {
    let (history, db) = workload(fs, seed, commits);
    db.close().unwrap();
    history
}

/// [`build`], but the files are left as a process crash would leave them: the log unsealed,
/// its preallocated end still zero. Returns that image.
fn build_crashed(seed: u64, commits: u64) -> (MemFs, History) {
    let live = MemFs::new();
    let (history, db) = workload(&live, seed, commits);
    let image = live.crash_clone(CrashPolicy::KeepAll);
    drop(db);
    (image, history)
}

/// Runs the workload on an open database; returns every key's history and the database.
fn workload(fs: &MemFs, seed: u64, commits: u64) -> (History, Db) {
    let fs: Arc<dyn Fs> = Arc::new(fs.clone());
    let db = Db::open_with_fs(fs, DIR, options()).unwrap();
    let mut rng = Rng::new(seed);
    let mut history = History::new();
    for i in 0..commits {
        let mut batch = WriteBatch::new();
        let mut writes = BTreeMap::new();
        for _ in 0..1 + rng.below(3) {
            let key = format!("key/{:04}", rng.below(600)).into_bytes();
            if rng.chance(15) {
                batch.delete(&key);
                writes.insert(key, None);
            } else {
                let mut value = format!("v{i}:").into_bytes();
                let filler = rng.index(60);
                value.extend(rng.bytes(filler));
                batch.put(&key, &value);
                writes.insert(key, Some(value));
            }
        }
        let seq = db.write(batch).unwrap();
        for (key, value) in writes {
            history.entry(key).or_default().push((seq, value));
        }
        if i == commits / 2 {
            db.compact().unwrap();
        }
    }
    (history, db)
}

/// The newest value of every live key.
fn newest(history: &History) -> BTreeMap<Vec<u8>, Vec<u8>> {
    history
        .iter()
        .filter_map(|(k, versions)| versions.last().and_then(|(_, v)| v.clone()).map(|v| (k.clone(), v)))
        .collect()
}

fn contents(fs: &MemFs) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut options = options();
    options.create_if_missing = false;
    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options).unwrap();
    let map = db.iter().map(|e| e.unwrap()).map(|e| (e.key, e.value)).collect();
    db.close().unwrap();
    map
}

fn verify_fs(fs: &MemFs) -> VerifyReport {
    verify(fs, DIR, &mut |_, _| {}).unwrap()
}

fn repair_fs(fs: &MemFs) -> RepairReport {
    repair(Arc::new(fs.clone()), DIR, &options(), &mut |_, _| {}).unwrap()
}

/// Whether a loss may have cost `key` (a version written by commit `seq`).
fn lost(report: &RepairReport, key: &[u8], seqs: &[u64]) -> bool {
    report.lost.iter().any(|loss| match loss {
        Loss::TableEntries { after, before, .. } => {
            after.as_deref().is_none_or(|a| a <= key) && before.as_deref().is_none_or(|b| key <= b)
        }
        Loss::Table { smallest, largest, .. } => smallest.as_slice() <= key && key <= largest.as_slice(),
        Loss::Commits { after, before, .. } => {
            seqs.iter().any(|s| s > after && before.is_none_or(|b| *s < b))
        }
    })
}

/// Checks a repaired database against the history: every key a loss cannot explain holds
/// its newest value; a key a loss may have cost holds one of its values or none. Returns
/// how many keys differ from their newest value.
fn check_repaired(fs: &MemFs, history: &History, report: &RepairReport, what: &str) -> usize {
    let repaired = contents(fs);
    let expected = newest(history);
    let mut differing = 0;
    for (key, versions) in history {
        let now = repaired.get(key);
        if now == expected.get(key) {
            continue;
        }
        differing += 1;
        let seqs: Vec<u64> = versions.iter().map(|(s, _)| *s).collect();
        assert!(
            lost(report, key, &seqs),
            "{what}: {key:?} is {now:?}, no loss explains it: {:?}",
            report.lost
        );
        let known = now.is_none() || versions.iter().any(|(_, v)| v.as_ref() == now);
        assert!(known, "{what}: {key:?} holds a value it never had");
    }
    for key in repaired.keys() {
        assert!(history.contains_key(key), "{what}: repair invented {key:?}");
    }
    differing
}

/// Where a flip lands, for the coverage count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Current,
    Manifest,
    Log,
    /// The preallocated, never written end of a crashed database's log.
    LogUnwritten,
    TableData,
    TableTail,
}

/// A database image to damage: its files and the history it holds.
struct Image {
    fs: MemFs,
    history: History,
    files: Vec<String>,
    /// The log segment, and where its written data ends (the rest is preallocated zeros).
    log: (String, u64),
}

impl Image {
    fn new(fs: MemFs, history: History) -> Image {
        assert!(verify_fs(&fs).is_clean(), "{:?}", verify_fs(&fs));
        let files: Vec<String> =
            fs.list(Path::new(DIR)).unwrap().into_iter().filter(|n| n != "LOCK").collect();
        assert!(files.iter().filter(|n| n.ends_with(".sst")).count() >= 4, "want several tables: {files:?}");
        assert!(files.iter().any(|n| n.starts_with("MANIFEST-")));
        let log = files.iter().find(|n| n.ends_with(".log")).unwrap().clone();
        let data = fs.read_all(&Path::new(DIR).join(&log)).unwrap();
        let number: u64 = log.trim_end_matches(".log").parse().unwrap();
        let info = stampkv_wal::SegmentInfo { number, name: log.clone(), is_last: true };
        let mut reader = stampkv_wal::SegmentReader::new(&data, info, Default::default());
        while reader.next_record().unwrap().is_some() {}
        let written = reader.summary().valid_end;
        Image { fs, history, files, log: (log, written) }
    }
}

#[test]
fn every_flipped_byte_is_found_and_repair_keeps_everything_else() {
    let trials = env_or("STAMPKV_FLIP_TRIALS", 500);
    let closed = MemFs::new();
    let history = build(&closed, 0xF11D, 900);
    let (crashed, crashed_history) = build_crashed(0xF11E, 900);
    let images = [Image::new(closed, history), Image::new(crashed, crashed_history)];
    let crashed_log = images[1].fs.read_all(&Path::new(DIR).join(&images[1].log.0)).unwrap();
    assert!(images[1].log.1 < crashed_log.len() as u64, "the crashed log has an unwritten end");
    let mut rng = Rng::new(env_or("STAMPKV_FLIP_SEED", 0xF11D_F11D));
    let mut coverage: BTreeMap<Place, usize> = BTreeMap::new();
    for trial in 0..trials {
        // A closed database three times out of four, else a crashed one.
        let image = &images[usize::from(rng.chance(25))];
        let fs = image.fs.crash_clone(CrashPolicy::KeepAll);
        // Pick a kind of file (tables half the time), then a file, then a byte (tables: half
        // the time among their last 700 bytes, where the filter, index, meta blocks and
        // footer lie).
        let tables: Vec<&String> = image.files.iter().filter(|n| n.ends_with(".sst")).collect();
        let kind = rng.below(6).min(3);
        let file = match kind {
            0 => "CURRENT".to_owned(),
            1 => image.files.iter().find(|n| n.starts_with("MANIFEST-")).unwrap().clone(),
            2 => image.log.0.clone(),
            _ => (*rng.pick(&tables)).clone(),
        };
        let path = Path::new(DIR).join(&file);
        let mut data = fs.read_all(&path).unwrap();
        let len = data.len() as u64;
        let pos = match kind {
            3 if rng.chance(50) => len - 1 - rng.below(len.min(700)),
            // The unwritten end of a crashed log, half the time.
            2 if len > image.log.1 && rng.chance(50) => image.log.1 + rng.below(len - image.log.1),
            _ => rng.below(len),
        };
        let flip = 1 + rng.below(255) as u8;
        data[pos as usize] ^= flip;
        let place = match kind {
            0 => Place::Current,
            1 => Place::Manifest,
            2 if pos >= image.log.1 => Place::LogUnwritten,
            2 => Place::Log,
            _ if pos + 700 >= len => Place::TableTail,
            _ => Place::TableData,
        };
        *coverage.entry(place).or_default() += 1;
        fs.remove(&path).unwrap();
        fs.create(&path).unwrap().write_all_at(&data, 0).unwrap();
        let what = format!("trial {trial}: {file} byte {pos} ^ {flip:#04x} ({place:?})");

        let report = verify_fs(&fs);
        assert!(!report.is_clean(), "{what}: not found");
        let here = report.problems.iter().find(|p| p.file == file);
        assert!(here.is_some(), "{what}: reported elsewhere: {:?}", report.problems);
        if place == Place::LogUnwritten {
            assert_eq!(here.and_then(|p| p.offset), Some(pos), "{what}: {:?}", report.problems);
        }

        let repaired = repair_fs(&fs);
        assert!(repaired.repaired, "{what}");
        assert!(repaired.problems_after.is_empty(), "{what}: after repair: {:?}", repaired.problems_after);
        assert!(verify_fs(&fs).is_clean(), "{what}: verify after repair");
        let differing = check_repaired(&fs, &image.history, &repaired, &what);
        match place {
            // Nothing but table data blocks and log records holds entries.
            Place::Current | Place::Manifest | Place::LogUnwritten => {
                assert!(repaired.lost.is_empty(), "{what}: {:?}", repaired.lost);
                assert_eq!(differing, 0, "{what}");
            }
            // One data block (256 bytes) holds a few entries; one record, one commit.
            Place::TableData | Place::TableTail => {
                assert!(differing <= 16, "{what}: {differing} keys differ")
            }
            Place::Log => assert!(differing <= 3, "{what}: {differing} keys differ"),
        }
        assert!(verify_fs(&fs).is_clean(), "{what}: verify after reopening");
    }
    // Every kind of place was hit many times.
    for place in
        [Place::Current, Place::Manifest, Place::Log, Place::LogUnwritten, Place::TableData, Place::TableTail]
    {
        assert!(
            coverage.get(&place).copied().unwrap_or(0) >= trials as usize / 50,
            "{place:?}: {coverage:?}"
        );
    }
    eprintln!("{trials} flips: {coverage:?}");
}

#[test]
fn a_flip_in_a_data_block_loses_exactly_that_block() {
    let original = MemFs::new();
    let history = build(&original, 7, 600);
    let table = original
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .max_by_key(|n| original.read_all(&Path::new(DIR).join(n)).unwrap().len())
        .unwrap();
    let path = Path::new(DIR).join(&table);
    let mut data = original.read_all(&path).unwrap();
    data[10] ^= 0x20; // inside the first data block
    original.remove(&path).unwrap();
    original.create(&path).unwrap().write_all_at(&data, 0).unwrap();
    let report = verify_fs(&original);
    let problem = report.problems.iter().find(|p| p.file == table).unwrap();
    assert_eq!(problem.offset, Some(0), "{problem}");
    assert!(problem.what.contains("checksum"), "{problem}");
    let repaired = repair_fs(&original);
    assert_eq!(repaired.lost.len(), 1, "{:?}", repaired.lost);
    let Loss::TableEntries { file, offset, after, before, .. } = &repaired.lost[0] else {
        panic!("{:?}", repaired.lost);
    };
    assert_eq!((file.as_str(), *offset, after), (table.as_str(), 0, &None));
    assert!(before.is_some());
    let differing = check_repaired(&original, &history, &repaired, "first block");
    assert!(differing >= 1, "a data block always holds entries");
    let shown = repaired.lost[0].to_string();
    assert!(shown.starts_with(&format!("{table} bytes 0..")), "{shown}");
}

#[test]
fn a_clean_database_is_left_alone() {
    let fs = MemFs::new();
    build(&fs, 3, 200);
    let before = fs.list(Path::new(DIR)).unwrap();
    let report = repair_fs(&fs);
    assert!(!report.repaired && report.problems.is_empty() && report.lost.is_empty());
    assert_eq!(fs.list(Path::new(DIR)).unwrap(), before);
    assert!(report.last_sequence >= 200);
}

#[test]
fn a_missing_table_is_reported_lost_and_the_rest_is_kept() {
    let fs = MemFs::new();
    let history = build(&fs, 11, 600);
    let table = fs.list(Path::new(DIR)).unwrap().into_iter().find(|n| n.ends_with(".sst")).unwrap();
    fs.remove(&Path::new(DIR).join(&table)).unwrap();
    let report = verify_fs(&fs);
    assert!(report.problems.iter().any(|p| p.file == table && p.what.contains("missing")), "{report:?}");
    assert!(matches!(Db::open_with_fs(Arc::new(fs.clone()), DIR, options()), Err(Error::Corruption { .. })));
    let repaired = repair_fs(&fs);
    assert!(
        matches!(&repaired.lost[..], [Loss::Table { file, .. }] if *file == table),
        "{:?}",
        repaired.lost
    );
    assert!(repaired.problems_after.is_empty());
    check_repaired(&fs, &history, &repaired, "missing table");
    // The replaced files are kept aside, not deleted.
    let aside = Path::new(DIR).join(repaired.moved_to.as_ref().unwrap());
    assert!(!fs.list(&aside).unwrap().is_empty());
}

#[test]
fn damage_in_several_places_is_all_reported_and_repaired() {
    let fs = MemFs::new();
    let history = build(&fs, 21, 800);
    let dir = Path::new(DIR);
    let mut damaged = Vec::new();
    for name in fs.list(dir).unwrap() {
        if name == "LOCK" {
            continue;
        }
        let path = dir.join(&name);
        let mut data = fs.read_all(&path).unwrap();
        if data.len() > 100 {
            let at = data.len() / 3;
            data[at] ^= 0x55;
            fs.remove(&path).unwrap();
            fs.create(&path).unwrap().write_all_at(&data, 0).unwrap();
            damaged.push(name);
        }
    }
    let report = verify_fs(&fs);
    for name in &damaged {
        assert!(
            report.problems.iter().any(|p| &p.file == name),
            "{name} not reported: {:?}",
            report.problems
        );
    }
    let repaired = repair_fs(&fs);
    assert!(repaired.problems_after.is_empty(), "{:?}", repaired.problems_after);
    assert!(!repaired.notes.is_empty(), "the damaged manifest is noted");
    check_repaired(&fs, &history, &repaired, "several");
}

#[test]
fn verify_and_repair_refuse_what_is_not_a_closed_database() {
    let fs = MemFs::new();
    let missing = verify(&fs, "/nowhere", &mut |_, _| {}).unwrap_err();
    assert!(matches!(&missing, Error::InvalidArgument(m) if m.contains("does not exist")), "{missing}");
    fs.create_dir_all(Path::new("/other")).unwrap();
    fs.create(Path::new("/other/notes.txt")).unwrap();
    let foreign = verify(&fs, "/other", &mut |_, _| {}).unwrap_err();
    assert!(
        matches!(&foreign, Error::InvalidArgument(m) if m.contains("not a stampkv database")),
        "{foreign}"
    );
    let foreign = repair(Arc::new(fs.clone()), "/other", &options(), &mut |_, _| {}).unwrap_err();
    assert!(matches!(foreign, Error::InvalidArgument(_)));
    // Nothing was created in the foreign directory.
    assert_eq!(fs.list(Path::new("/other")).unwrap(), vec!["notes.txt".to_owned()]);

    let db = Db::open_with_fs(Arc::new(fs.clone()), DIR, options()).unwrap();
    db.put(b"k", b"v").unwrap();
    assert!(matches!(verify(&fs, DIR, &mut |_, _| {}), Err(Error::Locked { .. })));
    assert!(matches!(
        repair(Arc::new(fs.clone()), DIR, &options(), &mut |_, _| {}),
        Err(Error::Locked { .. })
    ));
    db.close().unwrap();
    assert!(verify_fs(&fs).is_clean());
}
