//! `atomic_write` on either endpoint: forwarded upstream; once it committed, the cached
//! entries of every key it wrote are dropped, so this edge's next read sees the write.

use crate::respond::record;
use crate::service::Edge;
use crate::upstream::upstream_error;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use stampkv_kvconnect as proto;
use stampkv_kvconnect::http::{check_data_path, checked_body, decode, protobuf};
use std::sync::Arc;

/// `POST /v2/atomic_write` (and `/eventual/atomic_write`).
pub(crate) async fn atomic_write(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let config = edge.config();
        let net = &config.net;
        let checked = check_data_path(&net.access_token, edge.database_id(), &headers);
        let (_, body) =
            checked_body(checked, &headers, body, net.max_body_bytes, net.body_read_timeout).await?;
        let request: proto::AtomicWrite = decode(&body)?;
        edge.metrics().upstream_writes.add(1);
        let output = edge
            .upstream()
            .atomic_write_raw(&request)
            .await
            .map_err(|e| upstream_error(&config.upstream_url, &e))?;
        if output.status == proto::AW_SUCCESS {
            edge.store().forget_written(&request);
        }
        Ok(protobuf(&output))
    }
    .await;
    record(edge.metrics(), "atomic_write", result)
}
