//! `kvconnect_request` and `metadata_json`: request bodies from the network through the
//! KV Connect server's real request handling.
//!
//! One server per process: `stampkv_server::Server` over an in-memory `Kv` (small engine
//! options, background flushes and compactions), its axum router driven in-process with
//! `tower::ServiceExt::oneshot` on a current-thread tokio runtime — the same handlers,
//! extractors and body limits a socket reaches, without the socket.
//!
//! `kvconnect_request`: the first input byte chooses the endpoint (modulo 4: 0 `POST /`, the
//! metadata exchange; 1 `POST /v2/snapshot_read`; 2 `POST /v2/atomic_write`; 3
//! `POST /v2/watch`) and, in its bits 2 to 4, the protocol headers (6: version 2, 7: version
//! 1's `x-transaction-domain-id`, else version 3); the rest is the request body. Every
//! request carries the right token and database id. `metadata_json`: the whole input is the
//! body of a metadata exchange.
//!
//! Properties: the server never panics and never answers 5xx (a 500 would be an engine
//! error or a panic in a blocking task; the only 503 allowed is the documented "too many
//! watch streams" when the watch threads of earlier inputs have not ended yet). And:
//!
//! - a 200 metadata answer is JSON with the version the body asks for (the highest of 3, 2,
//!   1 in `supportedVersions`), this server's `databaseId` and a strong `/v2` endpoint; a body
//!   offering one of those versions is always answered 200;
//! - a 200 `snapshot_read` answer decodes as `SnapshotReadOutput`, with one range per range
//!   asked for, each within its limit, its keys inside `[start, end)` (below the reserved
//!   `0xFF` space), strictly in order (reversed if asked), with valid encodings and 10-byte
//!   versionstamps;
//! - a 200 `atomic_write` answer decodes as `AtomicWriteOutput`: a success carries a
//!   versionstamp larger than every earlier one and no failed checks; a check failure names
//!   only checks that exist and carries no versionstamp;
//! - a 200 `watch` answer streams frames that decode (`FrameDecoder`), the first message
//!   having one entry per watched key. Only the first frame is read (at most
//!   [`WATCH_WAIT`]); then the body is dropped, which ends the stream.
//!
//! Successful writes accumulate in the database; after [`CLEAR_EVERY`] of them every key is
//! deleted, so the database (and each execution) stays small.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use prost::Message;
use stampkv::engine::{Options, SyncMode};
use stampkv::remote::RawRange;
use stampkv::{Key, Kv, KvOptions};
use stampkv_server::proto;
use stampkv_server::proto::frame::FrameDecoder;
use stampkv_server::{Config, Server};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

/// The access token of the fuzzed server.
const TOKEN: &str = "fuzz-token-0123456789";
/// Successful atomic writes after which every key is deleted.
pub const CLEAR_EVERY: u64 = 512;
/// How long a watch answer may take to send its first frame before the target stops
/// waiting (the stream's first frame is the keys' current state, sent at once).
pub const WATCH_WAIT: Duration = Duration::from_secs(2);

/// The endpoint a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Metadata,
    SnapshotRead,
    AtomicWrite,
    Watch,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Endpoint::Metadata => "/",
            Endpoint::SnapshotRead => "/v2/snapshot_read",
            Endpoint::AtomicWrite => "/v2/atomic_write",
            Endpoint::Watch => "/v2/watch",
        }
    }
}

/// The server of this process and what the target remembers between inputs.
struct Harness {
    runtime: tokio::runtime::Runtime,
    server: Arc<Server>,
    router: Router,
    /// The versionstamp of the last successful atomic write.
    last_versionstamp: Vec<u8>,
    /// Successful atomic writes since the database was last cleared.
    writes: u64,
}

fn harness() -> &'static Mutex<Harness> {
    static HARNESS: OnceLock<Mutex<Harness>> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let mut engine = Options::default();
        engine.write_buffer_size = 256 << 10;
        engine.sync_mode = SyncMode::Buffered;
        engine.wal_preallocate_bytes = 0;
        engine.block_cache_bytes = 1 << 20;
        engine.max_open_files = 64;
        let kv = Kv::open_in_memory(KvOptions::with_engine(engine)).expect("open the database");
        let server = Server::new(kv, Config::new(TOKEN)).expect("server");
        let router = stampkv_server::router(server.clone());
        Mutex::new(Harness { runtime, server, router, last_versionstamp: Vec::new(), writes: 0 })
    })
}

/// Runs the `kvconnect_request` target on one input.
pub fn kvconnect_request(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else { return };
    let endpoint = match selector % 4 {
        0 => Endpoint::Metadata,
        1 => Endpoint::SnapshotRead,
        2 => Endpoint::AtomicWrite,
        _ => Endpoint::Watch,
    };
    let version = match (selector >> 2) % 8 {
        6 => 2,
        7 => 1,
        _ => 3,
    };
    run(endpoint, version, body);
}

/// Runs the `metadata_json` target on one input: the body of a metadata exchange.
pub fn metadata_json(data: &[u8]) {
    run(Endpoint::Metadata, 3, data);
}

fn run(endpoint: Endpoint, version: u8, body: &[u8]) {
    // A panic inside a check below poisons the lock; the next input still runs.
    let mut guard = harness().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let h = &mut *guard;
    let database_id = h.server.database_id().to_owned();
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(endpoint.path())
        .header(header::HOST, "127.0.0.1:4512")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header(header::CONTENT_LENGTH, body.len());
    if endpoint == Endpoint::Metadata {
        request = request.header(header::CONTENT_TYPE, "application/json");
    } else {
        request = request.header(header::CONTENT_TYPE, "application/x-protobuf");
        request = match version {
            1 => request.header("x-transaction-domain-id", &database_id),
            v => {
                request.header("x-denokv-version", v.to_string()).header("x-denokv-database-id", &database_id)
            }
        };
    }
    let request = request.body(Body::from(body.to_vec())).expect("request");
    let router = h.router.clone();
    let (status, answer) = h.runtime.block_on(async move {
        let response = match router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let answer = if status == StatusCode::OK && endpoint == Endpoint::Watch {
            first_frames(response.into_body()).await
        } else {
            match axum::body::to_bytes(response.into_body(), usize::MAX).await {
                Ok(bytes) => bytes.to_vec(),
                Err(e) => panic!("{endpoint:?}: reading the {status} answer failed: {e}"),
            }
        };
        (status, answer)
    });
    let text = || String::from_utf8_lossy(&answer).into_owned();
    if crate::util::verbose() {
        let shown = if status == StatusCode::OK { format!("{} bytes", answer.len()) } else { text() };
        eprintln!("{endpoint:?} (protocol {version}, {} bytes): {status} {shown}", body.len());
    }
    let too_many_watches = endpoint == Endpoint::Watch
        && status == StatusCode::SERVICE_UNAVAILABLE
        && text() == "Too many open watch streams.";
    assert!(
        !status.is_server_error() || too_many_watches,
        "{endpoint:?} (protocol {version}) answered {status}: {:?}; body {}",
        text(),
        crate::util::hex(body)
    );
    if status != StatusCode::OK {
        assert!(
            status.is_client_error() || status.is_server_error(),
            "{endpoint:?}: unexpected status {status}: {:?}",
            text()
        );
        if endpoint == Endpoint::Metadata {
            check_metadata_refused(body, status, &text());
        }
        return;
    }
    match endpoint {
        Endpoint::Metadata => check_metadata(body, &answer, &database_id),
        Endpoint::SnapshotRead => check_snapshot_read(body, &answer),
        Endpoint::AtomicWrite => {
            if check_atomic_write(body, &answer, &mut h.last_versionstamp) {
                h.writes += 1;
                if h.writes >= CLEAR_EVERY {
                    clear(h.server.kv());
                    h.writes = 0;
                }
            }
        }
        Endpoint::Watch => check_watch(body, &answer),
    }
}

/// The frames of a watch stream up to its first message (or [`WATCH_WAIT`]), as bytes.
async fn first_frames(mut body: Body) -> Vec<u8> {
    let mut bytes = Vec::new();
    let deadline = tokio::time::Instant::now() + WATCH_WAIT;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_elapsed) => break,
            Ok(None) => break,
            Ok(Some(Err(e))) => panic!("watch: the stream failed: {e}"),
            Ok(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            bytes.extend_from_slice(data);
        }
        let mut decoder = FrameDecoder::new();
        decoder.push(&bytes);
        let mut message = false;
        while let Some(popped) = decoder.pop() {
            message |= matches!(popped, Ok(Some(_)) | Err(_));
        }
        if message {
            break;
        }
    }
    bytes
}

/// The version a metadata body asks for: the highest of 3, 2 and 1 in its
/// `supportedVersions` array, if it is a JSON object with one.
fn offered_version(body: &[u8]) -> Option<u64> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    let offered = json.get("supportedVersions")?.as_array()?;
    [3u64, 2, 1].into_iter().find(|v| offered.iter().any(|o| o.as_u64() == Some(*v)))
}

fn check_metadata_refused(body: &[u8], status: StatusCode, text: &str) {
    if let Some(version) = offered_version(body) {
        panic!(
            "metadata: a body offering version {version} was refused with {status} {text:?}: {:?}",
            String::from_utf8_lossy(body)
        );
    }
}

fn check_metadata(body: &[u8], answer: &[u8], database_id: &str) {
    let shown = || String::from_utf8_lossy(body).into_owned();
    let json: serde_json::Value = match serde_json::from_slice(answer) {
        Ok(json) => json,
        Err(e) => panic!("metadata: the answer is not JSON ({e}): {:?}", String::from_utf8_lossy(answer)),
    };
    let version = json.get("version").and_then(serde_json::Value::as_u64);
    assert!(version.is_some(), "metadata: no version in {json} (body {:?})", shown());
    assert_eq!(version, offered_version(body), "metadata: version of {json} for body {:?}", shown());
    assert_eq!(
        json.get("databaseId").and_then(serde_json::Value::as_str),
        Some(database_id),
        "metadata: databaseId of {json}"
    );
    let endpoints = json.get("endpoints").and_then(serde_json::Value::as_array);
    let Some([endpoint]) = endpoints.map(Vec::as_slice) else {
        panic!("metadata: endpoints of {json} are not one endpoint")
    };
    let url = endpoint.get("url").and_then(serde_json::Value::as_str).unwrap_or_default();
    assert!(url.ends_with("/v2"), "metadata: endpoint url {url:?} in {json}");
    assert_eq!(
        endpoint.get("consistency").and_then(serde_json::Value::as_str),
        Some("strong"),
        "metadata: endpoint of {json}"
    );
    for field in ["token", "expiresAt"] {
        assert!(json.get(field).is_some_and(serde_json::Value::is_string), "metadata: {field} of {json}");
    }
}

fn check_snapshot_read(body: &[u8], answer: &[u8]) {
    let request = match proto::SnapshotRead::decode(body) {
        Ok(request) => request,
        Err(e) => panic!(
            "snapshot_read: answered 200 to a body that does not decode ({e}): {}",
            crate::util::hex(body)
        ),
    };
    let output = match proto::SnapshotReadOutput::decode(answer) {
        Ok(output) => output,
        Err(e) => panic!("snapshot_read: the 200 answer does not decode: {e}"),
    };
    assert_eq!(output.status, proto::SR_SUCCESS, "snapshot_read: status");
    assert_eq!(output.ranges.len(), request.ranges.len(), "snapshot_read: one output per range");
    for (range, found) in request.ranges.iter().zip(&output.ranges) {
        let limit = usize::try_from(range.limit).unwrap_or(0);
        assert!(
            found.values.len() <= limit,
            "snapshot_read: {} entries over limit {limit}",
            found.values.len()
        );
        for entry in &found.values {
            assert!(
                entry.key >= range.start && entry.key < range.end && entry.key.first() != Some(&0xFF),
                "snapshot_read: key {} outside [{}, {})",
                crate::util::hex(&entry.key),
                crate::util::hex(&range.start),
                crate::util::hex(&range.end)
            );
            assert!(
                Key::decode(&entry.key).is_ok(),
                "snapshot_read: stored key {} does not decode",
                crate::util::hex(&entry.key)
            );
            assert!(
                [proto::VE_V8, proto::VE_LE64, proto::VE_BYTES].contains(&entry.encoding),
                "snapshot_read: value encoding {}",
                entry.encoding
            );
            if entry.encoding == proto::VE_LE64 {
                assert_eq!(
                    entry.value.len(),
                    8,
                    "snapshot_read: a KvU64 value of {} bytes",
                    entry.value.len()
                );
            }
            assert_eq!(entry.versionstamp.len(), 10, "snapshot_read: versionstamp length");
        }
        for pair in found.values.windows(2) {
            let [a, b] = pair else { continue };
            let ordered = if range.reverse { a.key > b.key } else { a.key < b.key };
            assert!(
                ordered,
                "snapshot_read: keys {} then {} (reverse: {})",
                crate::util::hex(&a.key),
                crate::util::hex(&b.key),
                range.reverse
            );
        }
    }
}

/// Checks a 200 atomic write answer; true if the write was committed.
fn check_atomic_write(body: &[u8], answer: &[u8], last_versionstamp: &mut Vec<u8>) -> bool {
    let request = match proto::AtomicWrite::decode(body) {
        Ok(request) => request,
        Err(e) => panic!(
            "atomic_write: answered 200 to a body that does not decode ({e}): {}",
            crate::util::hex(body)
        ),
    };
    let output = match proto::AtomicWriteOutput::decode(answer) {
        Ok(output) => output,
        Err(e) => panic!("atomic_write: the 200 answer does not decode: {e}"),
    };
    match output.status {
        proto::AW_SUCCESS => {
            assert_eq!(output.versionstamp.len(), 10, "atomic_write: versionstamp length");
            assert!(output.failed_checks.is_empty(), "atomic_write: a success with failed checks");
            assert!(
                output.versionstamp > *last_versionstamp,
                "atomic_write: versionstamp {} not after {}",
                crate::util::hex(&output.versionstamp),
                crate::util::hex(last_versionstamp)
            );
            last_versionstamp.clone_from(&output.versionstamp);
            true
        }
        proto::AW_CHECK_FAILURE => {
            assert!(!request.checks.is_empty(), "atomic_write: a check failure without checks");
            assert!(output.versionstamp.is_empty(), "atomic_write: a check failure with a versionstamp");
            for index in &output.failed_checks {
                assert!(
                    usize::try_from(*index).is_ok_and(|i| i < request.checks.len()),
                    "atomic_write: failed check {index} of {}",
                    request.checks.len()
                );
            }
            false
        }
        other => panic!("atomic_write: status {other} in a 200 answer"),
    }
}

fn check_watch(body: &[u8], answer: &[u8]) {
    let request = match proto::Watch::decode(body) {
        Ok(request) => request,
        Err(e) => {
            panic!("watch: answered 200 to a body that does not decode ({e}): {}", crate::util::hex(body))
        }
    };
    let mut decoder = FrameDecoder::new();
    decoder.push(answer);
    while let Some(frame) = decoder.pop() {
        match frame {
            Ok(None) => {}
            Ok(Some(output)) => {
                assert_eq!(output.status, proto::SR_SUCCESS, "watch: status");
                assert_eq!(output.keys.len(), request.keys.len(), "watch: one output per key");
                return;
            }
            Err(e) => panic!("watch: the stream does not decode: {e}"),
        }
    }
}

/// Deletes every key (the database then holds tombstones only, which compactions drop).
fn clear(kv: &Kv) {
    loop {
        let range = RawRange { start: Vec::new(), end: vec![0xFF], limit: 100, reverse: false };
        let found = kv.snapshot_read(&[range]).expect("clear: read");
        let keys: Vec<Key> = found
            .into_iter()
            .flatten()
            .map(|entry| Key::decode(&entry.key).expect("clear: a stored key"))
            .collect();
        if keys.is_empty() {
            return;
        }
        let op = keys.iter().fold(kv.atomic(), |op, key| op.delete(key));
        op.commit().expect("clear: delete");
    }
}
