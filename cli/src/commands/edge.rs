//! `stampkv edge`: a caching KV Connect server in front of an upstream (`stampkv serve`,
//! another edge, or any KV Connect service), answering eventual reads from memory.

use crate::error::CliError;
use stampkv_client::RemoteError;
use stampkv_edge::{serve, Edge, EdgeConfig, EdgeError};
use stampkv_server::database_id_for;
use std::net::SocketAddr;
use std::time::Duration;

/// Arguments of `stampkv edge`.
#[derive(Debug, clap::Args)]
pub struct EdgeArgs {
    /// The upstream's URL (what `Deno.openKv` would be given): a primary or another edge.
    #[arg(long)]
    upstream: String,
    /// Address to listen on (port 0: any free port; the chosen address is logged).
    #[arg(long, default_value = "127.0.0.1:4513")]
    addr: SocketAddr,
    /// The access token clients of this edge present (at least 12 characters).
    #[arg(long, env = "STAMPKV_ACCESS_TOKEN", hide_env_values = true)]
    access_token: Option<String>,
    /// The token presented upstream (default: the access token).
    #[arg(long, env = "STAMPKV_UPSTREAM_TOKEN", hide_env_values = true)]
    upstream_token: Option<String>,
    /// How long a cached answer is served without asking upstream: `500ms`, `60s`, `5m`.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    cache_ttl: Duration,
    /// Fraction of the TTL after which an answer read again is refreshed in the background
    /// (1 turns refresh-ahead off).
    #[arg(long, default_value_t = 0.8)]
    refresh_ahead: f64,
    /// How long past its expiry an answer is still served while the upstream is unreachable.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    stale_if_error: Duration,
    /// Most memory the cache holds: `64MiB`, `1GiB`, or bytes.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    max_memory: usize,
    /// Subscribe upstream to cached keys so changes arrive as they are committed.
    #[arg(long)]
    push: bool,
    /// Most keys under push subscriptions.
    #[arg(long, default_value_t = 1000)]
    push_keys: usize,
    /// Extra delay before every upstream request, standing in for WAN distance (testing).
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    upstream_delay: Duration,
    /// The network tier's limits.
    #[command(flatten)]
    net: super::serve::NetArgs,
}

/// Runs `stampkv edge` until SIGINT or SIGTERM.
pub fn run(args: EdgeArgs) -> Result<(), CliError> {
    edge_until_signal(args).map_err(CliError::failed)
}

fn edge_until_signal(args: EdgeArgs) -> Result<(), String> {
    stampkv_kvconnect::http::logging::init();
    let token = super::serve::required_token(args.access_token)?;
    if !(0.0..=1.0).contains(&args.refresh_ahead) {
        return Err(format!("--refresh-ahead must be between 0 and 1, not {}", args.refresh_ahead));
    }
    let mut config = EdgeConfig::new(args.upstream.clone(), token.clone());
    config.net = args.net.config(token);
    if let Some(upstream_token) = args.upstream_token {
        config.upstream_token = upstream_token;
    }
    config.cache_ttl = args.cache_ttl;
    config.refresh_ahead = args.refresh_ahead;
    config.stale_if_error = args.stale_if_error;
    config.max_memory = args.max_memory;
    config.push = args.push;
    config.push_keys = args.push_keys;
    config.upstream_delay = args.upstream_delay;
    let runtime = super::serve::runtime()?;
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        // The same id after a restart on the same address: connected clients keep working.
        config.database_id = Some(database_id_for(&format!("edge {local} of {}", args.upstream)));
        let shutdown = super::serve::shutdown_signal();
        tokio::pin!(shutdown);
        // An upstream that cannot be reached yet (started after the edge) is waited for; any
        // other answer (a refused token, not a KV Connect service) ends the edge at once.
        let edge = loop {
            let attempt = tokio::select! {
                attempt = Edge::connect(config.clone()) => attempt,
                () = &mut shutdown => return Ok(()),
            };
            match attempt {
                Ok(edge) => break edge,
                Err(EdgeError::Upstream(e @ RemoteError::Unavailable { .. })) => {
                    tracing::warn!(error = %e, "upstream unreachable; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(format!("{}: {e}", args.upstream)),
            }
        };
        tracing::info!(addr = %local, upstream = ?args.upstream, database_id = edge.database_id(), "listening");
        serve(listener, edge, shutdown).await.map_err(|e| e.to_string())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    tracing::info!("stopped");
    result
}

/// Parses `250ms`, `60s`, `5m`, `1h` (a bare number is seconds).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("not a duration: {text:?} (try 500ms, 60s, 5m)"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(n.saturating_mul(3600))),
        _ => Err(format!("unknown duration unit {unit:?} in {text:?} (use ms, s, m or h)")),
    }
}

/// Parses `512KiB`, `64MiB`, `1GiB` (also KB/MB/GB as the same powers of two) or bytes.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: usize = number.parse().map_err(|_| format!("not a size: {text:?} (try 64MiB)"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("unknown size unit {unit:?} in {text:?} (use KiB, MiB or GiB)")),
    };
    n.checked_mul(1usize << shift).ok_or_else(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1gb"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 apples").is_err());
    }
}
