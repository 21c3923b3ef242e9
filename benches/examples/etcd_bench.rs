//! `stampkv serve --etcd` against etcd itself, side by side in one run on one 3-member etcd
//! cluster on loopback (started by this program; `/dev/shm` data directories):
//!
//! ```text
//! cargo build --release -p stampkv-cli
//! cargo run --release -p stampkv-benches --example etcd_bench -- \
//!     [--stampkv target/release/stampkv] [--seconds 5] [--clients 32] [--keys 10000]
//! ```
//! With `STAMPKV_ETCD_DIR=DIR` the members keep their data in DIR (a real disk) instead of
//! `/dev/shm`.
//!
//! Workloads (each for `--seconds`, from `--clients` concurrent clients):
//! - `etcd put`: plain single-key puts of fresh keys (100-byte values) with the `etcd-client`
//!   crate (the library the cluster store uses), all clients on one connection as that
//!   crate multiplexes;
//! - `stampkv commit`: durable `check(key, null) + set(key, 100 bytes)` atomics on fresh keys
//!   through one `stampkv serve --etcd` process, from `--clients` KV Connect clients (the
//!   Rust `stampkv-client`), each with its own connection;
//! - `etcd get` linearizable / serializable against `stampkv get` strong / eventual: point
//!   reads of `--keys` preloaded keys.
//!
//! Prints throughput, p50/p99 latency, the ratios, what one commit cost in etcd
//! transactions (from the server's `/metrics`), and the CPU time per operation of etcd,
//! the server and the clients.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "benchmark driver: a failed operation aborts the measurement"
)]

use stampkv::{key, Consistency, Key, KvValue};
use stampkv_client::{ConnectOptions, RemoteKv};
use stampkv_testkit::etcd::EtcdCluster;
use stampkv_testkit::SplitMix64;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "etcd-bench-token-0123456789";

struct Args {
    stampkv: PathBuf,
    seconds: f64,
    clients: usize,
    keys: u64,
}

fn parse_args() -> Args {
    let mut args =
        Args { stampkv: PathBuf::from("target/release/stampkv"), seconds: 5.0, clients: 32, keys: 10_000 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--stampkv" => args.stampkv = PathBuf::from(value),
            "--seconds" => args.seconds = value.parse().expect("--seconds"),
            "--clients" => args.clients = value.parse().expect("--clients"),
            "--keys" => args.keys = value.parse().expect("--keys"),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// Throughput, latencies and CPU time of one workload.
struct Measured {
    ops: usize,
    seconds: f64,
    latencies: Vec<Duration>,
    cpu: CpuSplit,
}

/// CPU seconds spent during a workload: by the whole machine, by `stampkv serve` and by
/// this program (the clients); the rest is etcd's (and whatever else ran).
#[derive(Clone, Copy, Default)]
struct CpuSplit {
    machine: f64,
    server: f64,
    clients: f64,
}

impl CpuSplit {
    /// The CPU seconds used so far (since boot for the machine, since start for processes).
    fn now(server: u32) -> CpuSplit {
        CpuSplit {
            machine: machine_busy_seconds(),
            server: process_seconds(&server.to_string()),
            clients: process_seconds("self"),
        }
    }

    fn since(self, start: CpuSplit) -> CpuSplit {
        CpuSplit {
            machine: self.machine - start.machine,
            server: self.server - start.server,
            clients: self.clients - start.clients,
        }
    }

    /// Microseconds of CPU per operation: etcd (and the rest), server, clients.
    fn per_op(&self, ops: usize) -> String {
        let us = |s: f64| 1e6 * s / ops.max(1) as f64;
        let etcd = (self.machine - self.server - self.clients).max(0.0);
        format!(
            "CPU per op: etcd {:.0} us, server {:.0} us, clients {:.0} us",
            us(etcd),
            us(self.server),
            us(self.clients)
        )
    }
}

/// Clock ticks per second of `/proc` times (`getconf CLK_TCK`; 100 on Linux).
const TICKS: f64 = 100.0;

/// Busy CPU seconds of the machine since boot (`/proc/stat`: all but idle and iowait).
fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<f64> =
        stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let total: f64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0.0) + fields.get(4).copied().unwrap_or(0.0);
    (total - idle) / TICKS
}

/// User plus system CPU seconds of process `pid` (`/proc/<pid>/stat`; "self" for this one).
fn process_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) end with ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / TICKS
}

impl Measured {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.seconds
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted.get(at).copied().unwrap_or_default()
    }
}

/// Runs `op(client, i)` from `clients` tasks for `seconds`; `op` returns after one request.
/// `server` is the pid of `stampkv serve`, whose CPU time is counted apart.
async fn drive<F, Fut>(server: u32, clients: usize, seconds: f64, op: F) -> Measured
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let cpu = CpuSplit::now(server);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                op(c, i).await;
                latencies.push(t.elapsed());
                i += 1;
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let cpu = CpuSplit::now(server).since(cpu);
    Measured { ops: latencies.len(), seconds: started.elapsed().as_secs_f64(), latencies, cpu }
}

/// The machine's cores.
fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

fn value() -> Vec<u8> {
    vec![b'v'; 100]
}

/// Starts `stampkv serve --etcd` and returns it with its URL.
fn start_server(args: &Args, endpoints: &str) -> (std::process::Child, String) {
    let mut child = Command::new(&args.stampkv)
        .args(["serve", "--etcd", endpoints, "--etcd-prefix", "bench/", "--addr", "127.0.0.1:0"])
        .args(["--access-token", TOKEN])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", args.stampkv.display()));
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("msg=\"listening\"") {
                if let Some(addr) = line.split("addr=").nth(1).and_then(|s| s.split_whitespace().next()) {
                    let _ = tx.send(addr.to_string());
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).expect("the server did not start listening");
    (child, format!("http://{addr}"))
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn row(name: &str, m: &Measured) {
    println!(
        "{name:<34} {:>10.0}/s  p50 {:>8.2} ms  p99 {:>8.2} ms  ({} ops; machine {:.0}% busy; {})",
        m.rate(),
        m.percentile(0.5).as_secs_f64() * 1e3,
        m.percentile(0.99).as_secs_f64() * 1e3,
        m.ops,
        100.0 * m.cpu.machine / (m.seconds * cores()),
        m.cpu.per_op(m.ops)
    );
}

fn main() {
    let args = parse_args();
    let cluster = EtcdCluster::start(3).expect("start a 3-member etcd cluster (is etcd installed?)");
    let endpoints = cluster.endpoints_arg();
    println!(
        "etcd_bench: 3 etcd members on loopback, {} clients, {} s per workload, {} keys for reads",
        args.clients, args.seconds, args.keys
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let (server, url) = start_server(&args, &endpoints);
    let server_pid = server.id();
    runtime.block_on(async {
        // Plain etcd puts and gets with the same client library as the cluster store.
        let etcd = etcd_client::Client::connect(cluster.endpoints(), None).await.unwrap();
        let kv = etcd.kv_client();
        let put = {
            let kv = kv.clone();
            drive(server_pid, args.clients, args.seconds, move |c, i| {
                let mut kv = kv.clone();
                async move {
                    kv.put(format!("plain/put/{c}/{i}"), value(), None).await.unwrap();
                }
            })
            .await
        };
        for i in 0..args.keys {
            kv.clone().put(format!("plain/get/{i}"), value(), None).await.unwrap();
        }
        let keys = args.keys;
        let etcd_get = |serializable: bool| {
            let kv = kv.clone();
            drive(server_pid, args.clients, args.seconds, move |c, i| {
                let mut kv = kv.clone();
                let n = SplitMix64::new((c as u64) << 32 | i).next_u64() % keys;
                async move {
                    let options = serializable.then(|| etcd_client::GetOptions::new().with_serializable());
                    let got = kv.get(format!("plain/get/{n}"), options).await.unwrap();
                    assert_eq!(got.kvs().len(), 1);
                }
            })
        };
        let etcd_linearizable = etcd_get(false).await;
        let etcd_serializable = etcd_get(true).await;

        // The same through `stampkv serve --etcd`.
        let mut clients = Vec::new();
        for _ in 0..args.clients {
            clients.push(Arc::new(RemoteKv::connect(&url, ConnectOptions::new(TOKEN)).await.unwrap()));
        }
        let clients = Arc::new(clients);
        let before = metrics(&url).await;
        let commit = {
            let clients = clients.clone();
            drive(server_pid, args.clients, args.seconds, move |c, i| {
                let kv = clients[c].clone();
                async move {
                    let key: Key = key!["commit", c as u64, i];
                    let done = kv
                        .atomic()
                        .check(&key, None)
                        .set(&key, &KvValue::Bytes(value()))
                        .commit()
                        .await
                        .unwrap();
                    assert!(done.ok());
                }
            })
            .await
        };
        let after = metrics(&url).await;
        let commits =
            metric(&after, "stampkv_etcd_commits_total") - metric(&before, "stampkv_etcd_commits_total");
        let batches = metric(&after, "stampkv_etcd_commit_batches_total")
            - metric(&before, "stampkv_etcd_commit_batches_total");
        let largest = metric(&after, "stampkv_etcd_largest_batch");
        let txn_seconds = metric(&after, "stampkv_etcd_transaction_seconds_sum")
            - metric(&before, "stampkv_etcd_transaction_seconds_sum");
        let txn_count = metric(&after, "stampkv_etcd_transaction_seconds_count")
            - metric(&before, "stampkv_etcd_transaction_seconds_count");
        let mut op = clients[0].atomic();
        for i in 0..args.keys {
            op = op.set(&key!["get", i], &KvValue::Bytes(value()));
            if i % 500 == 499 {
                op.commit().await.unwrap();
                op = clients[0].atomic();
            }
        }
        op.commit().await.unwrap();
        let stampkv_get = |consistency: Consistency| {
            let clients = clients.clone();
            drive(server_pid, args.clients, args.seconds, move |c, i| {
                let kv = clients[c].clone();
                let n = SplitMix64::new((c as u64) << 32 | i).next_u64() % keys;
                async move {
                    let got = kv.get_with::<KvValue>(&key!["get", n], consistency).await.unwrap();
                    assert!(got.versionstamp.is_some());
                }
            })
        };
        let reads_before = metric(&metrics(&url).await, "stampkv_etcd_read_seconds_count");
        let strong = stampkv_get(Consistency::Strong).await;
        let reads_between = metric(&metrics(&url).await, "stampkv_etcd_read_seconds_count");
        let eventual = stampkv_get(Consistency::Eventual).await;
        let reads_after = metric(&metrics(&url).await, "stampkv_etcd_read_seconds_count");

        println!();
        row("etcd put (single key)", &put);
        row("stampkv commit (check+set)", &commit);
        println!(
            "  ratio stampkv commits / etcd puts: {:.2}x; {:.0} commits in {:.0} etcd transactions \
             ({:.1} commits per transaction, largest group {largest:.0}; an etcd transaction took \
             {:.2} ms on average)",
            commit.rate() / put.rate(),
            commits,
            batches,
            commits / batches.max(1.0),
            1000.0 * txn_seconds / txn_count.max(1.0)
        );
        row("etcd get (linearizable)", &etcd_linearizable);
        row("stampkv get (strong)", &strong);
        println!(
            "  ratio: {:.2}x; {:.2} etcd reads per get",
            strong.rate() / etcd_linearizable.rate(),
            (reads_between - reads_before) / strong.ops.max(1) as f64
        );
        row("etcd get (serializable)", &etcd_serializable);
        row("stampkv get (eventual)", &eventual);
        println!(
            "  ratio: {:.2}x; {:.2} etcd reads per get",
            eventual.rate() / etcd_serializable.rate(),
            (reads_after - reads_between) / eventual.ops.max(1) as f64
        );
    });
    let mut server = server;
    let _ = server.kill();
    let _ = server.wait();
    drop(cluster);
}

async fn metrics(url: &str) -> String {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let out = Command::new("curl")
            .args(["-s", "-H", &format!("authorization: Bearer {TOKEN}"), &format!("{url}/metrics")])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .unwrap()
}
