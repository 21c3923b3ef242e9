//! `snapshot_read` on both endpoints: the request checked and decoded, answered by the edge's
//! read path ([`crate::read_path`]): eventual reads from the cache, strong reads forwarded.

use crate::cache::RangeKey;
use crate::respond::record;
use crate::service::Edge;
use crate::wire;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use stampkv_kvconnect as proto;
use stampkv_kvconnect::http::{check_data_path, checked_body, decode, protobuf};
use stampkv_kvconnect::http::{check_read, HttpError};
use std::sync::Arc;

/// Checks the headers and decodes a `SnapshotRead` with the server's limits.
async fn read_request(edge: &Edge, headers: &HeaderMap, body: Body) -> Result<Vec<RangeKey>, HttpError> {
    let net = &edge.config().net;
    let checked = check_data_path(&net.access_token, edge.database_id(), headers);
    let (_, body) = checked_body(checked, headers, body, net.max_body_bytes, net.body_read_timeout).await?;
    let request: proto::SnapshotRead = decode(&body)?;
    check_read(&request)?;
    Ok(request
        .ranges
        .iter()
        .map(|range| RangeKey::of(&range.start, &range.end, range.limit, range.reverse))
        .collect())
}

/// `POST /eventual/snapshot_read`.
pub(crate) async fn eventual_read(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let keys = read_request(&edge, &headers, body).await?;
        let answers = edge.reads().eventual(&keys).await?;
        Ok(([(header::CONTENT_TYPE, "application/x-protobuf")], wire::eventual_output(&answers))
            .into_response())
    }
    .await;
    record(edge.metrics(), "eventual_read", result)
}

/// `POST /v2/snapshot_read`: forwarded as a strong read. Cached entries of the same ranges
/// are brought up to date with the answer.
pub(crate) async fn strong_read(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let keys = read_request(&edge, &headers, body).await?;
        let output = edge.reads().strong(&keys).await?;
        Ok(protobuf(&output))
    }
    .await;
    record(edge.metrics(), "strong_read", result)
}
