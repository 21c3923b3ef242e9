//! [`EtcdOptions`]: where the cluster is and how long to wait for it.

use stampkv::engine::{Clock, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// The root prefix of a database when none is given.
pub const DEFAULT_PREFIX: &str = "stampkv/default/";

/// How to reach a database on an etcd cluster.
#[derive(Clone)]
#[non_exhaustive]
pub struct EtcdOptions {
    /// Client URLs of the cluster's members (`http://host:2379`).
    pub endpoints: Vec<String>,
    /// The root under which the database keeps its keys; several databases share a
    /// cluster under different prefixes. Default [`DEFAULT_PREFIX`].
    pub prefix: String,
    /// The clock expiry is evaluated on. Servers sharing a database must keep their clocks
    /// close (NTP): skew moves the moment an entry with an expiry disappears.
    pub clock: Arc<dyn Clock>,
    /// The longest one etcd call may take before it is abandoned (default 2 s): a commit
    /// sent to a leader that died is settled after it, so it bounds the pause a leader loss
    /// causes.
    pub request_timeout: Duration,
    /// How long a read is retried through elections and lost members (default 10 s).
    pub read_timeout: Duration,
    /// How long a commit whose answer was lost is chased before the commit fails with an
    /// unknown outcome (default 30 s).
    pub settle_timeout: Duration,
    /// How long connecting may take (default 3 s).
    pub connect_timeout: Duration,
    /// Worker threads of the client's runtime (default 2).
    pub runtime_threads: usize,
    /// How often this server compacts etcd's history, keeping one interval of it (default
    /// 5 minutes); `None` where the cluster compacts by itself or is shared with other
    /// users (compaction is cluster-wide). See the `compactor` module.
    pub compaction_interval: Option<Duration>,
}

impl std::fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("request_timeout", &self.request_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("settle_timeout", &self.settle_timeout)
            .field("compaction_interval", &self.compaction_interval)
            .finish()
    }
}

impl EtcdOptions {
    /// The options for the cluster at `endpoints`, everything else at its default.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> EtcdOptions {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_PREFIX.to_string(),
            clock: Arc::new(SystemClock),
            request_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(10),
            settle_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(3),
            runtime_threads: 2,
            compaction_interval: Some(Duration::from_secs(300)),
        }
    }

    /// The options for a comma-separated list of endpoints (the form of `--etcd`).
    pub fn from_endpoint_list(list: &str) -> EtcdOptions {
        EtcdOptions::new(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from))
    }

    /// With the database's keys under `prefix` (a `/` is added if it has none).
    pub fn with_prefix(mut self, prefix: &str) -> EtcdOptions {
        self.prefix = if prefix.ends_with('/') { prefix.to_string() } else { format!("{prefix}/") };
        self
    }

    /// With expiry evaluated on `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> EtcdOptions {
        self.clock = clock;
        self
    }
}
