//! Read-heavy global traffic in the manner of Workers KV: clients far from the primary read
//! it directly, or read a caching edge near them (`stampkv edge`), and writes at the primary
//! reach the edge's readers after some staleness. `benches/edge.sh` builds everything and
//! runs it:
//!
//! ```text
//! bash benches/edge.sh [--seconds 10] [--warmup 2] [--keys 100000] [--clients 32] [--delay-ms 50]
//! cargo run --release -p stampkv-benches --example edge_bench -- --stampkv BIN [--seconds 10]
//!     [--warmup 2] [--keys 100000] [--clients 32] [--delay-ms 50] [--hot-writes 20]
//!     [--write-gap-ms 200] [--chart FILE.svg]
//! ```
//!
//! The primary is `stampkv serve` on a directory filled beforehand with `Kv::open` and sets
//! (untimed): `--keys` keys `["k", i]` (12 bytes encoded) of 100-byte values. The workload is
//! eventual point reads, ranks drawn from YCSB's Zipfian distribution (s = 0.99) and mapped
//! to keys through a fixed random permutation (YCSB's "scrambled" Zipfian), by `--clients`
//! closed-loop readers: tokio tasks in this process, each with its own `RemoteKv` (its own
//! metadata exchange and connection pool). WAN distance is a sleep of `--delay-ms` before
//! every HTTP request that crosses it. Each case runs `--warmup` + `--seconds`:
//!
//! 1. **direct**: readers to the primary, each request delayed (`added_latency`);
//! 2. **edge, pull**: readers (no delay) to `stampkv edge --cache-ttl 60s --upstream-delay
//!    <delay>`, started cold; figures over the whole run (cold start included) and over the
//!    steady window (after the warm-up);
//! 3. **edge, push**: the same with `--push`.
//!
//! After case 2's run, every key is read once through its edge (10 keys per request, 128 at
//! a time, hottest first) and the readers run `--seconds` more on it: the hit path alone
//! ("warm"). A 60 s TTL cache under this workload is still filling with the Zipf tail after
//! 12 s, so the windows from cold show the edge filling and the warm window its ceiling.
//!
//! The edge's counters come from its `GET /metrics`; its peak RSS from `VmHWM`.
//!
//! **Staleness after writes**: with readers still running at an edge, a writer sets the
//! `--hot-writes` hottest keys (Zipf ranks 0, 1, ...) at the primary, one every
//! `--write-gap-ms` (spread so the writes fall at different points of the cache's refresh
//! cycle), and for each a prober polls the edge (eventual get every 5 ms) until it answers
//! the new versionstamp: staleness = first answer with it − the write's acknowledgement. Run
//! on a pull edge with `--cache-ttl 5s` and on the push edge of case 3 (`--cache-ttl 60s`).
//!
//! Every child process is stopped (SIGTERM, then SIGKILL) when its guard drops, on success
//! or panic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

use stampkv::{Consistency, Key, KeyPart, Kv, KvOptions, KvValue, SyncMode};
use stampkv_benches::report::{loadavg, rate_text};
use stampkv_benches::{shuffled, value, value_pool, Rng};
use stampkv_client::{ConnectOptions, RemoteKv};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "edge-bench-token-0123456789";
/// YCSB's Zipfian constant.
const ZIPF_THETA: f64 = 0.99;
/// Sets per commit while filling the primary.
const FILL_BATCH: usize = 1000;
/// How often a prober asks the edge again.
const PROBE_EVERY: Duration = Duration::from_millis(5);
/// A write not seen at the edge after this long counts as not seen.
const PROBE_LIMIT: Duration = Duration::from_secs(15);

struct Args {
    stampkv: PathBuf,
    keys: u64,
    seconds: f64,
    warmup: f64,
    clients: usize,
    delay_ms: u64,
    hot_writes: usize,
    write_gap_ms: u64,
    chart: Option<PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        stampkv: PathBuf::from("target/release/stampkv"),
        keys: 100_000,
        seconds: 10.0,
        warmup: 2.0,
        clients: 32,
        delay_ms: 50,
        hot_writes: 20,
        write_gap_ms: 200,
        chart: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--stampkv" => args.stampkv = value().into(),
            "--keys" => args.keys = value().parse().expect("--keys"),
            "--seconds" => args.seconds = value().parse().expect("--seconds"),
            "--warmup" => args.warmup = value().parse().expect("--warmup"),
            "--clients" => args.clients = value().parse().expect("--clients"),
            "--delay-ms" => args.delay_ms = value().parse().expect("--delay-ms"),
            "--hot-writes" => args.hot_writes = value().parse().expect("--hot-writes"),
            "--write-gap-ms" => args.write_gap_ms = value().parse().expect("--write-gap-ms"),
            "--chart" => args.chart = Some(value().into()),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(args.keys >= args.hot_writes as u64 && args.keys > 1, "--keys must exceed --hot-writes");
    assert!(args.clients > 0 && args.seconds > 0.0, "--clients and --seconds must be positive");
    args
}

/// A `stampkv serve` or `stampkv edge` process, stopped when dropped.
struct Proc {
    child: Child,
    url: String,
}

impl Proc {
    /// Starts `bin args` and waits for its `msg="listening" addr=...` log line. Warnings and
    /// errors it logs later are echoed to stderr, prefixed with `name`.
    fn start(name: &str, bin: &Path, args: &[&str]) -> Proc {
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({name}): {e}", bin.display()));
        let stderr = child.stderr.take().expect("piped stderr");
        // The guard exists before anything can fail, so the child is stopped whatever happens.
        let mut proc = Proc { child, url: String::new() };
        let (tx, rx) = std::sync::mpsc::channel();
        let label = name.to_owned();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("msg=\"listening\"") {
                    let addr = line.split_whitespace().find_map(|f| f.strip_prefix("addr="));
                    if let (Some(addr), Some(tx)) = (addr, tx.take()) {
                        let _ = tx.send(addr.to_owned());
                    }
                } else if line.contains("level=warn") || line.contains("level=error") {
                    eprintln!("[{label}] {line}");
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => proc.url = format!("http://{addr}"),
            Err(_) => panic!("{name} did not log a listening address (status: {:?})", proc.child.try_wait()),
        }
        proc
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.pid().to_string()).status();
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            if started.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A process's peak resident set (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// CPU time (user + system) a process has used so far, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// YCSB's Zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"): rank 0 is the most popular.
struct Zipf {
    n: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let n = n as f64;
        Zipf {
            n,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    /// The rank for a uniform `u` in [0, 1).
    fn rank(&self, u: f64) -> usize {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1;
        }
        let rank = (self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as usize;
        rank.min(self.n as usize - 1)
    }

    /// The share of draws that fall on the `top` most popular ranks.
    fn share_of_top(&self, top: u64, theta: f64) -> f64 {
        (1..=top).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>() / self.zetan
    }
}

fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// The keys by popularity rank, and the rank generator.
struct Workload {
    by_rank: Vec<Key>,
    zipf: Zipf,
}

fn key_of(i: u64) -> Key {
    Key(vec![KeyPart::from("k"), KeyPart::Number(i as f64)])
}

/// Fills the primary's directory (untimed): every key with a 100-byte value, 1,000 sets per
/// commit, then closes it.
fn populate(dir: &Path, keys: u64, pool: &[u8]) {
    let mut options = KvOptions::default();
    options.engine.sync_mode = SyncMode::Buffered;
    let kv = Kv::open(dir, options).expect("open the primary's directory");
    let all: Vec<u64> = (0..keys).collect();
    for chunk in all.chunks(FILL_BATCH) {
        let mut op = kv.atomic();
        for &i in chunk {
            op = op.set(&key_of(i), &KvValue::Bytes(value(pool, i).to_vec()));
        }
        op.commit().expect("fill commit");
    }
    kv.close().expect("close the primary's directory");
}

/// Readers running in the background.
struct Readers {
    origin: Instant,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<(f64, f64)>>>,
}

impl Readers {
    /// Connects `clients` readers to `url` (each its own `RemoteKv`), then starts them; the
    /// run's clock starts once every one is connected.
    async fn start(url: &str, delay: Duration, clients: usize, work: &Arc<Workload>, seed: u64) -> Readers {
        let mut connecting = Vec::new();
        for _ in 0..clients {
            let mut options = ConnectOptions::new(TOKEN);
            options.added_latency = delay;
            let url = url.to_owned();
            connecting.push(tokio::spawn(async move { RemoteKv::connect(&url, options).await }));
        }
        let mut kvs = Vec::new();
        for c in connecting {
            kvs.push(c.await.unwrap().unwrap_or_else(|e| panic!("connect to {url}: {e}")));
        }
        let origin = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = kvs
            .into_iter()
            .enumerate()
            .map(|(c, kv)| {
                let (work, stop) = (work.clone(), stop.clone());
                let seed = seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
                tokio::spawn(read_loop(kv, work, seed, origin, stop))
            })
            .collect();
        Readers { origin, stop, tasks }
    }

    /// Stops the readers; every read as (start, in seconds since the origin; latency in ms).
    async fn finish(self) -> Vec<(f64, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for task in self.tasks {
            all.extend(task.await.unwrap());
        }
        all
    }
}

async fn read_loop(
    kv: RemoteKv,
    work: Arc<Workload>,
    seed: u64,
    origin: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<(f64, f64)> {
    let mut rng = Rng::new(seed);
    let mut reads = Vec::with_capacity(1 << 16);
    while !stop.load(Ordering::Relaxed) {
        let key = &work.by_rank[work.zipf.rank(unit(&mut rng))];
        let start = Instant::now();
        let entry = kv
            .get_with::<KvValue>(key, Consistency::Eventual)
            .await
            .unwrap_or_else(|e| panic!("read {key:?}: {e}"));
        let ms = start.elapsed().as_secs_f64() * 1e3;
        assert!(entry.value.is_some(), "{key:?} was not found");
        reads.push((start.duration_since(origin).as_secs_f64(), ms));
    }
    reads
}

/// The edge counters the tables use.
#[derive(Debug, Clone, Copy, Default)]
struct EdgeCounters {
    hits: f64,
    negative_hits: f64,
    misses: f64,
    upstream_reads: f64,
    refreshes: f64,
    bytes_held: f64,
}

impl EdgeCounters {
    fn minus(self, earlier: EdgeCounters) -> EdgeCounters {
        EdgeCounters {
            hits: self.hits - earlier.hits,
            negative_hits: self.negative_hits - earlier.negative_hits,
            misses: self.misses - earlier.misses,
            upstream_reads: self.upstream_reads - earlier.upstream_reads,
            refreshes: self.refreshes - earlier.refreshes,
            bytes_held: self.bytes_held,
        }
    }

    fn hit_ratio(&self) -> f64 {
        let hits = self.hits + self.negative_hits;
        hits / (hits + self.misses).max(1.0)
    }
}

/// `GET /metrics` of the edge at `url`, parsed.
fn fetch_metrics(url: &str) -> EdgeCounters {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).expect("connect for /metrics");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("read /metrics");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let mut counters = EdgeCounters::default();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((name, value)) = line.split_once(' ') else { continue };
        let value: f64 = value.trim().parse().unwrap_or(0.0);
        match name {
            "stampkv_edge_hits_total" => counters.hits = value,
            "stampkv_edge_negative_hits_total" => counters.negative_hits = value,
            "stampkv_edge_misses_total" => counters.misses = value,
            "stampkv_edge_upstream_reads_total" => counters.upstream_reads = value,
            "stampkv_edge_refreshes_total" => counters.refreshes = value,
            "stampkv_edge_bytes_held" => counters.bytes_held = value,
            _ => {}
        }
    }
    counters
}

async fn metrics_of(url: &str) -> EdgeCounters {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || fetch_metrics(&url)).await.unwrap()
}

/// CPU seconds of this process, the primary and the edge (if any), at one moment.
fn cpu_now(primary: &Proc, edge: Option<&Proc>) -> [f64; 3] {
    [cpu_seconds(std::process::id()), cpu_seconds(primary.pid()), edge.map_or(0.0, |e| cpu_seconds(e.pid()))]
}

/// The figures of one window of one case.
struct Figures {
    reads: usize,
    rate: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    latencies: Vec<f64>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() as f64 - 1.0) * p / 100.0).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Reads that started in [from, to) seconds after the origin.
fn figures(reads: &[(f64, f64)], from: f64, to: f64) -> Figures {
    let mut latencies: Vec<f64> = reads.iter().filter(|(t, _)| *t >= from && *t < to).map(|r| r.1).collect();
    latencies.sort_by(f64::total_cmp);
    Figures {
        reads: latencies.len(),
        rate: latencies.len() as f64 / (to - from),
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        p999: percentile(&latencies, 99.9),
        latencies,
    }
}

/// One measured window of a case.
struct Window {
    label: &'static str,
    figures: Figures,
    /// The edge's counters over the window (none for direct reads).
    counters: Option<EdgeCounters>,
    seconds: f64,
    /// CPU µs per read over the window: this process (clients), primary, edge.
    cpu_us_per_read: [f64; 3],
    /// The edge's peak RSS so far at the window's end.
    edge_peak_rss: Option<u64>,
}

/// CPU µs per read between two `cpu_now` readings.
fn cpu_per_read(before: [f64; 3], after: [f64; 3], reads: usize) -> [f64; 3] {
    std::array::from_fn(|i| (after[i] - before[i]) * 1e6 / reads.max(1) as f64)
}

/// One measured case.
struct Case {
    name: &'static str,
    windows: Vec<Window>,
    staleness: Option<Staleness>,
}

/// Staleness of the hot writes: ms per write, `None` if not seen within the limit.
struct Staleness {
    ttl: &'static str,
    seen_ms: Vec<Option<f64>>,
}

/// Sets the `count` hottest keys at the primary one every `gap`; for each, polls the edge
/// until it answers the new versionstamp.
async fn staleness(
    primary_url: &str,
    edge_url: &str,
    work: &Arc<Workload>,
    count: usize,
    gap: Duration,
    round: u64,
) -> Vec<Option<f64>> {
    let writer = RemoteKv::connect(primary_url, ConnectOptions::new(TOKEN)).await.expect("writer connects");
    let prober = RemoteKv::connect(edge_url, ConnectOptions::new(TOKEN)).await.expect("prober connects");
    let pool = value_pool(round);
    let mut probes = Vec::new();
    for rank in 0..count {
        let key = work.by_rank[rank].clone();
        let fresh = KvValue::Bytes(value(&pool, rank as u64).to_vec());
        let stamp = writer.set(&key, &fresh).await.expect("hot write");
        let acked = Instant::now();
        let prober = prober.clone();
        probes.push(tokio::spawn(async move {
            loop {
                let entry = prober
                    .get_with::<KvValue>(&key, Consistency::Eventual)
                    .await
                    .unwrap_or_else(|e| panic!("probe {key:?}: {e}"));
                if entry.versionstamp >= Some(stamp) {
                    return Some(acked.elapsed().as_secs_f64() * 1e3);
                }
                if acked.elapsed() > PROBE_LIMIT {
                    return None;
                }
                tokio::time::sleep(PROBE_EVERY).await;
            }
        }));
        tokio::time::sleep(gap).await;
    }
    let mut seen = Vec::new();
    for probe in probes {
        seen.push(probe.await.unwrap());
    }
    seen
}

/// What kind of case to run.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Direct,
    Pull,
    Push,
}

async fn run_case(args: &Args, primary: &Proc, work: &Arc<Workload>, mode: Mode, seed: u64) -> Case {
    let delay = Duration::from_millis(args.delay_ms);
    let delay_text = format!("{}ms", args.delay_ms);
    let edge = match mode {
        Mode::Direct => None,
        Mode::Pull | Mode::Push => {
            let mut edge_args = vec![
                "edge",
                "--upstream",
                &primary.url,
                "--addr",
                "127.0.0.1:0",
                "--access-token",
                TOKEN,
                "--cache-ttl",
                "60s",
                "--upstream-delay",
                &delay_text,
            ];
            if mode == Mode::Push {
                edge_args.push("--push");
            }
            Some(Proc::start("edge", &args.stampkv, &edge_args))
        }
    };
    let (url, reader_delay) = match &edge {
        Some(edge) => (edge.url.clone(), Duration::ZERO),
        None => (primary.url.clone(), delay),
    };
    let counters = || async {
        match &edge {
            Some(edge) => Some(metrics_of(&edge.url).await),
            None => None,
        }
    };
    let readers = Readers::start(&url, reader_delay, args.clients, work, seed).await;
    let cpu_start = cpu_now(primary, edge.as_ref());
    let end = args.warmup + args.seconds;
    tokio::time::sleep_until((readers.origin + Duration::from_secs_f64(args.warmup)).into()).await;
    let at_warm = counters().await;
    let cpu_warm = cpu_now(primary, edge.as_ref());
    tokio::time::sleep_until((readers.origin + Duration::from_secs_f64(end)).into()).await;
    let at_end = counters().await;
    let cpu_end = cpu_now(primary, edge.as_ref());
    let rss_end = edge.as_ref().map(|e| peak_rss(e.pid()));
    let staleness = match (&edge, mode) {
        (Some(edge), Mode::Push) => {
            let gap = Duration::from_millis(args.write_gap_ms);
            let seen = staleness(&primary.url, &edge.url, work, args.hot_writes, gap, seed).await;
            Some(Staleness { ttl: "60s", seen_ms: seen })
        }
        _ => None,
    };
    let reads = readers.finish().await;
    let whole = figures(&reads, 0.0, end);
    let steady = figures(&reads, args.warmup, end);
    let mut windows = Vec::new();
    if edge.is_some() {
        let cpu = cpu_per_read(cpu_start, cpu_end, whole.reads);
        windows.push(Window {
            label: "whole run from cold",
            figures: whole,
            counters: at_end,
            seconds: end,
            cpu_us_per_read: cpu,
            edge_peak_rss: rss_end,
        });
    }
    let cpu = cpu_per_read(cpu_warm, cpu_end, steady.reads);
    let after = at_end.zip(at_warm).map(|(end, warm)| end.minus(warm));
    windows.push(Window {
        label: "after the warm-up",
        figures: steady,
        counters: after,
        seconds: args.seconds,
        cpu_us_per_read: cpu,
        edge_peak_rss: rss_end,
    });
    if let (Some(edge), Mode::Pull) = (&edge, mode) {
        // Every key cached (all fresh for the TTL): the hit path alone.
        let started = Instant::now();
        prewarm(&edge.url, work).await;
        eprintln!("prewarmed every key in {:.1} s", started.elapsed().as_secs_f64());
        let readers = Readers::start(&edge.url, Duration::ZERO, args.clients, work, seed + 1).await;
        let before = counters().await;
        let cpu_before = cpu_now(primary, Some(edge));
        tokio::time::sleep_until((readers.origin + Duration::from_secs_f64(args.seconds)).into()).await;
        let after = counters().await;
        let cpu_after = cpu_now(primary, Some(edge));
        let rss = Some(peak_rss(edge.pid()));
        let reads = readers.finish().await;
        let warm = figures(&reads, 0.0, args.seconds);
        let cpu = cpu_per_read(cpu_before, cpu_after, warm.reads);
        let counters = after.zip(before).map(|(after, before)| after.minus(before));
        windows.push(Window {
            label: "warm (every key cached)",
            figures: warm,
            counters,
            seconds: args.seconds,
            cpu_us_per_read: cpu,
            edge_peak_rss: rss,
        });
    }
    let name = match mode {
        Mode::Direct => "direct",
        Mode::Pull => "edge, pull",
        Mode::Push => "edge, push",
    };
    Case { name, windows, staleness }
}

/// Reads every key once through the edge at `url`, 10 keys per request, 128 requests at a
/// time, hottest first.
async fn prewarm(url: &str, work: &Arc<Workload>) {
    let kv = RemoteKv::connect(url, ConnectOptions::new(TOKEN)).await.expect("connect to prewarm");
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = (0..128)
        .map(|_| {
            let (kv, next, work) = (kv.clone(), next.clone(), work.clone());
            tokio::spawn(async move {
                loop {
                    let start = next.fetch_add(10, Ordering::Relaxed);
                    if start >= work.by_rank.len() {
                        return;
                    }
                    let keys = &work.by_rank[start..(start + 10).min(work.by_rank.len())];
                    kv.get_many_with::<KvValue>(keys, Consistency::Eventual).await.expect("prewarm read");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// A pull edge with a 5 s TTL: readers warm it for `--warmup`, then the hot writes.
async fn pull_staleness(args: &Args, primary: &Proc, work: &Arc<Workload>, seed: u64) -> Staleness {
    let delay_text = format!("{}ms", args.delay_ms);
    let edge_args = [
        "edge",
        "--upstream",
        &primary.url,
        "--addr",
        "127.0.0.1:0",
        "--access-token",
        TOKEN,
        "--cache-ttl",
        "5s",
        "--upstream-delay",
        &delay_text,
    ];
    let edge = Proc::start("edge", &args.stampkv, &edge_args);
    let readers = Readers::start(&edge.url, Duration::ZERO, args.clients, work, seed).await;
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let gap = Duration::from_millis(args.write_gap_ms);
    let seen = staleness(&primary.url, &edge.url, work, args.hot_writes, gap, seed).await;
    drop(readers.finish().await);
    Staleness { ttl: "5s", seen_ms: seen }
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / 1048576.0)
}

fn print_row(case: &Case, w: &Window) {
    let f = &w.figures;
    let (hit, upstream, held) = match &w.counters {
        Some(c) => (
            format!("{:.1}%", c.hit_ratio() * 100.0),
            format!("{:.0}/s", c.upstream_reads / w.seconds),
            mib(c.bytes_held),
        ),
        None => ("—".into(), format!("{} (every read)", rate_text(f.rate)), "—".into()),
    };
    let rss = w.edge_peak_rss.map_or("—".into(), |rss| mib(rss as f64));
    println!(
        "| {} | {} | {} | {} | {} | {} | {hit} | {upstream} | {rss} | {held} |",
        case.name,
        w.label,
        rate_text(f.rate),
        ms(f.p50),
        ms(f.p99),
        ms(f.p999)
    );
}

fn print_staleness(mode: &str, s: &Staleness, args: &Args) {
    let mut seen: Vec<f64> = s.seen_ms.iter().flatten().copied().collect();
    seen.sort_by(f64::total_cmp);
    let missing = s.seen_ms.len() - seen.len();
    println!(
        "| {mode} | {} | {} | {} ms | {} | {} | {} |",
        s.ttl,
        s.seen_ms.len(),
        args.write_gap_ms,
        seen.first().map_or("—".into(), |v| format!("{} ms", ms(*v))),
        if seen.is_empty() { "—".into() } else { format!("{} ms", ms(percentile(&seen, 50.0))) },
        match (seen.last(), missing) {
            (Some(v), 0) => format!("{} ms", ms(*v)),
            (_, n) => format!("{n} not seen within {} s", PROBE_LIMIT.as_secs()),
        }
    );
}

fn main() {
    let args = parse_args();
    let started = Instant::now();
    let zipf = Zipf::new(args.keys, ZIPF_THETA);
    let order = shuffled(args.keys, 7);
    let work = Arc::new(Workload { by_rank: order.iter().map(|&i| key_of(i)).collect(), zipf });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("primary");
    let pool = value_pool(1);
    populate(&db, args.keys, &pool);
    eprintln!("filled {} keys in {:.1} s", args.keys, started.elapsed().as_secs_f64());
    let db_text = db.to_str().expect("a UTF-8 temporary path");
    let primary = Proc::start(
        "primary",
        &args.stampkv,
        &["serve", "--path", db_text, "--addr", "127.0.0.1:0", "--access-token", TOKEN],
    );
    println!(
        "Edge caches: {} keys [\"k\", i] of 100-byte values, Zipf s = {ZIPF_THETA} eventual reads \
         (top 20 keys: {:.1}% of reads, top 1,000: {:.1}%), {} closed-loop readers, {} ms WAN \
         delay, {} s per case after a {} s warm-up; load before: {}",
        args.keys,
        work.zipf.share_of_top(20, ZIPF_THETA) * 100.0,
        work.zipf.share_of_top(1000.min(args.keys), ZIPF_THETA) * 100.0,
        args.clients,
        args.delay_ms,
        args.seconds,
        args.warmup,
        loadavg()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let (cases, pull_stale) = runtime.block_on(async {
        let mut cases = Vec::new();
        for (i, mode) in [Mode::Direct, Mode::Pull, Mode::Push].into_iter().enumerate() {
            let case = run_case(&args, &primary, &work, mode, 100 + i as u64).await;
            for w in &case.windows {
                eprintln!(
                    "{} ({}): {} over {} reads",
                    case.name,
                    w.label,
                    rate_text(w.figures.rate),
                    w.figures.reads
                );
            }
            eprintln!("{:.1} s since start", started.elapsed().as_secs_f64());
            cases.push(case);
        }
        let pull_stale = pull_staleness(&args, &primary, &work, 200).await;
        (cases, pull_stale)
    });
    let primary_rss = peak_rss(primary.pid());
    drop(primary);

    println!();
    println!("| case | window | reads/s | p50 ms | p99 ms | p99.9 ms | hit ratio | upstream reads | edge peak RSS | edge bytes held |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for case in &cases {
        for w in &case.windows {
            print_row(case, w);
        }
    }
    println!();
    println!("| edge case | window | throughput edge / direct | p50 edge / direct | p99 edge / direct |");
    println!("|---|---|---:|---:|---:|");
    let direct = &cases[0].windows[0].figures;
    for case in &cases[1..] {
        for w in &case.windows {
            let f = &w.figures;
            println!(
                "| {} | {} | {:.1}× | {:.3} | {:.3} |",
                case.name,
                w.label,
                f.rate / direct.rate,
                f.p50 / direct.p50,
                f.p99 / direct.p99
            );
        }
    }
    println!();
    println!("CPU per read (µs; clients = this process, with the writer and prober idle):");
    for case in &cases {
        for w in &case.windows {
            let [clients, primary, edge] = w.cpu_us_per_read;
            let misses = w.counters.map_or(String::new(), |c| {
                format!(
                    "; {:.0} misses, {:.0} upstream reads, {:.0} refreshes",
                    c.misses, c.upstream_reads, c.refreshes
                )
            });
            println!(
                "- {} ({}): clients {clients:.0}, primary {primary:.0}, edge {edge:.0}{misses}",
                case.name, w.label
            );
        }
    }
    println!("primary peak RSS {}", mib(primary_rss as f64));
    println!();
    println!(
        "| staleness after a write at the primary | edge TTL | hot keys written | write every | min | p50 | max |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    print_staleness("edge, pull", &pull_stale, &args);
    if let Some(s) = cases.iter().find_map(|c| c.staleness.as_ref()) {
        print_staleness("edge, push", s, &args);
    }
    println!("\nload after: {}; total {:.0} s", loadavg(), started.elapsed().as_secs_f64());
    if let Some(path) = &args.chart {
        let mut series = Vec::new();
        for case in &cases {
            for w in &case.windows {
                series.push((format!("{} ({})", case.name, w.label), w.figures.latencies.clone()));
            }
        }
        let caption = format!(
            "Eventual reads, Zipf 0.99 over {} keys, {} readers, {} ms WAN delay",
            args.keys, args.clients, args.delay_ms
        );
        stampkv_benches::chart::latency_cdf_series(path, &caption, &series).unwrap();
        println!("chart: {}", path.display());
    }
}
