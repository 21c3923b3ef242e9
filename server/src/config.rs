//! What an operator can tune: the access token, the limits of the network tier (shared by
//! the server and the edge) and the server's own settings.

use std::time::Duration;

/// The network tier's settings, the same for `stampkv serve` and `stampkv edge`: who may
/// call, how much a client may hold, and how long the server waits for it.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// The bearer token clients must present (at least 12 characters).
    pub access_token: String,
    /// Largest request body accepted; larger bodies get a 413 (from `Content-Length` before
    /// anything is read).
    pub max_body_bytes: usize,
    /// Most connections open at once. At the cap a new connection closes the connection
    /// idle the longest (no request in flight); if every connection is busy, the new one
    /// is closed at once.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (and, on a new connection,
    /// its first request).
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// How long a client may take to send a request's whole body: 408 beyond.
    pub body_read_timeout: Duration,
    /// Interval of the keep-alive frames of a watch stream.
    pub keepalive_interval: Duration,
    /// Most watch streams open at once, all clients together; more get a 503.
    pub max_watches: usize,
    /// Most watch streams one connection may hold open; more get a 429 (an HTTP/2 client
    /// multiplexes all its watches over one connection).
    pub max_watches_per_connection: usize,
    /// Most blocking database calls in flight at once; more wait for a turn.
    pub max_blocking: usize,
    /// After a shutdown signal, how long in-flight requests may take before the remaining
    /// connections are dropped. Watch streams end at once.
    pub shutdown_grace: Duration,
}

impl NetConfig {
    /// The defaults for a token: 16 MiB bodies, 4096 connections, 10 s for headers, 60 s
    /// idle, 30 s for a body, pings every 5 s, 4096 watch streams (256 per connection), 64
    /// blocking calls, 10 s of grace at shutdown.
    pub fn new(access_token: impl Into<String>) -> NetConfig {
        NetConfig {
            access_token: access_token.into(),
            max_body_bytes: 16 << 20,
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(5),
            max_watches: 4096,
            max_watches_per_connection: 256,
            max_blocking: 64,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// How the server is configured.
#[derive(Debug, Clone)]
pub struct Config {
    /// The network tier's settings (token, limits, timeouts).
    pub net: NetConfig,
    /// Reads asking for at most this many entries in all (the sum of their ranges' limits)
    /// run on the async runtime's thread; larger ones on the blocking pool. 0: every read
    /// goes to the blocking pool.
    pub inline_read_limit: usize,
    /// Shortest time between two frames of one shared watch: changes within it coalesce into
    /// the next frame (as rapid commits coalesce in Deno's own backends). It bounds what a hot
    /// key watched by many streams costs: at most one read and one frame per stream per
    /// interval, however fast the key is written. Zero: a frame per read.
    pub watch_frame_interval: Duration,
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
    /// The defaults ([`NetConfig::new`], reads of up to 16 entries inline, watch frames at
    /// least 25 ms apart) for a token.
    pub fn new(access_token: impl Into<String>) -> Config {
        Config {
            net: NetConfig::new(access_token),
            inline_read_limit: 16,
            watch_frame_interval: Duration::from_millis(25),
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
