//! A KV Connect server for stampkv databases: real Deno programs (`Deno.openKv("http://...")`)
//! and the `@deno/kv` client use a stampkv database over HTTP.
//!
//! Protocol versions 1, 2 and 3 (`../shared/reference/deno-kv-semantics.md` §9): the metadata
//! exchange (`POST /`), and `snapshot_read`, `atomic_write` and `watch` under `/v2`. Every
//! engine call runs on a blocking thread (`spawn_blocking`; a watch stream has a thread of
//! its own), never on the async runtime. `GET /metrics` serves Prometheus text.
//!
//! Enqueues inside an `atomic_write` are refused with a 400 (`Enqueue operations are not
//! supported by this server.`): Deno's client never sends one, and the protocol has no way
//! to listen to a queue, so a message could never be delivered to a remote client.

pub mod metrics;
pub mod proto;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use prost::Message;
use stampkv::remote::{RawEntry, RawRange};
use stampkv::{CommitResult, Key, Kv, KvError, KvValue, Mutation, MutationKind, Versionstamp};
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;

pub use metrics::Metrics;

/// Most ranges one `snapshot_read` may ask for (Deno's `getMany` sends at most 10).
pub const MAX_READ_RANGES: usize = 10;
/// Largest `limit` of one read range (Deno's largest list batch).
pub const MAX_READ_LIMIT: i32 = 1000;
/// Longest encoded key a read range may carry as start or end (Deno's read key limit).
pub const MAX_READ_KEY_BYTES: usize = 2049;

/// How the server is configured.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bearer token clients must present (at least 12 characters).
    pub access_token: String,
    /// Largest request body accepted; larger bodies get a 413.
    pub max_body_bytes: usize,
    /// Most watch streams open at once; more get a 503.
    pub max_watches: usize,
    /// How long a client may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// Interval of the keep-alive frames of a watch stream.
    pub keepalive_interval: Duration,
}

impl Config {
    /// The defaults (16 MiB bodies, 1024 watches, 10 s for headers, pings every 5 s) for a token.
    pub fn new(access_token: impl Into<String>) -> Config {
        Config {
            access_token: access_token.into(),
            max_body_bytes: 16 << 20,
            max_watches: 1024,
            header_read_timeout: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(5),
        }
    }
}

/// Why a server could not be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The access token is shorter than 12 characters.
    TokenTooShort,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the access token must be at least 12 characters long")
    }
}

impl std::error::Error for ConfigError {}

/// The KV Connect service over one open database.
#[derive(Debug)]
pub struct Server {
    kv: Kv,
    config: Config,
    database_id: String,
    metrics: Metrics,
    open_watches: AtomicUsize,
    shutting_down: AtomicBool,
}

impl Server {
    /// A service for `kv`. Its database id is a random UUID, new for every server.
    pub fn new(kv: Kv, config: Config) -> Result<Arc<Server>, ConfigError> {
        if config.access_token.chars().count() < 12 {
            return Err(ConfigError::TokenTooShort);
        }
        Ok(Arc::new(Server {
            kv,
            config,
            database_id: uuid::Uuid::new_v4().to_string(),
            metrics: Metrics::default(),
            open_watches: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
        }))
    }

    /// The database id the metadata exchange hands out.
    pub fn database_id(&self) -> &str {
        &self.database_id
    }

    /// The database served.
    pub fn kv(&self) -> &Kv {
        &self.kv
    }

    /// Ends every watch stream and refuses new ones.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }
}

/// Writes one structured log line to stderr: `ts_ms=... level=... msg="..." <fields>`.
pub fn log(level: &str, msg: &str, fields: &str) {
    let ts = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    eprintln!("ts_ms={ts} level={level} msg={msg:?} {fields}");
}

/// An error answer: a status and a plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub text: String,
}

fn bad(text: impl Into<String>) -> HttpError {
    HttpError { status: StatusCode::BAD_REQUEST, text: text.into() }
}

fn unavailable() -> HttpError {
    HttpError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        text: "The server is temporarially unavailable, try again later.".into(),
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], self.text).into_response()
    }
}

/// The answer to a `KvError` from the database: the reference server's texts for the
/// limits, Deno's text (a 400) for everything the request did wrong, 503 once closed.
fn kv_error(e: KvError) -> HttpError {
    match e {
        KvError::Closed => unavailable(),
        KvError::Engine(e) => {
            log("error", "engine error", &format!("error={:?}", e.to_string()));
            HttpError { status: StatusCode::INTERNAL_SERVER_ERROR, text: "Internal server error.".into() }
        }
        KvError::TooManyChecks { .. } => bad("Too many checks included in atomic write."),
        KvError::TooManyMutations { .. } => bad("Too many mutations / enqueues included in atomic write."),
        KvError::KeyTooLargeForWrite { .. } | KvError::KeyTooLargeForRead { .. } => {
            bad("A key exceeds the key size limit.")
        }
        KvError::ValueTooLarge { .. } => bad("A value exceeds the value size limit."),
        KvError::TotalMutationSizeTooLarge { .. } | KvError::TotalKeySizeTooLarge { .. } => {
            bad("The total size of the atomic write is too large.")
        }
        other => bad(other.to_string()),
    }
}

/// Runs a blocking database call off the async runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, HttpError> + Send + 'static,
) -> Result<T, HttpError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => {
            log("error", "blocking task failed", &format!("error={:?}", e.to_string()));
            Err(HttpError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                text: "Internal server error.".into(),
            })
        }
    }
}

/// The routes: `POST /`, `POST /v2/{snapshot_read,atomic_write,watch}`, `GET /metrics`.
pub fn router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/", post(metadata))
        .route("/v2/snapshot_read", post(snapshot_read))
        .route("/v2/atomic_write", post(atomic_write))
        .route("/v2/watch", post(watch))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(server)
}

async fn not_found() -> HttpError {
    HttpError { status: StatusCode::NOT_FOUND, text: "Resource not found.".into() }
}

/// Serves `server` on `listener` until `shutdown` resolves; then ends the watch streams,
/// lets in-flight requests finish (at most 30 s) and returns. The caller closes the database.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let app = router(server.clone());
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // HTTP/1.1 and HTTP/2 (Deno's client speaks HTTP/2 without TLS, with prior knowledge).
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(server.config.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        log("warn", "accept failed", &format!("error={:?}", e.to_string()));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                let builder = builder.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    let _ = watcher.watch(connection.into_owned()).await;
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    server.begin_shutdown();
    if tokio::time::timeout(Duration::from_secs(30), graceful.shutdown()).await.is_err() {
        log("warn", "connections still open after 30 s; stopping anyway", "");
    }
    Ok(())
}

/// Checks `authorization: Bearer <token>` in constant time.
fn authorize(server: &Server, headers: &HeaderMap) -> Result<(), HttpError> {
    let unauthorized = |text: &str| HttpError { status: StatusCode::UNAUTHORIZED, text: text.into() };
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| unauthorized("Malformed authorization header."))?;
    let token =
        value.strip_prefix("Bearer ").ok_or_else(|| unauthorized("Malformed authorization header."))?;
    if constant_time_eq(token.as_bytes(), server.config.access_token.as_bytes()) {
        Ok(())
    } else {
        Err(unauthorized("Invalid access token."))
    }
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        let y = b.get(i % b.len().max(1)).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// Reads the body, at most `max_body_bytes` (413 beyond).
async fn read_body(server: &Server, body: Body) -> Result<Bytes, HttpError> {
    let max = server.config.max_body_bytes;
    axum::body::to_bytes(body, max).await.map_err(|_| HttpError {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        text: format!("The request body is too large (max {max} bytes)."),
    })
}

fn record(server: &Server, kind: &'static str, result: Result<Response, HttpError>) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    server.metrics.request(kind, response.status().as_u16());
    response
}

async fn metadata(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = metadata_inner(&server, &headers, body).await;
    record(&server, "metadata", result)
}

async fn metadata_inner(server: &Server, headers: &HeaderMap, body: Body) -> Result<Response, HttpError> {
    authorize(server, headers)?;
    let body = read_body(server, body).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(bad("The server requires at least protocol version 2. Use Deno 1.38.0 or newer."));
    }
    let request: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| bad(format!("Invalid metadata exchange request: {e}")))?;
    let offered = request
        .get("supportedVersions")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("Invalid metadata exchange request: missing supportedVersions"))?;
    let version = [3u64, 2, 1]
        .into_iter()
        .find(|v| offered.iter().any(|o| o.as_u64() == Some(*v)))
        .ok_or_else(|| {
            bad("The server could not negotiate a protocol version. The server requires protocol version 1, 2 or 3.")
        })?;
    let url = if version == 1 {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(|| bad("Protocol version 1 needs a host header."))?;
        format!("http://{host}/v2")
    } else {
        "/v2".to_string()
    };
    let expires_at = SystemTime::now() + Duration::from_secs(24 * 3600);
    let body = serde_json::json!({
        "version": version,
        "databaseId": server.database_id,
        "endpoints": [{ "url": url, "consistency": "strong" }],
        "token": server.config.access_token,
        "expiresAt": rfc3339(expires_at),
    });
    Ok(([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response())
}

/// Formats a time as RFC 3339 in UTC with milliseconds.
pub fn rfc3339(time: SystemTime) -> String {
    let ms = time.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let secs = i64::try_from(ms / 1000).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// Checks the data path headers; returns the protocol version (1, 2 or 3).
fn data_path(server: &Server, headers: &HeaderMap) -> Result<u8, HttpError> {
    authorize(server, headers)?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (version, id) = match (header("x-denokv-version"), header("x-transaction-domain-id")) {
        (Some("2"), _) => (2, header("x-denokv-database-id")),
        (Some("3"), _) => (3, header("x-denokv-database-id")),
        (Some(_), _) => {
            return Err(bad("Unsupported protocol version: the server speaks versions 1, 2 and 3."))
        }
        (None, Some(id)) => (1, Some(id)),
        (None, None) => return Err(bad("Missing x-denokv-version header.")),
    };
    if id != Some(server.database_id.as_str()) {
        return Err(bad("Invalid database id."));
    }
    Ok(version)
}

/// Decodes a protobuf request body; an empty or undecodable body is a 400.
fn decode<M: Message + Default>(body: &[u8]) -> Result<M, HttpError> {
    if body.is_empty() {
        return Err(bad("The request body is empty."));
    }
    M::decode(body).map_err(|e| bad(format!("The request body is not a valid protobuf message: {e}")))
}

fn protobuf(message: &impl Message) -> Response {
    ([(header::CONTENT_TYPE, "application/x-protobuf")], message.encode_to_vec()).into_response()
}

fn entry_proto(entry: RawEntry) -> proto::KvEntry {
    let (value, encoding) = value_proto(entry.value);
    proto::KvEntry { key: entry.key, value, encoding, versionstamp: entry.versionstamp.0.to_vec() }
}

fn value_proto(value: KvValue) -> (Vec<u8>, i32) {
    match value {
        KvValue::V8(data) => (data, proto::VE_V8),
        KvValue::U64(n) => (n.to_le_bytes().to_vec(), proto::VE_LE64),
        KvValue::Bytes(data) => (data, proto::VE_BYTES),
    }
}

async fn snapshot_read(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = snapshot_read_inner(&server, &headers, body).await;
    record(&server, "snapshot_read", result)
}

async fn snapshot_read_inner(
    server: &Arc<Server>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    data_path(server, headers)?;
    let request: proto::SnapshotRead = decode(&read_body(server, body).await?)?;
    if request.ranges.len() > MAX_READ_RANGES {
        return Err(bad(format!("Too many ranges in one snapshot read (max {MAX_READ_RANGES}).")));
    }
    let mut ranges = Vec::with_capacity(request.ranges.len());
    for range in request.ranges {
        if range.limit <= 0 || range.limit > MAX_READ_LIMIT {
            return Err(bad("The read range limit of the snapshot read request is invalid."));
        }
        if range.start.len() > MAX_READ_KEY_BYTES || range.end.len() > MAX_READ_KEY_BYTES {
            return Err(bad("A key exceeds the key size limit."));
        }
        let limit = usize::try_from(range.limit).unwrap_or(0);
        ranges.push(RawRange { start: range.start, end: range.end, limit, reverse: range.reverse });
    }
    let kv = server.kv.clone();
    let found = blocking(move || kv.snapshot_read(&ranges).map_err(kv_error)).await?;
    let output = proto::SnapshotReadOutput {
        ranges: found
            .into_iter()
            .map(|entries| proto::ReadRangeOutput { values: entries.into_iter().map(entry_proto).collect() })
            .collect(),
        read_disabled: false,
        read_is_strongly_consistent: true,
        status: proto::SR_SUCCESS,
    };
    Ok(protobuf(&output))
}

fn decode_key(bytes: &[u8], what: &str) -> Result<Key, HttpError> {
    Key::decode(bytes).map_err(|e| bad(format!("Invalid {what} key: {e}.")))
}

fn decode_value(value: Option<proto::KvValue>) -> Result<KvValue, HttpError> {
    let value = value.ok_or_else(|| bad("Invalid mutation kind or arguments."))?;
    match value.encoding {
        proto::VE_V8 => Ok(KvValue::V8(value.data)),
        proto::VE_LE64 => {
            let bytes: [u8; 8] =
                value.data.try_into().map_err(|_| bad("A KvU64 value (encoding 2) must be 8 bytes."))?;
            Ok(KvValue::U64(u64::from_le_bytes(bytes)))
        }
        proto::VE_BYTES => Ok(KvValue::Bytes(value.data)),
        other => Err(bad(format!("Unknown value encoding {other}."))),
    }
}

/// An atomic write decoded and validated: checks, then mutations with their expiry.
struct DecodedWrite {
    checks: Vec<(Key, Option<Versionstamp>)>,
    mutations: Vec<(Mutation, Option<u64>)>,
}

fn decode_write(write: proto::AtomicWrite, kv: &Kv) -> Result<DecodedWrite, HttpError> {
    let limits = kv.limits();
    if write.checks.len() > limits.max_checks {
        return Err(bad("Too many checks included in atomic write."));
    }
    if write.mutations.len() + write.enqueues.len() > limits.max_mutations {
        return Err(bad("Too many mutations / enqueues included in atomic write."));
    }
    if !write.enqueues.is_empty() {
        return Err(bad("Enqueue operations are not supported by this server."));
    }
    let mut checks = Vec::with_capacity(write.checks.len());
    for check in write.checks {
        let versionstamp = match check.versionstamp.len() {
            0 => None,
            10 => {
                let mut stamp = [0u8; 10];
                stamp.copy_from_slice(&check.versionstamp);
                Some(Versionstamp(stamp))
            }
            _ => return Err(bad("Invalid versionstamp.")),
        };
        checks.push((decode_key(&check.key, "check")?, versionstamp));
    }
    let mut mutations = Vec::with_capacity(write.mutations.len());
    for m in write.mutations {
        let key = decode_key(&m.key, "mutation")?;
        let kind = match m.mutation_type {
            proto::M_SET => MutationKind::Set(decode_value(m.value)?),
            proto::M_DELETE => MutationKind::Delete,
            proto::M_SUM => {
                if !m.sum_min.is_empty() || !m.sum_max.is_empty() || m.sum_clamp {
                    return Err(bad(
                        "Sum bounds (sum_min, sum_max, sum_clamp) are not supported by this server.",
                    ));
                }
                MutationKind::Sum(decode_value(m.value)?)
            }
            proto::M_MIN => MutationKind::Min(decode_value(m.value)?),
            proto::M_MAX => MutationKind::Max(decode_value(m.value)?),
            proto::M_SET_SUFFIX_VERSIONSTAMPED_KEY => {
                MutationKind::SetSuffixVersionstampedKey(decode_value(m.value)?)
            }
            other => return Err(bad(format!("Unknown mutation type {other}."))),
        };
        let expires_at = match m.expire_at_ms {
            0 | -1 => None,
            ms if ms > 0 => Some(ms.unsigned_abs()),
            _ => return Err(bad("Invalid mutation kind or arguments.")),
        };
        mutations.push((Mutation { key, kind, expire_in: None }, expires_at));
    }
    Ok(DecodedWrite { checks, mutations })
}

/// Commits a decoded write; on a check failure, also reports which checks do not hold now.
fn commit(kv: &Kv, write: DecodedWrite) -> Result<proto::AtomicWriteOutput, HttpError> {
    let mut op = kv.atomic();
    for (key, versionstamp) in &write.checks {
        op = op.check(key, *versionstamp);
    }
    for (mutation, expires_at) in write.mutations {
        op = match expires_at {
            Some(at) => op.mutate_expiring_at(mutation, at),
            None => op.mutate(mutation),
        };
    }
    match op.commit().map_err(kv_error)? {
        CommitResult::Committed(versionstamp) => Ok(proto::AtomicWriteOutput {
            status: proto::AW_SUCCESS,
            versionstamp: versionstamp.0.to_vec(),
            failed_checks: Vec::new(),
        }),
        CommitResult::CheckFailed => {
            let mut failed_checks = Vec::new();
            for (index, (key, expected)) in write.checks.iter().enumerate() {
                let current = kv.get::<KvValue>(key).map_err(kv_error)?.versionstamp;
                if current != *expected {
                    failed_checks.push(u32::try_from(index).unwrap_or(u32::MAX));
                }
            }
            Ok(proto::AtomicWriteOutput {
                status: proto::AW_CHECK_FAILURE,
                versionstamp: Vec::new(),
                failed_checks,
            })
        }
    }
}

async fn atomic_write(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = atomic_write_inner(&server, &headers, body).await;
    record(&server, "atomic_write", result)
}

async fn atomic_write_inner(
    server: &Arc<Server>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    data_path(server, headers)?;
    let request: proto::AtomicWrite = decode(&read_body(server, body).await?)?;
    let write = decode_write(request, &server.kv)?;
    let kv = server.kv.clone();
    let started = Instant::now();
    let output = blocking(move || commit(&kv, write)).await;
    server.metrics.commit(started.elapsed());
    Ok(protobuf(&output?))
}

async fn metrics(State(server): State<Arc<Server>>) -> Response {
    let stats = server.kv.engine().stats();
    let text = server.metrics.render(server.open_watches.load(Ordering::Relaxed), &stats);
    server.metrics.request("metrics", 200);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Decrements the open watch count when a stream ends.
struct WatchSlot(Arc<Server>);

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.0.open_watches.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn watch(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = watch_inner(&server, &headers, body).await;
    record(&server, "watch", result)
}

async fn watch_inner(server: &Arc<Server>, headers: &HeaderMap, body: Body) -> Result<Response, HttpError> {
    if data_path(server, headers)? < 3 {
        return Err(bad("Watch needs protocol version 3."));
    }
    let request: proto::Watch = decode(&read_body(server, body).await?)?;
    let raw: Vec<Vec<u8>> = request.keys.into_iter().map(|k| k.key).collect();
    let keys = raw.iter().map(|k| decode_key(k, "watch")).collect::<Result<Vec<_>, _>>()?;
    if server.shutting_down.load(Ordering::SeqCst) {
        return Err(unavailable());
    }
    if server.open_watches.fetch_add(1, Ordering::SeqCst) >= server.config.max_watches {
        server.open_watches.fetch_sub(1, Ordering::SeqCst);
        return Err(HttpError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            text: "Too many open watch streams.".into(),
        });
    }
    let slot = WatchSlot(server.clone());
    let kv = server.kv.clone();
    let watch = blocking(move || kv.watch(&keys).map_err(kv_error)).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let spawned = std::thread::Builder::new()
        .name("stampkv-watch".into())
        .stack_size(256 << 10)
        .spawn(move || watch_loop(slot, watch, raw, tx));
    if spawned.is_err() {
        return Err(unavailable());
    }
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (Ok::<_, Infallible>(frame), rx))
    });
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], Body::from_stream(stream)).into_response())
}

/// Runs one watch stream on its own thread until the client goes away or the server stops.
fn watch_loop(
    slot: WatchSlot,
    mut watch: stampkv::Watch,
    raw: Vec<Vec<u8>>,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    let server = &slot.0;
    let mut last: Option<Vec<Option<Versionstamp>>> = None;
    let mut last_sent = Instant::now();
    while !server.shutting_down.load(Ordering::SeqCst) && !tx.is_closed() {
        let frame = match watch.next_timeout(Duration::from_millis(200)) {
            None if last_sent.elapsed() >= server.config.keepalive_interval => {
                Bytes::from_static(&[0, 0, 0, 0])
            }
            None => continue,
            Some(Err(e)) => {
                log("warn", "watch ended", &format!("error={:?}", e.to_string()));
                break;
            }
            Some(Ok(entries)) => {
                let stamps: Vec<Option<Versionstamp>> = entries.iter().map(|e| e.versionstamp).collect();
                let keys = entries
                    .into_iter()
                    .zip(&raw)
                    .enumerate()
                    .map(|(i, (entry, key))| {
                        let changed = last.as_ref().and_then(|l| l.get(i)) != Some(&entry.versionstamp);
                        let entry_if_changed = match (changed, entry.value, entry.versionstamp) {
                            (true, Some(value), Some(versionstamp)) => {
                                Some(entry_proto(RawEntry { key: key.clone(), value, versionstamp }))
                            }
                            _ => None,
                        };
                        proto::WatchKeyOutput { changed, entry_if_changed }
                    })
                    .collect();
                last = Some(stamps);
                let message = proto::WatchOutput { status: proto::SR_SUCCESS, keys }.encode_to_vec();
                let mut frame = Vec::with_capacity(4 + message.len());
                frame.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_le_bytes());
                frame.extend_from_slice(&message);
                Bytes::from(frame)
            }
        };
        if tx.blocking_send(frame).is_err() {
            break;
        }
        last_sent = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_251_199_123);
        assert_eq!(rfc3339(t), "2024-02-29T23:59:59.123Z");
    }

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abcdefghijkl", b"abcdefghijkl"));
        assert!(!constant_time_eq(b"abcdefghijkl", b"abcdefghijkm"));
        assert!(!constant_time_eq(b"abcdefghijk", b"abcdefghijkl"));
        assert!(!constant_time_eq(b"", b"abcdefghijkl"));
    }
}
