//! `stampkv serve`: serves a database directory over KV Connect, for `Deno.openKv("http://...")`
//! and the `@deno/kv` client.

use crate::error::CliError;
use clap::ValueEnum;
use stampkv::engine::SyncMode;
use stampkv::{Kv, KvOptions};
use stampkv_server::{database_id_for, log, serve, Config, Server};
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
    #[arg(long)]
    path: PathBuf,
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
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 16 << 20)]
    max_body_bytes: usize,
    /// Most watch streams open at once.
    #[arg(long, default_value_t = 1024)]
    max_watches: usize,
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
    let token = required_token(args.access_token)?;
    let mut config = Config::new(token);
    config.max_body_bytes = args.max_body_bytes;
    config.max_watches = args.max_watches;
    let mut options = KvOptions::default();
    options.engine.sync_mode = match args.sync {
        Sync::Always => SyncMode::Always,
        Sync::Periodic => SyncMode::Periodic(Duration::from_millis(args.sync_interval_ms)),
        Sync::Buffered => SyncMode::Buffered,
    };
    if config.access_token.chars().count() < 12 {
        return Err("the access token must be at least 12 characters long".into());
    }
    let kv =
        Kv::open(&args.path, options).map_err(|e| format!("cannot open {}: {e}", args.path.display()))?;
    // The same id after a restart: connected clients keep working.
    let canonical = std::fs::canonicalize(&args.path).unwrap_or_else(|_| args.path.clone());
    config.database_id = Some(database_id_for(&canonical.to_string_lossy()));
    let server = Server::new(kv.clone(), config).map_err(|e| e.to_string())?;
    let runtime = runtime()?;
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        log(
            "info",
            "listening",
            &format!(
                "addr={local} path={:?} database_id={}",
                args.path.display().to_string(),
                server.database_id()
            ),
        );
        serve(listener, server.clone(), shutdown_signal()).await.map_err(|e| e.to_string())
    });
    runtime.shutdown_timeout(Duration::from_secs(10));
    drop(server);
    log("info", "closing the database", "");
    kv.close().map_err(|e| format!("closing the database failed: {e}"))?;
    log("info", "stopped", "");
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
    log("info", "shutting down", "");
}
