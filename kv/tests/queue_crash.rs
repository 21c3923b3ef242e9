//! Process-kill test of the persisted queue: messages acknowledged by `enqueue` are all
//! delivered after SIGKILL and reopen (none lost), messages whose handler was running at
//! the kill are delivered again, and delayed messages are never delivered before their
//! deadline, which survives the crash.
//!
//! A child process opens the database in a directory that every cycle shares, starts a
//! listener (4 workers), and enqueues numbered messages: `try <first> <n> <marked>` before
//! each commit, `enq <id> <deadline_ms> <flags>` for each of its messages once the commit
//! returned `Ok` (the acknowledgement). Commits are a plain `kv.enqueue`, or an atomic
//! operation that also sets the marker `["sent", first]` and enqueues 1..=4 messages. About
//! one message in six has a delay of 2–5 s. The handler checks the payload and that the
//! deadline has come, adds 1 to `["deliveries", id]` in a durable commit, prints
//! `got <id> <count>`, maybe sleeps, prints `ret <id>` and returns. Each child's first
//! message is a *blocker*: on its first recorded delivery the handler prints `hold <id>`
//! and sleeps for a minute, so the kill always catches it in flight. Messages flagged
//! *fail-once* return an error on their first recorded delivery (retried after 100 ms).
//!
//! The parent kills each child with SIGKILL after a random delay; the next child continues
//! in the same directory. At the end the parent opens the database, listens until every
//! requirement below is met (or fails after a timeout, listing what is missing), closes,
//! reopens and checks the durable delivery counts:
//! - every acknowledged message was delivered (none lost); so was every message of a
//!   commit whose marker is stored, and no message of a marked commit whose marker is
//!   missing was ever delivered (enqueues are atomic with the rest of the commit);
//! - a message whose handler printed `got` but not `ret` before a kill was running then,
//!   so it cannot have been acknowledged: its count is at least 1 + such kills;
//! - no delivery came before the message's deadline (checked by every handler, recorded
//!   durably under `["early", id]`), and in the parent's run delayed messages come on time;
//! - every delivered id was enqueued by some child; fail-once messages were delivered twice.
//!
//! `harness = false`: the test re-executes itself as the child. Environment:
//! `STAMPKV_QUEUE_CRASH_CYCLES` (default 20), `STAMPKV_QUEUE_CRASH_SEED`,
//! `STAMPKV_QUEUE_CRASH_MAX_DELAY_MS` (longest run of a child before the kill, default
//! 1200). On failure the database directory is kept and its path printed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::unreachable,
    reason = "test code: a panic is a failed test"
)]

use stampkv::{
    key, EnqueueOptions, Key, KeyPart, Kv, KvOptions, KvValue, ListOptions, ListenOptions, Selector,
};
use stampkv_testkit::process::{collect_lines, collect_text, killed_by_sigkill, libtest_selects};
use stampkv_testkit::SplitMix64 as Rng;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Set in the child's environment to the database directory.
const CHILD_ENV: &str = "STAMPKV_QUEUE_CRASH_CHILD";
/// The child's first message id.
const CHILD_FIRST_ENV: &str = "STAMPKV_QUEUE_CRASH_CHILD_FIRST";
/// The child's workload seed.
const CHILD_SEED_ENV: &str = "STAMPKV_QUEUE_CRASH_CHILD_SEED";
/// Ids of cycle `c` start at `c * IDS_PER_CYCLE + 1`.
const IDS_PER_CYCLE: u64 = 1_000_000;
/// Flag: the handler holds the message for a minute on its first recorded delivery.
const BLOCK: u8 = 1;
/// Flag: the handler sleeps a little (10..=80 ms) after recording the delivery.
const SLOW: u8 = 2;
/// Flag: the handler fails the first recorded delivery.
const FAIL_ONCE: u8 = 4;
/// How long a blocker is held (far longer than a child lives).
const HOLD: Duration = Duration::from_secs(60);
/// Shortest run of a child before the kill.
const MIN_DELAY_MS: u64 = 40;
/// Longest the parent waits for the remaining deliveries, beyond the last deadline.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How late (after its deadline) the parent's listener may deliver a delayed message.
const LATENESS_BOUND_MS: u64 = 3_000;

fn main() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let first = env_or(CHILD_FIRST_ENV, 1);
        let seed = env_or(CHILD_SEED_ENV, 1);
        child(Path::new(&dir), first, seed);
    }
    // Behave like a libtest binary for `cargo test <filter>` and test runners.
    if libtest_selects("queue_process_kill") {
        parent();
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name} must be a number, got {v:?}")),
        Err(_) => default,
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

// ---------------------------------------------------------------------------------------
// Messages.

/// What a message carries: its id, the earliest time it may be delivered (taken just
/// before the enqueue, so at or before the queue's own deadline) and its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Payload {
    id: u64,
    deadline_ms: u64,
    flags: u8,
}

fn checksum(id: u64, deadline_ms: u64, flags: u8) -> u64 {
    let mut rng = Rng::new(id ^ deadline_ms.rotate_left(17) ^ u64::from(flags).rotate_left(50));
    rng.next_u64()
}

impl Payload {
    fn encode(&self) -> KvValue {
        let mut bytes = Vec::with_capacity(25);
        bytes.extend_from_slice(&self.id.to_be_bytes());
        bytes.extend_from_slice(&self.deadline_ms.to_be_bytes());
        bytes.push(self.flags);
        bytes.extend_from_slice(&checksum(self.id, self.deadline_ms, self.flags).to_be_bytes());
        KvValue::Bytes(bytes)
    }

    fn decode(value: &KvValue) -> Result<Payload, String> {
        let KvValue::Bytes(bytes) = value else { return Err(format!("not a bytes value: {value:?}")) };
        if bytes.len() != 25 {
            return Err(format!("payload of {} bytes", bytes.len()));
        }
        let word = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let payload = Payload { id: word(0), deadline_ms: word(8), flags: bytes[16] };
        if word(17) != checksum(payload.id, payload.deadline_ms, payload.flags) {
            return Err(format!("bad checksum in {bytes:?}"));
        }
        Ok(payload)
    }

    /// How long a slow handler sleeps.
    fn slow_ms(&self) -> u64 {
        10 + self.id % 71
    }
}

fn deliveries_key(id: u64) -> Key {
    key!["deliveries", id as f64]
}

fn id_of(key: &Key) -> Option<u64> {
    match key.0.get(1) {
        Some(KeyPart::Number(n)) if *n >= 0.0 && n.fract() == 0.0 => Some(*n as u64),
        _ => None,
    }
}

/// Every `[prefix, id]` entry: id → its value.
fn read_all(kv: &Kv, prefix: &str) -> Result<BTreeMap<u64, KvValue>, String> {
    let mut out = BTreeMap::new();
    let entries = kv
        .list::<KvValue>(&Selector::prefix(key![prefix]), &ListOptions::default())
        .map_err(|e| format!("listing {prefix}: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("listing {prefix}: {e}"))?;
        let id = id_of(&entry.key).ok_or_else(|| format!("unexpected key {:?}", entry.key))?;
        out.insert(id, entry.value);
    }
    Ok(out)
}

fn as_u64(value: &KvValue) -> u64 {
    match value {
        KvValue::U64(n) => *n,
        other => panic!("expected a KvU64, found {other:?}"),
    }
}

/// A delivery as the handler recorded it.
struct Delivery {
    payload: Payload,
    /// Recorded deliveries of this id so far, this one included.
    count: u64,
    /// When the handler ran.
    at_ms: u64,
}

/// What every handler does first: checks the payload and the deadline (recording an early
/// delivery durably under `["early", id]`), then adds 1 to `["deliveries", id]` in a durable
/// commit. `Err` only if the database fails (the message is then retried).
fn record(kv: &Kv, value: &KvValue) -> Result<Result<Delivery, String>, String> {
    let at_ms = now_ms();
    let payload = match Payload::decode(value) {
        Ok(payload) => payload,
        Err(e) => {
            kv.set(&key!["bad", at_ms as f64], &KvValue::Bytes(e.clone().into_bytes()))
                .map_err(|e| format!("recording a bad payload: {e}"))?;
            return Ok(Err(e));
        }
    };
    let id = payload.id;
    let mut op = kv.atomic().sum(&deliveries_key(id), 1);
    if at_ms < payload.deadline_ms {
        op = op.set(&key!["early", id as f64], &KvValue::U64(payload.deadline_ms - at_ms));
    }
    op.commit().map_err(|e| format!("recording delivery of {id}: {e}"))?;
    let count = match kv.get::<KvValue>(&deliveries_key(id)).map_err(|e| format!("reading count: {e}"))?.value
    {
        Some(value) => as_u64(&value),
        None => return Err(format!("the count of {id} vanished")),
    };
    Ok(Ok(Delivery { payload, count, at_ms }))
}

// ---------------------------------------------------------------------------------------
// The child.

fn child_fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("queue_crash child: {what}: {error}");
    std::process::exit(3);
}

/// The child's handler: records the delivery, reports it, holds blockers, sleeps if slow.
fn child_handle(kv: &Kv, value: &KvValue) -> Result<(), String> {
    let delivery = match record(kv, value) {
        Ok(Ok(delivery)) => delivery,
        Ok(Err(bad)) => {
            println!("bad {bad}");
            return Ok(());
        }
        Err(e) => {
            eprintln!("queue_crash child: {e}");
            return Err(e);
        }
    };
    let Payload { id, deadline_ms, flags } = delivery.payload;
    println!("got {id} {}", delivery.count);
    if delivery.at_ms < deadline_ms {
        println!("early {id} {}", deadline_ms - delivery.at_ms);
    }
    if flags & BLOCK != 0 && delivery.count == 1 {
        println!("hold {id}");
        std::thread::sleep(HOLD);
    }
    if flags & SLOW != 0 {
        std::thread::sleep(Duration::from_millis(delivery.payload.slow_ms()));
    }
    println!("ret {id}");
    if flags & FAIL_ONCE != 0 && delivery.count == 1 {
        return Err(format!("message {id} fails its first delivery"));
    }
    Ok(())
}

fn enqueue_options(delay_ms: u64, flags: u8) -> EnqueueOptions {
    EnqueueOptions {
        delay: Duration::from_millis(delay_ms),
        backoff_schedule: (flags & FAIL_ONCE != 0).then(|| vec![Duration::from_millis(100)]),
        ..EnqueueOptions::default()
    }
}

/// Listens and enqueues until killed.
fn child(dir: &Path, first: u64, seed: u64) -> ! {
    let kv = Kv::open(dir, KvOptions::default()).unwrap_or_else(|e| child_fail("open", e));
    println!("start {first}");
    let handler_kv = kv.clone();
    let listener = kv
        .listen_queue(ListenOptions::default(), move |message| child_handle(&handler_kv, &message.value))
        .unwrap_or_else(|e| child_fail("listen_queue", e));
    let mut rng = Rng::new(seed);
    let mut next = first;
    for commit in 0u64.. {
        // The first message is the blocker; then one commit in five is marked and
        // enqueues 1..=4 messages, one in five is marked with one message, the rest are
        // plain `kv.enqueue`s.
        let (count, marked) = match (commit, rng.below(5)) {
            (0, _) => (1, false),
            (_, 0) => (1 + rng.below(4), true),
            (_, 1) => (1, true),
            _ => (1, false),
        };
        let base_ms = now_ms();
        let payloads: Vec<(Payload, u64)> = (next..next + count)
            .map(|id| {
                let delay_ms = if commit > 0 && rng.one_in(6) { 2_000 + rng.below(3_001) } else { 0 };
                let mut flags = if commit == 0 { BLOCK } else { 0 };
                if commit > 0 && rng.one_in(10) {
                    flags |= SLOW;
                }
                if commit > 0 && rng.one_in(25) {
                    flags |= FAIL_ONCE;
                }
                (Payload { id, deadline_ms: base_ms + delay_ms, flags }, delay_ms)
            })
            .collect();
        println!("try {next} {count} {}", u8::from(marked));
        let outcome = if marked {
            let mut op = kv.atomic().set(&key!["sent", next as f64], &KvValue::U64(count));
            for (payload, delay_ms) in &payloads {
                op = op.enqueue(&payload.encode(), enqueue_options(*delay_ms, payload.flags));
            }
            op.commit().map(|result| assert!(result.ok(), "a commit without checks failed"))
        } else {
            let (payload, delay_ms) = payloads[0];
            kv.enqueue(&payload.encode(), enqueue_options(delay_ms, payload.flags)).map(|_| ())
        };
        if let Err(e) = outcome {
            child_fail(&format!("enqueue of {next}"), e);
        }
        for (payload, delay_ms) in &payloads {
            println!("enq {} {} {} {delay_ms}", payload.id, payload.deadline_ms, payload.flags);
        }
        next += count;
        if commit % 150 == 149 {
            // Move queued messages (and the deletions of delivered ones) into a table.
            kv.engine().flush().unwrap_or_else(|e| child_fail("flush", e));
        }
        std::thread::sleep(Duration::from_millis(1 + rng.below(4)));
    }
    drop(listener);
    unreachable!("ids ran out")
}

// ---------------------------------------------------------------------------------------
// The parent.

/// A message as its enqueue was acknowledged.
#[derive(Debug, Clone, Copy)]
struct Acked {
    deadline_ms: u64,
    flags: u8,
    delay_ms: u64,
    cycle: u64,
}

/// Everything the children reported.
#[derive(Default)]
struct Ledger {
    /// Acknowledged messages.
    acked: BTreeMap<u64, Acked>,
    /// Every id some child tried to enqueue.
    tried: BTreeSet<u64>,
    /// Marked commits: first id → (message count, acknowledged).
    marked: BTreeMap<u64, (u64, bool)>,
    /// Kills that caught a recorded delivery in its handler: id → how many.
    in_flight: BTreeMap<u64, u64>,
    /// Cycles in which each id was reported delivered.
    delivered_in: BTreeMap<u64, BTreeSet<u64>>,
    /// Early deliveries reported, and bad payloads.
    problems: Vec<String>,
    /// Blockers held at a kill.
    held_at_kill: u64,
    /// Children that started (opened the database).
    started: u64,
}

/// Runs a child for `delay`, kills it and adds its report to the ledger.
fn run_child(
    dir: &Path,
    cycle: u64,
    seed: u64,
    delay: Duration,
    ledger: &mut Ledger,
) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let first = cycle * IDS_PER_CYCLE + 1;
    let mut command = Command::new(exe);
    command
        .env(CHILD_ENV, dir)
        .env(CHILD_FIRST_ENV, first.to_string())
        .env(CHILD_SEED_ENV, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| format!("spawning the child: {e}"))?;
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
    let (mut acked, mut got, mut returned, mut holds) = (0, BTreeSet::new(), BTreeSet::new(), 0);
    let mut redelivered = 0;
    for line in &lines {
        let parts: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| -> Result<u64, String> {
            parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(|| format!("bad child line {line:?}"))
        };
        match parts[0] {
            "start" => ledger.started += 1,
            "try" => {
                let (first, count, marked) = (num(1)?, num(2)?, num(3)? == 1);
                ledger.tried.extend(first..first + count);
                if marked {
                    ledger.marked.insert(first, (count, false));
                }
            }
            "enq" => {
                let id = num(1)?;
                let flags = u8::try_from(num(3)?).map_err(|_| format!("bad flags in {line:?}"))?;
                ledger.acked.insert(id, Acked { deadline_ms: num(2)?, flags, delay_ms: num(4)?, cycle });
                if let Some(marked) = ledger.marked.get_mut(&id) {
                    marked.1 = true;
                }
                acked += 1;
            }
            "got" => {
                let id = num(1)?;
                redelivered += u64::from(num(2)? > 1);
                got.insert(id);
                ledger.delivered_in.entry(id).or_default().insert(cycle);
            }
            "ret" => {
                returned.insert(num(1)?);
            }
            "hold" => holds += 1,
            "early" => ledger.problems.push(format!("cycle {cycle}: {line}")),
            "bad" => ledger.problems.push(format!("cycle {cycle}: {line}")),
            _ => return Err(format!("unexpected child line {line:?}")),
        }
    }
    let mut in_flight = 0;
    for id in got.difference(&returned) {
        *ledger.in_flight.entry(*id).or_default() += 1;
        in_flight += 1;
    }
    ledger.held_at_kill += holds;
    Ok(format!(
        "acknowledged {acked:4}, delivered {:4} ({redelivered} again), {in_flight} in flight at the kill \
         ({holds} held)",
        got.len()
    ))
}

fn parent() {
    let seed = env_or("STAMPKV_QUEUE_CRASH_SEED", 0x0051_DE5E_ED00_0001);
    let cycles = env_or("STAMPKV_QUEUE_CRASH_CYCLES", 20);
    let max_delay = env_or("STAMPKV_QUEUE_CRASH_MAX_DELAY_MS", 1_200).max(MIN_DELAY_MS + 1);
    let dir = tempfile::Builder::new().prefix("stampkv-queue-crash-").tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    println!(
        "queue_crash: seed {seed}, {cycles} cycles, kill after {MIN_DELAY_MS}..{max_delay} ms, dir {}",
        path.display()
    );
    let started = Instant::now();
    match run(&path, seed, cycles, max_delay) {
        Ok(()) => println!("queue_crash: ok in {:?}", started.elapsed()),
        Err(message) => {
            let kept: PathBuf = dir.keep();
            eprintln!(
                "queue_crash FAILED (seed {seed}, {cycles} cycles; database kept in {}):\n{message}",
                kept.display()
            );
            std::process::exit(1);
        }
    }
}

fn run(dir: &Path, seed: u64, cycles: u64, max_delay: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let mut ledger = Ledger::default();
    for cycle in 0..cycles {
        let delay = Duration::from_millis(MIN_DELAY_MS + rng.below(max_delay - MIN_DELAY_MS));
        let child_seed = rng.next_u64();
        let started = Instant::now();
        let report = run_child(dir, cycle, child_seed, delay, &mut ledger)
            .map_err(|e| format!("cycle {cycle} (kill after {delay:?}): {e}"))?;
        println!("cycle {cycle:2}: kill after {:4} ms: {report}, {:?}", delay.as_millis(), started.elapsed());
    }
    drain_and_check(dir, &ledger)
}

/// What the parent's listener saw.
#[derive(Default)]
struct ParentDeliveries {
    counts: HashMap<u64, u64>,
    /// Delayed messages whose deadline was still ahead at the reopen: id → ms late.
    lateness: BTreeMap<u64, u64>,
    problems: Vec<String>,
}

fn drain_and_check(dir: &Path, ledger: &Ledger) -> Result<(), String> {
    let kv = Kv::open(dir, KvOptions::default()).map_err(|e| format!("reopening: {e}"))?;
    let open_ms = now_ms();
    let before: BTreeMap<u64, u64> =
        read_all(&kv, "deliveries")?.iter().map(|(id, v)| (*id, as_u64(v))).collect();
    let markers: BTreeMap<u64, u64> = read_all(&kv, "sent")?.iter().map(|(id, v)| (*id, as_u64(v))).collect();

    // What must be delivered, and how many times at least.
    let mut required: BTreeMap<u64, u64> = ledger.acked.keys().map(|id| (*id, 1)).collect();
    for (first, count) in &markers {
        for id in *first..first + count {
            required.entry(id).or_insert(1);
        }
    }
    for (id, kills) in &ledger.in_flight {
        let need = required.entry(*id).or_insert(1);
        *need = (*need).max(1 + kills);
    }
    for (id, acked) in &ledger.acked {
        if acked.flags & FAIL_ONCE != 0 {
            let need = required.entry(*id).or_insert(1);
            *need = (*need).max(2);
        }
    }
    let backlog = required.iter().filter(|(id, need)| before.get(id).copied().unwrap_or(0) < **need).count();
    let last_deadline = ledger.acked.values().map(|a| a.deadline_ms).max().unwrap_or(0);
    println!(
        "reopened: {} ids delivered before, {} markers, {} ids required ({backlog} still to deliver), \
         last deadline in {} ms",
        before.len(),
        markers.len(),
        required.len(),
        last_deadline.saturating_sub(open_ms)
    );

    let seen = Arc::new(Mutex::new(ParentDeliveries::default()));
    let (handler_kv, handler_seen) = (kv.clone(), seen.clone());
    let listener = kv
        .listen_queue(ListenOptions::default(), move |message| -> Result<(), String> {
            let delivery = match record(&handler_kv, &message.value)? {
                Ok(delivery) => delivery,
                Err(bad) => {
                    handler_seen.lock().expect("lock").problems.push(format!("parent: bad payload: {bad}"));
                    return Ok(());
                }
            };
            let Payload { id, deadline_ms, flags } = delivery.payload;
            let mut seen = handler_seen.lock().expect("lock");
            *seen.counts.entry(id).or_default() += 1;
            if delivery.at_ms < deadline_ms {
                seen.problems
                    .push(format!("parent: {id} delivered {} ms early", deadline_ms - delivery.at_ms));
            } else if deadline_ms > open_ms {
                // The first delivery (a fail-once message comes again 100 ms later).
                seen.lateness.entry(id).or_insert(delivery.at_ms - deadline_ms);
            }
            drop(seen);
            if flags & FAIL_ONCE != 0 && delivery.count == 1 {
                return Err(format!("message {id} fails its first delivery"));
            }
            Ok(())
        })
        .map_err(|e| format!("listen_queue: {e}"))?;
    let give_up =
        Instant::now() + DRAIN_TIMEOUT + Duration::from_millis(last_deadline.saturating_sub(open_ms));
    let missing = |seen: &ParentDeliveries| -> Vec<(u64, u64, u64)> {
        required
            .iter()
            .map(|(id, need)| {
                let have = before.get(id).copied().unwrap_or(0) + seen.counts.get(id).copied().unwrap_or(0);
                (*id, *need, have)
            })
            .filter(|(_, need, have)| have < need)
            .collect()
    };
    let drain_start = Instant::now();
    loop {
        let left = missing(&seen.lock().expect("lock"));
        if left.is_empty() {
            break;
        }
        if Instant::now() > give_up {
            listener.stop();
            let _ = kv.close();
            let shown: Vec<String> = left
                .iter()
                .take(40)
                .map(|(id, need, have)| {
                    let acked = ledger.acked.get(id);
                    format!(
                        "{id} (cycle {}, {}, flags {}, needs {need} deliveries, has {have})",
                        id / IDS_PER_CYCLE,
                        acked.map_or("not acknowledged, marker stored".to_string(), |a| format!(
                            "deadline {}",
                            a.deadline_ms
                        )),
                        acked.map_or(0, |a| a.flags),
                    )
                })
                .collect();
            return Err(format!(
                "after {:?}, {} messages were not delivered as often as required (LOST or not \
                 redelivered), first {}:\n  {}",
                drain_start.elapsed(),
                left.len(),
                shown.len(),
                shown.join("\n  ")
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let drained_in = drain_start.elapsed();
    // Anything else still queued (unacknowledged commits that did land) comes now.
    std::thread::sleep(Duration::from_millis(300));
    listener.stop();
    kv.close().map_err(|e| format!("close: {e}"))?;

    let seen = Arc::try_unwrap(seen).map_err(|_| "handler state still shared")?.into_inner().expect("lock");
    let kv = Kv::open(dir, KvOptions::default()).map_err(|e| format!("reopening again: {e}"))?;
    let after: BTreeMap<u64, u64> =
        read_all(&kv, "deliveries")?.iter().map(|(id, v)| (*id, as_u64(v))).collect();
    let early = read_all(&kv, "early")?;
    let bad = read_all(&kv, "bad")?;
    kv.close().map_err(|e| format!("close: {e}"))?;

    let mut problems: Vec<String> = ledger.problems.clone();
    problems.extend(seen.problems.iter().cloned());
    for (id, ms) in &early {
        problems.push(format!("message {id} was delivered {} ms before its deadline", as_u64(ms)));
    }
    for (at, text) in &bad {
        problems.push(format!("a bad payload was delivered at {at}: {text:?}"));
    }
    // The parent's deliveries were durable commits.
    let ids: BTreeSet<u64> = before.keys().chain(seen.counts.keys()).chain(after.keys()).copied().collect();
    for id in &ids {
        let expected = before.get(id).copied().unwrap_or(0) + seen.counts.get(id).copied().unwrap_or(0);
        if after.get(id).copied().unwrap_or(0) != expected {
            problems
                .push(format!("message {id}: {expected} deliveries recorded, {:?} durable", after.get(id)));
        }
    }
    for (id, need) in &required {
        let have = after.get(id).copied().unwrap_or(0);
        if have < *need {
            problems.push(format!("message {id}: {have} deliveries, at least {need} required"));
        }
    }
    for id in after.keys() {
        if !ledger.tried.contains(id) {
            problems.push(format!("message {id} was delivered but never enqueued"));
        }
    }
    for (first, (count, acked)) in &ledger.marked {
        match markers.get(first) {
            Some(stored) if stored != count => {
                problems.push(format!("marker of commit {first} holds {stored}, expected {count}"))
            }
            Some(_) => {}
            None if *acked => problems.push(format!("the acknowledged commit {first} lost its marker")),
            None => {
                for id in *first..first + count {
                    if after.contains_key(&id) {
                        problems.push(format!(
                            "message {id} was delivered, but the commit that enqueued it left no marker"
                        ));
                    }
                }
            }
        }
    }
    for (id, late) in &seen.lateness {
        if *late > LATENESS_BOUND_MS {
            problems.push(format!("delayed message {id} was delivered {late} ms after its deadline"));
        }
    }

    let redelivered = after.values().filter(|n| **n > 1).count();
    let in_flight_events: u64 = ledger.in_flight.values().sum();
    let delayed: Vec<(&u64, &Acked)> = ledger.acked.iter().filter(|(_, a)| a.delay_ms > 0).collect();
    // A delayed message "crossed a kill" when no child of its own cycle delivered it.
    let crossed = delayed
        .iter()
        .filter(|(id, a)| ledger.delivered_in.get(id).is_none_or(|cycles| !cycles.contains(&a.cycle)))
        .count();
    let max_late = seen.lateness.values().max().copied();
    println!(
        "drained in {drained_in:?}: {} acknowledged, {} ids delivered, {redelivered} delivered more than once, \
         {} delivered by the parent; {in_flight_events} handler runs caught in flight by a kill ({} held \
         blockers) all redelivered; {} delayed messages, {crossed} of them across a kill, {} due after the \
         reopen (latest {} ms after its deadline); {} children started",
        ledger.acked.len(),
        after.len(),
        seen.counts.len(),
        ledger.held_at_kill,
        delayed.len(),
        seen.lateness.len(),
        max_late.map_or("-".into(), |m| m.to_string()),
        ledger.started,
    );
    if !problems.is_empty() {
        let shown = problems.len().min(40);
        return Err(format!(
            "{} problems (first {shown}):\n  {}",
            problems.len(),
            problems[..shown].join("\n  ")
        ));
    }
    // The run must have exercised what it claims.
    if ledger.acked.len() < 50 {
        return Err(format!(
            "only {} enqueues were acknowledged: the test proved little",
            ledger.acked.len()
        ));
    }
    if in_flight_events == 0 || redelivered == 0 {
        return Err("no kill caught a handler in flight: redelivery was not exercised".into());
    }
    if crossed == 0 {
        return Err("no delayed message crossed a kill: deadlines after reopen were not exercised".into());
    }
    Ok(())
}
