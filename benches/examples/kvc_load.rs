//! A low-overhead KV Connect load generator: `stampkv serve` against Deno's reference server
//! (`denokv serve`, crates.io `denokv` 0.14.0), side by side in one run, with the servers and
//! the generator pinned to different cores so that the server's own cost shows.
//! `benches/kvc_load.sh` builds everything and runs it:
//!
//! ```text
//! bash benches/kvc_load.sh [--runs 3] [--seconds 5] [--connections 1,32]
//! cargo run --release -p stampkv-benches --example kvc_load -- --stampkv BIN --denokv BIN
//!     [--runs 3] [--seconds 5] [--warmup 1] [--keys 10000] [--connections 1,32]
//!     [--workloads read,commit] [--http 1|2] [--h2-client one-write|hyper]
//!     [--server-cpus 0] [--client-cpus 1]
//!     [--servers stampkv,denokv] [--chart FILE.svg]
//! ```
//! The generator is this process: one thread (a current-thread tokio runtime) on
//! `--client-cpus`, one KV Connect connection per simulated client (HTTP/1.1 by default, as
//! Deno's and Node's clients use over plain http), each sending its next request when the last
//! one returned. Over HTTP/2 a request's HEADERS and DATA frames leave in one write, as
//! Deno 2.9.6's client sends them (`tcpdump`: one segment per `kv.get`); `--h2-client hyper`
//! sends them as hyper's client does, the DATA frame in a segment of its own, which costs
//! the server a bare ACK per request. Requests are encoded with the same protobuf messages
//! Deno sends:
//! - `read`: `kv.get(["k", random i])` (a `snapshot_read` of one range, limit 1) of 100-byte
//!   values, after `--keys` keys were written through the same server (untimed); the value
//!   must be there;
//! - `commit`: `kv.atomic().check({ key, versionstamp: null }).set(key, value).commit()` on a
//!   fresh key per commit, durable on both sides (stampkv `--sync always`; denokv's SQLite in
//!   WAL mode with `synchronous=FULL`); the commit must succeed.
//!
//! Each case runs on a fresh server and directory; servers alternate order between runs. The
//! table shows the median throughput over the runs, p50/p99 latency over every request of
//! every run, the server's CPU time per request over the measured window (user + system from
//! `/proc`), the generator's own CPU per request, and the server's peak RSS.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

use stampkv_benches::report::{loadavg, median, rate_text};
use stampkv_benches::servers::{cpu_seconds, ServerProcess, SERVERS};
use stampkv_netbench::wire::{self, Conn, Target};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;
use std::time::{Duration, Instant};

const TOKEN: &str = "kvc-load-token-0123456789abcdef";
const VALUE_BYTES: usize = 100;

struct Args {
    stampkv: PathBuf,
    denokv: PathBuf,
    runs: usize,
    seconds: f64,
    warmup: f64,
    keys: u64,
    connections: Vec<usize>,
    workloads: Vec<String>,
    http2: bool,
    /// HTTP/2 requests as Deno's client writes them (HEADERS and DATA in one write); `false`:
    /// as hyper's client writes them (DATA in a segment of its own).
    h2_one_write: bool,
    server_cpus: String,
    client_cpus: String,
    chart: Option<PathBuf>,
    /// Only these servers (a subset of [`SERVERS`]; the table needs both).
    servers: Vec<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        stampkv: PathBuf::from("target/release/stampkv"),
        denokv: PathBuf::from("target/peers/denokv/bin/denokv"),
        runs: 3,
        seconds: 5.0,
        warmup: 1.0,
        keys: 10_000,
        connections: vec![1, 32],
        workloads: vec!["read".into(), "commit".into()],
        http2: false,
        h2_one_write: true,
        server_cpus: "0".into(),
        client_cpus: "1".into(),
        chart: None,
        servers: SERVERS.iter().map(|s| (*s).to_owned()).collect(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--stampkv" => args.stampkv = value().into(),
            "--denokv" => args.denokv = value().into(),
            "--runs" => args.runs = value().parse().unwrap(),
            "--seconds" => args.seconds = value().parse().unwrap(),
            "--warmup" => args.warmup = value().parse().unwrap(),
            "--keys" => args.keys = value().parse().unwrap(),
            "--connections" => args.connections = value().split(',').map(|c| c.parse().unwrap()).collect(),
            "--workloads" => args.workloads = value().split(',').map(str::to_owned).collect(),
            "--http" => args.http2 = value() == "2",
            "--h2-client" => {
                args.h2_one_write = match value().as_str() {
                    "one-write" => true,
                    "hyper" => false,
                    other => panic!("--h2-client is one-write or hyper, not {other}"),
                }
            }
            "--server-cpus" => args.server_cpus = value(),
            "--client-cpus" => args.client_cpus = value(),
            "--chart" => args.chart = Some(value().into()),
            "--servers" => args.servers = value().split(',').map(str::to_owned).collect(),
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

/// Pins every thread of this process to `cpus` (before the runtime starts any).
fn pin_self(cpus: &str) {
    let pid = std::process::id().to_string();
    let status = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid])
        .stdout(std::process::Stdio::null())
        .status();
    assert!(matches!(status, Ok(s) if s.success()), "taskset -c {cpus} failed: is util-linux installed?");
}

async fn open(target: &mut Target, args: &Args) -> Conn {
    let mut conn = if args.http2 && args.h2_one_write {
        Conn::H2OneWrite(wire::connect_h2_one_write(target.addr).await.unwrap())
    } else if args.http2 {
        Conn::H2(wire::connect_h2(target.addr).await.unwrap())
    } else {
        Conn::H1(wire::connect_h1(target.addr).await.unwrap())
    };
    if target.db_id.is_empty() {
        target.db_id = wire::metadata(&mut conn, target).await.unwrap();
    }
    conn
}

fn read_key(i: u64) -> Vec<u8> {
    wire::key(&["k", &format!("{i:08}")])
}

/// Writes keys `["k", i]` for `i < keys` in commits of 500.
async fn preload(target: &Target, conn: &mut Conn, keys: u64) {
    let value = vec![b'v'; VALUE_BYTES];
    let mut start = 0;
    while start < keys {
        let batch: Vec<(Vec<u8>, Vec<u8>)> =
            (start..keys.min(start + 500)).map(|i| (read_key(i), value.clone())).collect();
        wire::set(conn, target, &batch).await.unwrap();
        start += 500;
    }
}

/// What the measured window of one case gave.
struct Window {
    ops: u64,
    seconds: f64,
    latencies_us: Vec<u32>,
    server_cpu: f64,
    client_cpu: f64,
    /// The server's peak RSS, bytes (filled in by [`measure`]).
    peak_rss: u64,
}

/// Runs `workload` from `connections` connections for the warm-up, then the measured window.
async fn drive(args: &Args, target: &Target, server_pid: u32, workload: &str, connections: usize) -> Window {
    let mut conns = Vec::new();
    for _ in 0..connections {
        let mut t = target.clone();
        conns.push(open(&mut t, args).await);
    }
    let warm_end = Instant::now() + Duration::from_secs_f64(args.warmup);
    let end = warm_end + Duration::from_secs_f64(args.seconds);
    let latencies = Rc::new(RefCell::new(Vec::<u32>::with_capacity(1 << 20)));
    let local = tokio::task::LocalSet::new();
    for (c, mut conn) in conns.into_iter().enumerate() {
        let (target, latencies, workload, keys) =
            (target.clone(), latencies.clone(), workload.to_owned(), args.keys);
        local.spawn_local(async move {
            let value = vec![b'c'; VALUE_BYTES];
            let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (c as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
            let client = format!("{c:03}");
            for n in 0u64.. {
                let begin = Instant::now();
                if begin >= end {
                    break;
                }
                if workload == "read" {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let got = wire::get(&mut conn, &target, &read_key(rng % keys)).await.unwrap();
                    assert!(got.is_some(), "a preloaded key was not found");
                } else {
                    let key = wire::key(&["c", &client, &n.to_string()]);
                    wire::commit(&mut conn, &target, wire::check_set_body(&key, &value)).await.unwrap();
                }
                let done = Instant::now();
                if begin >= warm_end && done <= end {
                    latencies
                        .borrow_mut()
                        .push(u32::try_from((done - begin).as_micros()).unwrap_or(u32::MAX));
                }
            }
        });
    }
    let sample = local.spawn_local(async move {
        tokio::time::sleep_until(warm_end.into()).await;
        let before = (Instant::now(), cpu_seconds(server_pid), cpu_seconds(std::process::id()));
        tokio::time::sleep_until(end.into()).await;
        let after = (Instant::now(), cpu_seconds(server_pid), cpu_seconds(std::process::id()));
        (after.0 - before.0, after.1 - before.1, after.2 - before.2)
    });
    local.await;
    let (elapsed, server_cpu, client_cpu) = sample.await.unwrap();
    let latencies_us = Rc::try_unwrap(latencies).unwrap().into_inner();
    Window {
        ops: latencies_us.len() as u64,
        seconds: elapsed.as_secs_f64(),
        latencies_us,
        server_cpu,
        client_cpu,
        peak_rss: 0,
    }
}

/// One case on a fresh server.
fn measure(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    server: &str,
    workload: &str,
    connections: usize,
) -> Window {
    let dir = tempfile::tempdir().unwrap();
    let bin = if server == "stampkv" { &args.stampkv } else { &args.denokv };
    let mut running = ServerProcess::start(server, bin, dir.path(), TOKEN, Some(&args.server_cpus));
    let mut target = Target { addr: running.addr, token: TOKEN.to_owned(), db_id: String::new() };
    let window = runtime.block_on(async {
        let mut conn = open(&mut target, args).await;
        if workload == "read" {
            preload(&target, &mut conn, args.keys).await;
        }
        drive(args, &target, running.pid(), workload, connections).await
    });
    let peak_rss = running.peak_rss();
    running.stop();
    Window { peak_rss, ..window }
}

#[derive(Default)]
struct Summary {
    rates: Vec<f64>,
    server_us: Vec<f64>,
    client_us: Vec<f64>,
    latencies_us: Vec<u32>,
    peak_rss: u64,
}

fn quantile_ms(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    f64::from(sorted[((sorted.len() - 1) as f64 * q).round() as usize]) / 1000.0
}

fn main() {
    let args = parse_args();
    pin_self(&args.client_cpus);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    println!(
        "KV Connect load: stampkv serve vs denokv serve 0.14.0; servers on CPU {}, generator on CPU {} ({}); load average {}",
        args.server_cpus,
        args.client_cpus,
        match (args.http2, args.h2_one_write) {
            (false, _) => "HTTP/1.1",
            (true, true) => "HTTP/2, each request in one write",
            (true, false) => "HTTP/2, hyper's client: DATA in a write of its own",
        },
        loadavg()
    );
    let mut results: BTreeMap<(String, usize, String), Summary> = BTreeMap::new();
    for run in 0..args.runs {
        for workload in &args.workloads {
            for &connections in &args.connections {
                let mut order = SERVERS;
                if run % 2 == 1 {
                    order.reverse();
                }
                for server in order.into_iter().filter(|s| args.servers.iter().any(|a| a == s)) {
                    let w = measure(&args, &runtime, server, workload, connections);
                    let peak = w.peak_rss;
                    let rate = w.ops as f64 / w.seconds;
                    let server_us = w.server_cpu * 1e6 / w.ops.max(1) as f64;
                    let client_us = w.client_cpu * 1e6 / w.ops.max(1) as f64;
                    println!(
                        "run {run}: {workload:6} {connections:2} connections {server:7} {:>10}, CPU per request: server {server_us:.1} µs, generator {client_us:.1} µs (peak RSS {:.1} MiB)",
                        rate_text(rate),
                        peak as f64 / 1_048_576.0
                    );
                    let s = results.entry((workload.clone(), connections, server.to_owned())).or_default();
                    s.rates.push(rate);
                    s.server_us.push(server_us);
                    s.client_us.push(client_us);
                    s.latencies_us.extend(w.latencies_us);
                    s.peak_rss = s.peak_rss.max(peak);
                }
            }
        }
    }
    if args.servers.len() < SERVERS.len() {
        return;
    }
    println!();
    println!("| workload | connections | stampkv | denokv | ratio | stampkv p50 / p99 ms | denokv p50 / p99 ms | server CPU µs/request stampkv / denokv | generator CPU µs/request | peak RSS stampkv / denokv |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut chart_rows = Vec::new();
    let mut chart_series = Vec::new();
    for workload in &args.workloads {
        for &connections in &args.connections {
            let mut row = BTreeMap::new();
            for server in SERVERS {
                let s = results.get_mut(&(workload.clone(), connections, server.to_owned())).unwrap();
                s.latencies_us.sort_unstable();
                row.insert(
                    server,
                    (
                        median(&mut s.rates),
                        median(&mut s.server_us),
                        median(&mut s.client_us),
                        quantile_ms(&s.latencies_us, 0.5),
                        quantile_ms(&s.latencies_us, 0.99),
                        s.peak_rss,
                    ),
                );
            }
            let (a, b) = (row["stampkv"], row["denokv"]);
            println!(
                "| {workload} | {connections} | {} | {} | {:.2} | {:.3} / {:.3} | {:.3} / {:.3} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} MiB |",
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
                a.5 as f64 / 1_048_576.0,
                b.5 as f64 / 1_048_576.0
            );
            chart_rows.push(format!(
                "{workload}, {connections} connection{}",
                if connections == 1 { "" } else { "s" }
            ));
            let ms = |server: &str| -> Vec<f64> {
                results[&(workload.clone(), connections, server.to_owned())]
                    .latencies_us
                    .iter()
                    .map(|&us| f64::from(us) / 1000.0)
                    .collect()
            };
            chart_series.push((ms("stampkv"), ms("denokv")));
        }
    }
    if let Some(path) = &args.chart {
        stampkv_benches::chart::latency_cdf(
            path,
            "KV Connect load generator: latency of stampkv serve and denokv serve (servers and generator on separate cores)",
            &chart_rows,
            &chart_series,
        )
        .unwrap();
        println!("chart: {}", path.display());
    }
}
