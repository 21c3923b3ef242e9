//! What an operator tunes: where the upstream is, the tokens, the cache's lifetime and size,
//! refresh-ahead, serving stale copies while the upstream is down, push mode.

use stampkv_kvconnect::http::NetConfig;
use std::time::Duration;

/// How an edge is configured.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// The upstream's metadata URL: a `stampkv serve`, another edge, or any KV Connect service.
    pub upstream_url: String,
    /// The token the edge presents upstream.
    pub upstream_token: String,
    /// The network tier's settings, as the server's: the token clients of this edge present
    /// (at least 12 characters), body sizes, connections, timeouts, watch streams.
    pub net: NetConfig,
    /// How long a cached answer (found or not found) is served without asking upstream.
    pub cache_ttl: Duration,
    /// A cached answer read again when at least this fraction of `cache_ttl` has passed is
    /// refreshed in the background while the cached copy keeps being served. 1.0 turns
    /// refresh-ahead off.
    pub refresh_ahead: f64,
    /// While the upstream cannot be reached, an expired answer at most this old is still
    /// served (counted as stale). Zero: a miss is an error at once.
    pub stale_if_error: Duration,
    /// Most bytes the cache holds (keys, answers and a fixed per-entry overhead).
    pub max_memory: usize,
    /// Subscribe upstream (`watch`) to cached keys, so changes arrive as they are committed
    /// and those keys stay fresh beyond the TTL.
    pub push: bool,
    /// Most keys held under push subscriptions at once.
    pub push_keys: usize,
    /// Extra delay before every upstream request: a test option standing in for WAN distance.
    pub upstream_delay: Duration,
    /// The database id handed to clients; `None`: a random one. `stampkv edge` derives it
    /// from the upstream URL and its listening address, so it survives a restart.
    pub database_id: Option<String>,
}

impl EdgeConfig {
    /// The defaults (60 s TTL, refresh-ahead from 80% of it, stale copies served up to 5
    /// minutes past expiry while the upstream is down, 256 MiB, no push, the network defaults of
    /// [`NetConfig::new`]) for an upstream URL
    /// and a token used both by clients and upstream.
    pub fn new(upstream_url: impl Into<String>, access_token: impl Into<String>) -> EdgeConfig {
        let access_token = access_token.into();
        EdgeConfig {
            upstream_url: upstream_url.into(),
            upstream_token: access_token.clone(),
            net: NetConfig::new(access_token),
            cache_ttl: Duration::from_secs(60),
            refresh_ahead: 0.8,
            stale_if_error: Duration::from_secs(300),
            max_memory: 256 << 20,
            push: false,
            push_keys: 1000,
            upstream_delay: Duration::ZERO,
            database_id: None,
        }
    }

    /// The age from which a cached answer read again is refreshed in the background.
    pub fn refresh_after(&self) -> Duration {
        self.cache_ttl.mul_f64(self.refresh_ahead.clamp(0.0, 1.0))
    }
}
