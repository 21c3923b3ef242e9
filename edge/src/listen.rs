//! The routes and the accept loop of an edge.

use crate::service::Edge;
use crate::{metadata, read, watch, write};
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use stampkv_kvconnect::http::check_token;
use stampkv_kvconnect::http::{method_not_allowed, not_found};
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

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
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(edge)
}

/// `GET /metrics`: needs the bearer token.
async fn metrics(State(edge): State<Arc<Edge>>, headers: HeaderMap) -> Response {
    if let Err(e) = check_token(&edge.config().net.access_token, &headers) {
        edge.metrics().request("metrics", e.status.as_u16());
        return e.into_response();
    }
    let text = edge.render_metrics();
    edge.metrics().request("metrics", 200);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Serves `edge` on `listener` until `shutdown` resolves (running push mode if configured);
/// then ends the watch streams and lets in-flight requests finish (at most 30 s).
pub async fn serve(
    listener: TcpListener,
    edge: Arc<Edge>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let pusher = edge.pusher().map(|pusher| tokio::spawn(pusher.run()));
    let net = edge.config().net.clone();
    let stopping = edge.stopping().clone();
    let result =
        stampkv_kvconnect::http::serve_router(listener, router(edge), &net, stopping, shutdown).await;
    if let Some(pusher) = pusher {
        pusher.abort();
    }
    result
}
