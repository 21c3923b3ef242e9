//! The service state shared by every request: the database, the configuration, the
//! metrics and the open watch count.

use crate::config::{Config, ConfigError};
use crate::metrics::Metrics;
use stampkv::Kv;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The KV Connect service over one open database.
#[derive(Debug)]
pub struct Server {
    pub(crate) kv: Kv,
    pub(crate) config: Config,
    pub(crate) database_id: String,
    pub(crate) metrics: Metrics,
    /// Watch streams open now (bounded by `config.max_watches`).
    pub(crate) open_watches: AtomicUsize,
    /// Set once shutdown began: watch streams end, new ones are refused.
    pub(crate) shutting_down: AtomicBool,
}

impl Server {
    /// A service for `kv`. Its database id is `config.database_id`, or a random UUID.
    pub fn new(kv: Kv, config: Config) -> Result<Arc<Server>, ConfigError> {
        if config.access_token.chars().count() < 12 {
            return Err(ConfigError::TokenTooShort);
        }
        let database_id = config.database_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        Ok(Arc::new(Server {
            kv,
            config,
            database_id,
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
