//! The `stampkv serve` process under test: started on a loopback port in a temporary
//! directory with the flags it supports, its log drained, its memory and descriptors read
//! from `/proc`, killed when dropped (also when a phase panics).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// The server's pid while it runs, for the watchdog.
pub static SERVER_PID: AtomicU32 = AtomicU32::new(0);

/// The limits the attack is run under (each passed only if the binary knows its flag).
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub body_timeout: Duration,
    pub max_body_bytes: usize,
    pub max_watches: usize,
    pub max_watches_per_connection: usize,
    pub shutdown_grace: Duration,
    /// The soft `RLIMIT_NOFILE` the server is started with (0: inherited unchanged).
    pub nofile_soft: u64,
}

impl Limits {
    /// `(flag, value)` of every limit, in the order passed.
    fn flags(&self) -> Vec<(&'static str, String)> {
        vec![
            ("--max-connections", self.max_connections.to_string()),
            ("--idle-timeout-ms", self.idle_timeout.as_millis().to_string()),
            ("--body-timeout-ms", self.body_timeout.as_millis().to_string()),
            ("--max-body-bytes", self.max_body_bytes.to_string()),
            ("--max-watches", self.max_watches.to_string()),
            ("--max-watches-per-connection", self.max_watches_per_connection.to_string()),
            ("--shutdown-grace-ms", self.shutdown_grace.as_millis().to_string()),
        ]
    }
}

/// What the server wrote on stderr.
#[derive(Debug, Default)]
struct LogState {
    last: VecDeque<String>,
}

/// A running `stampkv serve`.
pub struct ServerProcess {
    child: Option<Child>,
    pub pid: u32,
    pub addr: SocketAddr,
    /// Flags passed, and flags of [`Limits`] this binary does not know (run with its defaults).
    pub passed: Vec<String>,
    pub missing: Vec<String>,
    log: Arc<Mutex<LogState>>,
    accept_failures: Arc<AtomicU64>,
    _dir: tempfile::TempDir,
}

/// The flags `stampkv serve --help` lists.
pub fn supported_flags(bin: &Path) -> String {
    let out = Command::new(bin)
        .args(["serve", "--help"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} serve --help: {e}", bin.display()));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl ServerProcess {
    /// Starts `bin serve` in a new temporary directory and waits for its `listening` line.
    pub fn start(bin: &Path, token: &str, limits: &Limits) -> ServerProcess {
        let help = supported_flags(bin);
        let dir = tempfile::Builder::new().prefix("stampkv-hostile-").tempdir().expect("temp dir");
        let db: PathBuf = dir.path().join("db");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--path".into(),
            db.display().to_string(),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--access-token".into(),
            token.into(),
        ];
        let (mut passed, mut missing) = (Vec::new(), Vec::new());
        for (flag, value) in limits.flags() {
            // A flag is known if the help lists it as a whole word.
            let known = help.split(|c: char| c.is_whitespace() || c == ',' || c == '=').any(|w| w == flag);
            if known {
                args.push(flag.into());
                args.push(value.clone());
                passed.push(format!("{flag} {value}"));
            } else {
                missing.push(flag.to_string());
            }
        }
        // `sh` lowers the soft descriptor limit, then becomes the server (same pid).
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(r#"if [ "$1" != 0 ]; then ulimit -Sn "$1" 2>/dev/null || true; fi; shift; exec "$@""#)
            .arg("sh")
            .arg(limits.nofile_soft.to_string())
            .arg(bin)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let pid = child.id();
        SERVER_PID.store(pid, Ordering::SeqCst);
        let stderr = child.stderr.take().expect("stderr piped");
        let log = Arc::new(Mutex::new(LogState::default()));
        let accept_failures = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel::<SocketAddr>();
        {
            let log = log.clone();
            let accept_failures = accept_failures.clone();
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if line.contains("accept failed") {
                        accept_failures.fetch_add(1, Ordering::Relaxed);
                    }
                    if line.contains("msg=\"listening\"") {
                        if let Some(addr) = line
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix("addr="))
                            .and_then(|a| a.trim_matches('"').parse().ok())
                        {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(addr);
                            }
                        }
                    }
                    let mut log = log.lock().unwrap();
                    log.last.push_back(line);
                    if log.last.len() > 30 {
                        log.last.pop_front();
                    }
                }
            });
        }
        let mut server = ServerProcess {
            child: Some(child),
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            passed,
            missing,
            log,
            accept_failures,
            _dir: dir,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addr) => server.addr = addr,
            Err(_) => {
                panic!("the server did not log `listening` within 30 s; its log:\n{}", server.log_tail())
            }
        }
        server
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        self.log.lock().unwrap().last.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// How many `accept failed` lines (for example EMFILE) the server logged so far.
    pub fn accept_failures(&self) -> u64 {
        self.accept_failures.load(Ordering::Relaxed)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status();
    }

    /// The exit status if the process has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        SERVER_PID.store(0, Ordering::SeqCst);
        Some(status)
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            SERVER_PID.store(0, Ordering::SeqCst);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The server's memory and descriptors, from `/proc/PID`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcSample {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub fds: u64,
}

/// Reads `VmRSS`, `VmHWM` and the number of open descriptors of `pid`.
pub fn sample(pid: u32) -> ProcSample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as u64).unwrap_or(0);
    ProcSample { rss_kib: field("VmRSS:"), hwm_kib: field("VmHWM:"), fds }
}

/// The soft and hard `RLIMIT_NOFILE` of `pid` (`/proc/PID/limits`).
pub fn nofile_limits(pid: u32) -> Option<(String, String)> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut words = line.trim_start_matches("Max open files").split_whitespace();
    Some((words.next()?.to_owned(), words.next()?.to_owned()))
}

/// Samples the server every 100 ms until stopped: the largest RSS and descriptor count seen.
pub struct Sampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: std::thread::JoinHandle<(ProcSample, ProcSample)>,
}

impl Sampler {
    pub fn start(pid: u32) -> Sampler {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut max = ProcSample::default();
            let mut last = ProcSample::default();
            loop {
                let s = sample(pid);
                if s.rss_kib > 0 {
                    last = s;
                    max.rss_kib = max.rss_kib.max(s.rss_kib);
                    max.hwm_kib = max.hwm_kib.max(s.hwm_kib);
                    max.fds = max.fds.max(s.fds);
                }
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            (max, last)
        });
        Sampler { stop, handle }
    }

    /// Stops sampling: `(largest seen, last sample)`.
    pub fn finish(self) -> (ProcSample, ProcSample) {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap()
    }
}

/// User + system CPU time of a process (`"self"` or a pid), in seconds (100 ticks a second).
pub fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}
