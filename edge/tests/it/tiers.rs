//! Edges on loopback, in front of a primary and of each other (primary ← regional edge ←
//! two local edges): what reaches upstream, coalesced misses, TTL and push staleness,
//! negative caching, writes through an edge, watch fan-out, eviction under a memory bound.

use futures_util::StreamExt;
use stampkv::{key, Consistency, Key, Kv, KvOptions, KvValue};
use stampkv_client::{ConnectOptions, RemoteKv};
use stampkv_edge::{serve as serve_edge, Edge, EdgeConfig};
use stampkv_kvconnect as proto;
use stampkv_server::{serve, Config, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

const TOKEN: &str = "edge-test-token-0123";

/// A running server task and the means to stop it.
struct Running {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn listen() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

async fn start_primary() -> (Kv, Running) {
    let kv = Kv::open_in_memory(KvOptions::default()).unwrap();
    let server = Server::new(kv.clone(), Config::new(TOKEN)).unwrap();
    let (listener, url) = listen().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, server, async move {
        let _ = stopped.await;
    }));
    (kv, Running { url, stop: Some(stop) })
}

async fn start_edge(upstream: &str, configure: impl FnOnce(&mut EdgeConfig)) -> (Arc<Edge>, Running) {
    let mut config = EdgeConfig::new(upstream, TOKEN);
    configure(&mut config);
    let edge = Edge::connect(config).await.unwrap();
    let (listener, url) = listen().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_edge(listener, edge.clone(), async move {
        let _ = stopped.await;
    }));
    (edge, Running { url, stop: Some(stop) })
}

async fn client(url: &str) -> RemoteKv {
    RemoteKv::connect(url, ConnectOptions::new(TOKEN)).await.unwrap()
}

fn encoded(key: &Key) -> Vec<u8> {
    key.encode().unwrap()
}

/// An eventual point read through `kv`: the stored bytes, if any.
async fn eventual_get(kv: &RemoteKv, key: &Key) -> Option<Vec<u8>> {
    let start = encoded(key);
    let mut end = start.clone();
    end.push(0);
    let request =
        proto::SnapshotRead { ranges: vec![proto::ReadRange { start, end, limit: 1, reverse: false }] };
    let output = kv.snapshot_read_raw(&request, Consistency::Eventual).await.unwrap();
    assert!(!output.read_is_strongly_consistent, "an edge's eventual answer must say it is not strong");
    output.ranges[0].values.first().map(|e| e.value.clone())
}

fn bytes(kv: &Kv, key: &Key, value: &[u8]) {
    kv.set(key, &KvValue::Bytes(value.to_vec())).unwrap();
}

/// Polls until `key` reads `want` at `kv`; returns how long it took.
async fn visible_after(kv: &RemoteKv, key: &Key, want: Option<&[u8]>, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if eventual_get(kv, key).await.as_deref() == want {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{key:?} did not read {want:?} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Primary ← regional ← (local A, local B), all with `ttl`.
struct Tiers {
    kv: Kv,
    regional: Arc<Edge>,
    a: Arc<Edge>,
    b: Arc<Edge>,
    at_a: RemoteKv,
    at_b: RemoteKv,
    servers: Vec<Running>,
}

async fn tiers(configure: impl Fn(&mut EdgeConfig) + Copy) -> Tiers {
    let (kv, primary) = start_primary().await;
    let (regional, regional_server) = start_edge(&primary.url, configure).await;
    let (a, a_server) = start_edge(&regional_server.url, configure).await;
    let (b, b_server) = start_edge(&regional_server.url, configure).await;
    let at_a = client(&a_server.url).await;
    let at_b = client(&b_server.url).await;
    Tiers { kv, regional, a, b, at_a, at_b, servers: vec![primary, regional_server, a_server, b_server] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_do_not_reach_upstream_and_tiers_share_their_fills() {
    let t = tiers(|_| {}).await;
    bytes(&t.kv, &key!["config", "theme"], b"dark");
    assert_eq!(eventual_get(&t.at_a, &key!["config", "theme"]).await.as_deref(), Some(&b"dark"[..]));
    assert_eq!((t.a.metrics().misses.get(), t.a.metrics().upstream_reads.get()), (1, 1));
    assert_eq!(t.regional.metrics().upstream_reads.get(), 1);
    for _ in 0..100 {
        assert_eq!(eventual_get(&t.at_a, &key!["config", "theme"]).await.as_deref(), Some(&b"dark"[..]));
    }
    assert_eq!(t.a.metrics().hits.get(), 100);
    assert_eq!(t.a.metrics().upstream_reads.get(), 1, "hits must not reach upstream");
    // The second local edge misses, and the regional tier answers it from its cache.
    assert_eq!(eventual_get(&t.at_b, &key!["config", "theme"]).await.as_deref(), Some(&b"dark"[..]));
    assert_eq!(t.b.metrics().upstream_reads.get(), 1);
    assert_eq!(t.regional.metrics().hits.get(), 1);
    assert_eq!(
        t.regional.metrics().upstream_reads.get(),
        1,
        "the regional tier must not ask the primary again"
    );
    // A list is cached as a range too, and a getMany of cached keys is all hits.
    for i in 0..5u64 {
        bytes(&t.kv, &key!["items", i], &[i as u8]);
    }
    let list = proto::SnapshotRead {
        ranges: vec![proto::ReadRange {
            start: encoded(&key!["items"]).into_iter().chain([0x00]).collect(),
            end: encoded(&key!["items"]).into_iter().chain([0xff]).collect(),
            limit: 100,
            reverse: false,
        }],
    };
    let first = t.at_a.snapshot_read_raw(&list, Consistency::Eventual).await.unwrap();
    assert_eq!(first.ranges[0].values.len(), 5);
    let reads = t.a.metrics().upstream_reads.get();
    let second = t.at_a.snapshot_read_raw(&list, Consistency::Eventual).await.unwrap();
    assert_eq!(second.ranges, first.ranges);
    assert_eq!(t.a.metrics().upstream_reads.get(), reads);
    // The metrics page shows the counters.
    let page = reqwest_text(&format!("{}/metrics", t.servers[2].url)).await;
    assert!(page.contains("stampkv_edge_hits_total 101"), "{page}");
    assert!(page.contains("stampkv_edge_served_age_seconds_count"), "{page}");
}

/// A plain HTTP GET over a fresh connection: the body as text.
async fn reqwest_text(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let head = format!(
        "GET /{path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {TOKEN}\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_identical_misses_makes_one_upstream_read() {
    let (kv, primary) = start_primary().await;
    // The upstream is 100 ms away, so every read of the storm arrives while the first waits.
    let (edge, edge_server) =
        start_edge(&primary.url, |c| c.upstream_delay = Duration::from_millis(100)).await;
    bytes(&kv, &key!["hot"], b"value");
    let at_edge = client(&edge_server.url).await;
    let mut reads = Vec::new();
    for _ in 0..1000 {
        let at_edge = at_edge.clone();
        reads.push(tokio::spawn(async move { eventual_get(&at_edge, &key!["hot"]).await }));
    }
    for read in reads {
        assert_eq!(read.await.unwrap().as_deref(), Some(&b"value"[..]));
    }
    let m = edge.metrics();
    assert_eq!(m.upstream_reads.get(), 1, "1,000 identical misses must share one upstream read");
    assert_eq!(m.misses.get() + m.hits.get(), 1000);
    assert_eq!(m.coalesced.get() + 1, m.misses.get());
    drop(primary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_at_the_primary_reaches_every_edge_within_the_ttl() {
    let ttl = Duration::from_millis(400);
    let t = tiers(|c| c.cache_ttl = ttl).await;
    let key = key!["greeting"];
    bytes(&t.kv, &key, b"old");
    assert_eq!(eventual_get(&t.at_a, &key).await.as_deref(), Some(&b"old"[..]));
    assert_eq!(eventual_get(&t.at_b, &key).await.as_deref(), Some(&b"old"[..]));
    bytes(&t.kv, &key, b"new");
    // Cached: the old value is still served right after the write (that is the cache working).
    assert_eq!(eventual_get(&t.at_a, &key).await.as_deref(), Some(&b"old"[..]));
    // Two tiers of TTL: a local copy may be fetched from a regional copy just before it expires.
    let bound = 2 * ttl + Duration::from_millis(300);
    let took_a = visible_after(&t.at_a, &key, Some(b"new"), bound).await;
    let took_b = visible_after(&t.at_b, &key, Some(b"new"), bound).await;
    eprintln!("pull mode, ttl {ttl:?}: visible at A after {took_a:?}, at B after {took_b:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_created_after_a_negative_lookup_appears_within_the_ttl() {
    let ttl = Duration::from_millis(300);
    let t = tiers(|c| c.cache_ttl = ttl).await;
    let key = key!["later"];
    assert_eq!(eventual_get(&t.at_a, &key).await, None);
    bytes(&t.kv, &key, b"here");
    assert_eq!(eventual_get(&t.at_a, &key).await, None, "the negative answer is cached");
    assert!(t.a.metrics().negative_hits.get() >= 1);
    let took = visible_after(&t.at_a, &key, Some(b"here"), 2 * ttl + Duration::from_millis(300)).await;
    eprintln!("negative entry replaced after {took:?} (ttl {ttl:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_an_edge_is_visible_there_at_once() {
    let t = tiers(|c| c.cache_ttl = Duration::from_secs(60)).await;
    let key = key!["profile", 7u64];
    bytes(&t.kv, &key, b"v1");
    assert_eq!(eventual_get(&t.at_a, &key).await.as_deref(), Some(&b"v1"[..]));
    assert_eq!(eventual_get(&t.at_b, &key).await.as_deref(), Some(&b"v1"[..]));
    let write = proto::AtomicWrite {
        checks: vec![],
        mutations: vec![proto::Mutation {
            key: encoded(&key),
            value: Some(proto::KvValue { data: b"v2".to_vec(), encoding: proto::VE_BYTES }),
            mutation_type: proto::M_SET,
            ..Default::default()
        }],
        enqueues: vec![],
    };
    let output = t.at_a.atomic_write_raw(&write).await.unwrap();
    assert_eq!(output.status, proto::AW_SUCCESS);
    assert_eq!(
        eventual_get(&t.at_a, &key).await.as_deref(),
        Some(&b"v2"[..]),
        "read-your-writes at the edge"
    );
    assert_eq!(t.kv.get::<KvValue>(&key).unwrap().value, Some(KvValue::Bytes(b"v2".to_vec())));
    // The other local edge is not told: it keeps its copy until the TTL (60 s here).
    assert_eq!(eventual_get(&t.at_b, &key).await.as_deref(), Some(&b"v1"[..]));
    // A strong read at an edge goes to the primary.
    let strong = t.at_b.snapshot_read_raw(&point_read(&key), Consistency::Strong).await.unwrap();
    assert!(strong.read_is_strongly_consistent);
    assert_eq!(strong.ranges[0].values[0].value, b"v2");
}

fn point_read(key: &Key) -> proto::SnapshotRead {
    let start = encoded(key);
    let mut end = start.clone();
    end.push(0);
    proto::SnapshotRead { ranges: vec![proto::ReadRange { start, end, limit: 1, reverse: false }] }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_mode_brings_changes_far_within_the_ttl() {
    let t = tiers(|c| {
        c.cache_ttl = Duration::from_secs(60);
        c.push = true;
    })
    .await;
    let keys: Vec<Key> = (0..25u64).map(|i| key!["pushed", i]).collect();
    for key in &keys {
        bytes(&t.kv, key, b"before");
        assert_eq!(eventual_get(&t.at_a, key).await.as_deref(), Some(&b"before"[..]));
        assert_eq!(eventual_get(&t.at_b, key).await.as_deref(), Some(&b"before"[..]));
    }
    // Wait until every edge holds its keys under live subscriptions.
    let start = Instant::now();
    while [&t.regional, &t.a, &t.b].iter().any(|e| e.gauges().pushed_keys < keys.len()) {
        let pushed: Vec<usize> = [&t.regional, &t.a, &t.b].iter().map(|e| e.gauges().pushed_keys).collect();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "push subscriptions did not go live: {pushed:?}, upstream watches {:?}",
            [&t.regional, &t.a, &t.b].iter().map(|e| e.metrics().upstream_watches.get()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut worst = Duration::ZERO;
    for key in keys.iter().take(5) {
        bytes(&t.kv, key, b"after");
        worst = worst.max(visible_after(&t.at_a, key, Some(b"after"), Duration::from_secs(5)).await);
        worst = worst.max(visible_after(&t.at_b, key, Some(b"after"), Duration::from_secs(5)).await);
    }
    t.kv.delete(&keys[5]).unwrap();
    worst = worst.max(visible_after(&t.at_a, &keys[5], None, Duration::from_secs(5)).await);
    eprintln!("push mode: changes visible at both local edges within {worst:?} (ttl 60 s)");
    assert!(worst < Duration::from_secs(2), "push staleness {worst:?} should be far below the 60 s TTL");
    assert!(t.a.metrics().push_updates.get() >= 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_watching_the_same_keys_share_one_upstream_watch() {
    let (kv, primary) = start_primary().await;
    let (edge, edge_server) = start_edge(&primary.url, |_| {}).await;
    let at_edge = client(&edge_server.url).await;
    bytes(&kv, &key!["w"], b"0");
    let mut streams = Vec::new();
    for _ in 0..5 {
        let mut stream = at_edge.watch_raw(vec![encoded(&key!["w"])]).await.unwrap();
        let first = stream.next().await.unwrap().unwrap();
        assert!(first.keys[0].changed);
        assert_eq!(first.keys[0].entry_if_changed.as_ref().unwrap().value, b"0");
        streams.push(stream);
    }
    assert_eq!(edge.metrics().upstream_watches.get(), 1, "five clients, one upstream watch");
    assert_eq!(edge.gauges().shared_watches, 1);
    bytes(&kv, &key!["w"], b"1");
    for stream in &mut streams {
        let frame =
            tokio::time::timeout(Duration::from_secs(5), stream.next()).await.unwrap().unwrap().unwrap();
        assert!(frame.keys[0].changed);
        assert_eq!(frame.keys[0].entry_if_changed.as_ref().unwrap().value, b"1");
    }
    drop(streams);
    let start = Instant::now();
    while edge.gauges().shared_watches != 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "the shared watch must end with its last client");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_bound_holds_and_the_hot_keys_stay() {
    let (kv, primary) = start_primary().await;
    let budget = 64 << 10;
    let (edge, edge_server) = start_edge(&primary.url, |c| c.max_memory = budget).await;
    let at_edge = client(&edge_server.url).await;
    for i in 0..400u64 {
        bytes(&kv, &key!["blob", i], &[1u8; 500]);
    }
    // About 90 entries fit. Each round reads the 10 hot keys, then 40 keys never read again:
    // 250 distinct keys in all, so the cache must evict, and SIEVE must keep the hot ones.
    for round in 0..6u64 {
        for hot in 0..10u64 {
            assert!(eventual_get(&at_edge, &key!["blob", hot]).await.is_some());
        }
        for cold in (10 + round * 40)..(10 + (round + 1) * 40) {
            assert!(eventual_get(&at_edge, &key!["blob", cold]).await.is_some(), "blob {cold} round {round}");
        }
    }
    let gauges = edge.gauges();
    assert!(gauges.bytes_held <= budget, "{} bytes held over the {budget} budget", gauges.bytes_held);
    assert!(gauges.evictions > 0);
    let reads = edge.metrics().upstream_reads.get();
    for hot in 0..10u64 {
        eventual_get(&at_edge, &key!["blob", hot]).await;
    }
    assert_eq!(edge.metrics().upstream_reads.get(), reads, "the keys read every round must still be cached");
    // Bad input is refused with the server's answers, and the edge keeps serving.
    let bad = proto::SnapshotRead {
        ranges: vec![proto::ReadRange { start: vec![1], end: vec![2], limit: 0, reverse: false }],
    };
    let err = at_edge.snapshot_read_raw(&bad, Consistency::Eventual).await.unwrap_err();
    assert!(
        err.to_string().contains("The read range limit of the snapshot read request is invalid."),
        "{err}"
    );
    assert!(eventual_get(&at_edge, &key!["blob", 0u64]).await.is_some());
    drop(primary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_read_near_its_expiry_is_refreshed_in_the_background() {
    let (kv, primary) = start_primary().await;
    let (edge, edge_server) = start_edge(&primary.url, |c| {
        c.cache_ttl = Duration::from_secs(2);
        c.refresh_ahead = 0.5;
    })
    .await;
    let at_edge = client(&edge_server.url).await;
    let key = key!["refreshed"];
    bytes(&kv, &key, b"v1");
    assert_eq!(eventual_get(&at_edge, &key).await.as_deref(), Some(&b"v1"[..]));
    bytes(&kv, &key, b"v2");
    // Past half the TTL: the cached copy is served at once, and a refresh starts behind it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(eventual_get(&at_edge, &key).await.as_deref(), Some(&b"v1"[..]));
    assert_eq!(edge.metrics().refreshes.get(), 1);
    let start = Instant::now();
    while edge.metrics().upstream_reads.get() < 2
        || eventual_get(&at_edge, &key).await.as_deref() != Some(b"v2")
    {
        assert!(start.elapsed() < Duration::from_secs(2), "the refresh did not land");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The refreshed copy was there before the old one expired: no reader ever missed.
    assert_eq!(edge.metrics().misses.get(), 1, "only the very first read may miss");
    drop(primary);
}
