//! The server's routes, its serving entry point and its metrics endpoints.

use crate::backend::ServedStore;
use crate::request::check_token;
use crate::service::Server;
use crate::{metadata, read, watch, write};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use stampkv_kvconnect::http::{method_not_allowed, not_found, serve_router};
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The routes: `POST /`, `POST /v2/{snapshot_read,atomic_write,watch}`, the same under
/// `/eventual/v2` (the endpoint the metadata lists as `eventual`, whose reads may be served
/// by a lagging replica where the store has one), and `GET /metrics` (with the bearer token).
pub fn router<S: ServedStore>(server: Arc<Server<S>>) -> Router {
    Router::new()
        .route("/", post(metadata::metadata::<S>))
        .route("/v2/snapshot_read", post(read::snapshot_read::<S>))
        .route("/v2/atomic_write", post(write::atomic_write::<S>))
        .route("/v2/watch", post(watch::watch::<S>))
        .route("/eventual/v2/snapshot_read", post(read::eventual_snapshot_read::<S>))
        .route("/eventual/v2/atomic_write", post(write::atomic_write::<S>))
        .route("/eventual/v2/watch", post(watch::watch::<S>))
        .route("/metrics", get(metrics::<S>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(server)
}

/// The routes of the optional metrics-only listener (`--metrics-addr`): `GET /metrics`
/// without a token, meant for an address only operators reach.
pub fn metrics_router<S: ServedStore>(server: Arc<Server<S>>) -> Router {
    Router::new().route("/metrics", get(open_metrics::<S>)).fallback(not_found).with_state(server)
}

/// Serves `server` on `listener` until `shutdown` resolves; then ends the watch streams,
/// lets in-flight requests finish (at most the configured grace) and returns. The caller
/// closes the database.
pub async fn serve<S: ServedStore>(
    listener: TcpListener,
    server: Arc<Server<S>>,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let app = router(server.clone());
    serve_router(listener, app, &server.config.net, server.stopping.clone(), shutdown).await
}

/// `GET /metrics` on the main address: needs the bearer token.
async fn metrics<S: ServedStore>(
    State(server): State<Arc<Server<S>>>,
    headers: HeaderMap,
    _request: Request,
) -> Response {
    if let Err(e) = check_token(&server.config.net.access_token, &headers) {
        server.metrics.request("metrics", e.status.as_u16());
        return e.into_response();
    }
    open_metrics(State(server)).await
}

async fn open_metrics<S: ServedStore>(State(server): State<Arc<Server<S>>>) -> Response {
    let mut store_metrics = String::new();
    S::render_metrics(&server.kv, &mut store_metrics);
    let text = server.metrics.render(server.watches.open(), server.watches.shared(), &store_metrics);
    server.metrics.request("metrics", 200);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
