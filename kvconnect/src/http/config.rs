//! The network tier's settings, shared by every KV Connect front end.

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults DESIGN.md and server/DESIGN.md quote.
    #[test]
    fn defaults_are_the_documented_ones() {
        let n = NetConfig::new("a-token-of-some-length");
        assert_eq!((n.max_body_bytes, n.max_connections, n.max_blocking), (16 << 20, 4096, 64));
        assert_eq!((n.max_watches, n.max_watches_per_connection), (4096, 256));
        let seconds = |d: Duration| d.as_secs();
        assert_eq!(
            (seconds(n.header_read_timeout), seconds(n.idle_timeout), seconds(n.body_read_timeout)),
            (10, 60, 30)
        );
        assert_eq!((seconds(n.keepalive_interval), seconds(n.shutdown_grace)), (5, 10));
    }
}
