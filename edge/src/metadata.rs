//! The metadata exchange (`POST /`): both endpoints are this edge's, the strong one
//! forwarding, the eventual one caching.

use crate::respond::record;
use crate::service::Edge;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use stampkv_kvconnect::http::{check_token, checked_body};
use stampkv_kvconnect::http::{negotiate_version, rfc3339, version1_host};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// `POST /`: the metadata exchange, listing this edge's two endpoints and its token.
pub(crate) async fn metadata(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        let net = &edge.config().net;
        let checked = check_token(&net.access_token, &headers);
        let (_, body) =
            checked_body(checked, &headers, body, net.max_body_bytes, net.body_read_timeout).await?;
        let version = negotiate_version(&body)?;
        // Version 1 needs absolute URLs; later versions resolve them against this URL.
        let base = if version == 1 { format!("http://{}", version1_host(&headers)?) } else { String::new() };
        let expires_at = SystemTime::now() + Duration::from_secs(24 * 3600);
        let body = serde_json::json!({
            "version": version,
            "databaseId": edge.database_id(),
            "endpoints": [
                { "url": format!("{base}/v2"), "consistency": "strong" },
                { "url": format!("{base}/eventual"), "consistency": "eventual" },
            ],
            "token": net.access_token,
            "expiresAt": rfc3339(expires_at),
        });
        Ok(([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response())
    }
    .await;
    record(edge.metrics(), "metadata", result)
}
