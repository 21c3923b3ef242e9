//! The routes and the accept loop of an edge.

use crate::service::Edge;
use crate::{metadata, push, read, watch, write};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use stampkv_server::HttpError;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The routes: `POST /` (metadata), the strong endpoint `POST /v2/{snapshot_read,
/// atomic_write,watch}` (forwarding), the eventual endpoint `POST /eventual/{...}` (cached
/// reads) and `GET /metrics`.
pub fn router(edge: Arc<Edge>) -> Router {
    Router::new()
        .route("/", post(metadata::metadata))
        .route("/v2/snapshot_read", post(read::strong_read))
        .route("/v2/atomic_write", post(write::atomic_write))
        .route("/v2/watch", post(watch::watch))
        .route("/eventual/snapshot_read", post(read::eventual_read))
        .route("/eventual/atomic_write", post(write::atomic_write))
        .route("/eventual/watch", post(watch::watch))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(edge)
}

async fn not_found() -> HttpError {
    HttpError { status: StatusCode::NOT_FOUND, text: "Resource not found.".into() }
}

async fn metrics(State(edge): State<Arc<Edge>>) -> Response {
    let text = edge.render_metrics();
    edge.metrics.request("metrics", 200);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Serves `edge` on `listener` until `shutdown` resolves (running push mode if configured);
/// then ends the watch streams and lets in-flight requests finish (at most 30 s).
pub async fn serve(
    listener: TcpListener,
    edge: Arc<Edge>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let pusher = edge.config.push.then(|| tokio::spawn(push::run(edge.clone())));
    let stopping = edge.clone();
    let result = stampkv_server::serve_router(
        listener,
        router(edge),
        HEADER_READ_TIMEOUT,
        move || stopping.begin_shutdown(),
        shutdown,
    )
    .await;
    if let Some(pusher) = pusher {
        pusher.abort();
    }
    result
}
