//! The client against a scripted KV Connect server: endpoint choice, retries, final 4xx
//! answers, metadata refresh (expiry, 401 / `Invalid database id.`, weak strong reads),
//! protocol version headers, added latency.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use prost::Message;
use stampkv::{key, Consistency, KvValue, ListOptions, Selector};
use stampkv_client::proto;
use stampkv_client::{ConnectOptions, RemoteError, RemoteKv, Retry};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::net::TcpListener;

const TOKEN: &str = "fake-access-token";
const DATA_TOKEN: &str = "fake-data-token";

/// The scripted server's knobs and what it saw.
struct Fake {
    base: String,
    version: AtomicU32,
    with_eventual: AtomicBool,
    database_id: Mutex<String>,
    /// Answer this many data path calls with 503 first.
    fail_503: AtomicU32,
    /// Answer every data path call with this.
    fail_with: Mutex<Option<(u16, String)>>,
    /// The strong endpoint answers reads as not strongly consistent.
    weak_strong: AtomicBool,
    expires_in_ms: AtomicU64,
    hits: Mutex<BTreeMap<String, u32>>,
    last_headers: Mutex<Option<HeaderMap>>,
}

impl Fake {
    fn hits(&self, path: &str) -> u32 {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

async fn handle(State(fake): State<Arc<Fake>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    *fake.hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    if path == "/" {
        return metadata(&fake, &headers);
    }
    if !["/snapshot_read", "/atomic_write", "/watch"].iter().any(|call| path.ends_with(call)) {
        return (StatusCode::NOT_FOUND, "Resource not found.").into_response();
    }
    *fake.last_headers.lock().unwrap() = Some(headers.clone());
    if fake.fail_503.load(Ordering::SeqCst) > 0 {
        fake.fail_503.fetch_sub(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, "try again later").into_response();
    }
    if let Some((status, text)) = fake.fail_with.lock().unwrap().clone() {
        return (StatusCode::from_u16(status).unwrap(), text).into_response();
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {DATA_TOKEN}")) {
        return (StatusCode::UNAUTHORIZED, "Invalid access token.").into_response();
    }
    let id = headers.get("x-denokv-database-id").or_else(|| headers.get("x-transaction-domain-id"));
    if id.and_then(|v| v.to_str().ok()) != Some(fake.database_id.lock().unwrap().as_str()) {
        return (StatusCode::BAD_REQUEST, "Invalid database id.").into_response();
    }
    if path.ends_with("/snapshot_read") {
        let read = proto::SnapshotRead::decode(body).unwrap();
        let strong = path.starts_with("/strong") && !fake.weak_strong.load(Ordering::SeqCst);
        let output = proto::SnapshotReadOutput {
            ranges: read.ranges.iter().map(|_| proto::ReadRangeOutput { values: vec![] }).collect(),
            read_disabled: false,
            read_is_strongly_consistent: strong,
            status: proto::SR_SUCCESS,
        };
        return output.encode_to_vec().into_response();
    }
    if path.ends_with("/atomic_write") {
        let output = proto::AtomicWriteOutput {
            status: proto::AW_SUCCESS,
            versionstamp: vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
            failed_checks: vec![],
        };
        return output.encode_to_vec().into_response();
    }
    if path.ends_with("/watch") {
        let watch = proto::Watch::decode(body).unwrap();
        let keys = watch.keys.iter().map(|_| proto::WatchKeyOutput { changed: true, entry_if_changed: None });
        let output = proto::WatchOutput { status: proto::SR_SUCCESS, keys: keys.collect() };
        let mut stream = proto::frame::PING.to_vec();
        stream.extend(proto::frame::encode_frame(&output));
        return Body::from(stream).into_response();
    }
    unreachable!("{path}")
}

fn metadata(fake: &Fake, headers: &HeaderMap) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {TOKEN}")) {
        return (StatusCode::UNAUTHORIZED, "Invalid access token.").into_response();
    }
    let version = fake.version.load(Ordering::SeqCst);
    let url = |path: &str| if version == 1 { format!("{}{path}", fake.base) } else { path.to_owned() };
    let mut endpoints = vec![serde_json::json!({ "url": url("/strong"), "consistency": "strong" })];
    if fake.with_eventual.load(Ordering::SeqCst) {
        endpoints.insert(0, serde_json::json!({ "url": url("/eventual"), "consistency": "eventual" }));
    }
    let expires = SystemTime::now() + Duration::from_millis(fake.expires_in_ms.load(Ordering::SeqCst));
    let body = serde_json::json!({
        "version": version,
        "databaseId": fake.database_id.lock().unwrap().clone(),
        "endpoints": endpoints,
        "token": DATA_TOKEN,
        "expiresAt": stampkv_server::proto::http::rfc3339(expires),
    });
    ([("content-type", "application/json")], body.to_string()).into_response()
}

async fn start_fake() -> Arc<Fake> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let fake = Arc::new(Fake {
        base,
        version: AtomicU32::new(3),
        with_eventual: AtomicBool::new(true),
        database_id: Mutex::new("db-1".into()),
        fail_503: AtomicU32::new(0),
        fail_with: Mutex::new(None),
        weak_strong: AtomicBool::new(false),
        expires_in_ms: AtomicU64::new(24 * 3600 * 1000),
        hits: Mutex::new(BTreeMap::new()),
        last_headers: Mutex::new(None),
    });
    let app = axum::Router::new().fallback(handle).with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    fake
}

fn quick(attempts: u32) -> ConnectOptions {
    ConnectOptions {
        retry: Retry { attempts, base_delay: Duration::from_millis(5) },
        ..ConnectOptions::new(TOKEN)
    }
}

#[tokio::test]
async fn strong_calls_go_to_the_strong_endpoint_and_eventual_ones_to_the_eventual() {
    let fake = start_fake().await;
    let kv = RemoteKv::connect(&fake.base, quick(1)).await.unwrap();
    let base = &fake.base;
    assert_eq!(kv.endpoints(), (format!("{base}/strong"), Some(format!("{base}/eventual"))));
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    kv.get_many::<KvValue>(&[key!["a"], key!["b"]]).await.unwrap();
    kv.set(&key!["a"], &KvValue::U64(1)).await.unwrap();
    assert_eq!((fake.hits("/strong/snapshot_read"), fake.hits("/strong/atomic_write")), (2, 1));
    assert_eq!(fake.hits("/eventual/snapshot_read"), 0);

    kv.get_with::<KvValue>(&key!["a"], Consistency::Eventual).await.unwrap();
    let eventual_list = ListOptions { consistency: Consistency::Eventual, ..ListOptions::default() };
    kv.list::<KvValue>(&Selector::prefix(key!["a"]), &eventual_list).unwrap().collect().await.unwrap();
    let mut watch = kv.watch(&[key!["w"]]).await.unwrap();
    let first = watch.next().await.unwrap().unwrap();
    assert_eq!(first.len(), 1);
    assert!(watch.next().await.is_none(), "the stream ends with the body");
    assert_eq!(fake.hits("/eventual/snapshot_read"), 2);
    assert_eq!(fake.hits("/eventual/watch"), 1);
    assert_eq!(fake.hits("/strong/watch"), 0);
    assert_eq!((fake.hits("/strong/snapshot_read"), fake.hits("/strong/atomic_write")), (2, 1));
    let stats = kv.stats();
    assert_eq!((stats.snapshot_reads, stats.atomic_writes, stats.watches), (4, 1, 1));
    assert_eq!((stats.eventual_requests, stats.metadata_exchanges, stats.retries), (3, 1, 0));

    let headers = fake.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["x-denokv-database-id"], "db-1");
    assert_eq!(headers["x-denokv-version"], "3");
    assert_eq!(headers["content-type"], "application/x-protobuf");
}

#[tokio::test]
async fn without_an_eventual_endpoint_everything_goes_to_the_strong_one() {
    let fake = start_fake().await;
    fake.with_eventual.store(false, Ordering::SeqCst);
    let kv = RemoteKv::connect(&fake.base, quick(1)).await.unwrap();
    assert_eq!(kv.endpoints(), (format!("{}/strong", fake.base), None));
    kv.get_with::<KvValue>(&key!["a"], Consistency::Eventual).await.unwrap();
    kv.watch(&[key!["w"]]).await.unwrap().next().await.unwrap().unwrap();
    assert_eq!((fake.hits("/strong/snapshot_read"), fake.hits("/strong/watch")), (1, 1));
    assert_eq!(kv.stats().eventual_requests, 0);
}

#[tokio::test]
async fn version_1_uses_absolute_urls_and_the_transaction_domain_header() {
    let fake = start_fake().await;
    fake.version.store(1, Ordering::SeqCst);
    let kv = RemoteKv::connect(&fake.base, quick(1)).await.unwrap();
    assert_eq!(kv.protocol_version(), 1);
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    let headers = fake.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(headers["x-transaction-domain-id"], "db-1");
    assert!(headers.get("x-denokv-version").is_none());
    let e = kv.watch(&[key!["w"]]).await.unwrap_err();
    assert!(matches!(e, RemoteError::Protocol(_)), "{e:?}");
    assert!(e.to_string().contains("protocol version 3"), "{e}");
}

#[tokio::test]
async fn a_503_is_retried_until_it_succeeds() {
    let fake = start_fake().await;
    let kv = RemoteKv::connect(&fake.base, quick(4)).await.unwrap();
    fake.fail_503.store(2, Ordering::SeqCst);
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    let stats = kv.stats();
    assert_eq!((stats.snapshot_reads, stats.retries), (3, 2));
    assert_eq!(fake.hits("/strong/snapshot_read"), 3);
}

#[tokio::test]
async fn a_server_that_stays_unavailable_fails_after_the_attempts() {
    let fake = start_fake().await;
    let kv = RemoteKv::connect(&fake.base, quick(3)).await.unwrap();
    fake.fail_503.store(100, Ordering::SeqCst);
    let e = kv.set(&key!["a"], &KvValue::U64(1)).await.unwrap_err();
    match &e {
        RemoteError::Unavailable { attempts: 3, last } => assert!(last.contains("status 503"), "{last}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(!e.to_string().contains('\n'));
    assert_eq!(fake.hits("/strong/atomic_write"), 3);
}

#[tokio::test]
async fn a_4xx_answer_is_final() {
    let fake = start_fake().await;
    let kv = RemoteKv::connect(&fake.base, quick(5)).await.unwrap();
    *fake.fail_with.lock().unwrap() = Some((403, "Forbidden here.".into()));
    match kv.get::<KvValue>(&key!["a"]).await {
        Err(RemoteError::Http { status: 403, body }) => assert_eq!(body, "Forbidden here."),
        other => panic!("expected a 403, got {other:?}"),
    }
    assert_eq!((kv.stats().snapshot_reads, kv.stats().retries), (1, 0));
}

#[tokio::test]
async fn an_invalid_database_id_refreshes_the_metadata_once() {
    let fake = start_fake().await;
    let kv = RemoteKv::connect(&fake.base, quick(1)).await.unwrap();
    *fake.database_id.lock().unwrap() = "db-2".into();
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    assert_eq!(kv.stats().metadata_exchanges, 2);
    assert_eq!(fake.hits("/strong/snapshot_read"), 2);
    // A server that keeps refusing: one refresh, one more try, then the error.
    *fake.fail_with.lock().unwrap() = Some((400, "Invalid database id.".into()));
    let e = kv.get::<KvValue>(&key!["a"]).await.unwrap_err();
    assert!(matches!(e, RemoteError::Http { status: 400, .. }), "{e:?}");
    assert_eq!(kv.stats().metadata_exchanges, 3);
    assert_eq!(fake.hits("/strong/snapshot_read"), 4);
}

#[tokio::test]
async fn a_weak_answer_to_a_strong_read_refreshes_then_fails() {
    let fake = start_fake().await;
    let kv = RemoteKv::connect(&fake.base, quick(1)).await.unwrap();
    fake.weak_strong.store(true, Ordering::SeqCst);
    let e = kv.get::<KvValue>(&key!["a"]).await.unwrap_err();
    assert!(matches!(e, RemoteError::NotStronglyConsistent), "{e:?}");
    assert_eq!(e.to_string(), "Strong consistency reads are not available for this database");
    assert_eq!((kv.stats().metadata_exchanges, fake.hits("/strong/snapshot_read")), (2, 2));
    // An eventual read accepts the same answer.
    kv.get_with::<KvValue>(&key!["a"], Consistency::Eventual).await.unwrap();
}

#[tokio::test]
async fn metadata_is_refreshed_before_it_expires() {
    let fake = start_fake().await;
    // Lifetime 1.2 s: refreshed after half of it.
    fake.expires_in_ms.store(1200, Ordering::SeqCst);
    let kv = RemoteKv::connect(&fake.base, quick(1)).await.unwrap();
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    assert_eq!(kv.stats().metadata_exchanges, 1);
    fake.expires_in_ms.store(24 * 3600 * 1000, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(700)).await;
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    assert_eq!(kv.stats().metadata_exchanges, 2);
}

#[tokio::test]
async fn connect_errors_are_clear() {
    let fake = start_fake().await;
    let e = RemoteKv::connect("https://127.0.0.1:1", quick(1)).await.unwrap_err();
    assert!(e.to_string().contains("https is not supported"), "{e}");
    let e = RemoteKv::connect(&format!("{}/nowhere", fake.base), quick(1)).await.unwrap_err();
    assert!(e.to_string().contains("responded with status 404"), "{e}");
    fake.version.store(1000, Ordering::SeqCst);
    let e = RemoteKv::connect(&fake.base, quick(1)).await.unwrap_err();
    assert!(e.to_string().contains("unsupported KV Connect metadata version 1000"), "{e}");
    // Nothing listens on a port just released: a network error, retried, then Unavailable.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = RemoteKv::connect(&format!("http://127.0.0.1:{port}"), quick(2)).await.unwrap_err();
    assert!(matches!(e, RemoteError::Unavailable { attempts: 2, .. }), "{e:?}");
}

#[tokio::test]
async fn added_latency_delays_every_request() {
    let fake = start_fake().await;
    let options = ConnectOptions { added_latency: Duration::from_millis(60), ..quick(1) };
    let started = Instant::now();
    let kv = RemoteKv::connect(&fake.base, options).await.unwrap();
    kv.get::<KvValue>(&key!["a"]).await.unwrap();
    kv.set(&key!["a"], &KvValue::U64(1)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(180), "{:?}", started.elapsed());
}
