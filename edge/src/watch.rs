//! `watch` on either endpoint: the request checked, the stream opened in the edge's watch
//! registry ([`crate::watch_hub`]), where clients watching the same keys share one upstream
//! watch.

use crate::respond::record;
use crate::service::Edge;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use stampkv_kvconnect as proto;
use stampkv_kvconnect::http::{check_data_path, checked_body, decode};
use stampkv_kvconnect::http::{Connection, HttpError, MAX_READ_KEY_BYTES};
use stampkv_kvconnect::http::{MAX_WATCHED_KEYS, TOO_MANY_WATCHED_KEYS};
use std::sync::Arc;

/// `POST /v2/watch` and `/eventual/watch`.
pub(crate) async fn watch(
    State(edge): State<Arc<Edge>>,
    connection: Option<Extension<Arc<Connection>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = watch_inner(&edge, connection.map(|c| c.0), &headers, body).await;
    record(edge.metrics(), "watch", result)
}

/// Checks the request and the connection's watch limit, then opens the stream.
async fn watch_inner(
    edge: &Edge,
    connection: Option<Arc<Connection>>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let net = &edge.config().net;
    let checked = check_data_path(&net.access_token, edge.database_id(), headers);
    let (version, body) =
        checked_body(checked, headers, body, net.max_body_bytes, net.body_read_timeout).await?;
    if version < 3 {
        return Err(HttpError::bad("Watch needs protocol version 3."));
    }
    let request: proto::Watch = decode(&body)?;
    if request.keys.len() > MAX_WATCHED_KEYS {
        return Err(HttpError::bad(TOO_MANY_WATCHED_KEYS));
    }
    let mut keys = Vec::with_capacity(request.keys.len());
    for key in request.keys {
        if key.key.len() > MAX_READ_KEY_BYTES {
            return Err(HttpError::bad("A key exceeds the key size limit."));
        }
        stampkv_model::Key::decode(&key.key)
            .map_err(|e| HttpError::bad(format!("Invalid watch key: {e}.")))?;
        keys.push(key.key);
    }
    let watches = edge.watches();
    if watches.is_stopping() {
        return Err(HttpError::unavailable());
    }
    let per_connection = match &connection {
        Some(c) => Some(c.try_add_watch(net.max_watches_per_connection).ok_or_else(|| HttpError {
            status: StatusCode::TOO_MANY_REQUESTS,
            text: format!(
                "Too many watch streams on one connection (max {}).",
                net.max_watches_per_connection
            ),
        })?),
        None => None,
    };
    let stream = watches.open(keys, per_connection).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], stream).into_response())
}
