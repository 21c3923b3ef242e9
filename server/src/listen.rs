//! The routes and the accept loop: HTTP/1.1 and HTTP/2 on one listener, graceful shutdown.

use crate::errors::HttpError;
use crate::log::log;
use crate::service::Server;
use crate::{metadata, read, watch, write};
use axum::extract::State;
use axum::http::header;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The routes: `POST /`, `POST /v2/{snapshot_read,atomic_write,watch}`, `GET /metrics`.
pub fn router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/", post(metadata::metadata))
        .route("/v2/snapshot_read", post(read::snapshot_read))
        .route("/v2/atomic_write", post(write::atomic_write))
        .route("/v2/watch", post(watch::watch))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(server)
}

async fn not_found() -> HttpError {
    HttpError { status: StatusCode::NOT_FOUND, text: "Resource not found.".into() }
}

/// Serves `server` on `listener` until `shutdown` resolves; then ends the watch streams,
/// lets in-flight requests finish (at most 30 s) and returns. The caller closes the database.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let app = router(server.clone());
    let stopping = server.clone();
    serve_router(
        listener,
        app,
        server.config.header_read_timeout,
        move || stopping.begin_shutdown(),
        shutdown,
    )
    .await
}

/// Serves `app` on `listener` (HTTP/1.1 and HTTP/2 without TLS, `TCP_NODELAY`) until
/// `shutdown` resolves; then calls `on_shutdown` (to end long streams), lets in-flight
/// requests finish (at most 30 s) and returns.
pub async fn serve_router(
    listener: TcpListener,
    app: Router,
    header_read_timeout: Duration,
    on_shutdown: impl FnOnce(),
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // HTTP/1.1 and HTTP/2 (Deno's client speaks HTTP/2 without TLS, with prior knowledge).
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => {
                        // Small frames (a 100-byte answer) go out at once, not after an ACK.
                        let _ = stream.set_nodelay(true);
                        stream
                    }
                    Err(e) => {
                        log("warn", "accept failed", &format!("error={:?}", e.to_string()));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                let builder = builder.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    let _ = watcher.watch(connection.into_owned()).await;
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    on_shutdown();
    if tokio::time::timeout(Duration::from_secs(30), graceful.shutdown()).await.is_err() {
        log("warn", "connections still open after 30 s; stopping anyway", "");
    }
    Ok(())
}

async fn metrics(State(server): State<Arc<Server>>) -> Response {
    let stats = server.kv.engine().stats();
    let text = server.metrics.render(server.open_watches.load(Ordering::Relaxed), &stats);
    server.metrics.request("metrics", 200);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
