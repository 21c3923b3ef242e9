//! LevelDB db_bench workloads on stampkv and fjall, side by side in one run, with ratios.
//!
//! ```text
//! cargo run --release -p stampkv-benches --example db_bench -- [--num 1000000] [--runs 3]
//!     [--sync-ops 10000] [--engines stampkv,fjall] [--compression lz4|none]
//!     [--values random|text]
//! ```
//! Each engine runs every workload in its own child process (so peak memory is its own);
//! runs alternate between engines; the table shows the median of the runs.
//! `--compression` sets stampkv's table compression (default lz4, the engine's default;
//! fjall keeps its own default: levels 0 and 1 uncompressed, LZ4 below). The engine
//! `stampkv-uncompressed` is stampkv with uncompressed tables whatever `--compression`
//! says, so `--engines stampkv,stampkv-uncompressed` measures what compression costs.
//! With more than two engines, the first is compared with each of the others. `--values text` cuts the values from JSON-like text
//! that LZ4 compresses to about 0.4 of its size instead of random bytes.
//! Workloads (16-byte keys, 100-byte values, incompressible by default): fillseq, fillrandom,
//! overwrite (a second random fill over the same keys), readrandom (every key once, random
//! order, right after overwrite), readseq (one full scan), fillsync with 1 and 8 writers
//! (each commit durable before it returns).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

#[path = "../peers/fjall_peer.rs"]
mod fjall_peer;
#[cfg(stampkv_rocksdb)]
#[path = "../peers/rocksdb_peer.rs"]
mod rocksdb_peer;

use stampkv_benches::report::{median, ChildReports};
use stampkv_benches::{
    dir_bytes, fill, fill_sync, peak_rss_bytes, read, read_seq, shuffled, text_value_pool, value_pool,
    BenchEngine, StampkvEngine, KEY_BYTES, VALUE_BYTES,
};
use stampkv_engine::Compression;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const WORKLOADS: [&str; 7] =
    ["fillseq", "fillrandom", "overwrite", "readrandom", "readseq", "fillsync_1", "fillsync_8"];

struct Args {
    num: u64,
    runs: usize,
    sync_ops: u64,
    engines: Vec<String>,
    child: Option<String>,
    compression: Compression,
    text_values: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        num: 1_000_000,
        runs: 3,
        sync_ops: 10_000,
        engines: vec!["stampkv".into(), "fjall".into()],
        child: None,
        compression: Compression::default(),
        text_values: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--num" => args.num = value().parse().expect("--num"),
            "--runs" => args.runs = value().parse().expect("--runs"),
            "--sync-ops" => args.sync_ops = value().parse().expect("--sync-ops"),
            "--engines" => args.engines = value().split(',').map(str::to_owned).collect(),
            "--child" => args.child = Some(value()),
            "--compression" => {
                let name = value();
                args.compression = Compression::from_name(&name)
                    .unwrap_or_else(|| panic!("--compression {name}: expected lz4 or none"));
            }
            "--values" => {
                args.text_values = match value().as_str() {
                    "random" => false,
                    "text" => true,
                    other => panic!("--values {other}: expected random or text"),
                }
            }
            "--bench" => {}
            "--help" | "-h" => {
                println!(
                    "db_bench [--num N] [--runs N] [--sync-ops N] [--engines stampkv,fjall] \
                     [--compression lz4|none] [--values random|text]"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument {other} (try --help)"),
        }
    }
    args
}

fn open(engine: &str, dir: &Path, args: &Args) -> Arc<dyn BenchEngine> {
    match engine {
        "stampkv" => Arc::new(StampkvEngine::open_with_compression(dir, args.compression)),
        "stampkv-uncompressed" => Arc::new(StampkvEngine::open_with_compression(dir, Compression::None)),
        "fjall" => Arc::new(fjall_peer::FjallEngine::open(dir)),
        // The block cache stampkv opens with by default, for both.
        #[cfg(stampkv_rocksdb)]
        "rocksdb" => {
            Arc::new(rocksdb_peer::RocksEngine::open(dir, stampkv_engine::default_block_cache_bytes()))
        }
        #[cfg(not(stampkv_rocksdb))]
        "rocksdb" => panic!("this build has no RocksDB: build with RUSTFLAGS=\"--cfg stampkv_rocksdb\""),
        other => panic!("unknown engine {other}"),
    }
}

fn rate(ops: u64, elapsed: Duration) -> f64 {
    ops as f64 / elapsed.as_secs_f64()
}

/// Runs every workload on one engine and prints `RESULT name ops_per_sec` lines.
fn child(engine: &str, args: &Args) {
    let pool = Arc::new(if args.text_values { text_value_pool(42) } else { value_pool(42) });
    let root = tempfile::tempdir().expect("tempdir");
    let n = args.num;
    // Durable commits first, before the bulk workloads leave the disk busy writing back.
    for threads in [1u64, 8] {
        let db = open(engine, &root.path().join(format!("sync{threads}")), args);
        let elapsed = fill_sync(&db, args.sync_ops, threads, &pool);
        println!("RESULT fillsync_{threads} {}", rate(args.sync_ops, elapsed));
    }
    let sequential: Vec<u64> = (0..n).collect();
    {
        let db = open(engine, &root.path().join("seq"), args);
        let elapsed = fill(&*db, &sequential, &pool);
        println!("RESULT fillseq {}", rate(n, elapsed));
    }
    let random_dir = root.path().join("random");
    {
        let db = open(engine, &random_dir, args);
        let elapsed = fill(&*db, &shuffled(n, 1), &pool);
        println!("RESULT fillrandom {}", rate(n, elapsed));
        let elapsed = fill(&*db, &shuffled(n, 2), &pool);
        println!("RESULT overwrite {}", rate(n, elapsed));
        let elapsed = read(&*db, &shuffled(n, 3));
        println!("RESULT readrandom {}", rate(n, elapsed));
        let elapsed = read_seq(&*db, n as usize);
        println!("RESULT readseq {}", rate(n, elapsed));
        let logical = n * (KEY_BYTES + VALUE_BYTES) as u64;
        println!("INFO space_amplification {:.2}", dir_bytes(&random_dir) as f64 / logical as f64);
        println!("INFO report {}", db.report());
    }
    println!("INFO peak_rss_mib {:.0}", peak_rss_bytes().unwrap_or(0) as f64 / (1 << 20) as f64);
}

fn main() {
    let args = parse_args();
    if let Some(engine) = &args.child {
        child(engine, &args);
        return;
    }
    let exe = std::env::current_exe().expect("current exe");
    let mut reports = ChildReports::default();
    for run in 0..args.runs {
        for engine in &args.engines {
            eprintln!("run {} of {}: {engine}", run + 1, args.runs);
            let output = Command::new(&exe)
                .args([
                    "--child",
                    engine,
                    "--num",
                    &args.num.to_string(),
                    "--sync-ops",
                    &args.sync_ops.to_string(),
                    "--compression",
                    args.compression.name(),
                    "--values",
                    if args.text_values { "text" } else { "random" },
                ])
                .output()
                .expect("run child");
            assert!(output.status.success(), "{engine} failed: {}", String::from_utf8_lossy(&output.stderr));
            reports.add_output(engine, &output.stdout);
        }
    }
    println!(
        "db_bench: {} entries, {KEY_BYTES}-byte keys, {VALUE_BYTES}-byte {} values, stampkv compression {}, median of {} runs",
        args.num,
        if args.text_values { "text" } else { "random" },
        args.compression.name(),
        args.runs
    );
    print!("{:<12}", "workload");
    for engine in &args.engines {
        print!("{engine:>22}");
    }
    let (first, others) = args.engines.split_first().expect("at least one engine");
    for other in others {
        print!("  {:>28}", format!("{first}/{other}"));
    }
    println!();
    // Runs alternate between engines, so run i of one engine ran next to run i of the
    // others: their ratios run by run show how much of a median's ratio is noise.
    let mut per_run_ratios = Vec::new();
    for workload in WORKLOADS {
        print!("{workload:<12}");
        let runs: Vec<Vec<f64>> = args
            .engines
            .iter()
            .map(|engine| {
                let [rates, _, _] = reports.take(engine, workload);
                rates
            })
            .collect();
        let medians: Vec<f64> = runs.iter().map(|r| median(&mut r.clone())).collect();
        for m in &medians {
            print!("{m:>20.0}/s");
        }
        for ((other, other_runs), other_name) in medians.iter().zip(&runs).skip(1).zip(others) {
            if *other > 0.0 {
                print!("  {:>28.3}", medians[0] / other);
            } else {
                print!("  {:>28}", "-");
            }
            let ratios: Vec<String> = runs[0]
                .iter()
                .zip(other_runs)
                .map(|(a, b)| if *b > 0.0 { format!("{:.2}", a / b) } else { "-".to_owned() })
                .collect();
            per_run_ratios.push(format!("{workload} {first}/{other_name}: {}", ratios.join(" ")));
        }
        println!();
    }
    println!("ratios run by run:");
    for line in &per_run_ratios {
        println!("  {line}");
    }
    reports.print_infos();
}
