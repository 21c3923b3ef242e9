//! `stampkv serve` against Deno's reference KV Connect server (`denokv serve`, crates.io
//! `denokv` 0.14.0), side by side in one run, with real Deno 2.9.6 as the client
//! (`benches/deno/kvconnect_client.ts`). `benches/kvconnect.sh` builds everything and runs it:
//!
//! ```text
//! bash benches/kvconnect.sh [--runs 3] [--seconds 5] [--keys 10000] [--clients 1,32]
//! cargo run --release -p stampkv-benches --example kvconnect_bench -- --stampkv BIN \
//!     --denokv BIN --deno BIN [--runs 3] [--seconds 5] [--warmup 1] [--keys 10000]
//!     [--clients 1,32] [--client-procs 2] [--chart FILE.svg]
//! ```
//! Workloads, each on a fresh server and database directory:
//! - `read`: point reads `kv.get(["k", random i])` of 100-byte values, after `--keys` keys
//!   were written through the same server (untimed);
//! - `commit`: `kv.atomic().check({ key, versionstamp: null }).set(key, value).commit()` on a
//!   fresh key per commit, durable on both sides (stampkv `--sync always`; denokv's SQLite in
//!   WAL mode with its default `synchronous=FULL` fsyncs every commit).
//!
//! Each workload runs from 1 client and from N concurrent clients (`--clients`); concurrent
//! clients are spread over `--client-procs` Deno processes, each client its own
//! `Deno.openKv(url)` handle and connection. Servers alternate order between runs. The table
//! shows the median throughput over the runs, p50/p99 latency over every request of every run,
//! the server's CPU time per request (user + system, over the whole client run including
//! warm-up; median over the runs) and the server's peak RSS (its `VmHWM`). Client and servers
//! share the machine's cores: once the cores are busy, throughput measures client and server
//! together, while CPU per request measures the server alone.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

use stampkv_benches::report::{loadavg, median, rate_text};
use stampkv_benches::servers::{ServerProcess, SERVERS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const TOKEN: &str = "kvconnect-bench-token-0123456789";

struct Args {
    stampkv: PathBuf,
    denokv: PathBuf,
    deno: PathBuf,
    runs: usize,
    seconds: f64,
    warmup: f64,
    keys: u64,
    clients: Vec<usize>,
    client_procs: usize,
    chart: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        stampkv: PathBuf::from("target/release/stampkv"),
        denokv: PathBuf::from("target/peers/denokv/bin/denokv"),
        deno: std::env::var_os("DENO").map_or_else(|| PathBuf::from("deno"), PathBuf::from),
        runs: 3,
        seconds: 5.0,
        warmup: 1.0,
        keys: 10_000,
        clients: vec![1, 32],
        client_procs: 2,
        chart: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--stampkv" => args.stampkv = value().into(),
            "--denokv" => args.denokv = value().into(),
            "--deno" => args.deno = value().into(),
            "--runs" => args.runs = value().parse().expect("--runs"),
            "--seconds" => args.seconds = value().parse().expect("--seconds"),
            "--warmup" => args.warmup = value().parse().expect("--warmup"),
            "--keys" => args.keys = value().parse().expect("--keys"),
            "--clients" => args.clients = value().split(',').map(|c| c.parse().expect("--clients")).collect(),
            "--client-procs" => args.client_procs = value().parse().expect("--client-procs"),
            "--chart" => args.chart = Some(value().into()),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn deno_client(
    args: &Args,
    url: &str,
    workload: &str,
    clients: usize,
    base: usize,
    latencies: &Path,
) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("deno/kvconnect_client.ts");
    Command::new(&args.deno)
        .args(["run", "-A", "--unstable-kv"])
        .arg(script)
        .args(["--url", url, "--workload", workload])
        .args(["--clients", &clients.to_string(), "--client-base", &base.to_string()])
        .args(["--seconds", &args.seconds.to_string(), "--warmup", &args.warmup.to_string()])
        .args(["--keys", &args.keys.to_string()])
        .arg("--latencies")
        .arg(latencies)
        .env("DENO_KV_ACCESS_TOKEN", TOKEN)
        .env("DENO_NO_UPDATE_CHECK", "1")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start deno ({}): {e}", args.deno.display()))
}

/// `RESULT ops seconds all_ops cpu_us` from a client's output.
fn result_line(child: Child) -> (u64, f64, u64, f64) {
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "a Deno client failed: {}", String::from_utf8_lossy(&output.stdout));
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("RESULT ")).expect("no RESULT line");
    let mut parts = line.split(' ');
    let ops = parts.next().unwrap().parse().unwrap();
    let seconds = parts.next().unwrap().parse().unwrap();
    let all_ops = parts.next().unwrap().parse().unwrap();
    (ops, seconds, all_ops, parts.next().unwrap().parse().unwrap())
}

fn read_latencies(path: &Path) -> Vec<f64> {
    std::fs::read(path).unwrap().chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// One measured case on one server: ops/s, latencies (ms), the server's CPU time per
/// request (µs) and its peak RSS.
struct Measured {
    rate: f64,
    cpu_us_per_op: f64,
    client_cpu_us_per_op: f64,
    latencies: Vec<f64>,
    peak_rss: u64,
}

fn measure(args: &Args, server: &str, workload: &str, clients: usize) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let bin = if server == "stampkv" { &args.stampkv } else { &args.denokv };
    let mut running = ServerProcess::start(server, bin, dir.path(), TOKEN, None);
    if workload == "read" {
        let preload = deno_client(args, &running.url, "preload", 1, 0, &dir.path().join("preload.lat"));
        result_line(preload);
    }
    let cpu_before = running.cpu_seconds();
    let procs = if clients == 1 { 1 } else { args.client_procs.clamp(1, clients) };
    let mut children = Vec::new();
    for p in 0..procs {
        let share = clients / procs + usize::from(p < clients % procs);
        let base = (0..p).map(|q| clients / procs + usize::from(q < clients % procs)).sum();
        let file = dir.path().join(format!("{p}.lat"));
        children.push((deno_client(args, &running.url, workload, share, base, &file), file));
    }
    let mut rate = 0.0;
    let mut all_ops = 0;
    let mut client_cpu_us = 0.0;
    let mut latencies = Vec::new();
    for (child, file) in children {
        let (ops, seconds, all, cpu_us) = result_line(child);
        client_cpu_us += cpu_us;
        rate += ops as f64 / seconds;
        all_ops += all;
        latencies.extend(read_latencies(&file));
    }
    let cpu_us_per_op = (running.cpu_seconds() - cpu_before) * 1e6 / all_ops.max(1) as f64;
    let peak_rss = running.peak_rss();
    running.stop();
    let client_cpu_us_per_op = client_cpu_us / all_ops.max(1) as f64;
    Measured { rate, cpu_us_per_op, client_cpu_us_per_op, latencies, peak_rss }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() as f64 - 1.0) * p / 100.0).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

#[derive(Default)]
struct Summary {
    rates: Vec<f64>,
    cpu_us_per_op: Vec<f64>,
    client_cpu_us_per_op: Vec<f64>,
    latencies: Vec<f64>,
    peak_rss: u64,
}

fn main() {
    let args = parse_args();
    let version = Command::new(&args.deno).arg("--version").output().expect("deno --version");
    println!(
        "KV Connect: stampkv serve vs denokv serve 0.14.0, client {}",
        String::from_utf8_lossy(&version.stdout).lines().next().unwrap_or("deno")
    );
    println!(
        "{} runs x {} s (+{} s warm-up), {} preloaded keys, clients {:?} ({} Deno processes when concurrent); load before: {}",
        args.runs,
        args.seconds,
        args.warmup,
        args.keys,
        args.clients,
        args.client_procs,
        loadavg()
    );
    let mut results: BTreeMap<(String, usize, String), Summary> = BTreeMap::new();
    for run in 0..args.runs {
        for workload in ["read", "commit"] {
            for &clients in &args.clients {
                let mut order = SERVERS;
                if run % 2 == 1 {
                    order.reverse();
                }
                for server in order {
                    let m = measure(&args, server, workload, clients);
                    eprintln!(
                        "run {run}: {workload:6} {clients:2} clients {server:7} {:>10}, CPU per request: server {:.0} µs, Deno client {:.0} µs (peak RSS {:.1} MiB)",
                        rate_text(m.rate),
                        m.cpu_us_per_op,
                        m.client_cpu_us_per_op,
                        m.peak_rss as f64 / 1048576.0
                    );
                    let s = results.entry((workload.to_owned(), clients, server.to_owned())).or_default();
                    s.rates.push(m.rate);
                    s.cpu_us_per_op.push(m.cpu_us_per_op);
                    s.client_cpu_us_per_op.push(m.client_cpu_us_per_op);
                    s.latencies.extend(m.latencies);
                    s.peak_rss = s.peak_rss.max(m.peak_rss);
                }
            }
        }
    }
    println!();
    println!("| workload | clients | stampkv | denokv | ratio | stampkv p50 / p99 ms | denokv p50 / p99 ms | server CPU µs/request stampkv / denokv | Deno client CPU µs/request (stampkv / denokv runs) | peak RSS stampkv / denokv |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut chart_rows = Vec::new();
    for workload in ["read", "commit"] {
        for &clients in &args.clients {
            let mut row = Vec::new();
            for server in SERVERS {
                let s = results.get_mut(&(workload.to_owned(), clients, server.to_owned())).unwrap();
                s.latencies.sort_by(f64::total_cmp);
                row.push((
                    median(&mut s.rates),
                    median(&mut s.cpu_us_per_op),
                    median(&mut s.client_cpu_us_per_op),
                    percentile(&s.latencies, 50.0),
                    percentile(&s.latencies, 99.0),
                    s.peak_rss,
                ));
            }
            let (a, b) = (row[0], row[1]);
            println!(
                "| {workload} | {clients} | {} | {} | {:.2} | {:.3} / {:.3} | {:.3} / {:.3} | {:.0} / {:.0} | {:.0} / {:.0} | {:.1} / {:.1} MiB |",
                rate_text(a.0),
                rate_text(b.0),
                a.0 / b.0,
                a.3,
                a.4,
                b.3,
                b.4,
                a.1,
                b.1,
                a.2,
                b.2,
                a.5 as f64 / 1048576.0,
                b.5 as f64 / 1048576.0
            );
            chart_rows.push(format!("{workload}, {clients} client{}", if clients == 1 { "" } else { "s" }));
        }
    }
    println!("\nload after: {}", loadavg());
    if let Some(path) = &args.chart {
        let mut series = Vec::new();
        for workload in ["read", "commit"] {
            for &clients in &args.clients {
                let get = |server: &str| {
                    results[&(workload.to_owned(), clients, server.to_owned())].latencies.clone()
                };
                series.push((get("stampkv"), get("denokv")));
            }
        }
        stampkv_benches::chart::latency_cdf(
            path,
            "KV Connect latency (Deno 2.9.6 client)",
            &chart_rows,
            &series,
        )
        .unwrap();
        println!("chart: {}", path.display());
    }
}
