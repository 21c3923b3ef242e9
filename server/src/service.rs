//! The service state shared by every request: the database, the configuration, the
//! metrics, the watch streams and the bounds on blocking work.

use crate::backend::ServedStore;
use crate::config::{Config, ConfigError};
use crate::metrics::Metrics;
use crate::watch::WatchRegistry;
use stampkv::store::EngineStore;
use stampkv::Kv;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The KV Connect service over one open database, on the LSM engine (the default) or
/// another [`ServedStore`].
#[derive(Debug)]
pub struct Server<S: ServedStore = EngineStore> {
    pub(crate) kv: Kv<S>,
    pub(crate) config: Config,
    pub(crate) database_id: String,
    pub(crate) metrics: Metrics,
    /// The watch streams and the watches they share.
    pub(crate) watches: WatchRegistry,
    /// Turns for blocking database calls (`config.net.max_blocking`).
    pub(crate) blocking: Arc<Semaphore>,
    /// Cancelled once shutdown began: watch streams end, new ones are refused.
    pub(crate) stopping: CancellationToken,
}

impl<S: ServedStore> Server<S> {
    /// A service for `kv`. Its database id is `config.database_id`, or a random UUID.
    pub fn new(kv: Kv<S>, config: Config) -> Result<Arc<Server<S>>, ConfigError> {
        if config.net.access_token.chars().count() < 12 {
            return Err(ConfigError::TokenTooShort);
        }
        let database_id = config.database_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Ok(Arc::new(Server {
            kv,
            watches: WatchRegistry::new(config.net.max_watches),
            blocking: Arc::new(Semaphore::new(config.net.max_blocking.max(1))),
            config,
            database_id,
            metrics: Metrics::default(),
            stopping: CancellationToken::new(),
        }))
    }

    /// The database id the metadata exchange hands out.
    pub fn database_id(&self) -> &str {
        &self.database_id
    }

    /// The database served.
    pub fn kv(&self) -> &Kv<S> {
        &self.kv
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Watch streams open now, and the shared watches behind them.
    pub fn watch_counts(&self) -> (usize, usize) {
        (self.watches.open(), self.watches.shared())
    }

    /// The token cancelled when shutdown begins (see [`Server::begin_shutdown`]).
    pub fn stopping_token(&self) -> tokio_util::sync::CancellationToken {
        self.stopping.clone()
    }

    /// Ends every watch stream and refuses new ones.
    pub fn begin_shutdown(&self) {
        self.stopping.cancel();
    }
}
