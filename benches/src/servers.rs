//! KV Connect servers run as processes for the network benchmarks: `stampkv serve` (durable,
//! `--sync always`) and Deno's reference server `denokv serve`, each on a free loopback port,
//! optionally pinned to chosen cores with `taskset`, and their CPU time and peak memory read
//! from `/proc`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The servers compared, by the name the benchmarks print.
pub const SERVERS: [&str; 2] = ["stampkv", "denokv"];

/// A server process listening on a loopback port; stopped with [`ServerProcess::stop`].
pub struct ServerProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://addr`, the URL a client opens.
    pub url: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl ServerProcess {
    /// Starts `server` (`stampkv` or `denokv`, the binary `bin`) with its database in `dir`
    /// and access token `token`, on the cores `cpus` (a `taskset -c` list) if given, and waits
    /// until it accepts connections.
    pub fn start(server: &str, bin: &Path, dir: &Path, token: &str, cpus: Option<&str>) -> ServerProcess {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = match cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let addr_text = addr.to_string();
        match server {
            "stampkv" => command
                .args(["serve", "--sync", "always", "--addr", &addr_text, "--path"])
                .arg(dir.join("db")),
            "denokv" => command
                .arg("--sqlite-path")
                .arg(dir.join("denokv.sqlite3"))
                .args(["serve", "--addr", &addr_text]),
            other => panic!("unknown server {other}"),
        };
        let child = command
            .env("STAMPKV_ACCESS_TOKEN", token)
            .env("DENO_KV_ACCESS_TOKEN", token)
            .args(["--access-token", token])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {server} ({}): {e}", bin.display()));
        let mut running = ServerProcess { child, addr, url: format!("http://{addr}") };
        let started = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if started.elapsed() > Duration::from_secs(30) || running.child.try_wait().unwrap().is_some() {
                running.stop();
                panic!("{server} did not start listening on {addr}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        running
    }

    /// The process id (of `taskset`'s exec, which is the server itself).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time (user + system) the server has used so far, in seconds.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.pid())
    }

    /// The server's peak resident set (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    }

    /// Stops it with SIGTERM, and SIGKILL after 20 s.
    pub fn stop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.pid().to_string()).status();
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) {
            if started.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// CPU time (user + system) process `pid` has used so far, in seconds (0 if it is gone).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}
