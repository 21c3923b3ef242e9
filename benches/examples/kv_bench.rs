//! Deno KV workloads on stampkv and on Deno KV's own SQLite backend (`denokv_sqlite`), side
//! by side, with ratios, latencies and peak memory.
//!
//! ```text
//! cargo run --release -p stampkv-benches --example kv_bench -- [--runs 3] [--entries 100000]
//!     [--commits 10000] [--gets N (default: entries)] [--lists 1000] [--engines stampkv,denokv]
//! ```
//! Each engine runs every workload in its own child process (so peak RSS is its own); runs
//! alternate between engines; the table shows medians over the runs. Requests (identical on
//! both sides, see `peers/denokv_peer.rs`), keys `["users", i]` (16 bytes), 100-byte values:
//! - `commit_1`: `--commits` atomic commits of check(key absent) + set, durable, 1 client,
//!   fresh database;
//! - `commit_8`: the same from 8 clients (stampkv: 8 OS threads sharing one `Kv`;
//!   denokv_sqlite: 8 tasks on its current-thread runtime, one backend worker), fresh database;
//! - then `--entries` entries are loaded (1000 sets per commit, untimed);
//! - `get_unflushed`: `--gets` random point reads right after the load (stampkv: memtable);
//! - the data settles (stampkv flushes its memtable to a table, SQLite checkpoints its WAL);
//! - `get`: `--gets` random point reads;
//! - `list`: `--lists` lists of one batch of 1000 entries under `["users"]`, from start keys
//!   stepping through the keyspace (keys/s; latency per batch);
//! - `sum`: `--commits` sums of KvU64 1 on `["counters", i % 100]`, one durable commit each;
//! - `short_list`: a typical page of a Deno KV application, `kv.list({ prefix: ["posts", u] },
//!   { limit: 20 })` for `--lists` × 20 random users `u`, on a database of its own holding
//!   `--entries` keys `["posts", u, j]` (50 per user), loaded and settled (keys/s; latency per
//!   list).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

#[path = "../peers/denokv_peer.rs"]
mod denokv_peer;

use denokv_peer::{check_key_encodings, open_kv};
use stampkv_benches::report::{emit, loadavg, median, rate_text, ChildReports, Sample};
use stampkv_benches::{dir_bytes, peak_rss_bytes, shuffled, value, value_pool};
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

const WORKLOADS: [&str; 7] = ["commit_1", "commit_8", "get_unflushed", "get", "list", "short_list", "sum"];
const LIST_BATCH: usize = 1000;
/// Keys `["posts", u, j]` per user `u` for `short_list`.
const POSTS_PER_USER: u64 = 50;
/// Entries per `short_list` list (a page).
const SHORT_LIST: usize = 20;
const COUNTERS: u64 = 100;

struct Args {
    runs: usize,
    entries: u64,
    commits: u64,
    gets: Option<u64>,
    lists: u64,
    engines: Vec<String>,
    child: Option<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        runs: 3,
        entries: 100_000,
        commits: 10_000,
        gets: None,
        lists: 1000,
        engines: vec!["stampkv".into(), "denokv".into()],
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => args.runs = value().parse().expect("--runs"),
            "--entries" => args.entries = value().parse().expect("--entries"),
            "--commits" => args.commits = value().parse().expect("--commits"),
            "--gets" => args.gets = Some(value().parse().expect("--gets")),
            "--lists" => args.lists = value().parse().expect("--lists"),
            "--engines" => args.engines = value().split(',').map(str::to_owned).collect(),
            "--child" => args.child = Some(value()),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(args.entries >= LIST_BATCH as u64, "--entries must be at least {LIST_BATCH}");
    args
}

/// Runs `op` for each of `items`, timing each call; `units` is what the rate counts.
fn timed<T: Copy>(items: &[T], mut op: impl FnMut(T) -> u64) -> Sample {
    let mut latencies = Vec::with_capacity(items.len());
    let mut units = 0;
    let start = Instant::now();
    for &item in items {
        let t = Instant::now();
        units += op(item);
        latencies.push(t.elapsed());
    }
    Sample::new(units, start.elapsed(), latencies)
}

/// Runs every workload on one engine; prints `RESULT name rate p50 p99` and `INFO` lines.
fn child(engine: &str, args: &Args) {
    check_key_encodings();
    let pool = Arc::new(value_pool(42));
    let root = tempfile::tempdir().expect("tempdir");
    let commits = args.commits;

    let db = open_kv(engine, &root.path().join("commit1"));
    let ids: Vec<u64> = (0..commits).collect();
    emit(
        "commit_1",
        &timed(&ids, |i| {
            assert!(db.commit_new(i, value(&pool, i)), "commit {i} failed its check");
            1
        }),
    );
    db.close();

    let db = open_kv(engine, &root.path().join("commit8"));
    let start = Instant::now();
    let latencies = db.commit_new_concurrent(0, commits, 8, &pool);
    emit("commit_8", &Sample::new(commits, start.elapsed(), latencies));
    db.close();

    let dir = root.path().join("data");
    let db = open_kv(engine, &dir);
    let n = args.entries;
    let start = Instant::now();
    db.load(n, &pool);
    println!("INFO load {n} entries in {:.2} s", start.elapsed().as_secs_f64());
    let gets = args.gets.unwrap_or(n);
    let order: Vec<u64> = shuffled(n, 3).into_iter().cycle().take(gets as usize).collect();
    let get = |i: u64| {
        assert!(db.get(i), "key {i} missing");
        1
    };
    emit("get_unflushed", &timed(&order, get));
    let start = Instant::now();
    db.settle();
    println!("INFO settle {:.3} s", start.elapsed().as_secs_f64());
    emit("get", &timed(&order, get));
    let last_start = n - LIST_BATCH as u64;
    let starts: Vec<u64> = (0..args.lists).map(|j| (j * LIST_BATCH as u64 * 7) % (last_start + 1)).collect();
    emit(
        "list",
        &timed(&starts, |s| {
            let count = db.list(s, LIST_BATCH);
            assert_eq!(count, LIST_BATCH, "list from {s}");
            count as u64
        }),
    );
    emit(
        "sum",
        &timed(&ids, |i| {
            db.sum(i % COUNTERS);
            1
        }),
    );
    println!("INFO disk_mib {:.1}", dir_bytes(&dir) as f64 / (1 << 20) as f64);
    db.close();

    // Short lists, on a database of their own: `--entries` keys ["posts", u, j].
    let db = open_kv(engine, &root.path().join("posts"));
    let users = (n / POSTS_PER_USER).max(1);
    db.load_posts(users, POSTS_PER_USER, &pool);
    db.settle();
    let pages: Vec<u64> = shuffled(users, 5).into_iter().cycle().take(args.lists as usize * 20).collect();
    emit(
        "short_list",
        &timed(&pages, |u| {
            let count = db.list_posts(u, SHORT_LIST);
            assert_eq!(count, SHORT_LIST, "list of user {u}");
            count as u64
        }),
    );
    db.close();
    println!("INFO peak_rss_mib {:.1}", peak_rss_bytes().unwrap_or(0) as f64 / (1 << 20) as f64);
}

/// Versions of the peer crates, from the workspace's Cargo.lock.
fn peer_versions() -> String {
    let lock =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap_or_default();
    let version = |name: &str| {
        let header = format!("name = \"{name}\"\nversion = \"");
        lock.find(&header)
            .and_then(|at| lock[at + header.len()..].split('"').next())
            .unwrap_or("?")
            .to_owned()
    };
    format!(
        "denokv_sqlite {}, denokv_proto {}, rusqlite {} (bundled SQLite {})",
        version("denokv_sqlite"),
        version("denokv_proto"),
        version("rusqlite"),
        rusqlite::version()
    )
}

fn main() {
    let args = parse_args();
    if let Some(engine) = &args.child {
        child(engine, &args);
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    let mut reports = ChildReports::default();
    let load_before = loadavg();
    for run in 0..args.runs {
        for engine in &args.engines {
            eprintln!("run {} of {}: {engine} (load {})", run + 1, args.runs, loadavg());
            let mut command = Command::new(&exe);
            command.args([
                "--child",
                engine,
                "--entries",
                &args.entries.to_string(),
                "--commits",
                &args.commits.to_string(),
                "--lists",
                &args.lists.to_string(),
            ]);
            if let Some(gets) = args.gets {
                command.args(["--gets", &gets.to_string()]);
            }
            let output = command.output().expect("run child");
            assert!(output.status.success(), "{engine} failed: {}", String::from_utf8_lossy(&output.stderr));
            reports.add_output(engine, &output.stdout);
        }
    }
    println!(
        "kv_bench: {} entries, {} commits, {} gets, {} lists of {LIST_BATCH}; 16-byte keys, 100-byte values; \
         median of {} runs",
        args.entries,
        args.commits,
        args.gets.unwrap_or(args.entries),
        args.lists,
        args.runs
    );
    println!("peer: {}", peer_versions());
    println!("load average before / after: {load_before} / {}", loadavg());
    print!("{:<14}", "workload");
    for engine in &args.engines {
        print!("{engine:>14}");
    }
    print!("{:>9}", "ratio");
    for engine in &args.engines {
        print!("{:>22}", format!("{engine} p50/p99 µs"));
    }
    println!();
    let mut ratios: BTreeMap<&str, f64> = BTreeMap::new();
    for workload in WORKLOADS {
        print!("{workload:<14}");
        let mut rates = Vec::new();
        let mut latencies = Vec::new();
        for engine in &args.engines {
            let [rate, p50, p99] = reports.take(engine, workload);
            let (mut rate, mut p50, mut p99) = (rate, p50, p99);
            if rate.is_empty() {
                rates.push(0.0);
                latencies.push("-".to_owned());
                print!("{:>14}", "-");
                continue;
            }
            let m = median(&mut rate);
            rates.push(m);
            latencies.push(format!("{:.1} / {:.1}", median(&mut p50), median(&mut p99)));
            print!("{:>14}", rate_text(m));
        }
        if rates.len() == 2 && rates[1] > 0.0 {
            ratios.insert(workload, rates[0] / rates[1]);
            print!("{:>8.2}x", rates[0] / rates[1]);
        } else {
            print!("{:>9}", "");
        }
        for latency in &latencies {
            print!("{latency:>22}");
        }
        println!();
    }
    println!(
        "(list: keys/s, latency per batch of {LIST_BATCH}; short_list: keys/s, latency per list of \
         {SHORT_LIST}; ratio: first engine / second)"
    );
    if args.engines.len() == 2 {
        let targets: [(&str, &[&str], f64); 4] = [
            ("durable atomic commits from 8 clients", &["commit_8"], 5.0),
            ("point reads (the worse of get, get_unflushed)", &["get", "get_unflushed"], 10.0),
            ("lists", &["list"], 3.0),
            ("short lists (prefix, limit 20)", &["short_list"], 5.0),
        ];
        for (what, workloads, goal) in targets {
            let worst = workloads.iter().filter_map(|w| ratios.get(w)).copied().fold(f64::INFINITY, f64::min);
            if worst.is_finite() {
                let verdict = if worst >= goal { "MET" } else { "NOT MET" };
                println!("target {what} >= {goal}x: {worst:.2}x -> {verdict}");
            }
        }
    }
    reports.print_infos();
}
