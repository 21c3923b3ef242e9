//! Process-kill test of the WAL written through a memory mapping (`Options::wal_mapped`,
//! the default) at the sizes where it matters: buffered commits (never synced by the
//! writer) of 1 KiB values into 16 MiB memtables, so that each WAL segment runs through
//! its 64 KiB, doubling and 4 MiB mapped windows and the writes that cross a window's end.
//! The child prints the id of every put once it has returned; the parent waits until at
//! least [`MIN_ACKED`] puts (about 10 MiB of WAL) are acknowledged, lets the child go on
//! for a random while, kills it with SIGKILL and reopens the database: every acknowledged
//! put must be there with its value, and nothing but puts the child made. Then it does the
//! same again on the recovered database. A `harness = false` test that re-executes itself
//! as the child, like `crash_process`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is a failed test"
)]

use stampkv_engine::{Db, Options, SyncMode};
use stampkv_testkit::process::{collect_text, killed_by_sigkill};
use stampkv_testkit::SplitMix64;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the child's environment to the database directory.
const CHILD_ENV: &str = "STAMPKV_MAPPED_WAL_CHILD";
/// Set in the child's environment to the first put id it writes.
const CHILD_START_ENV: &str = "STAMPKV_MAPPED_WAL_START";
/// Acknowledged puts the parent waits for before it picks a moment to kill.
const MIN_ACKED: u64 = 10_000;
const VALUE_BYTES: usize = 1000;
const CYCLES: u64 = 3;

fn options() -> Options {
    let mut options = Options::default();
    options.sync_mode = SyncMode::Buffered;
    options.write_buffer_size = 16 << 20;
    options
}

fn key(id: u64) -> [u8; 8] {
    id.to_be_bytes()
}

fn value(id: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(id ^ 0xC0FF_EE00);
    (0..VALUE_BYTES).map(|_| rng.next_u64() as u8).collect()
}

/// Puts ids from `start` on until killed, printing each id once its put has returned.
fn child(dir: &Path, start: u64) -> ! {
    let db = Db::open(dir, options()).unwrap_or_else(|e| panic!("child open: {e}"));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut id = start;
    loop {
        db.put(&key(id), &value(id)).unwrap_or_else(|e| panic!("child put {id}: {e}"));
        writeln!(out, "{id}").and_then(|()| out.flush()).unwrap_or_else(|e| panic!("child stdout: {e}"));
        id += 1;
    }
}

/// Runs a child from put `start` and kills it a random while after it acknowledged
/// [`MIN_ACKED`] puts; returns the last acknowledged id.
fn run_child(dir: &Path, start: u64, rng: &mut SplitMix64) -> u64 {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .env(CHILD_ENV, dir)
        .env(CHILD_START_ENV, start.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the child");
    // Count acknowledgments as they arrive through a pipe reader of our own.
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = sender.send(());
            lines.push(line);
        }
        lines
    });
    let stderr = collect_text(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut acked = 0;
    while acked < MIN_ACKED {
        match receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => acked += 1,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the child acknowledged {acked} puts, then stopped; stderr:\n{}",
                    stderr.join().unwrap()
                );
            }
        }
    }
    std::thread::sleep(Duration::from_millis(rng.below(300)));
    child.kill().expect("kill");
    let status = child.wait().expect("wait");
    let lines = reader.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    assert!(killed_by_sigkill(&status), "the child exited by itself with {status}; stderr:\n{stderr}");
    // A line cut by the kill has no newline and was not acknowledged; `lines()` still
    // yields it, so only ids that the next line follows are trusted, plus the last one
    // when it parses to the expected id.
    let mut last = None;
    for (i, line) in lines.iter().enumerate() {
        let expected = start + i as u64;
        match line.parse::<u64>() {
            Ok(id) if id == expected => last = Some(id),
            _ if i + 1 == lines.len() => break,
            _ => panic!("child line {i} is {line:?}, expected {expected}"),
        }
    }
    last.expect("acknowledged puts")
}

/// Reopens the database: every put up to `last_acked` holds its value; any later key is a
/// put the child made (it may have returned just before the kill without being printed).
fn verify(dir: &Path, start: u64, last_acked: u64) -> u64 {
    let db = Db::open(dir, options()).expect("reopening after the kill");
    for id in 0..=last_acked {
        let found = db.get(&key(id)).expect("get");
        assert!(
            found.as_deref() == Some(value(id).as_slice()),
            "acknowledged put {id} lost or wrong after the kill"
        );
    }
    let mut next = last_acked + 1;
    while let Some(found) = db.get(&key(next)).expect("get") {
        assert_eq!(found, value(next), "unacknowledged put {next} holds another value");
        next += 1;
    }
    let mut count = 0;
    let mut cursor = db.cursor::<&[u8], _>(..);
    while cursor.next().expect("scan") {
        count += 1;
    }
    assert_eq!(count, next, "keys beyond the puts made (started this cycle at {start})");
    let wal_segments = db.recovery_report().segments.len();
    assert!(wal_segments > 0, "the kill left WAL to replay");
    db.close().expect("close");
    next
}

fn parent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = std::env::var("STAMPKV_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x4D41_5050);
    let mut rng = SplitMix64::new(seed);
    let mut start = 0;
    for cycle in 0..CYCLES {
        let last_acked = run_child(dir.path(), start, &mut rng);
        let wal_bytes = (last_acked + 1 - start) * (VALUE_BYTES as u64 + 8);
        let next = verify(dir.path(), start, last_acked);
        println!(
            "crash_mapped_wal: seed {seed} cycle {cycle}: puts {start}..={last_acked} acknowledged (~{} MiB of WAL), {} more found",
            wal_bytes >> 20,
            next - last_acked - 1
        );
        start = next;
    }
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let start = std::env::var(CHILD_START_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        child(Path::new(&dir), start);
    }
    if stampkv_testkit::process::libtest_selects("killed_writer_loses_no_buffered_commit_of_a_mapped_wal") {
        parent();
        println!("test killed_writer_loses_no_buffered_commit_of_a_mapped_wal ... ok");
    }
}
