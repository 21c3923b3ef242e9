//! What an operator can tune: the access token and the limits.

use std::time::Duration;

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
    /// Reads asking for at most this many entries in all (the sum of their ranges' limits)
    /// run on the async runtime's thread; larger ones on the blocking pool. 0: every read
    /// goes to the blocking pool.
    pub inline_read_limit: usize,
    /// The database id handed out by the metadata exchange. `None`: a random one for this
    /// server. A stable id (see [`database_id_for`]) lets clients keep their metadata across
    /// a restart: Deno's client fails every call answered `Invalid database id.`.
    pub database_id: Option<String>,
}

/// A database id that is the same every time for the same `name` (a UUID of version 5 in
/// the URL namespace over `stampkv:<name>`), such as a database's canonical path.
pub fn database_id_for(name: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, format!("stampkv:{name}").as_bytes()).to_string()
}

impl Config {
    /// The defaults (16 MiB bodies, 1024 watches, 10 s for headers, pings every 5 s, reads of
    /// up to 16 entries inline) for a token.
    pub fn new(access_token: impl Into<String>) -> Config {
        Config {
            access_token: access_token.into(),
            max_body_bytes: 16 << 20,
            max_watches: 1024,
            header_read_timeout: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(5),
            inline_read_limit: 16,
            database_id: None,
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
