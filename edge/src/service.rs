//! The edge's shared state: its configuration, the upstream client, the cache with its
//! invalidation history, the upstream reads in flight, the watch hub and the counters.

use crate::cache::{Cache, RangeKey};
use crate::config::EdgeConfig;
use crate::fill::Pending;
use crate::invalidations::Invalidations;
use crate::metrics::{EdgeMetrics, Gauges};
use crate::watch::WatchHub;
use crate::wire;
use parking_lot::Mutex;
use stampkv_client::{ConnectOptions, RemoteError, RemoteKv, Retry};
use stampkv_kvconnect as proto;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How many invalidations the history remembers (see [`crate::invalidations`]).
const INVALIDATION_HISTORY: usize = 4096;

/// What the cache lock guards: the cache and what must change together with it.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) cache: Cache,
    pub(crate) invalidations: Invalidations,
    /// Keys whose cached point answer came from a live push subscription: fresh whatever
    /// their age, until the subscription ends or a pull answer replaces it.
    pub(crate) pushed: HashSet<Vec<u8>>,
    /// Keys newly cached as points, waiting for a push subscription.
    pub(crate) push_queue: VecDeque<Vec<u8>>,
}

/// A running edge.
#[derive(Debug)]
pub struct Edge {
    pub(crate) config: EdgeConfig,
    pub(crate) upstream: RemoteKv,
    pub(crate) database_id: String,
    pub(crate) store: Mutex<Store>,
    pub(crate) flights: Mutex<HashMap<RangeKey, Pending>>,
    pub(crate) metrics: EdgeMetrics,
    pub(crate) watches: WatchHub,
    pub(crate) open_watches: AtomicUsize,
    /// Cancelled once shutdown began: watch streams end, push mode stops.
    pub(crate) stopping: CancellationToken,
}

/// Why an edge could not start.
#[derive(Debug)]
pub enum EdgeError {
    /// The access token is shorter than 12 characters.
    TokenTooShort,
    /// The upstream's metadata exchange failed.
    Upstream(RemoteError),
}

impl std::fmt::Display for EdgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EdgeError::TokenTooShort => f.write_str("the access token must be at least 12 characters long"),
            EdgeError::Upstream(e) => write!(f, "cannot reach the upstream: {e}"),
        }
    }
}

impl std::error::Error for EdgeError {}

impl Edge {
    /// Connects to the upstream (a metadata exchange) and builds the edge. Push mode's
    /// subscriptions start with [`crate::serve`].
    pub async fn connect(config: EdgeConfig) -> Result<Arc<Edge>, EdgeError> {
        if config.net.access_token.chars().count() < 12 {
            return Err(EdgeError::TokenTooShort);
        }
        let mut options = ConnectOptions::new(config.upstream_token.clone());
        // One attempt: a client waiting on a miss gets the edge's answer at once, and retries
        // itself if it wants to; a background refresh simply tries again on the next read.
        options.retry = Retry { attempts: 1, base_delay: Duration::from_millis(100) };
        options.added_latency = config.upstream_delay;
        let upstream = RemoteKv::connect(&config.upstream_url, options).await.map_err(EdgeError::Upstream)?;
        let database_id = config.database_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Ok(Arc::new(Edge {
            store: Mutex::new(Store {
                cache: Cache::new(config.max_memory),
                invalidations: Invalidations::new(INVALIDATION_HISTORY),
                pushed: HashSet::new(),
                push_queue: VecDeque::new(),
            }),
            config,
            upstream,
            database_id,
            flights: Mutex::new(HashMap::new()),
            metrics: EdgeMetrics::default(),
            watches: WatchHub::default(),
            open_watches: AtomicUsize::new(0),
            stopping: CancellationToken::new(),
        }))
    }

    /// The configuration.
    pub fn config(&self) -> &EdgeConfig {
        &self.config
    }

    /// The database id this edge hands its clients.
    pub fn database_id(&self) -> &str {
        &self.database_id
    }

    /// The counters.
    pub fn metrics(&self) -> &EdgeMetrics {
        &self.metrics
    }

    /// The gauges: bytes and entries held, evictions, pushed keys, shared watches.
    pub fn gauges(&self) -> Gauges {
        let store = self.store.lock();
        Gauges {
            bytes_held: store.cache.bytes(),
            entries: store.cache.len(),
            evictions: store.cache.evictions(),
            pushed_keys: store.pushed.len(),
            shared_watches: self.watches.len(),
        }
    }

    /// The Prometheus text of `GET /metrics`.
    pub fn render_metrics(&self) -> String {
        self.metrics.render(self.gauges())
    }

    /// Ends every watch stream and refuses new ones.
    pub fn begin_shutdown(&self) {
        self.stopping.cancel();
    }

    /// Records that encoded `key` changed: drops the cached entries that could hold it and
    /// keeps fills already in flight from caching what they fetched before. Returns whether a
    /// point entry for it was cached.
    pub(crate) fn invalidate(&self, key: &[u8]) -> bool {
        let mut store = self.store.lock();
        store.invalidations.record(key);
        let had_point = store.cache.contains(&RangeKey::Point(key.to_vec()));
        let dropped = store.cache.invalidate(key);
        self.metrics.invalidations.add(dropped as u64);
        had_point
    }

    /// A change of encoded `key` learned from a watch stream (`entry`: its new state, `None`
    /// if deleted). If the cached point answer already holds that versionstamp it is only
    /// renewed; otherwise the entries that could hold the key are dropped and fills in flight
    /// kept from caching. A cached point answer is replaced by the new state, and marked as
    /// pushed (fresh beyond the TTL) when it came from push mode's own subscription; a change
    /// seen on a client's shared watch leaves that mark as it was.
    pub(crate) fn apply_change(&self, key: &[u8], entry: Option<proto::KvEntry>, from_push: bool) {
        let point = RangeKey::Point(key.to_vec());
        let stamp = entry.as_ref().map(|e| e.versionstamp.clone());
        let mut store = self.store.lock();
        let cached = store.cache.peek(&point).map(wire::point_stamp);
        let unchanged = matches!(&cached, Some(Some(held)) if *held == stamp);
        if !unchanged {
            store.invalidations.record(key);
            let dropped = store.cache.invalidate(key);
            self.metrics.invalidations.add(dropped as u64);
        }
        if cached.is_some() {
            store.cache.insert(point, wire::point_answer(entry, Instant::now()));
            if !unchanged {
                self.metrics.push_updates.add(1);
            }
            if from_push {
                store.pushed.insert(key.to_vec());
            }
        }
    }

    /// Drops every cached multi-key range (a write whose key is not known in advance, such
    /// as a versionstamped key) and keeps fills in flight from caching.
    pub(crate) fn invalidate_all_ranges(&self) {
        let mut store = self.store.lock();
        store.invalidations.record_all();
        let dropped = store.cache.invalidate_ranges();
        self.metrics.invalidations.add(dropped as u64);
    }
}
