//! `stampkv verify`, `repair`, `stats` and `compact` through the binary: a clean database
//! verifies with exit 0; a flipped byte anywhere is reported with its file and offset and
//! exit 3; repair then yields a database that verifies clean and holds everything else;
//! stats prints the tree and its amplification, writing nothing to a closed database and
//! sharing it with other readers; compact shrinks it. Bad input (not a
//! database, a missing directory, a database another process holds open) gets one clear
//! line and exit 1, and creates nothing.

use crate::common::{fails_with, stampkv};
use stampkv::engine::Options;
use stampkv::{key, Kv, KvOptions, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn run(command: &str, dir: &Path) -> (i32, String, String) {
    stampkv(&[command, "--path", dir.to_str().unwrap()])
}

fn kv_options() -> KvOptions {
    let mut engine = Options::tiny_for_tests();
    engine.wal_preallocate_bytes = 0;
    KvOptions::with_engine(engine)
}

/// A closed database of `count` keys `["k", i]` = i (some overwritten twice), with tables
/// on several levels and commits still in the log.
fn database(root: &Path, count: u64) -> PathBuf {
    let dir = root.join("db");
    let kv = Kv::open(&dir, kv_options()).unwrap();
    for round in 0..2 {
        for i in 0..count {
            kv.set(&key!["k", i as f64], &Value::from((i + round * 1000) as f64)).unwrap();
        }
    }
    kv.close().unwrap();
    dir
}

fn contents(dir: &Path) -> BTreeMap<u64, f64> {
    let kv = Kv::open(dir, kv_options()).unwrap();
    let mut map = BTreeMap::new();
    for i in 0..1000u64 {
        if let Some(Value::Number(n)) = kv.get::<Value>(&key!["k", i as f64]).unwrap().value {
            map.insert(i, n);
        }
    }
    kv.close().unwrap();
    map
}

fn database_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "LOCK"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_clean_database_verifies_with_exit_zero() {
    let root = tempfile::tempdir().unwrap();
    let dir = database(root.path(), 300);
    let (code, stdout, stderr) = run("verify", &dir);
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert!(stderr.is_empty(), "quiet when piped: {stderr:?}");
    assert!(
        stdout.starts_with("checked ")
            && stdout.contains("log segment")
            && stdout.ends_with(": no problems\n"),
        "{stdout}"
    );
    let (code, stdout, _) = run("repair", &dir);
    assert_eq!(code, 0);
    assert!(stdout.contains("nothing to repair"), "{stdout}");
}

#[test]
fn random_flips_are_reported_with_file_and_offset_and_repaired() {
    let root = tempfile::tempdir().unwrap();
    let original = database(root.path(), 400);
    let expected = contents(&original);
    assert_eq!(expected.len(), 400);
    let files = database_files(&original);
    let mut rng = stampkv_testkit::SplitMix64::new(0xC11);
    for trial in 0..12 {
        let dir = root.path().join(format!("trial-{trial}"));
        std::fs::create_dir(&dir).unwrap();
        for file in &files {
            std::fs::copy(file, dir.join(file.file_name().unwrap())).unwrap();
        }
        let victim = dir.join(rng.pick(&files).file_name().unwrap());
        let mut data = std::fs::read(&victim).unwrap();
        let pos = rng.index(data.len());
        data[pos] ^= 1 + rng.below(255) as u8;
        std::fs::write(&victim, &data).unwrap();
        let what = format!("trial {trial}: {} byte {pos}", victim.display());

        let (code, stdout, stderr) = run("verify", &dir);
        assert_eq!(code, 3, "{what}: {stdout}");
        let name = victim.display().to_string();
        assert!(stdout.lines().any(|l| l.starts_with(&name)), "{what}: {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        assert!(stderr.contains("problem") && stderr.contains("stampkv repair"), "{stderr}");

        let (code, stdout, stderr) = run("repair", &dir);
        assert_eq!(code, 0, "{what}: {stdout} {stderr}");
        assert!(stdout.contains("found ") && stdout.contains("repaired "), "{what}: {stdout}");
        let (code, stdout, _) = run("verify", &dir);
        assert_eq!(code, 0, "{what}: after repair: {stdout}");
        let now = contents(&dir);
        if stdout.contains("lost: nothing") {
            assert_eq!(now, expected, "{what}");
        }
        // At most one data block or one commit is lost; what is left is right.
        let differing = expected.iter().filter(|(k, v)| now.get(k) != Some(v)).count();
        assert!(differing <= 16, "{what}: {differing} keys differ");
        for (k, v) in &now {
            assert!(expected.get(k) == Some(v) || *v == *k as f64, "{what}: {k} holds {v}");
        }
    }
}

#[test]
fn repair_reports_what_a_damaged_data_block_cost() {
    let root = tempfile::tempdir().unwrap();
    let dir = database(root.path(), 400);
    let table = database_files(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut data = std::fs::read(&table).unwrap();
    data[20] ^= 0x08;
    std::fs::write(&table, &data).unwrap();
    let (code, stdout, _) = run("verify", &dir);
    assert_eq!(code, 3);
    assert!(stdout.contains(&format!("{} at offset 0: data block", table.display())), "{stdout}");
    let (code, stdout, _) = run("repair", &dir);
    assert_eq!(code, 0, "{stdout}");
    let lost_line = stdout.lines().skip_while(|l| *l != "lost:").nth(1).unwrap();
    assert!(lost_line.contains(&format!("{} bytes 0..", table.display())), "{stdout}");
    assert!(stdout.contains("the files it replaced are in"), "{stdout}");
    assert_eq!(run("verify", &dir).0, 0);
}

#[test]
fn stats_prints_levels_sizes_amplification_and_a_key_estimate() {
    let root = tempfile::tempdir().unwrap();
    let dir = database(root.path(), 500);
    let (code, stdout, stderr) = run("stats", &dir);
    assert_eq!(code, 0, "{stdout} {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("level") && lines[0].contains("entries"), "{stdout}");
    for level in 0..7 {
        assert!(lines[1 + level].starts_with(&level.to_string()), "{stdout}");
    }
    assert!(lines[8].starts_with("total"), "{stdout}");
    let field = |prefix: &str| -> String {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix}: {stdout}"))
            .to_owned()
    };
    assert!(field("live data (full scan): ").starts_with("500 keys"), "{stdout}");
    let estimate: u64 = field("key count estimate: ").split(' ').next().unwrap().parse().unwrap();
    assert!(estimate >= 500, "{stdout}");
    // The scan just read every table: they are open.
    let memory = field("memory: ");
    assert!(memory.contains("memtables") && memory.contains("block cache"), "{stdout}");
    let open_tables: usize =
        memory.split("held by ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        open_tables,
        lines[8].split_whitespace().nth(1).unwrap().parse::<usize>().unwrap(),
        "{stdout}"
    );
    let space: f64 = field("space amplification: ").split(' ').next().unwrap().parse().unwrap();
    let write: f64 = field("write amplification: ").split(' ').next().unwrap().parse().unwrap();
    assert!((1.0..20.0).contains(&space), "{stdout}");
    assert!((2.0..=8.0).contains(&write), "{stdout}");
}

/// Every entry of `dir` (the directory itself included, under ""): its size, its
/// modification time and, for files, its bytes.
fn directory_state(dir: &Path) -> BTreeMap<String, (u64, std::time::SystemTime, Vec<u8>)> {
    let state = |path: &Path| {
        let meta = std::fs::metadata(path).unwrap();
        let bytes = if meta.is_file() { std::fs::read(path).unwrap() } else { Vec::new() };
        (meta.len(), meta.modified().unwrap(), bytes)
    };
    let mut entries = BTreeMap::from([(String::new(), state(dir))]);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        entries.insert(path.file_name().unwrap().to_string_lossy().into_owned(), state(&path));
    }
    entries
}

#[test]
fn stats_writes_nothing_and_shares_a_closed_database_with_other_readers() {
    let root = tempfile::tempdir().unwrap();
    let dir = database(root.path(), 300);
    let before = directory_state(&dir);
    assert!(before.keys().any(|name| name.ends_with(".log")), "commits are still in the log: {before:?}");
    let (code, stdout, stderr) = run("stats", &dir);
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert!(stdout.contains("live data (full scan): 300 keys"), "{stdout}");
    let names = |state: &BTreeMap<String, _>| state.keys().cloned().collect::<Vec<_>>();
    let after = directory_state(&dir);
    assert_eq!(names(&after), names(&before), "no file was created or removed");
    assert!(after == before, "every file and the directory are byte-identical, sizes and times too");

    // Another reader holds the lock shared: stats opens all the same.
    let reader = Kv::open_read_only(&dir, KvOptions::default()).unwrap();
    let (code, stdout, stderr) = run("stats", &dir);
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert!(stdout.contains("live data (full scan): 300 keys"), "{stdout}");
    reader.close().unwrap();
    assert!(directory_state(&dir) == before, "still byte-identical");
}

#[test]
fn compact_leaves_one_level_and_the_same_data() {
    let root = tempfile::tempdir().unwrap();
    let dir = database(root.path(), 500);
    let before = contents(&dir);
    let (code, stdout, stderr) = run("compact", &dir);
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert!(
        stdout.starts_with(&format!("compacted {}", dir.display())) && stdout.contains("became"),
        "{stdout}"
    );
    assert_eq!(contents(&dir), before);
    let (_, stats, _) = run("stats", &dir);
    let levels: Vec<u64> = stats
        .lines()
        .skip(1)
        .take(7)
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(levels.iter().filter(|&&n| n > 0).count(), 1, "{stats}");
    assert_eq!(run("verify", &dir).0, 0);
}

#[test]
fn every_command_refuses_bad_directories_with_one_clear_line() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("missing");
    let plain = root.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "hello").unwrap();
    for command in ["verify", "repair", "stats", "compact"] {
        fails_with(run(command, &missing), "does not exist");
        fails_with(run(command, &plain), "is not a stampkv database");
    }
    assert!(!missing.exists());
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 1, "nothing was created");
    let file = plain.join("notes.txt");
    fails_with(run("stats", &file), "is not a directory");
}

#[test]
fn every_command_refuses_a_database_another_process_holds_open() {
    let root = tempfile::tempdir().unwrap();
    let dir = database(root.path(), 50);
    let kv = Kv::open(&dir, kv_options()).unwrap();
    for command in ["verify", "repair", "stats", "compact"] {
        fails_with(run(command, &dir), "is open in another process");
    }
    kv.close().unwrap();
    assert_eq!(run("verify", &dir).0, 0);
}
