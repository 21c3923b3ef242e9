//! Real etcd clusters for tests: members on free loopback ports, data in a temporary
//! directory (on `/dev/shm` when it exists: etcd 3.4 fsyncs every commit and has no
//! switch to stop it), stopped when the [`EtcdCluster`] is dropped.
//!
//! Each member runs under a small shell guard that kills it when the test process is gone,
//! so a test binary that panics or is killed leaves no etcd behind either (a `static`
//! cluster shared by a whole test binary is never dropped).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a member may take to answer `/health` after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// One etcd process of a cluster.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    /// The shell guard running etcd (`None` while the member is killed).
    guard: Option<Child>,
}

/// A running etcd cluster on loopback; every member is killed on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    dir: PathBuf,
    /// Extra flags every member is started with.
    flags: Vec<String>,
    /// The cluster's token (the same for every member).
    token: String,
}

/// Why a cluster could not be started.
#[derive(Debug)]
pub struct EtcdError(pub String);

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EtcdError {}

/// A free TCP port on 127.0.0.1 (free when asked; another process may take it later).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The etcd binary: `$STAMPKV_ETCD_BIN`, or `etcd` on the `PATH`.
fn etcd_binary() -> String {
    std::env::var("STAMPKV_ETCD_BIN").unwrap_or_else(|_| "etcd".to_string())
}

/// Whether an etcd binary can be run here.
pub fn etcd_available() -> bool {
    Command::new(etcd_binary())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl EtcdCluster {
    /// Starts `size` members with `--max-txn-ops 4096` and revision auto-compaction
    /// (10,000 revisions kept), and waits until every member reports healthy.
    pub fn start(size: usize) -> Result<EtcdCluster, EtcdError> {
        Self::start_with_flags(
            size,
            &[
                "--max-txn-ops",
                "4096",
                "--auto-compaction-mode",
                "revision",
                "--auto-compaction-retention",
                "10000",
            ],
        )
    }

    /// Starts `size` members with `flags` added to each, and waits until all are healthy.
    pub fn start_with_flags(size: usize, flags: &[&str]) -> Result<EtcdCluster, EtcdError> {
        // STAMPKV_ETCD_DIR puts the data on a disk of one's choosing (benchmarks: etcd's
        // fsyncs then cost what they cost on that disk).
        let base = match std::env::var_os("STAMPKV_ETCD_DIR") {
            Some(dir) => PathBuf::from(dir),
            None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
            None => std::env::temp_dir(),
        };
        let dir = base.join(format!("stampkv-etcd-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| EtcdError(format!("cannot create {}: {e}", dir.display())))?;
        // Every port is held until all are chosen, so that no two members get the same one
        // (a port released at once may be handed out again by the next bind).
        let mut held = Vec::with_capacity(2 * size);
        let mut port = |what: &str| -> Result<u16, EtcdError> {
            let listener = TcpListener::bind("127.0.0.1:0")
                .map_err(|e| EtcdError(format!("no free {what} port: {e}")))?;
            let port =
                listener.local_addr().map_err(|e| EtcdError(format!("no free {what} port: {e}")))?.port();
            held.push(listener);
            Ok(port)
        };
        let mut members = Vec::with_capacity(size);
        for i in 0..size {
            members.push(Member {
                name: format!("m{i}"),
                client_port: port("client")?,
                peer_port: port("peer")?,
                guard: None,
            });
        }
        drop(held);
        let mut cluster = EtcdCluster {
            members,
            dir,
            flags: flags.iter().map(|s| s.to_string()).collect(),
            token: format!("stampkv-test-{}", unique()),
        };
        for i in 0..size {
            cluster.spawn(i, "new")?;
        }
        for i in 0..size {
            cluster.wait_healthy(i)?;
        }
        Ok(cluster)
    }

    /// The client URLs of every member (`http://127.0.0.1:PORT`).
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| format!("http://127.0.0.1:{}", m.client_port)).collect()
    }

    /// The client URLs of every member, joined by commas (the form of `--etcd`).
    pub fn endpoints_arg(&self) -> String {
        self.endpoints().join(",")
    }

    /// How many members the cluster has (running or not).
    pub fn size(&self) -> usize {
        self.members.len()
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize, state: &str) -> Result<(), EtcdError> {
        let initial_cluster = self.initial_cluster();
        let member = self.members.get(i).ok_or_else(|| EtcdError(format!("no member {i}")))?;
        let data_dir = self.dir.join(&member.name);
        let log = self.dir.join(format!("{}.log", member.name));
        let mut args: Vec<String> = vec![
            "--name".into(),
            member.name.clone(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--listen-client-urls".into(),
            format!("http://127.0.0.1:{}", member.client_port),
            "--advertise-client-urls".into(),
            format!("http://127.0.0.1:{}", member.client_port),
            "--listen-peer-urls".into(),
            format!("http://127.0.0.1:{}", member.peer_port),
            "--initial-advertise-peer-urls".into(),
            format!("http://127.0.0.1:{}", member.peer_port),
            "--initial-cluster".into(),
            initial_cluster,
            "--initial-cluster-token".into(),
            self.token.clone(),
            "--initial-cluster-state".into(),
            state.into(),
        ];
        args.extend(self.flags.iter().cloned());
        // The guard: etcd in the background, killed as soon as the test process ($1) is gone
        // or the guard itself is told to stop (TERM/KILL of the guard's process group is
        // how `kill` below stops both). When the test process is gone (a cluster in a
        // static is never dropped), the guard also removes the member's data and log, and
        // the last guard the cluster's directory: nothing is left in /dev/shm.
        let script = r#"
parent=$1; shift; log=$1; shift; data=$1; shift; bin=$1; shift
"$bin" "$@" >>"$log" 2>&1 &
child=$!
trap 'kill -9 $child 2>/dev/null; exit 0' TERM INT
while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.2; done
kill -9 $child 2>/dev/null
wait $child 2>/dev/null
if ! kill -0 "$parent" 2>/dev/null; then
  rm -rf "$data" "$log"
  rmdir "$(dirname "$data")" 2>/dev/null
fi
"#;
        let guard = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("etcd-guard")
            .arg(std::process::id().to_string())
            .arg(&log)
            .arg(&data_dir)
            .arg(etcd_binary())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| EtcdError(format!("cannot start etcd ({}): {e}", etcd_binary())))?;
        if let Some(member) = self.members.get_mut(i) {
            member.guard = Some(guard);
        }
        Ok(())
    }

    fn wait_healthy(&self, i: usize) -> Result<(), EtcdError> {
        let member = self.members.get(i).ok_or_else(|| EtcdError(format!("no member {i}")))?;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(body) = http(member.client_port, "GET", "/health", "") {
                if body.contains("\"health\":\"true\"") {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.join(format!("{}.log", member.name)))
                    .unwrap_or_default();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(20)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                return Err(EtcdError(format!(
                    "etcd member {} not healthy after {READY_TIMEOUT:?}; log tail:\n{tail}",
                    member.name
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills member `i` with SIGKILL (its data stays; [`EtcdCluster::restart`] brings it back).
    pub fn kill(&mut self, i: usize) {
        if let Some(member) = self.members.get_mut(i) {
            if let Some(mut guard) = member.guard.take() {
                // The guard kills etcd with SIGKILL when it gets TERM.
                let _ = Command::new("kill").arg("-TERM").arg(guard.id().to_string()).status();
                let _ = guard.wait();
            }
            // Wait until the port is closed: etcd is gone.
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(("127.0.0.1", member.client_port)).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Starts member `i` again on its data after [`EtcdCluster::kill`], and waits until it is healthy.
    pub fn restart(&mut self, i: usize) -> Result<(), EtcdError> {
        self.spawn(i, "existing")?;
        self.wait_healthy(i)
    }

    /// Whether member `i` is running.
    pub fn is_running(&self, i: usize) -> bool {
        self.members.get(i).is_some_and(|m| m.guard.is_some())
    }

    /// The index of the current leader, as a running member reports it.
    pub fn leader(&self) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leader = None;
        for m in &self.members {
            let status = if m.guard.is_some() {
                http(m.client_port, "POST", "/v3/maintenance/status", "{}").ok()
            } else {
                None
            };
            let member_id = status.as_deref().and_then(|s| json_field(s, "member_id"));
            if leader.is_none() {
                leader = status.as_deref().and_then(|s| json_field(s, "leader")).filter(|l| l != "0");
            }
            ids.push(member_id);
        }
        let leader = leader?;
        ids.iter().position(|id| id.as_deref() == Some(leader.as_str()))
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A string field's value (or a number's text) in a flat JSON document.
fn json_field(body: &str, field: &str) -> Option<String> {
    let at = body.find(&format!("\"{field}\""))?;
    let rest = body.get(at + field.len() + 2..)?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest.find(['"', ',', '}'])?;
    Some(rest.get(..end)?.to_string())
}

/// One HTTP/1.0 request to 127.0.0.1:`port`; the response body.
fn http(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// A number unique within this process.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (u64::from(nanos) << 16) ^ NEXT.fetch_add(1, Ordering::Relaxed)
}
