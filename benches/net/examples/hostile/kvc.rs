//! The hostile check's clients over [`stampkv_netbench::wire`]: the well-behaved client
//! ([`Probe`]), the hot-key writer and the watchers.

pub use stampkv_netbench::wire::{connect_h1, connect_h2, key, metadata, quantile, set, Body, Conn, Target};

use http_body_util::BodyExt;
use hyper::client::conn::http2;
use hyper::StatusCode;
use prost::Message;
use stampkv_kvconnect as proto;
use stampkv_kvconnect::frame::FrameDecoder;
use stampkv_netbench::wire::get;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The access token of the server under test.
pub const TOKEN: &str = "hostile-clients-token-0123456789";

/// What the well-behaved client saw in one phase.
#[derive(Debug, Default, Clone)]
pub struct ProbeReport {
    pub gets: Vec<Duration>,
    pub sets: Vec<Duration>,
    /// A fresh connection each: connect, metadata exchange, one read.
    pub fresh: Vec<Duration>,
    pub failed: u64,
    /// Of `failed`, requests on a fresh connection.
    pub fresh_failed: u64,
    /// Times its keep-alive connection was found closed (between requests) and reopened.
    pub reconnects: u64,
    pub errors: Vec<String>,
}

impl ProbeReport {
    pub fn ok(&self) -> u64 {
        (self.gets.len() + self.sets.len() + self.fresh.len()) as u64
    }

    fn merge(&mut self, other: ProbeReport) {
        self.gets.extend(other.gets);
        self.sets.extend(other.sets);
        self.fresh.extend(other.fresh);
        self.failed += other.failed;
        self.fresh_failed += other.fresh_failed;
        self.reconnects += other.reconnects;
        for e in other.errors {
            if self.errors.len() < 5 {
                self.errors.push(e);
            }
        }
    }

    pub fn sort(&mut self) {
        self.gets.sort();
        self.sets.sort();
        self.fresh.sort();
    }
}

/// How the well-behaved client behaves.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    pub getters: usize,
    pub setters: usize,
    /// Pause between two requests of one worker.
    pub pause: Duration,
    /// A fresh connection every so often (zero: none).
    pub fresh_every: Duration,
    /// A request not answered by then is a failure.
    pub timeout: Duration,
    /// The same for a fresh connection's connect, metadata exchange and read.
    pub fresh_timeout: Duration,
}

/// A well-behaved client: a few workers reading and committing over one shared HTTP/2
/// keep-alive connection, and now and then a request on a fresh HTTP/1.1 connection.
pub struct Probe {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<ProbeReport>>,
}

/// The well-behaved client's keep-alive connection, kept from phase to phase.
pub type Shared = Arc<tokio::sync::Mutex<Option<http2::SendRequest<Body>>>>;

/// Opens the keep-alive connection of [`Probe`]s.
pub async fn keepalive_connection(addr: SocketAddr) -> Result<Shared, String> {
    Ok(Arc::new(tokio::sync::Mutex::new(Some(connect_h2(addr).await?))))
}

/// The shared keep-alive connection, reopened if the server closed it.
async fn keepalive(shared: &Shared, addr: SocketAddr, reconnects: &mut u64) -> Result<Conn, String> {
    let mut guard = shared.lock().await;
    if let Some(sender) = guard.as_ref() {
        if !sender.is_closed() {
            return Ok(Conn::H2(sender.clone()));
        }
        *reconnects += 1;
    }
    let sender = connect_h2(addr).await?;
    *guard = Some(sender.clone());
    Ok(Conn::H2(sender))
}

impl Probe {
    /// Starts the workers on the keep-alive connection `shared`.
    pub fn start(target: &Target, shared: &Shared, config: &ProbeConfig, tag: &str) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for worker in 0..config.getters + config.setters {
            let writes = worker >= config.getters;
            let (stop, shared, target, config) =
                (stop.clone(), shared.clone(), target.clone(), config.clone());
            let name = format!("{tag}-{}", worker % config.setters.max(1));
            tasks.push(tokio::spawn(async move {
                let mut report = ProbeReport::default();
                let value = vec![b'v'; 100];
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let k = key(&["probe", &name, &(n % 64).to_string()]);
                    let started = Instant::now();
                    let attempt = async {
                        let mut conn = keepalive(&shared, target.addr, &mut report.reconnects).await?;
                        if writes {
                            set(&mut conn, &target, &[(k, value.clone())]).await
                        } else {
                            get(&mut conn, &target, &k).await.map(|_| ())
                        }
                    };
                    match tokio::time::timeout(config.timeout, attempt).await {
                        Ok(Ok(())) if writes => report.sets.push(started.elapsed()),
                        Ok(Ok(())) => report.gets.push(started.elapsed()),
                        Ok(Err(e)) => report.fail(e),
                        Err(_) => report.fail(format!("no answer within {:?}", config.timeout)),
                    }
                    tokio::time::sleep(config.pause).await;
                }
                report
            }));
        }
        if !config.fresh_every.is_zero() {
            let (stop, target, config) = (stop.clone(), target.clone(), config.clone());
            tasks.push(tokio::spawn(async move {
                // Each attempt on its own task: a connection the server never serves does
                // not hold up the next attempt.
                let mut attempts = tokio::task::JoinSet::new();
                let mut tick = tokio::time::interval(config.fresh_every);
                while !stop.load(Ordering::SeqCst) {
                    tick.tick().await;
                    let (target, timeout) = (target.clone(), config.fresh_timeout);
                    attempts.spawn(async move {
                        let started = Instant::now();
                        let attempt = async {
                            let mut conn = Conn::H1(connect_h1(target.addr).await?);
                            metadata(&mut conn, &target).await?;
                            get(&mut conn, &target, &key(&["probe", "fresh"])).await
                        };
                        match tokio::time::timeout(timeout, attempt).await {
                            Ok(Ok(_)) => Ok(started.elapsed()),
                            Ok(Err(e)) => Err(format!("fresh connection: {e}")),
                            Err(_) => Err(format!("fresh connection: no answer within {timeout:?}")),
                        }
                    });
                }
                let mut report = ProbeReport::default();
                while let Some(result) = attempts.join_next().await {
                    match result {
                        Ok(Ok(latency)) => report.fresh.push(latency),
                        Ok(Err(e)) => {
                            report.fresh_failed += 1;
                            report.fail(e);
                        }
                        Err(e) => report.fail(format!("fresh connection task: {e}")),
                    }
                }
                report
            }));
        }
        Probe { stop, tasks }
    }

    /// Stops the workers (each finishes its request) and merges what they saw.
    pub async fn finish(self) -> ProbeReport {
        self.stop.store(true, Ordering::SeqCst);
        let mut report = ProbeReport::default();
        for task in self.tasks {
            if let Ok(r) = task.await {
                report.merge(r);
            }
        }
        report.sort();
        report
    }
}

impl ProbeReport {
    fn fail(&mut self, error: String) {
        self.failed += 1;
        if self.errors.len() < 5 {
            self.errors.push(error);
        }
    }
}

/// Commits to one hot key in a loop over one keep-alive connection: values 1, 2, 3, ...
pub struct HotWriter {
    stop: Arc<AtomicBool>,
    task: JoinHandle<(u64, Vec<Duration>, u64, Duration)>,
}

/// What the hot-key writer did.
pub struct HotReport {
    /// The last value committed (the watchers must all see it).
    pub last: u64,
    pub latencies: Vec<Duration>,
    pub failed: u64,
    pub elapsed: Duration,
}

impl HotWriter {
    pub fn start(target: &Target, hot: Vec<u8>, first: u64) -> HotWriter {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, target) = (stop.clone(), target.clone());
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut latencies = Vec::new();
            let (mut last, mut failed) = (first.saturating_sub(1), 0u64);
            let mut conn: Option<Conn> = None;
            while !flag.load(Ordering::SeqCst) {
                let value = last + 1;
                let t = Instant::now();
                let attempt = async {
                    if conn.as_ref().is_none_or(Conn::is_closed) {
                        conn = Some(Conn::H1(connect_h1(target.addr).await?));
                    }
                    let c = conn.as_mut().ok_or("no connection")?;
                    set(c, &target, &[(hot.clone(), value.to_le_bytes().to_vec())]).await
                };
                match tokio::time::timeout(Duration::from_secs(10), attempt).await {
                    Ok(Ok(())) => {
                        latencies.push(t.elapsed());
                        last = value;
                    }
                    _ => {
                        failed += 1;
                        conn = None;
                    }
                }
            }
            (last, latencies, failed, started.elapsed())
        });
        HotWriter { stop, task }
    }

    pub async fn finish(self) -> HotReport {
        self.stop.store(true, Ordering::SeqCst);
        let (last, mut latencies, failed, elapsed) = self.task.await.expect("hot writer");
        latencies.sort();
        HotReport { last, latencies, failed, elapsed }
    }
}

/// Watch streams on one key, spread over HTTP/2 connections.
pub struct Watchers {
    stop: Arc<AtomicBool>,
    /// The last value each stream delivered (`u64::MAX`: none yet).
    pub last: Arc<Vec<AtomicU64>>,
    pub frames: Arc<AtomicU64>,
    pub opened: Arc<AtomicUsize>,
    /// Statuses (or `0` for a failed request) of streams the server refused.
    pub refused: Arc<Mutex<Vec<u16>>>,
    /// When each stream ended (body finished or failed).
    pub ended: Arc<Mutex<Vec<Option<Instant>>>>,
    pub connections: Vec<http2::SendRequest<Body>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Watchers {
    /// Opens `per_connection` streams on each of `connections` new HTTP/2 connections, all
    /// served by `runtime` (a runtime of their own keeps their work off the well-behaved
    /// client's task queue).
    pub async fn open(
        runtime: &tokio::runtime::Handle,
        target: &Target,
        hot: &[u8],
        connections: usize,
        per_connection: usize,
    ) -> Watchers {
        let (target, hot) = (target.clone(), hot.to_vec());
        runtime
            .spawn(async move { Watchers::open_here(&target, &hot, connections, per_connection).await })
            .await
            .expect("opening the watch streams")
    }

    async fn open_here(target: &Target, hot: &[u8], connections: usize, per_connection: usize) -> Watchers {
        let total = connections * per_connection;
        let mut watchers = Watchers {
            stop: Arc::new(AtomicBool::new(false)),
            last: Arc::new((0..total).map(|_| AtomicU64::new(u64::MAX)).collect()),
            frames: Arc::new(AtomicU64::new(0)),
            opened: Arc::new(AtomicUsize::new(0)),
            refused: Arc::new(Mutex::new(Vec::new())),
            ended: Arc::new(Mutex::new(vec![None; total])),
            connections: Vec::new(),
            tasks: Vec::new(),
        };
        for c in 0..connections {
            let sender = match connect_h2(target.addr).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("watch connection {c}: {e}");
                    watchers.refused.lock().unwrap().extend(std::iter::repeat_n(0, per_connection));
                    continue;
                }
            };
            for s in 0..per_connection {
                let index = c * per_connection + s;
                let task = watchers.spawn_stream(target, hot, sender.clone(), Some(index));
                watchers.tasks.push(task);
            }
            watchers.connections.push(sender);
        }
        watchers
    }

    /// One more stream on `sender` (not tracked in `last`, read until [`Watchers::close`]):
    /// the status of its answer.
    pub async fn one_more(
        &self,
        target: &Target,
        hot: &[u8],
        sender: &http2::SendRequest<Body>,
    ) -> Result<u16, String> {
        let mut conn = Conn::H2(sender.clone());
        let body = proto::Watch { keys: vec![proto::WatchKey { key: hot.to_vec() }] }.encode_to_vec();
        let response = tokio::time::timeout(Duration::from_secs(5), conn.send(target, "/v2/watch", 3, body))
            .await
            .map_err(|_| "no answer within 5 s".to_string())??;
        let status = response.status().as_u16();
        if status == 200 {
            let stop = self.stop.clone();
            tokio::spawn(async move {
                let mut body = response.into_body();
                while !stop.load(Ordering::SeqCst) {
                    match tokio::time::timeout(Duration::from_millis(200), body.frame()).await {
                        Err(_) | Ok(Some(Ok(_))) => {}
                        Ok(_) => break,
                    }
                }
            });
        }
        Ok(status)
    }

    fn spawn_stream(
        &self,
        target: &Target,
        hot: &[u8],
        sender: http2::SendRequest<Body>,
        index: Option<usize>,
    ) -> JoinHandle<()> {
        let (stop, last, frames, opened, refused, ended) = (
            self.stop.clone(),
            self.last.clone(),
            self.frames.clone(),
            self.opened.clone(),
            self.refused.clone(),
            self.ended.clone(),
        );
        let target = target.clone();
        let body = proto::Watch { keys: vec![proto::WatchKey { key: hot.to_vec() }] }.encode_to_vec();
        tokio::spawn(async move {
            let mut conn = Conn::H2(sender);
            let response = match conn.send(&target, "/v2/watch", 3, body).await {
                Ok(r) if r.status() == StatusCode::OK => r,
                Ok(r) => {
                    refused.lock().unwrap().push(r.status().as_u16());
                    return;
                }
                Err(_) => {
                    refused.lock().unwrap().push(0);
                    return;
                }
            };
            opened.fetch_add(1, Ordering::SeqCst);
            let mut body = response.into_body();
            let mut decoder = FrameDecoder::new();
            while !stop.load(Ordering::SeqCst) {
                let frame = match tokio::time::timeout(Duration::from_millis(200), body.frame()).await {
                    Err(_) => continue,
                    Ok(Some(Ok(frame))) => frame,
                    Ok(_) => break,
                };
                let Ok(data) = frame.into_data() else { continue };
                decoder.push(&data);
                while let Some(Ok(output)) = decoder.pop() {
                    let Some(output) = output else { continue };
                    frames.fetch_add(1, Ordering::Relaxed);
                    let value = output
                        .keys
                        .first()
                        .and_then(|k| k.entry_if_changed.as_ref())
                        .and_then(|e| <[u8; 8]>::try_from(e.value.as_slice()).ok())
                        .map(u64::from_le_bytes);
                    if let (Some(v), Some(i)) = (value, index) {
                        if let Some(slot) = last.get(i) {
                            slot.store(v, Ordering::SeqCst);
                        }
                    }
                }
            }
            if let Some(i) = index {
                if let Some(slot) = ended.lock().unwrap().get_mut(i) {
                    *slot = Some(Instant::now());
                }
            }
        })
    }

    /// Streams that answered (200 or refused) so far.
    pub fn answered(&self) -> usize {
        self.opened.load(Ordering::SeqCst) + self.refused.lock().unwrap().len()
    }

    /// How many streams last delivered `value`.
    pub fn seeing(&self, value: u64) -> usize {
        self.last.iter().filter(|v| v.load(Ordering::SeqCst) == value).count()
    }

    /// Streams ended so far, and the latest end.
    pub fn ended_count(&self) -> (usize, Option<Instant>) {
        let ended = self.ended.lock().unwrap();
        (ended.iter().flatten().count(), ended.iter().flatten().max().copied())
    }

    /// Ends every stream and drops the connections.
    pub async fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.connections.clear();
        for task in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
    }
}
