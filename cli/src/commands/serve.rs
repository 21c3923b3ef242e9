//! `stampkv serve`: serves a database directory, or a database on an etcd cluster, over KV
//! Connect, for `Deno.openKv("http://...")` and the `@deno/kv` client.

use crate::error::CliError;
use clap::ValueEnum;
use stampkv::engine::SyncMode;
use stampkv::{Kv, KvOptions, Limits};
use stampkv_etcd::{EtcdOptions, EtcdStore};
use stampkv_server::{database_id_for, metrics_router, serve, Config, NetConfig, ServedStore, Server};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// When commits reach the disk.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Sync {
    /// Every commit is synced before it is acknowledged.
    Always,
    /// Commits are synced every `--sync-interval-ms`.
    Periodic,
    /// Commits are synced when a log segment is sealed and at shutdown.
    Buffered,
}

/// Arguments of `stampkv serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The database directory (created if missing).
    #[arg(long, required_unless_present = "etcd", conflicts_with = "etcd")]
    path: Option<PathBuf>,
    /// Serve the database on this etcd cluster instead of a directory: its client URLs,
    /// comma-separated (`http://10.0.0.1:2379,http://10.0.0.2:2379`). Any number of servers
    /// may serve one cluster database at once.
    #[arg(long, value_name = "URL[,URL...]")]
    etcd: Option<String>,
    /// The key prefix of the database in etcd (several databases may share a cluster).
    #[arg(long, requires = "etcd", default_value = stampkv_etcd::DEFAULT_PREFIX)]
    etcd_prefix: String,
    /// Address to listen on (port 0: any free port; the chosen address is logged).
    #[arg(long, default_value = "127.0.0.1:4512")]
    addr: SocketAddr,
    /// The access token clients must present (at least 12 characters).
    #[arg(long, env = "STAMPKV_ACCESS_TOKEN", hide_env_values = true)]
    access_token: Option<String>,
    /// When commits reach the disk.
    #[arg(long, value_enum, default_value_t = Sync::Always)]
    sync: Sync,
    /// Sync interval of `--sync periodic`, in milliseconds.
    #[arg(long, default_value_t = 100)]
    sync_interval_ms: u64,
    /// Serve `GET /metrics` without a token on this address too (on the main address it
    /// needs the token). Meant for an address only operators reach.
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// The network tier's limits.
    #[command(flatten)]
    net: NetArgs,
}

/// The limits of the network tier, the same for `stampkv serve` and `stampkv edge`.
#[derive(Debug, clap::Args)]
pub struct NetArgs {
    /// Largest request body, in bytes (413 beyond, from Content-Length before reading).
    #[arg(long, default_value_t = 16 << 20)]
    max_body_bytes: usize,
    /// Most connections open at once: at the cap a new connection closes the one idle the
    /// longest, or is refused if every connection is busy.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// A connection with no request in flight for this long is closed, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    idle_timeout_ms: u64,
    /// How long a client may take to send a request's headers, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// How long a client may take to send a request's body, in milliseconds (408 beyond).
    #[arg(long, default_value_t = 30_000)]
    body_timeout_ms: u64,
    /// Most watch streams open at once, all clients together (503 beyond).
    #[arg(long, default_value_t = 4096)]
    max_watches: usize,
    /// Most watch streams one connection may hold (429 beyond).
    #[arg(long, default_value_t = 256)]
    max_watches_per_connection: usize,
    /// After SIGTERM, how long in-flight requests may take before the process stops, in
    /// milliseconds.
    #[arg(long, default_value_t = 10_000)]
    shutdown_grace_ms: u64,
}

impl NetArgs {
    /// The network settings for `token`, with the connection cap lowered to what the
    /// process's file descriptor limit allows (after raising that limit as far as it goes).
    pub(crate) fn config(&self, token: String) -> NetConfig {
        let mut net = NetConfig::new(token);
        net.max_body_bytes = self.max_body_bytes;
        net.max_connections = fd_bounded_connections(self.max_connections);
        net.idle_timeout = Duration::from_millis(self.idle_timeout_ms);
        net.header_read_timeout = Duration::from_millis(self.header_timeout_ms);
        net.body_read_timeout = Duration::from_millis(self.body_timeout_ms);
        net.max_watches = self.max_watches;
        net.max_watches_per_connection = self.max_watches_per_connection;
        net.shutdown_grace = Duration::from_millis(self.shutdown_grace_ms);
        net
    }
}

/// File descriptors kept for everything but client connections (tables, log, listeners).
const RESERVED_FDS: u64 = 256;

/// Raises the open-file limit to its hard limit, and returns `wanted` lowered to fit in it.
fn fd_bounded_connections(wanted: usize) -> usize {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => {
            let room = usize::try_from(limit.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX).max(16);
            if wanted > room {
                tracing::warn!(
                    wanted,
                    allowed = room,
                    fd_limit = limit,
                    "the open-file limit allows fewer connections than asked; lowering the cap"
                );
            }
            wanted.min(room)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot raise the open-file limit");
            wanted
        }
    }
}

/// Runs `stampkv serve` until SIGINT or SIGTERM, then closes the database cleanly.
pub fn run(args: ServeArgs) -> Result<(), CliError> {
    serve_until_signal(args).map_err(CliError::failed)
}

/// The access token of `--access-token` or `STAMPKV_ACCESS_TOKEN`, which must be given.
pub(crate) fn required_token(token: Option<String>) -> Result<String, String> {
    token.ok_or_else(|| {
        "no access token: pass --access-token or set STAMPKV_ACCESS_TOKEN (at least 12 characters)".into()
    })
}

/// The multi-threaded runtime a server runs on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn serve_until_signal(args: ServeArgs) -> Result<(), String> {
    stampkv_kvconnect::http::logging::init();
    let token = required_token(args.access_token.clone())?;
    let mut config = Config::new(token.clone());
    config.net = args.net.config(token);
    if config.net.access_token.chars().count() < 12 {
        return Err("the access token must be at least 12 characters long".into());
    }
    if let Some(endpoints) = &args.etcd {
        let options = EtcdOptions::from_endpoint_list(endpoints).with_prefix(&args.etcd_prefix);
        let store = EtcdStore::open(options)
            .map_err(|e| format!("cannot open the database on etcd {endpoints}: {e}"))?;
        // Every server of the cluster database hands out the database's own id.
        config.database_id = Some(store.database_id().to_string());
        let kv = Kv::with_store(store, Limits::default());
        let what = format!("etcd {endpoints} prefix {}", args.etcd_prefix);
        return serve_kv(kv, config, &args, &what);
    }
    let Some(path) = args.path.clone() else {
        return Err("give --path DIR or --etcd URL[,URL...]".into());
    };
    let mut options = KvOptions::default();
    options.engine.sync_mode = match args.sync {
        Sync::Always => SyncMode::Always,
        Sync::Periodic => SyncMode::Periodic(Duration::from_millis(args.sync_interval_ms)),
        Sync::Buffered => SyncMode::Buffered,
    };
    let kv = Kv::open(&path, options).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // The same id after a restart: connected clients keep working.
    let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    config.database_id = Some(database_id_for(&canonical.to_string_lossy()));
    serve_kv(kv, config, &args, &path.display().to_string())
}

/// Serves `kv` (described in logs as `what`) until SIGINT or SIGTERM, then closes it.
fn serve_kv<S: ServedStore>(kv: Kv<S>, config: Config, args: &ServeArgs, what: &str) -> Result<(), String> {
    let server = Server::new(kv.clone(), config).map_err(|e| e.to_string())?;
    let runtime = runtime()?;
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        if let Some(metrics_addr) = args.metrics_addr {
            let metrics = tokio::net::TcpListener::bind(metrics_addr)
                .await
                .map_err(|e| format!("cannot listen on {metrics_addr}: {e}"))?;
            let metrics_local = metrics.local_addr().map_err(|e| e.to_string())?;
            tracing::info!(addr = %metrics_local, "serving metrics without a token");
            let app = metrics_router(server.clone());
            let net = server.config().net.clone();
            let stopping = server.stopping_token();
            tokio::spawn(async move {
                let stopped = stopping.clone();
                let _ = stampkv_kvconnect::http::serve_router(
                    metrics,
                    app,
                    &net,
                    stopping,
                    stopped.cancelled_owned(),
                )
                .await;
            });
        }
        tracing::info!(addr = %local, database = what, database_id = server.database_id(), "listening");
        serve(listener, server.clone(), shutdown_signal()).await.map_err(|e| e.to_string())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(server);
    tracing::info!("closing the database");
    kv.close().map_err(|e| format!("closing the database failed: {e}"))?;
    tracing::info!("stopped");
    result
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
