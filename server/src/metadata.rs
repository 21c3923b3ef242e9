//! The metadata exchange (`POST /`): version negotiation, database id, endpoints, expiry.

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

pub(crate) async fn metadata(State(server): State<Arc<Server>>, headers: HeaderMap, body: Body) -> Response {
    let result = metadata_inner(&server, &headers, body).await;
    record(&server, "metadata", result)
}

async fn metadata_inner(server: &Server, headers: &HeaderMap, body: Body) -> Result<Response, HttpError> {
    let body = metadata_request(server, headers, body).await?;
    let version = negotiate_version(&body)?;
    let url = if version == 1 { format!("http://{}/v2", version1_host(headers)?) } else { "/v2".to_string() };
    let expires_at = SystemTime::now() + Duration::from_secs(24 * 3600);
    let body = serde_json::json!({
        "version": version,
        "databaseId": server.database_id,
        "endpoints": [{ "url": url, "consistency": "strong" }],
        "token": server.config.net.access_token,
        "expiresAt": rfc3339(expires_at),
    });
    Ok(([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response())
}
