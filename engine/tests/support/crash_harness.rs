//! The process-kill harness shared by the `crash_process` test and the `crash_torture`
//! example: a child process commits batches to a real on-disk database and acknowledges
//! each one on stdout once `write` returns; the parent kills it with SIGKILL at a random
//! moment (mid-commit, mid-flush, mid-compaction, even mid-open), reopens the database and
//! checks that it holds exactly the state after batches `1..=k`, where `k` is the last
//! acknowledged batch or the one after it (a commit may be durable but not yet
//! acknowledged). So: no acknowledged commit is lost, no partial batch, no hole, and
//! sequence numbers survive (batch `i` is commit `i`). The next child continues from `k`.
//! In about a third of the cycles the parent does not check in between, so the next child
//! recovers the crashed database itself, and may be killed while recovering; its first
//! line reports the state it found, which must be one the acknowledgements allow.
//!
//! The workload is derived from the batch id alone (a PRNG seeded by the id), so the parent
//! replays ids into a `BTreeMap` model. Most cycles use `SyncMode::Always`; every fourth
//! uses `SyncMode::Buffered`, which must survive a process crash just the same.
//! Environment: `STAMPKV_CRASH_SEED` (kill delays), `STAMPKV_CRASH_MAX_DELAY_MS` (default
//! 400). On failure the database directory is kept and its path printed.
#![allow(dead_code)]

#[path = "../it/common.rs"]
pub mod common;

use common::{env_or, Rng};
use stampkv_engine::{Db, Entry, Options, SyncMode, WriteBatch};
use stampkv_testkit::process::{collect_lines, collect_text, killed_by_sigkill};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the child's environment to the database directory.
pub const CHILD_ENV: &str = "STAMPKV_CRASH_CHILD";
/// Set in the child's environment to "buffered" to use `SyncMode::Buffered`.
pub const CHILD_SYNC_ENV: &str = "STAMPKV_CRASH_CHILD_SYNC";
/// Holds the id of the last batch, written by every batch.
const META_KEY: &[u8] = b"meta/last";
/// Size of the key space the batches write to.
const KEYS: u64 = 3000;
/// Mixed into every batch's PRNG seed.
const WORKLOAD_SEED: u64 = 0x5EED_CA5E_D00D_0001;
/// The child calls `flush` after batches whose id is a multiple of this.
const FLUSH_EVERY: u64 = 97;
/// The child calls `compact` after batches whose id is a multiple of this.
const COMPACT_EVERY: u64 = 1009;
/// A batch may delete keys put by one of this many batches before it.
const DELETE_LOOKBACK: u64 = 64;

/// Small sizes so that flushes and compactions happen while the child runs.
fn options(sync_mode: SyncMode) -> Options {
    let mut options = Options::default();
    options.sync_mode = sync_mode;
    options.write_buffer_size = 64 << 10;
    options.wal_preallocate_bytes = 64 << 10;
    options.target_file_size = 64 << 10;
    options.level1_target_bytes = 256 << 10;
    options.max_manifest_bytes = 64 << 10;
    options.table.block_size = 512;
    options.table.restart_interval = 8;
    options
}

// ---------------------------------------------------------------------------------------
// The workload: a pure function of the batch id.

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn key(index: u64) -> Vec<u8> {
    format!("k/{index:05}").into_bytes()
}

fn value(id: u64, idx: u64, count: u64, filler: &[u8]) -> Vec<u8> {
    let mut value = format!("b{id:010} i{idx:02} n{count:02} ").into_bytes();
    value.extend_from_slice(filler);
    value
}

/// Parses (batch id, key index, key count) from a value written by [`value`].
fn decode_value(value: &[u8]) -> Option<(u64, u64, u64)> {
    let head = std::str::from_utf8(value.get(..22)?).ok()?;
    let mut parts = head.split(' ');
    let id = parts.next()?.strip_prefix('b')?.parse().ok()?;
    let idx = parts.next()?.strip_prefix('i')?.parse().ok()?;
    let count = parts.next()?.strip_prefix('n')?.parse().ok()?;
    Some((id, idx, count))
}

/// The keys and values batch `id` puts: 1..=8 of them.
fn puts(id: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng::new(WORKLOAD_SEED ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let count = 1 + rng.below(8);
    (0..count)
        .map(|idx| {
            let k = key(rng.below(KEYS));
            let len = 16 + rng.below(240);
            // Random letters, or (half the time) a short run of them repeated, so that
            // some table blocks are stored compressed and some not.
            let period = if rng.chance(50) { 1 + rng.below(8) } else { len };
            let letters: Vec<u8> = (0..period).map(|_| b'a' + rng.below(26) as u8).collect();
            let filler: Vec<u8> = letters.iter().copied().cycle().take(len as usize).collect();
            (k, value(id, idx, count, &filler))
        })
        .collect()
}

/// Every operation of batch `id`, in order.
fn ops(id: u64) -> Vec<Op> {
    let mut rng = Rng::new(!WORKLOAD_SEED ^ id.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let own = puts(id);
    let mut ops: Vec<Op> = own.iter().map(|(k, v)| Op::Put(k.clone(), v.clone())).collect();
    if id > 1 && rng.chance(25) {
        // Delete some keys an earlier batch put (they may have been overwritten since).
        let earlier = id - 1 - rng.below((id - 1).min(DELETE_LOOKBACK));
        let theirs = puts(earlier);
        let victims = 1 + rng.below(theirs.len() as u64);
        for (k, _) in theirs.into_iter().take(victims as usize) {
            ops.push(Op::Delete(k));
        }
    }
    if rng.chance(4) {
        // Put and delete the same key in one batch: the delete wins.
        ops.push(Op::Delete(own[0].0.clone()));
    }
    ops.push(Op::Put(META_KEY.to_vec(), id.to_string().into_bytes()));
    ops
}

fn batch(id: u64) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for op in ops(id) {
        match op {
            Op::Put(k, v) => batch.put(&k, &v),
            Op::Delete(k) => batch.delete(&k),
        };
    }
    batch
}

// ---------------------------------------------------------------------------------------
// The child.

fn child_fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("crash_process child: {what}: {error}");
    std::process::exit(3);
}

fn last_batch_id(db: &Db) -> u64 {
    match db.get(META_KEY) {
        Ok(Some(v)) => match std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()) {
            Some(id) => id,
            None => child_fail("bad meta/last value", String::from_utf8_lossy(&v)),
        },
        Ok(None) => 0,
        Err(e) => child_fail("reading meta/last", e),
    }
}

/// Commits batches forever, acknowledging each on stdout; the parent kills it.
/// Runs as the child: commits batches until killed.
pub fn child(dir: &Path, buffered: bool) -> ! {
    let sync_mode = if buffered { SyncMode::Buffered } else { SyncMode::Always };
    let db = Db::open(dir, options(sync_mode)).unwrap_or_else(|e| child_fail("open", e));
    let first = last_batch_id(&db) + 1;
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
            child_fail("writing to stdout", e);
        }
    };
    say(format!("start {first}"));
    for id in first.. {
        let seq = db.write(batch(id)).unwrap_or_else(|e| child_fail(&format!("write of batch {id}"), e));
        if seq != id {
            child_fail(&format!("batch {id}"), format!("got sequence number {seq}"));
        }
        say(format!("ok {id}"));
        if id % FLUSH_EVERY == 0 {
            db.flush().unwrap_or_else(|e| child_fail(&format!("flush after batch {id}"), e));
        }
        if id % COMPACT_EVERY == 0 {
            db.compact().unwrap_or_else(|e| child_fail(&format!("compact after batch {id}"), e));
        }
    }
    unreachable!("batch ids ran out")
}

// ---------------------------------------------------------------------------------------
// The parent.

/// Key → (value, sequence number) after batches `1..=applied`.
struct Model {
    state: BTreeMap<Vec<u8>, (Vec<u8>, u64)>,
    applied: u64,
}

impl Model {
    fn advance_to(&mut self, k: u64) {
        assert!(k >= self.applied, "the model cannot go back from {} to {k}", self.applied);
        for id in self.applied + 1..=k {
            for op in ops(id) {
                match op {
                    Op::Put(k, v) => self.state.insert(k, (v, id)),
                    Op::Delete(k) => self.state.remove(&k),
                };
            }
        }
        self.applied = k;
    }
}

fn describe(value: &[u8]) -> String {
    match decode_value(value) {
        Some((id, idx, count)) => format!("batch {id} key {idx}/{count}"),
        None => format!("{:?}", String::from_utf8_lossy(&value[..value.len().min(40)])),
    }
}

/// What one child run acknowledged.
struct ChildRun {
    /// The first batch id it was going to write, if it got that far.
    start: Option<u64>,
    /// Acknowledged batch ids, in order.
    acked: Vec<u64>,
}

/// Runs a child on `dir` for `delay`, then kills it. Fails if it exited by itself.
fn run_child(dir: &Path, delay: Duration, buffered: bool) -> Result<ChildRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut command = Command::new(exe);
    command.env(CHILD_ENV, dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if buffered {
        command.env(CHILD_SYNC_ENV, "buffered");
    }
    let mut child: Child = command.spawn().map_err(|e| format!("spawning the child: {e}"))?;
    let stdout = collect_lines(child.stdout.take().expect("piped stdout"));
    let stderr = collect_text(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + delay;
    let mut exited_early = None;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().map_err(|e| format!("try_wait: {e}"))? {
            exited_early = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(2).min(deadline.saturating_duration_since(Instant::now())));
    }
    if exited_early.is_none() {
        child.kill().map_err(|e| format!("kill: {e}"))?;
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    let lines = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    if exited_early.is_some() || !killed_by_sigkill(&status) {
        return Err(format!("the child exited by itself with {status}; its stderr:\n{stderr}"));
    }
    let mut run = ChildRun { start: None, acked: Vec::new() };
    for (i, line) in lines.iter().enumerate() {
        match (i, line.split_once(' ')) {
            (0, Some(("start", n))) => run.start = n.parse().ok(),
            (_, Some(("ok", n))) if run.start.is_some() => {
                let id: u64 = n.parse().map_err(|_| format!("bad child line {line:?}"))?;
                let expected = run.start.unwrap_or(0) + run.acked.len() as u64;
                if id != expected {
                    return Err(format!("the child acknowledged batch {id} where {expected} was next"));
                }
                run.acked.push(id);
            }
            _ => return Err(format!("unexpected child line {i}: {line:?}")),
        }
    }
    Ok(run)
}

/// Opens the database, checks it holds exactly the state after some `k` in `lowest..=highest`
/// batches, closes it, and returns `k` and the number of commits the WAL replay found.
fn verify(dir: &Path, model: &mut Model, lowest: u64, highest: u64) -> Result<(u64, u64), String> {
    let db = Db::open(dir, options(SyncMode::Always)).map_err(|e| format!("reopening: {e}"))?;
    let replayed = db.recovery_report().commits_replayed;
    let k = match db.get(META_KEY).map_err(|e| format!("reading meta/last: {e}"))? {
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad meta/last value {:?}", String::from_utf8_lossy(&v)))?,
        None => 0,
    };
    if !(lowest..=highest).contains(&k) {
        return Err(format!(
            "recovered the state after batch {k}, expected a batch in {lowest}..={highest} \
             (every acknowledged batch, at most one more)"
        ));
    }
    model.advance_to(k);
    if db.last_sequence() != k {
        return Err(format!("last_sequence() is {} after recovering batch {k}", db.last_sequence()));
    }

    let forward: Vec<Entry> =
        db.iter().collect::<Result<_, _>>().map_err(|e| format!("forward scan: {e}"))?;
    let mut problems = Vec::new();
    let mut expected = model.state.iter().peekable();
    let mut found = forward.iter().peekable();
    loop {
        match (expected.peek(), found.peek()) {
            (None, None) => break,
            (Some((ek, (ev, eseq))), Some(f)) if **ek == f.key => {
                if *ev != f.value || *eseq != f.seq {
                    problems.push(format!(
                        "{}: expected {} (seq {eseq}), found {} (seq {})",
                        String::from_utf8_lossy(ek),
                        describe(ev),
                        describe(&f.value),
                        f.seq
                    ));
                }
                expected.next();
                found.next();
            }
            (Some((ek, (ev, eseq))), f) if f.is_none_or(|f| **ek < f.key) => {
                problems.push(format!(
                    "{}: missing, expected {} (seq {eseq})",
                    String::from_utf8_lossy(ek),
                    describe(ev)
                ));
                expected.next();
            }
            (_, Some(f)) => {
                problems.push(format!(
                    "{}: present but should not be: {} (seq {})",
                    String::from_utf8_lossy(&f.key),
                    describe(&f.value),
                    f.seq
                ));
                found.next();
            }
            (Some(_), None) => unreachable!("handled by the arm above"),
        }
    }
    if !problems.is_empty() {
        let shown = problems.len().min(20);
        return Err(format!(
            "the database differs from the model after batch {k} in {} keys (first {shown}):\n  {}",
            problems.len(),
            problems[..shown].join("\n  ")
        ));
    }
    // Every key's value names the batch that wrote it, whose sequence number it carries.
    for entry in forward.iter().filter(|e| e.key.starts_with(b"k/")) {
        let (id, idx, count) = decode_value(&entry.value).ok_or("undecodable value")?;
        let written = puts(id);
        if id != entry.seq
            || count != written.len() as u64
            || written.get(idx as usize).map(|p| &p.0) != Some(&entry.key)
        {
            return Err(format!(
                "{}: value of {} with seq {}",
                String::from_utf8_lossy(&entry.key),
                describe(&entry.value),
                entry.seq
            ));
        }
    }

    let mut backward: Vec<Entry> =
        db.iter().rev().collect::<Result<_, _>>().map_err(|e| format!("reverse scan: {e}"))?;
    backward.reverse();
    if backward != forward {
        return Err(format!(
            "reverse scan ({} entries) differs from forward scan ({})",
            backward.len(),
            forward.len()
        ));
    }
    for (k, (v, seq)) in &model.state {
        let entry = db.get_entry(k).map_err(|e| format!("get: {e}"))?;
        if entry.as_ref().map(|e| (&e.value, e.seq)) != Some((v, *seq)) {
            return Err(format!(
                "get({}) = {:?}, expected {}",
                String::from_utf8_lossy(k),
                entry.map(|e| describe(&e.value)),
                describe(v)
            ));
        }
    }
    for index in (0..KEYS).step_by(7) {
        let k = key(index);
        if !model.state.contains_key(&k) {
            if let Some(e) = db.get_entry(&k).map_err(|e| format!("get: {e}"))? {
                return Err(format!(
                    "get({}) found deleted key: {}",
                    String::from_utf8_lossy(&k),
                    describe(&e.value)
                ));
            }
        }
    }
    let snapshot = db.snapshot();
    if snapshot.sequence() != k {
        return Err(format!("snapshot sequence {} after recovering batch {k}", snapshot.sequence()));
    }
    drop(snapshot);
    if k > 0 && db.stats().table_bytes == 0 {
        return Err("no table files after recovery: flushes never happened".into());
    }
    db.close().map_err(|e| format!("close: {e}"))?;
    Ok((k, replayed))
}

/// Runs the kill cycles (counts, seed and delays from the environment, or as given).
pub fn parent() {
    parent_with(env_or("STAMPKV_CRASH_CYCLES", 24));
}

/// Runs `cycles` kill cycles; exits the process with status 1 on a failure.
pub fn parent_with(cycles: u64) {
    let seed = env_or("STAMPKV_CRASH_SEED", 0xC0FF_EE15_DEAD);
    let max_delay = env_or("STAMPKV_CRASH_MAX_DELAY_MS", 400).max(21);
    let dir = tempfile::Builder::new().prefix("stampkv-crash-").tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    println!(
        "crash_process: seed {seed}, {cycles} cycles, kill after 20..{max_delay} ms, dir {}",
        path.display()
    );
    match run_cycles(&path, seed, cycles, max_delay) {
        Ok(()) => println!("crash_process: ok"),
        Err(message) => {
            let kept: PathBuf = dir.keep();
            eprintln!("crash_process FAILED (seed {seed}; database kept in {}):\n{message}", kept.display());
            std::process::exit(1);
        }
    }
}

fn run_cycles(dir: &Path, seed: u64, cycles: u64, max_delay: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let mut model = Model { state: BTreeMap::new(), applied: 0 };
    // The database holds the state after some batch in low..=high.
    let (mut low, mut high) = (0u64, 0u64);
    let (mut total_acked, mut cycles_with_acks, mut verified) = (0u64, 0u64, 0u64);
    let test_start = Instant::now();
    for cycle in 0..cycles {
        let delay = Duration::from_millis(20 + rng.below(max_delay - 20));
        let buffered = cycle % 4 == 3;
        // Sometimes the next child recovers the crashed database itself (and may be killed
        // while doing so) instead of the parent verifying it first.
        let verify_now = cycle + 1 == cycles || rng.below(3) != 0;
        let started = Instant::now();
        let context = |e: String| format!("cycle {cycle} (delay {delay:?}, buffered {buffered}): {e}");
        let run = run_child(dir, delay, buffered).map_err(context)?;
        if let Some(start) = run.start {
            let found = start - 1;
            if !(low..=high).contains(&found) {
                return Err(context(format!(
                    "the child opened the state after batch {found}, expected a batch in {low}..={high}"
                )));
            }
            // Batch `start` may be durable without its acknowledgement.
            (low, high) = (found, start);
        }
        if let Some(&last) = run.acked.last() {
            (low, high) = (last, last + 1);
        }
        total_acked += run.acked.len() as u64;
        cycles_with_acks += u64::from(!run.acked.is_empty());
        let outcome = if verify_now {
            let (k, replayed) = verify(dir, &mut model, low, high).map_err(context)?;
            let unacked = if k > low && !run.acked.is_empty() { " (+1 unacknowledged)" } else { "" };
            verified += 1;
            (low, high) = (k, k);
            format!("recovered {k}{unacked}, {replayed} commits replayed, {} keys", model.state.len())
        } else {
            format!("not verified, state after a batch in {low}..={high}")
        };
        println!(
            "cycle {cycle:3}: {} kill after {:3} ms, acknowledged {:5} (last {}), {outcome}, {:?}",
            if buffered { "buffered" } else { "always  " },
            delay.as_millis(),
            run.acked.len(),
            run.acked.last().map_or("-".to_string(), |a| a.to_string()),
            started.elapsed()
        );
    }
    let k = low;
    println!(
        "crash_process: {cycles} cycles ({verified} verified), {total_acked} batches acknowledged, \
         {cycles_with_acks} cycles with acknowledgements, state after batch {k}, {:?}",
        test_start.elapsed()
    );
    if cycles > 0 && total_acked == 0 {
        return Err("no child ever acknowledged a batch: the test proved nothing".into());
    }
    if cycles_with_acks * 4 < cycles {
        return Err(format!("only {cycles_with_acks} of {cycles} children acknowledged anything"));
    }
    Ok(())
}

/// If this process was started as a child, runs the child and never returns.
pub fn run_child_if_requested() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let buffered = std::env::var(CHILD_SYNC_ENV).is_ok_and(|v| v == "buffered");
        child(Path::new(&dir), buffered);
    }
}
