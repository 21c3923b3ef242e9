//! The metadata exchange (`POST /`): version negotiation, database id, endpoints, expiry.

use crate::backend::ServedStore;
use crate::errors::HttpError;
use crate::request::{metadata_request, record};
use crate::service::Server;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use stampkv_kvconnect::http::{negotiate_version, rfc3339, version1_host};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub(crate) async fn metadata<S: ServedStore>(
    State(server): State<Arc<Server<S>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = metadata_inner(&server, &headers, body).await;
    record(&server, "metadata", result)
}

async fn metadata_inner<S: ServedStore>(
    server: &Server<S>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let body = metadata_request(server, headers, body).await?;
    let version = negotiate_version(&body)?;
    let base = if version == 1 { format!("http://{}", version1_host(headers)?) } else { String::new() };
    let mut endpoints = vec![serde_json::json!({ "url": format!("{base}/v2"), "consistency": "strong" })];
    if S::EVENTUAL_READS {
        // `@deno/kv` sends eventual reads and watches here; Deno's own client ignores it.
        endpoints
            .push(serde_json::json!({ "url": format!("{base}/eventual/v2"), "consistency": "eventual" }));
    }
    let expires_at = SystemTime::now() + Duration::from_secs(24 * 3600);
    let body = serde_json::json!({
        "version": version,
        "databaseId": server.database_id,
        "endpoints": endpoints,
        "token": server.config.net.access_token,
        "expiresAt": rfc3339(expires_at),
    });
    Ok(([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response())
}
