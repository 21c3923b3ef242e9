//! The composition root: [`Edge`] builds the edge's parts from its configuration and hands
//! them to the handlers. The parts own their state and know nothing of `Edge`: the
//! [`Store`] (cached answers and invalidation), the [`Filler`] (coalesced upstream reads),
//! the [`ReadPath`] (eventual and strong reads), the [`WatchHub`] (shared watches) and push
//! mode's [`Pusher`].

use crate::config::EdgeConfig;
use crate::fill::Filler;
use crate::metrics::{EdgeMetrics, Gauges};
use crate::push::Pusher;
use crate::read_path::{Freshness, ReadPath};
use crate::store::Store;
use crate::watch_hub::{WatchHub, WatchLimits};
use stampkv_client::{ConnectOptions, RemoteError, RemoteKv, Retry};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A running edge.
#[derive(Debug)]
pub struct Edge {
    config: EdgeConfig,
    upstream: RemoteKv,
    database_id: String,
    metrics: Arc<EdgeMetrics>,
    store: Arc<Store>,
    reads: ReadPath,
    watches: Arc<WatchHub>,
    /// Cancelled once shutdown began: watch streams end, push mode stops.
    stopping: CancellationToken,
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
        Ok(Arc::new(Edge::assemble(config, upstream, database_id)))
    }

    /// Builds the parts around a connected `upstream`.
    fn assemble(config: EdgeConfig, upstream: RemoteKv, database_id: String) -> Edge {
        let metrics = Arc::new(EdgeMetrics::default());
        let stopping = CancellationToken::new();
        let store = Arc::new(Store::new(config.max_memory, config.push, metrics.clone()));
        let filler = Arc::new(Filler::new(store.clone(), upstream.clone(), metrics.clone()));
        let freshness = Freshness {
            ttl: config.cache_ttl,
            refresh_after: config.refresh_after(),
            stale_if_error: config.stale_if_error,
        };
        let reads = ReadPath::new(
            store.clone(),
            filler,
            upstream.clone(),
            config.upstream_url.clone(),
            freshness,
            metrics.clone(),
        );
        let limits =
            WatchLimits { max_watches: config.net.max_watches, keepalive: config.net.keepalive_interval };
        let watches = Arc::new(WatchHub::new(
            limits,
            store.clone(),
            upstream.clone(),
            config.upstream_url.clone(),
            metrics.clone(),
            stopping.clone(),
        ));
        Edge { config, upstream, database_id, metrics, store, reads, watches, stopping }
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
        self.store.gauges(self.watches.len())
    }

    /// The Prometheus text of `GET /metrics`.
    pub fn render_metrics(&self) -> String {
        self.metrics.render(self.gauges())
    }

    /// Ends every watch stream and refuses new ones.
    pub fn begin_shutdown(&self) {
        self.stopping.cancel();
    }

    /// The token cancelled once shutdown began.
    pub(crate) fn stopping(&self) -> &CancellationToken {
        &self.stopping
    }

    /// The upstream client (for forwarded writes).
    pub(crate) fn upstream(&self) -> &RemoteKv {
        &self.upstream
    }

    /// The cached answers (for what a forwarded write invalidates).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The read path of `snapshot_read`.
    pub(crate) fn reads(&self) -> &ReadPath {
        &self.reads
    }

    /// The watch registry.
    pub(crate) fn watches(&self) -> &Arc<WatchHub> {
        &self.watches
    }

    /// Push mode, if configured, ready to run (see [`crate::serve`]).
    pub(crate) fn pusher(&self) -> Option<Pusher> {
        self.config.push.then(|| {
            Pusher::new(
                self.store.clone(),
                self.upstream.clone(),
                self.metrics.clone(),
                self.config.push_keys,
                self.stopping.clone(),
            )
        })
    }
}
