//! The persisted queue: enqueue latency and enqueue-then-deliver throughput of stampkv,
//! side by side with Deno KV's own SQLite backend (`denokv_sqlite`, driven as the Deno CLI
//! drives it) and, when a Deno executable is found, the real Deno runtime
//! (`benches/deno/queue_bench.ts`).
//!
//! ```text
//! cargo run --release -p stampkv-benches --example queue_bench -- [--messages 100000]
//!     [--enqueues 10000] [--runs 3] [--engines stampkv,denokv,deno]
//!     [--peer-messages N] [--peer-enqueues N]
//! ```
//! Deno is looked for in `$DENO`, then `node_modules/.bin/deno` in the current directory,
//! the workspace and `/tmp` (`cd /tmp && npm install deno@2.9.6` puts it there); if none is
//! found its column says "not measured". `--peer-messages`/`--peer-enqueues` run the peers
//! on fewer messages when their queue is too slow for the full count (rates are per message).
//!
//! Each engine runs every workload in its own child process (so peak RSS is its own); runs
//! alternate between engines; the table shows medians over the runs. Messages are small
//! (stampkv `KvU64(i)`; denokv_sqlite an 8-byte payload; Deno the number `i`); every enqueue
//! is durable before it returns (stampkv's default options; SQLite's WAL with
//! `synchronous = FULL`, as the Deno CLI opens it):
//! - `enqueue_1`: `--enqueues` single-message enqueues (`kv.enqueue`), 1 client; latency;
//! - `enqueue_8`: the same from 8 clients (stampkv: 8 threads sharing one `Kv`; denokv and
//!   Deno: 8 concurrent tasks/promises on one event loop);
//! - `deliver_single`: a listener delivers the `--enqueues` messages `enqueue_8` left;
//! - `enq8+deliver`: messages / (enqueue_8 time + deliver_single time);
//! - `enqueue_batch`: `--messages` messages enqueued 1000 per atomic commit (latency per
//!   commit);
//! - `deliver`: a listener delivers them: time from its start until every message was
//!   handled and acknowledged (stampkv: 4 workers, then `close`, which waits for the last
//!   acknowledgements; denokv_sqlite: Deno's `listenQueue` loop — dequeue, run the handler
//!   as a task, `finish(true)` — until every `finish` returned; Deno: `listenQueue` until
//!   the handler saw every message, then `close`);
//! - `enqueue+deliver`: messages / (enqueue_batch time + deliver time) — the headline figure,
//!   target: at least 10× Deno's.
//!
//! The handler only counts. After each delivery run the database is reopened (untimed) and
//! checked: stampkv delivers nothing more. The peers count distinct payloads, so every
//! message was delivered and finished; their database may still hold duplicates requeued by
//! the periodic cleanup (reported as `requeued_left`, with `duplicates` delivered).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

use denokv_proto::{AtomicWrite, Database, Enqueue};
use denokv_sqlite::{Sqlite, SqliteConfig, SqliteNotifier};
use rand::{rngs::StdRng, RngCore, SeedableRng};
use stampkv::{EnqueueOptions, Kv, KvOptions, KvValue, ListenOptions};
use stampkv_benches::peak_rss_bytes;
use stampkv_benches::report::{emit, loadavg, median, rate_text, ChildReports, Sample};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Messages per atomic commit in `enqueue_batch` (Deno's limit on mutations + enqueues).
pub const BATCH: u64 = 1000;
/// Listener worker threads of stampkv.
pub const WORKERS: usize = 4;
/// Concurrent clients of `enqueue_8`.
pub const CLIENTS: u64 = 8;

const WORKLOADS: [&str; 7] = [
    "enqueue_1",
    "enqueue_8",
    "deliver_single",
    "enq8+deliver",
    "enqueue_batch",
    "deliver",
    "enqueue+deliver",
];

/// The queue operations the workloads need, on one open database.
pub trait QueueBench {
    /// Enqueues message `i` in its own durable commit.
    fn enqueue(&self, i: u64);
    /// Enqueues messages `first..first + total` one per commit from `clients` concurrent
    /// clients; every enqueue's latency.
    fn enqueue_concurrent(&self, first: u64, total: u64, clients: u64) -> Vec<Duration>;
    /// Enqueues messages `first..first + count` in one atomic commit.
    fn enqueue_batch(&self, first: u64, count: u64);
    /// Starts a listener with a handler that only counts, waits until `expected` messages
    /// were handled and acknowledged, and closes the database; the time from the start of
    /// the listener.
    fn deliver_and_close(self: Box<Self>, expected: u64) -> Duration;
    /// Closes the database.
    fn close(self: Box<Self>);
}

/// Opens engine `name` (`stampkv` or `denokv`) in `dir`.
pub fn open_queue(name: &str, dir: &Path) -> Box<dyn QueueBench> {
    match name {
        "stampkv" => Box::new(StampQueue::open(dir)),
        "denokv" => Box::new(DenoSqliteQueue::open(dir)),
        other => panic!("unknown engine {other} (stampkv or denokv)"),
    }
}

/// Checks (untimed) that every message in the database in `dir` was delivered and
/// acknowledged: stampkv delivers nothing after a reopen; for denokv_sqlite, returns how
/// many requeued duplicates it still holds.
pub fn check_drained(name: &str, dir: &Path) -> u64 {
    match name {
        "stampkv" => {
            let kv = Kv::open(dir, KvOptions::default()).expect("reopen stampkv");
            let seen = Arc::new(AtomicU64::new(0));
            let counter = seen.clone();
            let _listener = kv
                .listen_queue(ListenOptions::default(), move |_| -> Result<(), String> {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .expect("listen");
            std::thread::sleep(Duration::from_millis(200));
            kv.close().expect("close");
            assert_eq!(seen.load(Ordering::SeqCst), 0, "stampkv delivered messages again after reopen");
            0
        }
        "denokv" => {
            // The peers saw every message delivered and finished (they count distinct
            // payloads); what is left are duplicates the periodic cleanup requeued, waiting
            // or running (see `deliver_and_close`).
            let conn = rusqlite::Connection::open(dir.join("kv.sqlite3")).expect("open sqlite");
            let count = |table: &str| -> u64 {
                conn.query_row(&format!("select count(*) from {table}"), [], |row| row.get(0)).expect(table)
            };
            count("queue") + count("queue_running")
        }
        other => panic!("unknown engine {other}"),
    }
}

/// stampkv with default options: every commit fdatasync'ed before it is acknowledged;
/// concurrent commits share syncs.
pub struct StampQueue {
    kv: Kv,
}

impl StampQueue {
    /// Opens (creates) the database in `dir`.
    pub fn open(dir: &Path) -> Self {
        StampQueue { kv: Kv::open(dir, KvOptions::default()).expect("open stampkv") }
    }
}

impl QueueBench for StampQueue {
    fn enqueue(&self, i: u64) {
        self.kv.enqueue(&KvValue::U64(i), EnqueueOptions::default()).expect("enqueue");
    }

    fn enqueue_concurrent(&self, first: u64, total: u64, clients: u64) -> Vec<Duration> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|t| {
                    let kv = &self.kv;
                    scope.spawn(move || {
                        let mut latencies = Vec::with_capacity((total / clients + 1) as usize);
                        for i in (first + t..first + total).step_by(clients as usize) {
                            let start = Instant::now();
                            kv.enqueue(&KvValue::U64(i), EnqueueOptions::default()).expect("enqueue");
                            latencies.push(start.elapsed());
                        }
                        latencies
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().expect("client thread")).collect()
        })
    }

    fn enqueue_batch(&self, first: u64, count: u64) {
        let mut op = self.kv.atomic();
        for i in first..first + count {
            op = op.enqueue(&KvValue::U64(i), EnqueueOptions::default());
        }
        assert!(op.commit().expect("enqueue batch").ok());
    }

    fn deliver_and_close(self: Box<Self>, expected: u64) -> Duration {
        let delivered = Arc::new(AtomicU64::new(0));
        let counter = delivered.clone();
        let start = Instant::now();
        let options = ListenOptions { workers: WORKERS, ..ListenOptions::default() };
        let _listener = self
            .kv
            .listen_queue(options, move |message| -> Result<(), String> {
                match message.value {
                    KvValue::U64(_) => {
                        counter.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    }
                    other => Err(format!("unexpected payload {other:?}")),
                }
            })
            .expect("listen");
        while delivered.load(Ordering::Relaxed) < expected {
            std::thread::sleep(Duration::from_micros(200));
        }
        // Closing waits for the workers, so for the last acknowledgements.
        self.kv.close().expect("close");
        let elapsed = start.elapsed();
        assert_eq!(delivered.load(Ordering::SeqCst), expected, "stampkv delivered a message twice");
        elapsed
    }

    fn close(self: Box<Self>) {
        self.kv.close().expect("close");
    }
}

/// `denokv_sqlite` as the Deno CLI runs it (see `peers/denokv_peer.rs`): one backend worker,
/// no write batching, SQLite's WAL with `synchronous = FULL`, requests from a
/// current-thread runtime.
pub struct DenoSqliteQueue {
    runtime: tokio::runtime::Runtime,
    db: Sqlite,
}

impl DenoSqliteQueue {
    /// Opens (creates) `dir/kv.sqlite3`.
    pub fn open(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("create dir");
        let path = dir.join("kv.sqlite3");
        let conn_gen = move || {
            let conn = denokv_sqlite::Connection::open(&path).expect("open sqlite");
            let rng: Box<dyn RngCore + Send> = Box::new(StdRng::from_entropy());
            Ok((conn, rng))
        };
        let config = SqliteConfig { num_workers: 1, batch_timeout: None };
        let db = Sqlite::new(conn_gen, SqliteNotifier::default(), config).expect("open denokv_sqlite");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        DenoSqliteQueue { runtime, db }
    }

    fn message(i: u64) -> Enqueue {
        Enqueue {
            payload: i.to_le_bytes().to_vec(),
            deadline: denokv_proto::time::utc_now(),
            keys_if_undelivered: Vec::new(),
            backoff_schedule: None,
        }
    }

    async fn write(db: &Sqlite, enqueues: Vec<Enqueue>) {
        let write = AtomicWrite { checks: Vec::new(), mutations: Vec::new(), enqueues };
        let result = <Sqlite as Database>::atomic_write(db, write).await.expect("atomic_write");
        assert!(result.is_some(), "an enqueue without checks failed");
    }
}

impl QueueBench for DenoSqliteQueue {
    fn enqueue(&self, i: u64) {
        self.runtime.block_on(Self::write(&self.db, vec![Self::message(i)]));
    }

    /// `clients` tasks on the one current-thread runtime, like as many pending `enqueue`
    /// promises in one Deno isolate.
    fn enqueue_concurrent(&self, first: u64, total: u64, clients: u64) -> Vec<Duration> {
        let local = tokio::task::LocalSet::new();
        self.runtime.block_on(local.run_until(async {
            let tasks: Vec<_> = (0..clients)
                .map(|t| {
                    let db = self.db.clone();
                    tokio::task::spawn_local(async move {
                        let mut latencies = Vec::with_capacity((total / clients + 1) as usize);
                        for i in (first + t..first + total).step_by(clients as usize) {
                            let start = Instant::now();
                            Self::write(&db, vec![Self::message(i)]).await;
                            latencies.push(start.elapsed());
                        }
                        latencies
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(total as usize);
            for task in tasks {
                all.extend(task.await.expect("client task"));
            }
            all
        }))
    }

    fn enqueue_batch(&self, first: u64, count: u64) {
        let enqueues = (first..first + count).map(Self::message).collect();
        self.runtime.block_on(Self::write(&self.db, enqueues));
    }

    /// Deno's `listenQueue` loop: dequeue the next message, run the handler as its own task
    /// and `finish(true)` it there, dequeue the next one meanwhile. Done when every message
    /// was finished at least once: denokv_sqlite's periodic cleanup (every 60 s) requeues the
    /// messages it finds running past `enqueue time + 5 s` (it never refreshes that deadline),
    /// so a long backlog sees a few duplicate deliveries, reported as `INFO duplicates`.
    fn deliver_and_close(self: Box<Self>, expected: u64) -> Duration {
        let local = tokio::task::LocalSet::new();
        let start = Instant::now();
        let seen = Rc::new(RefCell::new(vec![false; expected as usize]));
        let (distinct, deliveries) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
        let done = Rc::new(tokio::sync::Notify::new());
        self.runtime.block_on(local.run_until(async {
            let state = (self.db.clone(), seen.clone(), distinct.clone(), deliveries.clone(), done.clone());
            let _dispatcher = tokio::task::spawn_local(async move {
                let (db, seen, distinct, deliveries, done) = state;
                while let Some(mut handle) = db.dequeue_next_message().await.expect("dequeue") {
                    let (seen, distinct, deliveries, done) =
                        (seen.clone(), distinct.clone(), deliveries.clone(), done.clone());
                    tokio::task::spawn_local(async move {
                        let payload = handle.take_payload().await.expect("payload");
                        let id = payload.try_into().map(u64::from_le_bytes).expect("an 8-byte payload");
                        handle.finish(true).await.expect("finish");
                        deliveries.set(deliveries.get() + 1);
                        let first = !std::mem::replace(&mut seen.borrow_mut()[id as usize], true);
                        if first {
                            distinct.set(distinct.get() + 1);
                            if distinct.get() == expected {
                                done.notify_one();
                            }
                        }
                    });
                }
            });
            done.notified().await;
        }));
        drop(local);
        self.db.close();
        let elapsed = start.elapsed();
        assert_eq!(distinct.get(), expected);
        println!("INFO duplicates {} of {expected}", deliveries.get() - expected);
        elapsed
    }

    fn close(self: Box<Self>) {
        self.db.close();
    }
}

// ---------------------------------------------------------------------------------------
// The runner.

struct Args {
    runs: usize,
    messages: u64,
    enqueues: u64,
    peer_messages: Option<u64>,
    peer_enqueues: Option<u64>,
    engines: Vec<String>,
    child: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        runs: 3,
        messages: 100_000,
        enqueues: 10_000,
        peer_messages: None,
        peer_enqueues: None,
        engines: vec!["stampkv".into(), "denokv".into(), "deno".into()],
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => args.runs = value().parse().expect("--runs"),
            "--messages" => args.messages = value().parse().expect("--messages"),
            "--enqueues" => args.enqueues = value().parse().expect("--enqueues"),
            "--peer-messages" => args.peer_messages = Some(value().parse().expect("--peer-messages")),
            "--peer-enqueues" => args.peer_enqueues = Some(value().parse().expect("--peer-enqueues")),
            "--engines" => args.engines = value().split(',').map(str::to_owned).collect(),
            "--child" => args.child = Some(value()),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(args.messages > 0 && args.enqueues > 0, "--messages and --enqueues must be positive");
    args
}

/// Runs every workload on one engine (in this child process); prints `RESULT name rate p50
/// p99` and `INFO name value` lines.
fn child(engine: &str, messages: u64, enqueues: u64) {
    let root = tempfile::tempdir().expect("tempdir");
    println!("INFO messages {messages} (enqueues {enqueues})");

    let db = open_queue(engine, &root.path().join("enqueue1"));
    let mut latencies = Vec::with_capacity(enqueues as usize);
    let start = Instant::now();
    for i in 0..enqueues {
        let t = Instant::now();
        db.enqueue(i);
        latencies.push(t.elapsed());
    }
    emit("enqueue_1", &Sample::new(enqueues, start.elapsed(), latencies));
    db.close();

    let dir = root.path().join("enqueue8");
    let db = open_queue(engine, &dir);
    let start = Instant::now();
    let latencies = db.enqueue_concurrent(0, enqueues, CLIENTS);
    let enqueue_time = start.elapsed();
    emit("enqueue_8", &Sample::new(enqueues, enqueue_time, latencies));
    let deliver_time = db.deliver_and_close(enqueues);
    emit("deliver_single", &Sample::new(enqueues, deliver_time, Vec::new()));
    emit("enq8+deliver", &Sample::new(enqueues, enqueue_time + deliver_time, Vec::new()));
    println!("INFO requeued_left {}", check_drained(engine, &dir));

    let dir = root.path().join("batch");
    let db = open_queue(engine, &dir);
    let mut latencies = Vec::with_capacity((messages / BATCH + 1) as usize);
    let start = Instant::now();
    for first in (0..messages).step_by(BATCH as usize) {
        let t = Instant::now();
        db.enqueue_batch(first, BATCH.min(messages - first));
        latencies.push(t.elapsed());
    }
    let enqueue_time = start.elapsed();
    emit("enqueue_batch", &Sample::new(messages, enqueue_time, latencies));
    let deliver_time = db.deliver_and_close(messages);
    emit("deliver", &Sample::new(messages, deliver_time, Vec::new()));
    emit("enqueue+deliver", &Sample::new(messages, enqueue_time + deliver_time, Vec::new()));
    println!(
        "INFO times enqueue {:.2} s + deliver {:.2} s for {messages}",
        enqueue_time.as_secs_f64(),
        deliver_time.as_secs_f64()
    );
    println!("INFO requeued_left {}", check_drained(engine, &dir));
    println!("INFO peak_rss_mib {:.1}", peak_rss_bytes().unwrap_or(0) as f64 / (1 << 20) as f64);
}

/// The Deno executable: `$DENO`, or `node_modules/.bin/deno` here, in the workspace or in
/// `/tmp`.
fn find_deno() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("DENO") {
        return Some(PathBuf::from(path));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    [Path::new("."), Path::new(env!("CARGO_MANIFEST_DIR")), workspace.as_path(), Path::new("/tmp")]
        .iter()
        .map(|dir| dir.join("node_modules/.bin/deno"))
        .find(|path| path.exists())
}

fn deno_version(deno: &Path) -> String {
    Command::new(deno)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn main() {
    let args = parse_args();
    if let Some(engine) = &args.child {
        child(engine, args.messages, args.enqueues);
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    let deno = find_deno();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("deno/queue_bench.ts");
    let mut reports = ChildReports::default();
    let load_before = loadavg();
    for run in 0..args.runs {
        for engine in &args.engines {
            let peer = engine != "stampkv";
            let messages = if peer { args.peer_messages.unwrap_or(args.messages) } else { args.messages };
            let enqueues = if peer { args.peer_enqueues.unwrap_or(args.enqueues) } else { args.enqueues };
            // Where Deno leaves its databases, checked below.
            let deno_dir = tempfile::tempdir().expect("tempdir");
            let mut command = match engine.as_str() {
                "deno" => {
                    let Some(deno) = &deno else { continue };
                    let mut command = Command::new(deno);
                    command.args(["run", "-A", "--unstable-kv", "--quiet"]).arg(&script);
                    command.arg("--dir").arg(deno_dir.path());
                    command
                }
                _ => {
                    let mut command = Command::new(&exe);
                    command.args(["--child", engine]);
                    command
                }
            };
            command.args(["--messages", &messages.to_string(), "--enqueues", &enqueues.to_string()]);
            eprintln!("run {} of {}: {engine}, {messages} messages (load {})", run + 1, args.runs, loadavg());
            let started = Instant::now();
            let output = command.output().expect("run child");
            assert!(output.status.success(), "{engine} failed: {}", String::from_utf8_lossy(&output.stderr));
            eprintln!("  {engine} took {:.1} s", started.elapsed().as_secs_f64());
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                eprintln!("  {line}");
            }
            if engine == "deno" {
                // Deno's local queue is denokv_sqlite's: the same tables.
                for db in ["enqueue8", "batch"] {
                    let left = check_drained("denokv", &deno_dir.path().join(db));
                    reports.add_info(engine, "requeued_left", left.to_string());
                }
            }
            reports.add_output(engine, &output.stdout);
        }
    }
    println!(
        "queue_bench: {} messages (peers {}), {} single enqueues (peers {}); median of {} runs",
        args.messages,
        args.peer_messages.unwrap_or(args.messages),
        args.enqueues,
        args.peer_enqueues.unwrap_or(args.enqueues),
        args.runs
    );
    let deno_text = deno
        .as_ref()
        .map_or("not found (set DENO)".into(), |d| format!("{} ({})", deno_version(d), d.display()));
    println!("deno: {deno_text}");
    println!("load average before / after: {load_before} / {}", loadavg());
    print!("{:<16}", "workload");
    for engine in &args.engines {
        print!("{engine:>14}");
    }
    let peers: Vec<&String> = args.engines.iter().skip(1).collect();
    for peer in &peers {
        print!("{:>12}", format!("÷{peer}"));
    }
    for engine in &args.engines {
        print!("{:>22}", format!("{engine} p50/p99 µs"));
    }
    println!();
    let mut ratios: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for workload in WORKLOADS {
        print!("{workload:<16}");
        let mut rates = Vec::new();
        let mut latencies = Vec::new();
        for engine in &args.engines {
            let [rate, p50, p99] = reports.take(engine, workload);
            let (mut rate, mut p50, mut p99) = (rate, p50, p99);
            if rate.is_empty() {
                rates.push(0.0);
                latencies.push("-".to_owned());
                print!("{:>14}", "not measured");
                continue;
            }
            let m = median(&mut rate);
            rates.push(m);
            let (p50, p99) = (median(&mut p50), median(&mut p99));
            latencies.push(if p50 > 0.0 { format!("{p50:.0} / {p99:.0}") } else { "-".to_owned() });
            print!("{:>14}", rate_text(m));
        }
        for (k, peer) in peers.iter().enumerate() {
            let theirs = rates[k + 1];
            if rates[0] > 0.0 && theirs > 0.0 {
                ratios.insert((workload, peer.as_str()), rates[0] / theirs);
                print!("{:>11.1}x", rates[0] / theirs);
            } else {
                print!("{:>12}", "-");
            }
        }
        for latency in &latencies {
            print!("{latency:>22}");
        }
        println!();
    }
    println!("(rates in messages/s; enqueue_batch latency is per commit of {BATCH}; ratio: stampkv / peer)");
    for peer in &peers {
        for workload in ["enqueue+deliver", "deliver", "enq8+deliver"] {
            if let Some(ratio) = ratios.get(&(workload, peer.as_str())) {
                let verdict = if *ratio >= 10.0 { "MET" } else { "NOT MET" };
                println!("target {workload} throughput >= 10x {peer}: {ratio:.1}x -> {verdict}");
            }
        }
    }
    reports.print_infos();
}
