//! Hostile clients against a real `stampkv serve` process: a well-behaved client keeps
//! reading and committing while other clients misbehave, phase by phase, and the server's
//! memory and open descriptors are read from `/proc`.
//!
//! ```text
//! cargo build --release -p stampkv-cli --bin stampkv
//! cargo run --release -p stampkv-netbench --example hostile -- target/release/stampkv --bench \
//!     [--seconds 10] [--watchers 1000] [--tsv benches/results/hostile.tsv --label NAME]
//! cargo run --release -p stampkv-netbench --example hostile -- target/release/stampkv --check
//! ```
//!
//! The server runs in a temporary directory on a loopback port with small limits
//! (`--max-connections 256 --idle-timeout-ms 2000 --body-timeout-ms 2000
//! --max-body-bytes 1048576 --max-watches 1010 --max-watches-per-connection 100
//! --shutdown-grace-ms 3000`; a flag its `serve --help` does not list is left out, so an
//! older binary runs with its defaults) and a soft descriptor limit of 512.
//!
//! Phases (the well-behaved client runs in each: 2 readers and 2 committers sharing one
//! HTTP/2 keep-alive connection, 2 ms between requests, plus a fresh HTTP/1.1 connection
//! every 250 ms for a metadata exchange and a read):
//! 0. baseline, no attack;
//! 1. idle sockets: 2x the connection cap sending nothing, and a quarter of the cap sending
//!    the HTTP/2 preface and SETTINGS, then nothing; each reconnects 1 s after the server
//!    closes it;
//! 2. bodies: 1 MB at one byte a second, shorter than their Content-Length (then silence,
//!    or then EOF), a never-ending chunked body, a Content-Length over the body limit;
//! 3. a snapshot read of 10 ranges x limit 1000 over 1,000 values of 64 KiB, again and again;
//! 4. 1,000 watch streams on one hot key (10 HTTP/2 connections x 100 streams) while a
//!    writer commits to that key, against the same writer with no watchers;
//! 5. SIGTERM while idle sockets, slow bodies and 200 watch streams are open.
//!
//! `--bench` prints a table; `--check` asserts behaviour only (never timing), prints
//! `N passed, M failed` and exits 1 if any check failed. Everything is bounded in time;
//! the server is killed at the end, also when a check fails or the program panics.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test and benchmark driver: a failed operation aborts the run"
)]

#[path = "hostile/attack.rs"]
mod attack;
#[path = "hostile/kvc.rs"]
mod kvc;
#[path = "hostile/server.rs"]
mod server;

use attack::{Bodies, BodyKind, Idle, Outcome, OverLimit};
use kvc::{Conn, HotWriter, Probe, ProbeConfig, ProbeReport, Target, Watchers};
use server::{Limits, ProcSample, Sampler, ServerProcess};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

struct Args {
    bin: PathBuf,
    check: bool,
    seconds: f64,
    watchers: usize,
    big_values: usize,
    /// Idle sockets of phase 1 that send the HTTP/2 preface (default: a quarter of the cap).
    h2_idle: Option<usize>,
    limits: Limits,
    tsv: Option<PathBuf>,
    label: String,
}

fn parse_args() -> Args {
    let mut bin = None;
    let mut mode = None;
    let mut seconds = None;
    let mut args = Args {
        bin: PathBuf::new(),
        check: false,
        seconds: 0.0,
        watchers: 1000,
        big_values: 1000,
        h2_idle: None,
        limits: Limits {
            max_connections: 256,
            idle_timeout: Duration::from_millis(2000),
            body_timeout: Duration::from_millis(2000),
            max_body_bytes: 1 << 20,
            max_watches: 1010,
            max_watches_per_connection: 100,
            shutdown_grace: Duration::from_millis(3000),
            nofile_soft: 512,
        },
        tsv: None,
        label: String::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--bench" => mode = Some(false),
            "--check" => mode = Some(true),
            "--seconds" => seconds = Some(value().parse::<f64>().expect("--seconds")),
            "--watchers" => args.watchers = value().parse().expect("--watchers"),
            "--big-values" => args.big_values = value().parse().expect("--big-values"),
            "--max-connections" => args.limits.max_connections = value().parse().expect("--max-connections"),
            "--idle-timeout-ms" => {
                args.limits.idle_timeout = Duration::from_millis(value().parse().expect("--idle-timeout-ms"));
            }
            "--body-timeout-ms" => {
                args.limits.body_timeout = Duration::from_millis(value().parse().expect("--body-timeout-ms"));
            }
            "--shutdown-grace-ms" => {
                args.limits.shutdown_grace =
                    Duration::from_millis(value().parse().expect("--shutdown-grace-ms"));
            }
            "--h2-idle" => args.h2_idle = Some(value().parse().expect("--h2-idle")),
            "--nofile" => args.limits.nofile_soft = value().parse().expect("--nofile"),
            "--tsv" => args.tsv = Some(value().into()),
            "--label" => args.label = value(),
            "-h" | "--help" => {
                println!(
                    "usage: hostile STAMPKV_BIN (--bench | --check) [--seconds S] [--watchers N] \
                     [--big-values N] [--max-connections N] [--idle-timeout-ms N] [--body-timeout-ms N] \
                     [--shutdown-grace-ms N] [--h2-idle N] [--nofile N] [--tsv FILE] [--label TEXT]"
                );
                std::process::exit(0);
            }
            other if !other.starts_with("--") && bin.is_none() => bin = Some(PathBuf::from(other)),
            other => panic!("unknown argument {other} (see --help)"),
        }
    }
    args.bin = bin.expect("the path of the stampkv binary is required (see --help)");
    args.check = mode.expect("--bench or --check is required");
    args.seconds = seconds.unwrap_or(if args.check { 3.0 } else { 10.0 });
    let per_connection = args.limits.max_watches_per_connection;
    assert!(
        args.watchers >= per_connection && args.watchers.is_multiple_of(per_connection),
        "--watchers: a multiple of 100"
    );
    args.limits.max_watches = args.watchers + 10;
    args
}

/// Pass/fail of each behaviour asserted.
#[derive(Default)]
struct Checks {
    passed: usize,
    failed: Vec<String>,
}

impl Checks {
    fn check(&mut self, name: &str, ok: bool, detail: impl AsRef<str>) {
        let detail = detail.as_ref();
        if ok {
            self.passed += 1;
            println!("  ok    {name}: {detail}");
        } else {
            self.failed.push(format!("{name}: {detail}"));
            println!("  FAIL  {name}: {detail}");
        }
    }
}

/// One line of the table.
struct Row {
    phase: String,
    probe: ProbeReport,
    peak: ProcSample,
    end: ProcSample,
    note: String,
}

/// CPU time of the server and of this program over a window.
struct Cpu {
    pid: String,
    server: f64,
    client: f64,
    since: Instant,
}

impl Cpu {
    fn start(pid: u32) -> Cpu {
        let pid = pid.to_string();
        Cpu {
            server: server::cpu_seconds(&pid),
            client: server::cpu_seconds("self"),
            pid,
            since: Instant::now(),
        }
    }

    /// "server CPU x s, client CPU y s over z s".
    fn finish(self) -> String {
        format!(
            "CPU over {:.1} s: server {:.1} s, clients {:.1} s",
            self.since.elapsed().as_secs_f64(),
            server::cpu_seconds(&self.pid) - self.server,
            server::cpu_seconds("self") - self.client
        )
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
}

fn mib(kib: u64) -> String {
    format!("{:.0}", kib as f64 / 1024.0)
}

fn pair(sorted: &[Duration]) -> String {
    format!("{} / {}", ms(kvc::quantile(sorted, 0.5)), ms(kvc::quantile(sorted, 0.99)))
}

fn probe_config(check: bool) -> ProbeConfig {
    ProbeConfig {
        getters: 2,
        setters: 2,
        pause: Duration::from_millis(2),
        fresh_every: Duration::from_millis(250),
        // A request unanswered for this long failed (the server is meant to answer in ms).
        timeout: Duration::from_secs(if check { 5 } else { 10 }),
        fresh_timeout: Duration::from_secs(5),
    }
}

fn describe_failures(probe: &ProbeReport) -> String {
    let mut text =
        format!("{} ok, {} failed, {} keep-alive reopenings", probe.ok(), probe.failed, probe.reconnects);
    if let Some(e) = probe.errors.first() {
        text.push_str(&format!(" (first error: {e})"));
    }
    text
}

async fn sleep_secs(seconds: f64) {
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
}

fn main() {
    let args = parse_args();
    // Every run is bounded: past the limit the server is killed and the run fails.
    let limit = Duration::from_secs(if args.check { 88 } else { 1800 });
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        let pid = server::SERVER_PID.load(Ordering::SeqCst);
        if pid != 0 {
            let _ = std::process::Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
        }
        eprintln!("hostile: the run took longer than {limit:?}; server killed");
        std::process::exit(1);
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // The watch streams' own runtime (one thread).
    let watch_runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let code = runtime.block_on(run(&args, watch_runtime.handle()));
    watch_runtime.shutdown_timeout(Duration::from_secs(2));
    runtime.shutdown_timeout(Duration::from_secs(2));
    std::process::exit(code);
}

async fn run(args: &Args, watch_runtime: &tokio::runtime::Handle) -> i32 {
    let started = Instant::now();
    let limits = &args.limits;
    let cap = limits.max_connections;
    let mut server = ServerProcess::start(&args.bin, kvc::TOKEN, limits);
    println!("server {} pid {} on {}", args.bin.display(), server.pid, server.addr);
    println!("  flags passed: {}", server.passed.join(" "));
    if !server.missing.is_empty() {
        println!("  flags this binary does not know (its defaults apply): {}", server.missing.join(" "));
    }
    let grace_passed = server.missing.iter().all(|f| f != "--shutdown-grace-ms");
    // Without the flag the documented default grace applies.
    let grace = if grace_passed { limits.shutdown_grace } else { Duration::from_secs(10) };
    let mut target = Target { addr: server.addr, token: kvc::TOKEN.to_owned(), db_id: String::new() };
    let mut conn = Conn::H1(kvc::connect_h1(server.addr).await.expect("connect"));
    target.db_id = kvc::metadata(&mut conn, &target).await.expect("metadata exchange");
    drop(conn);
    let probe_config = probe_config(args.check);
    // The well-behaved client's keep-alive connection, opened before any attack.
    let keepalive = kvc::keepalive_connection(server.addr).await.expect("keep-alive connection");
    let mut checks = Checks::default();
    let mut rows = Vec::new();
    let s = args.seconds;

    // 0. Baseline.
    println!("\nphase 0: baseline");
    let sampler = Sampler::start(server.pid);
    let probe = Probe::start(&target, &keepalive, &probe_config, "p0");
    sleep_secs(s).await;
    let probe = probe.finish().await;
    let (peak, end) = sampler.finish();
    let base_fds = end.fds;
    checks.check("baseline: well-behaved requests succeed", probe.failed == 0, describe_failures(&probe));
    let anonymous = attack::get_status(server.addr, "/metrics", false).await;
    let with_token = attack::get_status(server.addr, "/metrics", true).await;
    checks.check(
        "GET /metrics needs the bearer token",
        anonymous == Some(401) && with_token == Some(200),
        format!("without token {anonymous:?}, with token {with_token:?} (expected 401, 200)"),
    );
    let mut note = format!("server fds {base_fds}");
    match server::nofile_limits(server.pid) {
        Some((soft, hard))
            if limits.nofile_soft > 0 && hard.parse::<u64>().is_ok_and(|h| h > limits.nofile_soft) =>
        {
            checks.check(
                "RLIMIT_NOFILE raised to its hard limit",
                soft == hard,
                format!("started with soft {}: now soft {soft}, hard {hard}", limits.nofile_soft),
            );
            note.push_str(&format!(", nofile {soft}/{hard}"));
        }
        other => println!("  (descriptor limit not checked: {other:?})"),
    }
    rows.push(Row { phase: "0 baseline".into(), probe, peak, end, note });

    // 1. Idle sockets beyond the connection cap.
    let (silent_n, h2_n) = (2 * cap, args.h2_idle.unwrap_or(cap / 4));
    println!("\nphase 1: {silent_n} silent sockets and {h2_n} HTTP/2 prefaces then silence (cap {cap})");
    let accept_failures_before = server.accept_failures();
    let sampler = Sampler::start(server.pid);
    let silent = Idle::start(server.addr, silent_n, false, Duration::from_secs(1));
    let h2 = Idle::start(server.addr, h2_n, true, Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(3);
    while silent.counts.connected.load(Ordering::Relaxed) + h2.counts.connected.load(Ordering::Relaxed)
        < (silent_n + h2_n) as u64
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let probe = Probe::start(&target, &keepalive, &probe_config, "p1");
    sleep_secs(s.max(limits.idle_timeout.as_secs_f64() + 3.0)).await;
    let probe = probe.finish().await;
    let (peak, end) = sampler.finish();
    let (sc, hc) = (&silent.counts, &h2.counts);
    let closed_sockets =
        sc.sockets_closed.load(Ordering::Relaxed) + hc.sockets_closed.load(Ordering::Relaxed);
    let connected = sc.connected.load(Ordering::Relaxed) + hc.connected.load(Ordering::Relaxed);
    let closes = sc.closed.load(Ordering::Relaxed) + hc.closed.load(Ordering::Relaxed);
    let accept_failures = server.accept_failures() - accept_failures_before;
    // The keep-alive connection may be closed by an eviction just as a request goes out.
    const EVICTION_FAILURES: u64 = 2;
    checks.check(
        "idle sockets: well-behaved requests succeed",
        probe.fresh_failed == 0 && probe.failed - probe.fresh_failed <= EVICTION_FAILURES,
        format!(
            "{}, {} of them on fresh connections (none may fail; at most {EVICTION_FAILURES} on the keep-alive connection, to an eviction)",
            describe_failures(&probe),
            probe.fresh_failed
        ),
    );
    let fd_limit = cap as u64 + base_fds + 16;
    checks.check(
        "idle sockets: server descriptors stay near the cap",
        peak.fds <= fd_limit,
        format!("peak {} fds, limit cap {cap} + baseline {base_fds} + 16 = {fd_limit}", peak.fds),
    );
    let must_close = (silent_n + h2_n - cap) as u64;
    checks.check(
        "idle sockets: the server closes idle sockets beyond the cap",
        closed_sockets >= must_close,
        format!(
            "{closed_sockets} of {} attackers closed by the server at least once (need {must_close})",
            silent_n + h2_n
        ),
    );
    let h2_closed = hc.sockets_closed.load(Ordering::Relaxed);
    checks.check(
        "idle sockets: HTTP/2 connections idle past --idle-timeout-ms are closed",
        h2_closed == h2_n as u64 && h2_n > 0,
        format!("{h2_closed} of {h2_n} closed"),
    );
    let mut lifetimes: Vec<Duration> =
        silent.lifetimes.lock().unwrap().iter().chain(h2.lifetimes.lock().unwrap().iter()).copied().collect();
    lifetimes.sort();
    let note = format!(
        "{connected} attacker connections, {closes} closed by the server (median after {} ms); {accept_failures} accept failures logged",
        ms(kvc::quantile(&lifetimes, 0.5))
    );
    silent.finish().await;
    h2.finish().await;
    rows.push(Row { phase: "1 idle sockets".into(), probe, peak, end, note });
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 2. Slow, short and endless bodies.
    let per_kind = if args.check { 4 } else { 8 };
    println!("\nphase 2: misbehaving bodies ({per_kind} clients of each kind)");
    let sampler = Sampler::start(server.pid);
    let bodies = Bodies::start(&target, per_kind, limits.max_body_bytes);
    let probe = Probe::start(&target, &keepalive, &probe_config, "p2");
    let window = s.max(limits.body_timeout.as_secs_f64() + 4.0);
    sleep_secs(window).await;
    let probe = probe.finish().await;
    let attempts = bodies.finish().await;
    let (peak, end) = sampler.finish();
    checks.check("bodies: well-behaved requests succeed", probe.failed == 0, describe_failures(&probe));
    let due = limits.body_timeout + Duration::from_secs(3);
    let mut notes = Vec::new();
    for kind in BodyKind::ALL {
        let of_kind: Vec<_> = attempts.iter().filter(|a| a.kind == kind).collect();
        let expected = kind.expected();
        let mut answered = 0;
        let mut wrong = Vec::new();
        for a in &of_kind {
            match a.outcome {
                Outcome::Status(status) if status == expected && a.after <= due => answered += 1,
                Outcome::Pending if a.after < due => {}
                outcome => wrong.push(format!("{outcome:?} after {:.1} s", a.after.as_secs_f64())),
            }
        }
        wrong.truncate(3);
        checks.check(
            &format!("bodies: {} -> {expected}", kind.name()),
            answered > 0 && wrong.is_empty(),
            format!(
                "{answered} of {} requests answered {expected} within {:.0} s{}",
                of_kind.len(),
                due.as_secs_f64(),
                if wrong.is_empty() { String::new() } else { format!("; others: {}", wrong.join(", ")) }
            ),
        );
        let mut seen = std::collections::BTreeMap::<String, usize>::new();
        for a in &of_kind {
            let what = match a.outcome {
                Outcome::Status(st) => st.to_string(),
                Outcome::Closed => "closed".into(),
                Outcome::Pending => "unanswered".into(),
            };
            *seen.entry(what).or_default() += 1;
        }
        let seen: Vec<String> = seen.into_iter().map(|(what, n)| format!("{n}x {what}")).collect();
        notes.push(format!("{}: {}", kind.short(), seen.join(" ")));
    }
    rows.push(Row { phase: "2 slow/short bodies".into(), probe, peak, end, note: notes.join("; ") });
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 3. The over-limit read.
    println!("\nphase 3: snapshot read of 10 ranges x limit 1000 over {} values of 64 KiB", args.big_values);
    let filled = Instant::now();
    attack::fill_big(&target, args.big_values, 65536, 10).await.expect("writing the 64 KiB values");
    println!("  wrote {} values in {:.1} s", args.big_values, filled.elapsed().as_secs_f64());
    let before = server::sample(server.pid);
    let sampler = Sampler::start(server.pid);
    let over = OverLimit::start(&target);
    let probe = Probe::start(&target, &keepalive, &probe_config, "p3");
    sleep_secs(s).await;
    let probe = probe.finish().await;
    let statuses = over.finish().await;
    let (peak, end) = sampler.finish();
    let after = server::sample(server.pid);
    checks.check(
        "over-limit read: well-behaved requests succeed",
        probe.failed == 0,
        describe_failures(&probe),
    );
    let refused = statuses.iter().filter(|(st, _)| *st == 400).count();
    let mut shown: Vec<String> =
        statuses.iter().take(5).map(|(st, d)| format!("{st} in {} ms", d.as_millis())).collect();
    if statuses.len() > 5 {
        shown.push("...".into());
    }
    checks.check(
        "over-limit read: refused with 400",
        refused == statuses.len() && refused > 0,
        format!("{refused} of {} answered 400 ({})", statuses.len(), shown.join(", ")),
    );
    let growth = after.hwm_kib.saturating_sub(before.hwm_kib);
    checks.check(
        "over-limit read: server memory does not balloon",
        growth <= 64 * 1024,
        format!(
            "peak RSS (VmHWM) {} -> {} MiB (+{} MiB, limit +64)",
            mib(before.hwm_kib),
            mib(after.hwm_kib),
            mib(growth)
        ),
    );
    rows.push(Row {
        phase: "3 over-limit read".into(),
        probe,
        peak,
        end,
        note: format!("{} reads: {refused} x 400; VmHWM +{} MiB", statuses.len(), mib(growth)),
    });
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 4. Watch streams on a hot key.
    let hot = kvc::key(&["hot"]);
    {
        let mut c = Conn::H1(kvc::connect_h1(server.addr).await.expect("connect"));
        kvc::set(&mut c, &target, &[(hot.clone(), 0u64.to_le_bytes().to_vec())]).await.expect("set hot key");
    }
    println!("\nphase 4a: hot key writer, no watchers");
    let sampler = Sampler::start(server.pid);
    let cpu = Cpu::start(server.pid);
    let probe = Probe::start(&target, &keepalive, &probe_config, "p4a");
    let writer = HotWriter::start(&target, hot.clone(), 1);
    sleep_secs(s).await;
    let quiet = writer.finish().await;
    let probe = probe.finish().await;
    let (peak, end) = sampler.finish();
    let quiet_cpu = cpu.finish();
    let quiet_rate = quiet.latencies.len() as f64 / quiet.elapsed.as_secs_f64();
    checks.check(
        "hot key, no watchers: well-behaved requests succeed",
        probe.failed == 0,
        describe_failures(&probe),
    );
    let quiet_probe_set = kvc::quantile(&probe.sets, 0.5);
    rows.push(Row {
        phase: "4a hot key, 0 watchers".into(),
        probe,
        peak,
        end,
        note: format!(
            "hot commits {quiet_rate:.0}/s (p50 {} ms, {} failed); {quiet_cpu}",
            ms(kvc::quantile(&quiet.latencies, 0.5)),
            quiet.failed
        ),
    });

    let per_connection = limits.max_watches_per_connection;
    let connections = args.watchers / per_connection;
    println!(
        "\nphase 4b: hot key writer, {} watchers ({connections} HTTP/2 connections x {per_connection})",
        args.watchers
    );
    let last_value = quiet.last;
    let opening = Instant::now();
    let watchers = Watchers::open(watch_runtime, &target, &hot, connections, per_connection).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while watchers.answered() < args.watchers && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let opened = watchers.opened.load(Ordering::SeqCst);
    while watchers.seeing(last_value) < opened && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let initial = watchers.seeing(last_value);
    println!(
        "  {opened} streams open, {initial} delivered the current value, in {:.1} s",
        opening.elapsed().as_secs_f64()
    );
    let refused: Vec<u16> = watchers.refused.lock().unwrap().clone();
    checks.check(
        "watchers: all streams open",
        opened == args.watchers,
        format!(
            "{opened} of {} open; refused: {:?}",
            args.watchers,
            refused.iter().take(5).collect::<Vec<_>>()
        ),
    );
    let sampler = Sampler::start(server.pid);
    let frames_before = watchers.frames.load(Ordering::SeqCst);
    let cpu = Cpu::start(server.pid);
    let probe = Probe::start(&target, &keepalive, &probe_config, "p4b");
    let writer = HotWriter::start(&target, hot.clone(), last_value + 1);
    sleep_secs(s).await;
    let busy = writer.finish().await;
    let probe = probe.finish().await;
    let busy_cpu = cpu.finish();
    let stopped = Instant::now();
    let deadline = stopped + Duration::from_secs(10);
    while watchers.seeing(busy.last) < opened && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let delivered = watchers.seeing(busy.last);
    let lag = stopped.elapsed();
    let (peak, end) = sampler.finish();
    let frames = watchers.frames.load(Ordering::SeqCst) - frames_before;
    let busy_rate = busy.latencies.len() as f64 / busy.elapsed.as_secs_f64();
    checks.check(
        "hot key, watchers: well-behaved requests succeed",
        probe.failed == 0,
        describe_failures(&probe),
    );
    checks.check(
        "watchers: every stream delivers the last commit",
        opened > 0 && delivered == opened,
        format!(
            "{delivered} of {opened} saw value {} ({:.2} s after the writer stopped); {frames} change frames",
            busy.last,
            lag.as_secs_f64()
        ),
    );
    // The per-connection and the global watch limits.
    let extra = match watchers.connections.first() {
        Some(first) => watchers.one_more(&target, &hot, first).await,
        None => Err("no watch connection".into()),
    };
    checks.check(
        "watchers: a stream beyond --max-watches-per-connection gets 429",
        extra == Ok(429),
        format!("{extra:?} for stream {} on one connection", per_connection + 1),
    );
    let mut global = Vec::new();
    if let Ok(sender) = kvc::connect_h2(server.addr).await {
        for _ in 0..=limits.max_watches.saturating_sub(opened) {
            let status = watchers.one_more(&target, &hot, &sender).await;
            let refused = status != Ok(200);
            global.push(status);
            if refused {
                break;
            }
        }
    }
    let first_refusal = global.iter().find(|st| **st != Ok(200)).cloned();
    checks.check(
        "watchers: a stream beyond --max-watches gets 503",
        first_refusal == Some(Ok(503)),
        format!(
            "{} more streams accepted on a new connection, then {first_refusal:?} (--max-watches {})",
            global.iter().filter(|st| **st == Ok(200)).count(),
            limits.max_watches
        ),
    );
    let busy_probe_set = kvc::quantile(&probe.sets, 0.5);
    rows.push(Row {
        phase: format!("4b hot key, {} watchers", args.watchers),
        probe,
        peak,
        end,
        note: format!(
            "hot commits {busy_rate:.0}/s (p50 {} ms, {} failed), {:.2}x of 0 watchers; unrelated set p50 {:.2}x; {frames} change frames; {busy_cpu}",
            ms(kvc::quantile(&busy.latencies, 0.5)),
            busy.failed,
            busy_rate / quiet_rate.max(1e-9),
            busy_probe_set
                .zip(quiet_probe_set)
                .map_or(0.0, |(b, q)| b.as_secs_f64() / q.as_secs_f64().max(1e-9))
        ),
    });
    watchers.close().await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 5. SIGTERM during an attack.
    println!(
        "\nphase 5: SIGTERM with idle sockets, slow bodies and 200 watch streams open (grace {grace:?})"
    );
    let sampler = Sampler::start(server.pid);
    let silent = Idle::start(server.addr, cap / 2, false, Duration::from_secs(1));
    let h2 = Idle::start(server.addr, cap / 16, true, Duration::from_secs(1));
    let bodies = Bodies::start(&target, 2, limits.max_body_bytes);
    let watchers = Watchers::open(watch_runtime, &target, &hot, 2, per_connection).await;
    let probe = Probe::start(&target, &keepalive, &probe_config, "p5");
    let deadline = Instant::now() + Duration::from_secs(10);
    while watchers.answered() < 2 * per_connection && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sleep_secs(s.min(2.0)).await;
    let probe = probe.finish().await;
    let open_streams = watchers.opened.load(Ordering::SeqCst);
    let signalled = Instant::now();
    server.terminate();
    let wait_limit = grace + Duration::from_secs(2);
    let mut status = None;
    while signalled.elapsed() < wait_limit {
        if let Some(st) = server.try_exit() {
            status = Some(st);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let exit_after = signalled.elapsed();
    let (ended, latest) = watchers.ended_count();
    let (peak, end) = sampler.finish();
    if status.is_none() {
        server.kill();
    }
    // After the grace period the server closes what is left and then the database.
    const CLOSE_SLACK: Duration = Duration::from_secs(1);
    checks.check(
        "SIGTERM: the process exits within the grace period",
        status.is_some() && exit_after <= grace + CLOSE_SLACK,
        match status {
            Some(st) => format!(
                "exited ({st}) {:.2} s after SIGTERM (grace {:.1} s, + {:.0} s to close the database)",
                exit_after.as_secs_f64(),
                grace.as_secs_f64(),
                CLOSE_SLACK.as_secs_f64()
            ),
            None => format!("still running {:.1} s after SIGTERM: killed", exit_after.as_secs_f64()),
        },
    );
    checks.check("SIGTERM: the exit is clean", status.is_some_and(|st| st.success()), format!("{status:?}"));
    let streams_end = latest.map(|t| t.saturating_duration_since(signalled));
    checks.check(
        "SIGTERM: watch streams end at once",
        open_streams > 0 && ended == open_streams && streams_end.is_some_and(|d| d <= Duration::from_secs(1)),
        format!(
            "{ended} of {open_streams} streams ended, the last {} ms after SIGTERM (limit 1000 ms)",
            streams_end.map_or_else(|| "-".into(), |d| d.as_millis().to_string())
        ),
    );
    watchers.close().await;
    silent.finish().await;
    h2.finish().await;
    bodies.finish().await;
    rows.push(Row {
        phase: "5 SIGTERM under attack".into(),
        probe,
        peak,
        end,
        note: match status {
            Some(_) => format!("exit {:.2} s after SIGTERM", exit_after.as_secs_f64()),
            None => format!("no exit within {:.1} s (killed)", exit_after.as_secs_f64()),
        },
    });
    drop(server);

    print_table(&rows);
    if let Some(path) = &args.tsv {
        write_tsv(path, &args.label, &rows);
    }
    if !checks.failed.is_empty() {
        println!("\nfailed checks:");
        for failure in &checks.failed {
            println!("  {failure}");
        }
    }
    println!("\nhostile clients: {:.0} s", started.elapsed().as_secs_f64());
    println!("{} passed, {} failed", checks.passed, checks.failed.len());
    i32::from(args.check && !checks.failed.is_empty())
}

fn print_table(rows: &[Row]) {
    println!("\nwell-behaved client (latency ms p50 / p99) and server resources, per phase:\n");
    println!(
        "| phase | get | set | fresh connection | ok | failed | RSS end / peak MiB | VmHWM MiB | fds peak | notes |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |",
            r.phase,
            pair(&r.probe.gets),
            pair(&r.probe.sets),
            pair(&r.probe.fresh),
            r.probe.ok(),
            r.probe.failed,
            mib(r.end.rss_kib),
            mib(r.peak.rss_kib),
            mib(r.peak.hwm_kib),
            r.peak.fds,
            r.note
        );
    }
}

fn write_tsv(path: &PathBuf, label: &str, rows: &[Row]) {
    let new = !path.exists();
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("results file");
    if new {
        writeln!(
            file,
            "label\tphase\tget_p50_ms\tget_p99_ms\tset_p50_ms\tset_p99_ms\tfresh_p50_ms\tfresh_p99_ms\tok\tfailed\trss_end_mib\trss_peak_mib\thwm_mib\tfds_peak\tnote"
        )
        .unwrap();
    }
    for r in rows {
        let q = |v: &[Duration], x| ms(kvc::quantile(v, x));
        writeln!(
            file,
            "{label}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            r.phase,
            q(&r.probe.gets, 0.5),
            q(&r.probe.gets, 0.99),
            q(&r.probe.sets, 0.5),
            q(&r.probe.sets, 0.99),
            q(&r.probe.fresh, 0.5),
            q(&r.probe.fresh, 0.99),
            r.probe.ok(),
            r.probe.failed,
            mib(r.end.rss_kib),
            mib(r.peak.rss_kib),
            mib(r.peak.hwm_kib),
            r.peak.fds,
            r.note
        )
        .unwrap();
    }
}
