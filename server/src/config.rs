//! What an operator can tune: the access token, the limits of the network tier (shared by
//! the server and the edge) and the server's own settings.

pub use stampkv_kvconnect::http::NetConfig;
use std::time::Duration;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults DESIGN.md and server/DESIGN.md quote.
    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::new("a-token-of-some-length");
        assert_eq!(c.inline_read_limit, 16);
        assert_eq!(c.watch_frame_interval, Duration::from_millis(25));
    }
}
