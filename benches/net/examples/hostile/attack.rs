//! The hostile clients, on raw TCP sockets: idle connections (silent, or an HTTP/2 preface
//! and then nothing), slow and truncated request bodies, a never-ending chunked body, an
//! oversized Content-Length, and the over-limit snapshot read.

use crate::kvc::{Conn, Target, TOKEN};
use prost::Message;
use stampkv_kvconnect as proto;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The client preface of HTTP/2 and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// What the idle sockets saw.
#[derive(Debug, Default)]
pub struct IdleCounts {
    /// Connections established.
    pub connected: AtomicU64,
    /// Connections the server closed (end of stream or reset).
    pub closed: AtomicU64,
    /// Sockets (attackers) the server closed at least once.
    pub sockets_closed: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    pub connect_failures: AtomicU64,
}

/// Idle connections that reconnect `reopen_after` a close by the server.
pub struct Idle {
    stop: Arc<AtomicBool>,
    pub counts: Arc<IdleCounts>,
    /// Time from connect to close by the server, of every closed connection.
    pub lifetimes: Arc<Mutex<Vec<Duration>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Idle {
    /// `n` sockets; `h2`: each sends the HTTP/2 preface and a SETTINGS frame, then nothing.
    pub fn start(addr: SocketAddr, n: usize, h2: bool, reopen_after: Duration) -> Idle {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(IdleCounts::default());
        let lifetimes = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..n)
            .map(|_| {
                let (stop, counts, lifetimes) = (stop.clone(), counts.clone(), lifetimes.clone());
                tokio::spawn(async move {
                    let mut closed_once = false;
                    while !stop.load(Ordering::SeqCst) {
                        let Ok(Ok(mut stream)) =
                            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await
                        else {
                            counts.connect_failures.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        };
                        let since = Instant::now();
                        counts.connected.fetch_add(1, Ordering::Relaxed);
                        counts.open.fetch_add(1, Ordering::Relaxed);
                        if h2 {
                            let _ = stream.write_all(H2_PREFACE).await;
                        }
                        let mut buf = [0u8; 4096];
                        let closed = loop {
                            if stop.load(Ordering::SeqCst) {
                                break false;
                            }
                            match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf))
                                .await
                            {
                                Err(_) | Ok(Ok(1..)) => {}
                                Ok(Ok(0) | Err(_)) => break true,
                            }
                        };
                        counts.open.fetch_sub(1, Ordering::Relaxed);
                        if closed {
                            counts.closed.fetch_add(1, Ordering::Relaxed);
                            if !closed_once {
                                closed_once = true;
                                counts.sockets_closed.fetch_add(1, Ordering::Relaxed);
                            }
                            lifetimes.lock().unwrap().push(since.elapsed());
                            tokio::time::sleep(reopen_after).await;
                        }
                    }
                })
            })
            .collect();
        Idle { stop, counts, lifetimes, tasks }
    }

    pub async fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// A misbehaving request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// Content-Length 1,000,000, one byte a second.
    Slow,
    /// Content-Length 100, 10 bytes, then silence.
    ShortStall,
    /// Content-Length 100, 10 bytes, then the client closes its sending side.
    ShortClosed,
    /// Chunked, a one-byte chunk every 200 ms, never the last chunk.
    Chunked,
    /// Content-Length above `--max-body-bytes`, no body sent.
    Oversized,
}

impl BodyKind {
    pub const ALL: [BodyKind; 5] =
        [BodyKind::Slow, BodyKind::ShortStall, BodyKind::ShortClosed, BodyKind::Chunked, BodyKind::Oversized];

    pub fn name(self) -> &'static str {
        match self {
            BodyKind::Slow => "slow body (1 MB at 1 B/s)",
            BodyKind::ShortStall => "body shorter than Content-Length, then silence",
            BodyKind::ShortClosed => "body shorter than Content-Length, then EOF",
            BodyKind::Chunked => "never-ending chunked body",
            BodyKind::Oversized => "Content-Length over --max-body-bytes",
        }
    }

    /// A short name for the table.
    pub fn short(self) -> &'static str {
        match self {
            BodyKind::Slow => "slow",
            BodyKind::ShortStall => "short+silence",
            BodyKind::ShortClosed => "short+EOF",
            BodyKind::Chunked => "chunked",
            BodyKind::Oversized => "oversized",
        }
    }

    /// The status the hardened server answers with.
    pub fn expected(self) -> u16 {
        match self {
            BodyKind::Slow | BodyKind::ShortStall | BodyKind::Chunked => 408,
            BodyKind::ShortClosed => 400,
            BodyKind::Oversized => 413,
        }
    }
}

/// How one misbehaving request ended.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    /// The server answered with this status.
    Status(u16),
    /// The server closed the connection without an answer.
    Closed,
    /// Still waiting when the phase ended.
    Pending,
}

/// One misbehaving request: its kind, how it ended and after how long.
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub kind: BodyKind,
    pub outcome: Outcome,
    pub after: Duration,
}

/// Misbehaving request bodies, each attacker repeating its request after an answer.
pub struct Bodies {
    stop: Arc<AtomicBool>,
    pub attempts: Arc<Mutex<Vec<Attempt>>>,
    tasks: Vec<JoinHandle<()>>,
}

fn head(target: &Target, kind: BodyKind, max_body: usize) -> String {
    let length = match kind {
        BodyKind::Slow => "content-length: 1000000\r\n".to_owned(),
        BodyKind::ShortStall | BodyKind::ShortClosed => "content-length: 100\r\n".to_owned(),
        BodyKind::Chunked => "transfer-encoding: chunked\r\n".to_owned(),
        BodyKind::Oversized => format!("content-length: {}\r\n", max_body + 1),
    };
    format!(
        "POST /v2/atomic_write HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\n\
         content-type: application/x-protobuf\r\nx-denokv-version: 2\r\nx-denokv-database-id: {}\r\n{length}\r\n",
        target.addr, target.db_id
    )
}

/// Sends one misbehaving request and waits for the server's answer (or close) or `stop`.
async fn one(target: &Target, kind: BodyKind, max_body: usize, stop: &AtomicBool) -> Attempt {
    let started = Instant::now();
    let done = |outcome| Attempt { kind, outcome, after: started.elapsed() };
    let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(target.addr)).await
    else {
        return done(Outcome::Closed);
    };
    let (mut reader, mut writer) = stream.into_split();
    if writer.write_all(head(target, kind, max_body).as_bytes()).await.is_err() {
        return done(Outcome::Closed);
    }
    let sending = tokio::spawn(async move {
        match kind {
            BodyKind::Slow => loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if writer.write_all(b"x").await.is_err() {
                    break;
                }
            },
            BodyKind::ShortStall => {
                let _ = writer.write_all(&[b'x'; 10]).await;
                std::future::pending::<()>().await;
            }
            BodyKind::ShortClosed => {
                let _ = writer.write_all(&[b'x'; 10]).await;
                let _ = writer.shutdown().await;
                std::future::pending::<()>().await;
            }
            BodyKind::Chunked => loop {
                if writer.write_all(b"1\r\nx\r\n").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            },
            BodyKind::Oversized => std::future::pending::<()>().await,
        }
    });
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    let outcome = loop {
        if stop.load(Ordering::SeqCst) {
            break Outcome::Pending;
        }
        match tokio::time::timeout(Duration::from_millis(100), reader.read(&mut buf)).await {
            Err(_) => continue,
            Ok(Ok(0) | Err(_)) => break Outcome::Closed,
            Ok(Ok(n)) => {
                received.extend_from_slice(buf.get(..n).unwrap_or_default());
                let text = String::from_utf8_lossy(&received);
                if let Some(line) = text.split("\r\n").next().filter(|_| text.contains("\r\n")) {
                    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                    break Outcome::Status(status);
                }
            }
        }
    };
    sending.abort();
    done(outcome)
}

impl Bodies {
    /// `per_kind` attackers of each kind.
    pub fn start(target: &Target, per_kind: usize, max_body: usize) -> Bodies {
        let stop = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for kind in BodyKind::ALL {
            for _ in 0..per_kind {
                let (stop, attempts, target) = (stop.clone(), attempts.clone(), target.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::SeqCst) {
                        let attempt = one(&target, kind, max_body, &stop).await;
                        attempts.lock().unwrap().push(attempt);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }));
            }
        }
        Bodies { stop, attempts, tasks }
    }

    pub async fn finish(self) -> Vec<Attempt> {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            let _ = task.await;
        }
        self.attempts.lock().unwrap().clone()
    }
}

/// The entries the over-limit read covers: `count` values of `value_bytes` random bytes
/// under `["big", i]`, written `per_commit` to a commit.
pub async fn fill_big(
    target: &Target,
    count: usize,
    value_bytes: usize,
    per_commit: usize,
) -> Result<(), String> {
    let mut conn = Conn::H1(crate::kvc::connect_h1(target.addr).await?);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut entries = Vec::new();
    for i in 0..count {
        let value: Vec<u8> = (0..value_bytes)
            .map(|_| {
                // xorshift64: incompressible values, so the answer is as large as it says.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        entries.push((crate::kvc::key(&["big", &format!("{i:06}")]), value));
        if entries.len() == per_commit || i + 1 == count {
            crate::kvc::set(&mut conn, target, &entries).await?;
            entries.clear();
        }
    }
    Ok(())
}

/// The over-limit read: 10 ranges over `["big"]`, each with limit 1000 (10,000 entries in
/// all, ten times what a snapshot read may ask for).
pub fn over_limit_read() -> Vec<u8> {
    let prefix = crate::kvc::key(&["big"]);
    let (mut start, mut end) = (prefix.clone(), prefix);
    start.push(0x00);
    end.push(0xff);
    let range = proto::ReadRange { start, end, limit: 1000, reverse: false };
    proto::SnapshotRead { ranges: vec![range; 10] }.encode_to_vec()
}

/// Sends the over-limit read again and again until stopped (at least once); the statuses.
/// A 200 answer's body is not read: the connection is dropped after its head.
pub struct OverLimit {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Vec<(u16, Duration)>>,
}

impl OverLimit {
    pub fn start(target: &Target) -> OverLimit {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, target) = (stop.clone(), target.clone());
        let task = tokio::spawn(async move {
            let mut statuses = Vec::new();
            loop {
                let started = Instant::now();
                let attempt = async {
                    let mut conn = Conn::H1(crate::kvc::connect_h1(target.addr).await?);
                    let response = conn.send(&target, "/v2/snapshot_read", 2, over_limit_read()).await?;
                    Ok::<u16, String>(response.status().as_u16())
                };
                let status = match tokio::time::timeout(Duration::from_secs(60), attempt).await {
                    Ok(Ok(status)) => status,
                    _ => 0,
                };
                statuses.push((status, started.elapsed()));
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            statuses
        });
        OverLimit { stop, task }
    }

    pub async fn finish(self) -> Vec<(u16, Duration)> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap_or_default()
    }
}

/// Sends `GET path` (with the access token if `token`) on a new connection; the status.
pub async fn get_status(addr: SocketAddr, path: &str, token: bool) -> Option<u16> {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        let auth = if token { format!("authorization: Bearer {TOKEN}\r\n") } else { String::new() };
        let request = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut received = Vec::new();
        let mut buf = [0u8; 1024];
        while !received.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            received.extend_from_slice(buf.get(..n)?);
        }
        String::from_utf8_lossy(&received).split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(5), attempt).await.ok()?
}
