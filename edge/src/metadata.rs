//! The metadata exchange (`POST /`): both endpoints are this edge's, the strong one
//! forwarding, the eventual one caching.

use crate::read::record;
use crate::service::Edge;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use stampkv_server::request::{check_token, read_limited};
use stampkv_server::{negotiate_version, rfc3339, HttpError};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub(crate) async fn metadata(State(edge): State<Arc<Edge>>, headers: HeaderMap, body: Body) -> Response {
    let result = async {
        check_token(&edge.config.access_token, &headers)?;
        let version = negotiate_version(&read_limited(body, edge.config.max_body_bytes).await?)?;
        // Version 1 needs absolute URLs; later versions resolve them against this URL.
        let base = if version == 1 {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .ok_or_else(|| HttpError::bad("Protocol version 1 needs a host header."))?;
            format!("http://{host}")
        } else {
            String::new()
        };
        let expires_at = SystemTime::now() + Duration::from_secs(24 * 3600);
        let body = serde_json::json!({
            "version": version,
            "databaseId": edge.database_id,
            "endpoints": [
                { "url": format!("{base}/v2"), "consistency": "strong" },
                { "url": format!("{base}/eventual"), "consistency": "eventual" },
            ],
            "token": edge.config.access_token,
            "expiresAt": rfc3339(expires_at),
        });
        Ok(([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response())
    }
    .await;
    record(&edge, "metadata", result)
}
